// synth-gsm generator, internal: the random stream, names and worked-solution builder shared by
// the problem templates (synth_gsm_templates_*.cpp), and the templates themselves.
#pragma once
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace ears::synth {

// splitmix64: tiny, fast, and bit-identical everywhere.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform-enough integer in [lo, hi] (modulo bias is irrelevant here; determinism is not).
  long between(long lo, long hi) {
    return lo + static_cast<long>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  template <class T, std::size_t N>
  const T& pick(const std::array<T, N>& a) {
    return a[next() % N];
  }
};

struct Person {
  const char* name;
  const char* subj;  // she / he
  const char* Subj;
  const char* obj;   // her / him
  const char* poss;  // her / his
  const char* self;  // herself / himself
};

constexpr Person F(const char* n) { return {n, "she", "She", "her", "her", "herself"}; }
constexpr Person M(const char* n) { return {n, "he", "He", "him", "his", "himself"}; }

constexpr std::array<Person, 40> kPeople = {
    F("Maria"), M("James"), F("Aisha"), M("Liam"),  F("Sofia"), M("Noah"),   F("Mei"),
    M("Carlos"), F("Priya"), M("Omar"), F("Elena"), M("Tom"),   F("Hana"),   M("Diego"),
    F("Zoe"),   M("Samuel"), F("Fatima"), M("Lucas"), F("Grace"), M("Ivan"), F("Nora"),
    M("Kenji"), F("Amara"), M("Felix"), F("Leila"), M("Marco"), F("Chloe"), M("Arjun"),
    F("Rosa"),  M("Ben"),   F("Yuki"),  M("Daniel"), F("Ines"), M("Pavel"), F("Mila"),
    M("Ahmed"), F("Lena"),  M("Oscar"), F("Tara"),  M("Hugo")};

inline std::string N(long v) { return std::to_string(v); }

// " <n> unit" / " <n> units" as the tail of a step line, e.g. units_tail(1, "hour") -> " hour.".
inline std::string units_tail(long n, const char* word) { return fmt::format(" {}{}.", word, n == 1 ? "" : "s"); }

// A worked solution in GSM8K format.
class Solution {
 public:
  // Appends "<before> a op b ... = [$]<<a op b...=v>>v<after>" as one line; returns v.
  long step(std::string_view before, std::initializer_list<std::string> terms, long v,
            bool money, std::string_view after) {
    std::string shown, compact;
    for (const auto& t : terms) {
      if (!shown.empty()) shown += ' ';
      shown += t;
      compact += t;
    }
    lines_ += fmt::format("{} {} = {}<<{}={}>>{}{}\n", before, shown, money ? "$" : "", compact,
                          v, v, after);
    ++steps_;
    return v;
  }
  std::string text(long final) const { return lines_ + "#### " + N(final); }
  int steps() const { return steps_; }

 private:
  std::string lines_;
  int steps_ = 0;
};

struct Problem {
  std::string question;
  std::string answer;
};

inline long smallest_bill_above(long amount) {
  for (long bill : {10L, 20L, 50L, 100L, 200L, 500L, 1000L, 2000L, 5000L})
    if (bill > amount) return bill;
  return (amount / 1000 + 1) * 1000;
}

// The templates (synth_gsm_templates_a.cpp: shopping .. savings; _b.cpp: legs .. unit_price).
Problem shopping(Rng& r);
Problem time_spent(Rng& r);
Problem distance(Rng& r);
Problem sharing(Rng& r);
Problem bakery(Rng& r);
Problem savings(Rng& r);
Problem legs(Rng& r);
Problem ages(Rng& r);
Problem machines(Rng& r);
Problem discount(Rng& r);
Problem garden(Rng& r);
Problem tickets(Rng& r);
Problem reading(Rng& r);
Problem unit_price(Rng& r);

}  // namespace ears::synth
