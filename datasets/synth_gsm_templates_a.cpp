// synth-gsm problem templates (shopping .. savings); see synth_gsm.h. All problem text here is original.
#include <fmt/format.h>

#include <array>

#include "datasets/synth_gsm_parts.h"

namespace ears::synth {
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

}  // namespace ears::synth
