// synth-gsm generator; see synth_gsm.h. All problem text here is original.
#include "datasets/synth_gsm.h"

#include <fmt/format.h>

#include <array>
#include <unordered_set>

#include "datasets/synth_gsm_parts.h"
#include "harness/base/error.h"

namespace ears {
namespace {
using synth::Problem;
using synth::Rng;

using Template = Problem (*)(Rng&);
constexpr std::array<Template, 14> kTemplates = {
    synth::shopping, synth::time_spent, synth::distance, synth::sharing, synth::bakery,
    synth::savings,  synth::legs,       synth::ages,     synth::machines, synth::discount,
    synth::garden,   synth::tickets,    synth::reading,  synth::unit_price};

int count_steps(const std::string& answer) {
  int n = 0;
  for (std::size_t pos = answer.find("<<"); pos != std::string::npos;
       pos = answer.find("<<", pos + 2))
    ++n;
  return n;
}

}  // namespace

uint64_t synth_gsm_hash(std::string_view question) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (char c : question) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ULL;
  }
  return h;
}

std::string synth_gsm_split_of(std::string_view question) {
  return synth_gsm_hash(question) % 10 == 0 ? "test" : "train";
}

std::vector<std::pair<std::string, std::string>> synth_gsm_pairs(std::size_t n, uint64_t seed,
                                                                 const std::string& split) {
  if (split != "train" && split != "test")
    fail("synth-gsm: unknown split '{}'; use train or test", split);
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(n);
  std::unordered_set<std::string> seen;
  Rng rng{seed};
  const std::size_t max_candidates = 100 * n + 10000;
  for (std::size_t i = 0; out.size() < n; ++i) {
    if (i >= max_candidates)
      fail("synth-gsm: could not generate {} distinct {} problems (got {}); ask for fewer",
           n, split, out.size());
    Problem p = kTemplates[rng.next() % kTemplates.size()](rng);
    if (synth_gsm_split_of(p.question) != split) continue;
    if (!seen.insert(p.question).second) continue;
    out.emplace_back(std::move(p.question), std::move(p.answer));
  }
  return out;
}

std::vector<Doc> synth_gsm_problems(std::size_t n, uint64_t seed, const std::string& split) {
  auto pairs = synth_gsm_pairs(n, seed, split);
  std::vector<Doc> out(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    Doc& d = out[i];
    d.key = fmt::format("{}/{}/{}", split, seed, i);
    auto pos = pairs[i].second.rfind("#### ");
    d.gold = {pairs[i].second.substr(pos + 5)};
    d.category = fmt::format("steps={}", count_steps(pairs[i].second));
    d.question = std::move(pairs[i].first);
    d.solution = std::move(pairs[i].second);
  }
  return out;
}

std::vector<Request> synth_gsm(std::size_t n, uint64_t seed, const std::string& split) {
  std::vector<Request> out;
  for (Doc& d : synth_gsm_problems(n, seed, split)) {
    Request r;
    r.id = "synth-gsm/" + d.key;
    r.prompt = gsm8k_prompt(d.question, {});
    r.gold = std::move(d.gold);
    r.category = std::move(d.category);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ears
