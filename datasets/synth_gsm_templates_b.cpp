// synth-gsm problem templates (animal legs .. unit prices); see synth_gsm.h. All problem text here is original.
#include <fmt/format.h>

#include <array>

#include "datasets/synth_gsm_parts.h"

namespace ears::synth {
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

}  // namespace ears::synth
