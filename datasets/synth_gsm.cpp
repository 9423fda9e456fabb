// synth-gsm generator; see synth_gsm.h. All problem text here is original.
#include "datasets/synth_gsm.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <unordered_set>

#include "harness/base/error.h"

namespace ears {
namespace {

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

std::string N(long v) { return std::to_string(v); }

// " <n> unit" / " <n> units" as the tail of a step line, e.g. units_tail(1, "hour") -> " hour.".
std::string units_tail(long n, const char* word) { return fmt::format(" {}{}.", word, n == 1 ? "" : "s"); }

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

long smallest_bill_above(long amount) {
  for (long bill : {10L, 20L, 50L, 100L, 200L, 500L, 1000L, 2000L, 5000L})
    if (bill > amount) return bill;
  return (amount / 1000 + 1) * 1000;
}

// ---- templates ----

struct Item {
  const char* plural;
  long lo, hi;  // unit price range in dollars
};
constexpr std::array<Item, 12> kShopItems = {{{"notebooks", 2, 9},
                                              {"pencils", 1, 3},
                                              {"boxes of crayons", 3, 8},
                                              {"bags of apples", 3, 7},
                                              {"movie tickets", 8, 16},
                                              {"T-shirts", 9, 25},
                                              {"potted plants", 4, 15},
                                              {"books", 6, 30},
                                              {"board games", 15, 45},
                                              {"pairs of socks", 2, 6},
                                              {"headphones", 25, 120},
                                              {"chairs", 35, 150}}};

Problem shopping(Rng& r) {
  const Person& p = r.pick(kPeople);
  const Item& a = r.pick(kShopItems);
  const Item* b = &r.pick(kShopItems);
  while (b == &a) b = &r.pick(kShopItems);
  long qa = r.between(2, 12), pa = r.between(a.lo, a.hi);
  long qb = r.between(2, 9), pb = r.between(b->lo, b->hi);
  long variant = r.between(1, 4);
  Solution s;
  Problem out;
  if (variant == 1) {
    out.question = fmt::format("{} buys {} {} for ${} each. How much does {} spend?", p.name,
                               qa, a.plural, pa, p.subj);
    long c = s.step(fmt::format("{} spends", p.name), {N(qa), "*", N(pa)}, qa * pa, true, ".");
    out.answer = s.text(c);
  } else if (variant == 2) {
    long c = qa * pa, bill = smallest_bill_above(c);
    out.question = fmt::format(
        "{} buys {} {} for ${} each and pays with a ${} bill. How much change does {} get?",
        p.name, qa, a.plural, pa, bill, p.subj);
    s.step(fmt::format("The {} cost", a.plural), {N(qa), "*", N(pa)}, c, true, ".");
    long change = s.step(fmt::format("{} gets", p.Subj), {N(bill), "-", N(c)}, bill - c, true,
                         " in change.");
    out.answer = s.text(change);
  } else {
    long ca = qa * pa, cb = qb * pb, total = ca + cb;
    std::string q = fmt::format("{} buys {} {} for ${} each and {} {} for ${} each.", p.name,
                                qa, a.plural, pa, qb, b->plural, pb);
    s.step(fmt::format("The {} cost", a.plural), {N(qa), "*", N(pa)}, ca, true, ".");
    s.step(fmt::format("The {} cost", b->plural), {N(qb), "*", N(pb)}, cb, true, ".");
    s.step("Altogether that is", {N(ca), "+", N(cb)}, total, true, ".");
    if (variant == 3) {
      out.question = q + fmt::format(" How much does {} spend in total?", p.subj);
      out.answer = s.text(total);
    } else {
      long bill = smallest_bill_above(total);
      out.question = q + fmt::format(" {} pays with a ${} bill. How much change does {} get?",
                                     p.Subj, bill, p.subj);
      long change = s.step(fmt::format("{} gets", p.Subj), {N(bill), "-", N(total)},
                           bill - total, true, " in change.");
      out.answer = s.text(change);
    }
  }
  return out;
}

constexpr std::array<const char*, 8> kActivities = {
    "practicing the piano", "reading", "jogging",       "drawing",
    "studying Spanish",     "swimming", "walking the dog", "playing chess"};

long gcd(long a, long b) { return b == 0 ? a : gcd(b, a % b); }

Problem time_spent(Rng& r) {
  const Person& p = r.pick(kPeople);
  const char* act = r.pick(kActivities);
  long variant = r.between(1, 3);
  Solution s;
  Problem out;
  if (variant == 1) {
    long m = r.between(10, 95), d = r.between(3, 30);
    out.question = fmt::format(
        "{} spends {} minutes {} every day. How many minutes does {} spend {} in {} days?",
        p.name, m, act, p.subj, act, d);
    long t = s.step(fmt::format("{} spends", p.name), {N(m), "*", N(d)}, m * d, false,
                    " minutes.");
    out.answer = s.text(t);
  } else if (variant == 2) {
    constexpr std::array<long, 9> kDays = {3, 4, 5, 6, 10, 12, 15, 20, 30};
    long d = r.pick(kDays);
    long unit = 60 / gcd(60, d);  // m*d is a whole number of hours iff unit divides m
    long m = unit * r.between((10 + unit - 1) / unit, 120 / unit);
    long total = m * d;
    out.question = fmt::format(
        "{} spends {} minutes {} every day. How many hours does {} spend {} over {} days?",
        p.name, m, act, p.subj, act, d);
    s.step(fmt::format("In {} days {} spends", d, p.subj), {N(m), "*", N(d)}, total, false,
           " minutes.");
    long h = s.step("That is", {N(total), "/", "60"}, total / 60, false, units_tail(total / 60, "hour"));
    out.answer = s.text(h);
  } else {
    long m1 = 12 * r.between(1, 8), m2 = 30 * r.between(1, 5);
    out.question = fmt::format(
        "On each of the 5 weekdays, {} spends {} minutes {}, and on each of the 2 weekend days "
        "{} spends {} minutes {}. How many hours does {} spend {} in a week?",
        p.name, m1, act, p.subj, m2, act, p.subj, act);
    long a = s.step("On weekdays that is", {"5", "*", N(m1)}, 5 * m1, false, " minutes.");
    long b = s.step("On the weekend that is", {"2", "*", N(m2)}, 2 * m2, false, " minutes.");
    long t = s.step("In a week that is", {N(a), "+", N(b)}, a + b, false, " minutes.");
    long h = s.step("That is", {N(t), "/", "60"}, t / 60, false, units_tail(t / 60, "hour"));
    out.answer = s.text(h);
  }
  return out;
}

struct Vehicle {
  const char* name;
  const char* verb;
  long lo, hi;  // km per hour
};
constexpr std::array<Vehicle, 5> kVehicles = {{{"train", "travels", 60, 140},
                                               {"truck", "drives", 40, 90},
                                               {"bus", "drives", 35, 80},
                                               {"ferry", "sails", 15, 40},
                                               {"delivery van", "drives", 30, 70}}};

Problem distance(Rng& r) {
  const Vehicle& v = r.pick(kVehicles);
  long s1 = r.between(v.lo, v.hi), h1 = r.between(2, 6);
  long variant = r.between(1, 3);
  Solution s;
  Problem out;
  if (variant == 1) {
    out.question = fmt::format(
        "A {} {} at {} km per hour for {} hours. How many kilometers does it cover?", v.name,
        v.verb, s1, h1);
    long d = s.step(fmt::format("The {} covers", v.name), {N(s1), "*", N(h1)}, s1 * h1, false,
                    " km.");
    out.answer = s.text(d);
  } else if (variant == 2) {
    long done = s1 * h1, total = done + r.between(10, 300);
    out.question = fmt::format(
        "A {} has to cover {} km. It {} at {} km per hour for {} hours. How many kilometers "
        "are left?",
        v.name, total, v.verb, s1, h1);
    s.step("So far it has covered", {N(s1), "*", N(h1)}, done, false, " km.");
    long left = s.step("There are", {N(total), "-", N(done)}, total - done, false, " km left.");
    out.answer = s.text(left);
  } else {
    long s2 = r.between(v.lo, v.hi), h2 = r.between(1, 5);
    out.question = fmt::format(
        "A {} {} at {} km per hour for {} hours, then at {} km per hour for {} hours. How many "
        "kilometers does it travel in total?",
        v.name, v.verb, s1, h1, s2, h2);
    long a = s.step("The first part is", {N(s1), "*", N(h1)}, s1 * h1, false, " km.");
    long b = s.step("The second part is", {N(s2), "*", N(h2)}, s2 * h2, false, " km.");
    long t = s.step("In total it travels", {N(a), "+", N(b)}, a + b, false, " km.");
    out.answer = s.text(t);
  }
  return out;
}

constexpr std::array<const char*, 6> kThings = {"stickers",       "marbles",      "cookies",
                                                "trading cards", "strawberries", "crayons"};

Problem sharing(Rng& r) {
  const Person& p = r.pick(kPeople);
  const char* thing = r.pick(kThings);
  long k = r.between(2, 9), each = r.between(3, 30), g = r.between(1, 20);
  long variant = r.between(1, 3);
  Solution s;
  Problem out;
  if (variant == 1) {
    long total = each * k;
    out.question = fmt::format(
        "{} has {} {} and shares them equally among {} friends. How many {} does each friend "
        "get?",
        p.name, total, thing, k, thing);
    long e = s.step("Each friend gets", {N(total), "/", N(k)}, each, false, fmt::format(" {}.", thing));
    out.answer = s.text(e);
  } else if (variant == 2) {
    long total = each * k + g;
    out.question = fmt::format(
        "{} has {} {}. {} keeps {} for {} and shares the rest equally among {} friends. How "
        "many {} does each friend get?",
        p.name, total, thing, p.Subj, g, p.self, k, thing);
    long rest = s.step(fmt::format("{} shares", p.Subj), {N(total), "-", N(g)}, total - g,
                       false, fmt::format(" {}.", thing));
    long e = s.step("Each friend gets", {N(rest), "/", N(k)}, rest / k, false,
                    fmt::format(" {}.", thing));
    out.answer = s.text(e);
  } else {
    long total = 0, bag = 0;
    for (;; ++g) {  // find a bag size that divides the total (skip prime totals)
      total = each * k + g;
      for (long b = r.between(3, 12); b <= total / 2 && bag == 0; ++b)
        if (total % b == 0) bag = b;
      if (bag != 0) break;
    }
    long bags = total / bag;
    out.question = fmt::format(
        "{} buys {} bags of {} with {} in each bag. {} keeps {} for {} and shares the rest "
        "equally among {} friends. How many {} does each friend get?",
        p.name, bags, thing, bag, p.Subj, g, p.self, k, thing);
    long t = s.step(fmt::format("{} buys", p.Subj), {N(bags), "*", N(bag)}, total, false,
                    fmt::format(" {}.", thing));
    long rest = s.step(fmt::format("{} shares", p.Subj), {N(t), "-", N(g)}, t - g, false,
                       fmt::format(" {}.", thing));
    long e = s.step("Each friend gets", {N(rest), "/", N(k)}, rest / k, false,
                    fmt::format(" {}.", thing));
    out.answer = s.text(e);
  }
  return out;
}

constexpr std::array<const char*, 5> kBaked = {"cookies", "muffins", "rolls", "bagels",
                                               "scones"};

Problem bakery(Rng& r) {
  const char* good = r.pick(kBaked);
  long t = r.between(3, 12), c = r.between(6, 36);
  long made = t * c;
  long variant = r.between(1, 3);
  Solution s;
  Problem out;
  if (variant == 1) {
    out.question = fmt::format(
        "A bakery bakes {} trays of {} with {} {} on each tray. How many {} does it bake?", t,
        good, c, good, good);
    s.step("The bakery bakes", {N(t), "*", N(c)}, made, false, fmt::format(" {}.", good));
    out.answer = s.text(made);
  } else if (variant == 2) {
    long sold = r.between(1, made - 1);
    out.question = fmt::format(
        "A bakery bakes {} trays of {} with {} {} on each tray. It sells {} of them. How many "
        "{} are left?",
        t, good, c, good, sold, good);
    s.step("The bakery bakes", {N(t), "*", N(c)}, made, false, fmt::format(" {}.", good));
    long left = s.step("There are", {N(made), "-", N(sold)}, made - sold, false,
                       fmt::format(" {} left.", good));
    out.answer = s.text(left);
  } else {
    long d = r.between(2, 7), total = made * d, sold = r.between(total / 2, total - 1);
    out.question = fmt::format(
        "Every day a bakery bakes {} trays of {} with {} on each tray. Over {} days it sells "
        "{} {}. How many {} are left unsold?",
        t, good, c, d, sold, good, good);
    s.step("Each day it bakes", {N(t), "*", N(c)}, made, false, fmt::format(" {}.", good));
    s.step(fmt::format("In {} days it bakes", d), {N(made), "*", N(d)}, total, false,
           fmt::format(" {}.", good));
    long left = s.step("Unsold are", {N(total), "-", N(sold)}, total - sold, false,
                       fmt::format(" {}.", good));
    out.answer = s.text(left);
  }
  return out;
}

constexpr std::array<const char*, 6> kPurchases = {"bike",   "skateboard", "video game",
                                                   "guitar", "telescope",  "tent"};

Problem savings(Rng& r) {
  const Person& p = r.pick(kPeople);
  long w = r.between(5, 40), n = r.between(3, 20);
  long saved = w * n;
  long variant = r.between(1, 3);
  Solution s;
  Problem out;
  if (variant == 1) {
    out.question = fmt::format("{} saves ${} every week. How much money does {} save in {} weeks?",
                               p.name, w, p.subj, n);
    s.step(fmt::format("{} saves", p.Subj), {N(w), "*", N(n)}, saved, true, ".");
    out.answer = s.text(saved);
  } else if (variant == 2) {
    long x = r.between(saved / 3 + 1, saved - 1);
    out.question = fmt::format(
        "{} saves ${} every week. After {} weeks {} buys a {} for ${}. How much money does {} "
        "have left?",
        p.name, w, n, p.subj, r.pick(kPurchases), x, p.subj);
    s.step(fmt::format("{} saves", p.Subj), {N(w), "*", N(n)}, saved, true, ".");
    long left = s.step(fmt::format("{} has", p.Subj), {N(saved), "-", N(x)}, saved - x, true,
                       " left.");
    out.answer = s.text(left);
  } else {
    long y = 5 * r.between(2, 20);
    long have = saved + y;
    long x = r.between(have / 3 + 1, have - 1);
    out.question = fmt::format(
        "{} saves ${} every week for {} weeks, and {} grandmother gives {} another ${}. Then "
        "{} buys a {} for ${}. How much money does {} have left?",
        p.name, w, n, p.poss, p.obj, y, p.subj, r.pick(kPurchases), x, p.subj);
    s.step(fmt::format("{} saves", p.Subj), {N(w), "*", N(n)}, saved, true, ".");
    s.step(fmt::format("With the gift {} has", p.subj), {N(saved), "+", N(y)}, have, true, ".");
    long left = s.step("After the purchase", {N(have), "-", N(x)}, have - x, true, " is left.");
    out.answer = s.text(left);
  }
  return out;
}

struct Animal {
  const char* plural;
  long legs;
};
constexpr std::array<Animal, 7> kAnimals = {{{"chickens", 2},
                                             {"ducks", 2},
                                             {"cows", 4},
                                             {"goats", 4},
                                             {"horses", 4},
                                             {"sheep", 4},
                                             {"pigs", 4}}};

Problem legs(Rng& r) {
  const Animal& a = r.pick(kAnimals);
  const Animal* b = &r.pick(kAnimals);
  while (b == &a) b = &r.pick(kAnimals);
  long na = r.between(3, 120), nb = r.between(3, 60);
  long variant = r.between(1, 3);
  Solution s;
  Problem out;
  if (variant == 1) {
    out.question = fmt::format("A farm has {} {}. How many legs do the {} have in total?", na,
                               a.plural, a.plural);
    long l = s.step(fmt::format("The {} have", a.plural), {N(na), "*", N(a.legs)}, na * a.legs,
                    false, " legs.");
    out.answer = s.text(l);
  } else if (variant == 2) {
    long sold = r.between(1, na - 1);
    out.question = fmt::format(
        "A farm has {} {}. The farmer sells {} of them. How many legs do the remaining {} have "
        "in total?",
        na, a.plural, sold, a.plural);
    long left = s.step("There are", {N(na), "-", N(sold)}, na - sold, false,
                       fmt::format(" {} left.", a.plural));
    long l = s.step("They have", {N(left), "*", N(a.legs)}, left * a.legs, false, " legs.");
    out.answer = s.text(l);
  } else {
    out.question = fmt::format("A farm has {} {} and {} {}. How many legs are there in total?",
                               na, a.plural, nb, b->plural);
    long la = s.step(fmt::format("The {} have", a.plural), {N(na), "*", N(a.legs)},
                     na * a.legs, false, " legs.");
    long lb = s.step(fmt::format("The {} have", b->plural), {N(nb), "*", N(b->legs)},
                     nb * b->legs, false, " legs.");
    long l = s.step("Altogether there are", {N(la), "+", N(lb)}, la + lb, false, " legs.");
    out.answer = s.text(l);
  }
  return out;
}

Problem ages(Rng& r) {
  const Person& a = r.pick(kPeople);
  const Person* b = &r.pick(kPeople);
  while (b == &a) b = &r.pick(kPeople);
  const Person* c = &r.pick(kPeople);
  while (c == &a || c == b) c = &r.pick(kPeople);
  constexpr std::array<const char*, 5> kTimes = {"", "", "twice", "three times", "four times"};
  long age_a = r.between(4, 15), k = r.between(2, 4);
  long age_b = age_a * k, d = r.between(1, std::min(age_b - 1, 12L)), age_c = age_b - d;
  bool sum = r.between(0, 1) == 1;
  Solution s;
  Problem out;
  out.question = fmt::format(
      "{} is {} years old. {} is {} as old as {}, and {} is {} year{} younger than {}. {}",
      a.name, age_a, b->name, kTimes[k], a.name, c->name, d, d == 1 ? "" : "s", b->name,
      sum ? "What is the sum of their three ages?" : fmt::format("How old is {}?", c->name));
  s.step(fmt::format("{} is", b->name), {N(age_a), "*", N(k)}, age_b, false, " years old.");
  s.step(fmt::format("{} is", c->name), {N(age_b), "-", N(d)}, age_c, false,
         fmt::format(" year{} old.", age_c == 1 ? "" : "s"));
  if (!sum) {
    out.answer = s.text(age_c);
  } else {
    long t = s.step("Together they are", {N(age_a), "+", N(age_b), "+", N(age_c)},
                    age_a + age_b + age_c, false, " years old.");
    out.answer = s.text(t);
  }
  return out;
}

struct Machine {
  const char* name;
  const char* verb;
  const char* object;
};
constexpr std::array<Machine, 4> kMachines = {{{"machine", "fills", "bottles"},
                                               {"printer", "prints", "pages"},
                                               {"robot", "packs", "boxes"},
                                               {"press", "stamps", "coins"}}};

Problem machines(Rng& r) {
  const Machine& m = r.pick(kMachines);
  long f1 = r.between(3, 40), f2 = r.between(3, 40);
  long variant = r.between(1, 3);
  Solution s;
  Problem out;
  if (variant == 1) {
    long t = r.between(5, 90), n = f1 * t;
    out.question = fmt::format(
        "A {} {} {} {} per minute. How many minutes does it take to finish {} {}?", m.name,
        m.verb, f1, m.object, n, m.object);
    long x = s.step("It takes", {N(n), "/", N(f1)}, t, false, " minutes.");
    out.answer = s.text(x);
  } else {
    long hours = r.between(1, 5);
    long t = variant == 2 ? r.between(5, 90) : 60 * hours;
    long n = (f1 + f2) * t;
    out.question = fmt::format(
        "One {} {} {} {} per minute and a second {} {} {} per minute. Working together, how "
        "many {} do they need to finish {} {}?",
        m.name, m.verb, f1, m.object, m.name, m.verb, f2, variant == 2 ? "minutes" : "hours", n,
        m.object);
    long rate = s.step("Together they do", {N(f1), "+", N(f2)}, f1 + f2, false,
                       fmt::format(" {} per minute.", m.object));
    long x = s.step("They need", {N(n), "/", N(rate)}, t, false, " minutes.");
    if (variant == 3) x = s.step("That is", {N(x), "/", "60"}, hours, false, units_tail(hours, "hour"));
    out.answer = s.text(x);
  }
  return out;
}

constexpr std::array<const char*, 7> kSaleItems = {"jacket", "bicycle", "lamp",    "tent",
                                                   "printer", "blender", "suitcase"};

Problem discount(Rng& r) {
  const Person& p = r.pick(kPeople);
  const char* item = r.pick(kSaleItems);
  constexpr std::array<long, 8> kPct = {5, 10, 15, 20, 25, 30, 40, 50};
  long pct = r.pick(kPct), price = 20 * r.between(2, 40);  // price*pct is a multiple of 100
  long off = price * pct / 100, sale = price - off;
  bool buy_more = r.between(0, 1) == 1;
  long k = r.between(2, 6);
  Solution s;
  Problem out;
  out.question = fmt::format("A {} costs ${}. During a sale it is {}% off. ", item, price, pct);
  out.question += buy_more ? fmt::format("{} buys {} of them at the sale price. How much does {} pay?",
                                         p.name, k, p.subj)
                           : std::string("What is the sale price?");
  s.step("The discount is", {N(price), "*", N(pct), "/", "100"}, off, true, ".");
  s.step("The sale price is", {N(price), "-", N(off)}, sale, true, ".");
  if (!buy_more) {
    out.answer = s.text(sale);
  } else {
    long t = s.step(fmt::format("{} pays", p.name), {N(k), "*", N(sale)}, k * sale, true, ".");
    out.answer = s.text(t);
  }
  return out;
}

constexpr std::array<const char*, 6> kSeedlings = {"tomato", "pepper", "lettuce",
                                                   "basil",  "bean",   "sunflower"};

Problem garden(Rng& r) {
  const Person& p = r.pick(kPeople);
  const char* plant = r.pick(kSeedlings);
  long trays = r.between(3, 15), per = r.between(4, 20), k = r.between(2, 9);
  long total = trays * per;
  long g = total % k + k * r.between(0, 2);
  if (g == 0) g = k;
  if (g >= total) g = total % k == 0 ? k : total % k;  // keep the rest positive
  long each = (total - g) / k;
  bool more = r.between(0, 1) == 1;
  long extra = r.between(2, 9);
  Solution s;
  Problem out;
  out.question = fmt::format(
      "{} grows {} seedlings in {} trays with {} seedlings in each tray. {} gives {} seedlings "
      "to a neighbor and plants the rest equally in {} garden beds. ",
      p.name, plant, trays, per, p.Subj, g, k);
  out.question += more ? fmt::format(
                             "Each bed already had {} plants in it. How many plants does each "
                             "bed have now?",
                             extra)
                       : std::string("How many seedlings go in each bed?");
  s.step(fmt::format("{} has", p.Subj), {N(trays), "*", N(per)}, total, false, " seedlings.");
  long rest = s.step(fmt::format("{} plants", p.Subj), {N(total), "-", N(g)}, total - g, false,
                     " seedlings.");
  s.step("Each bed gets", {N(rest), "/", N(k)}, each, false, " seedlings.");
  if (!more) {
    out.answer = s.text(each);
  } else {
    long now = s.step("Each bed now has", {N(each), "+", N(extra)}, each + extra, false,
                      " plants.");
    out.answer = s.text(now);
  }
  return out;
}

constexpr std::array<const char*, 5> kPlaces = {"zoo", "aquarium", "museum", "water park",
                                                "science center"};

Problem tickets(Rng& r) {
  long adults = r.between(2, 6), kids = r.between(2, 8);
  long x = r.between(10, 45), y = r.between(5, x - 1), snacks = r.between(5, 60);
  bool change = r.between(0, 1) == 1;
  Solution s;
  Problem out;
  out.question = fmt::format(
      "A family of {} adults and {} children visits the {}. Adult tickets cost ${} and child "
      "tickets cost ${}. ",
      adults, kids, r.pick(kPlaces), x, y);
  long a = s.step("The adult tickets cost", {N(adults), "*", N(x)}, adults * x, true, ".");
  long c = s.step("The child tickets cost", {N(kids), "*", N(y)}, kids * y, true, ".");
  if (!change) {
    out.question += "How much do the tickets cost in total?";
    long t = s.step("All tickets cost", {N(a), "+", N(c)}, a + c, true, ".");
    out.answer = s.text(t);
  } else {
    long total = a + c + snacks, bill = smallest_bill_above(total);
    out.question += fmt::format(
        "They also spend ${} on snacks and pay for everything with ${}. How much change do "
        "they get?",
        snacks, bill);
    s.step("Tickets and snacks cost", {N(a), "+", N(c), "+", N(snacks)}, total, true, ".");
    long ch = s.step("The change is", {N(bill), "-", N(total)}, bill - total, true, ".");
    out.answer = s.text(ch);
  }
  return out;
}

Problem reading(Rng& r) {
  const Person& p = r.pick(kPeople);
  long per = r.between(5, 40), d = r.between(2, 10), rest_days = r.between(1, 15);
  long pages = per * (d + rest_days);
  bool days = r.between(0, 1) == 1;
  Solution s;
  Problem out;
  out.question = fmt::format("A book has {} pages. {} reads {} pages every day for {} days. ",
                             pages, p.name, per, d);
  out.question += days ? fmt::format(
                             "If {} keeps reading {} pages a day, how many more days does {} "
                             "need to finish the book?",
                             p.subj, per, p.subj)
                       : fmt::format("How many pages does {} still have to read?", p.subj);
  long read = s.step(fmt::format("{} has read", p.Subj), {N(per), "*", N(d)}, per * d, false,
                     " pages.");
  long left = s.step("There are", {N(pages), "-", N(read)}, pages - read, false,
                     " pages left.");
  if (!days) {
    out.answer = s.text(left);
  } else {
    long more = s.step(fmt::format("{} needs", p.Subj), {N(left), "/", N(per)}, rest_days,
                       false, fmt::format(" more day{}.", rest_days == 1 ? "" : "s"));
    out.answer = s.text(more);
  }
  return out;
}

struct PackItem {
  const char* singular;
  const char* plural;
};
constexpr std::array<PackItem, 6> kPackItems = {{{"pen", "pens"},
                                                 {"battery", "batteries"},
                                                 {"candle", "candles"},
                                                 {"soap bar", "soap bars"},
                                                 {"juice box", "juice boxes"},
                                                 {"tennis ball", "tennis balls"}}};

Problem unit_price(Rng& r) {
  const PackItem& it = r.pick(kPackItems);
  long b = r.between(2, 24), u = r.between(1, 15), k = r.between(2, 30);
  if (k == b) ++k;
  long cost = b * u;
  bool several = r.between(0, 1) == 1;
  Solution s;
  Problem out;
  out.question = fmt::format("A pack of {} {} costs ${}. ", b, it.plural, cost);
  out.question += several ? fmt::format("At the same price per {}, how much do {} {} cost?",
                                        it.singular, k, it.plural)
                          : fmt::format("How much does one {} cost?", it.singular);
  s.step(fmt::format("One {} costs", it.singular), {N(cost), "/", N(b)}, u, true, ".");
  if (!several) {
    out.answer = s.text(u);
  } else {
    long t = s.step(fmt::format("{} {} cost", k, it.plural), {N(k), "*", N(u)}, k * u, true, ".");
    out.answer = s.text(t);
  }
  return out;
}

using Template = Problem (*)(Rng&);
constexpr std::array<Template, 14> kTemplates = {shopping, time_spent, distance, sharing,
                                                 bakery,   savings,    legs,     ages,
                                                 machines, discount,   garden,   tickets,
                                                 reading,  unit_price};

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

std::vector<Request> synth_gsm(std::size_t n, uint64_t seed, const std::string& split) {
  auto pairs = synth_gsm_pairs(n, seed, split);
  std::vector<Request> out;
  out.reserve(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    Request r;
    r.id = fmt::format("synth-gsm/{}/{}/{}", split, seed, i);
    r.prompt = gsm8k_prompt(pairs[i].first, {});
    auto pos = pairs[i].second.rfind("#### ");
    r.gold = {pairs[i].second.substr(pos + 5)};
    r.category = fmt::format("steps={}", count_steps(pairs[i].second));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ears
