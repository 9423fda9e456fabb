#include "reports/metrics.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

#include "harness/base/error.h"

namespace ears {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Basic statistics

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return nan_value();
  if (!(q >= 0 && q <= 100)) fail("percentile q = {} outside [0, 100]", q);
  std::sort(v.begin(), v.end());
  const double h = (static_cast<double>(v.size()) - 1) * q / 100.0;
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return nan_value();
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

Interval wilson_interval(int64_t successes, int64_t n, double z) {
  if (n <= 0) return {};
  const double nn = static_cast<double>(n);
  const double p = static_cast<double>(successes) / nn;
  const double z2 = z * z;
  const double denom = 1 + z2 / nn;
  const double centre = (p + z2 / (2 * nn)) / denom;
  const double half = z / denom * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

double mcnemar_exact_p(int64_t b, int64_t c) {
  const int64_t n = b + c;
  if (n <= 0) return 1.0;
  const int64_t k = std::min(b, c);
  // P(X <= k), X ~ Bin(n, 1/2), summed in log space to stay finite for large n.
  const double log_half_n = -static_cast<double>(n) * std::log(2.0);
  double tail = 0;
  for (int64_t i = 0; i <= k; ++i) {
    const double nd = static_cast<double>(n), id = static_cast<double>(i);
    const double log_choose = std::lgamma(nd + 1.0) - std::lgamma(id + 1.0) - std::lgamma(nd - id + 1.0);
    tail += std::exp(log_choose + log_half_n);
  }
  return std::min(1.0, 2 * tail);
}

// ---------------------------------------------------------------------------------------------
// Per-arm metrics

namespace {

double ratio(double num, double den) { return den > 0 ? num / den : nan_value(); }
double ratio(int64_t num, int64_t den) { return ratio(static_cast<double>(num), static_cast<double>(den)); }

void add_into(std::vector<int64_t>& acc, const std::vector<int64_t>& v) {
  if (acc.size() < v.size()) acc.resize(v.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) acc[i] += v[i];
}

struct CategoryAcc {
  int64_t n = 0, scored = 0, correct = 0, out = 0, emitted = 0, steps = 0;
  double latency = 0;
};

}  // namespace

ArmMetrics compute_arm_metrics(const std::vector<RequestResult>& results, const std::string& arm, double wall_s) {
  ArmMetrics m;
  std::vector<double> latencies, ttfts, tpots;
  int64_t emitted = 0, efficiency_den = 0, correct = 0, strict = 0, flexible = 0;
  int64_t tv_positions = 0, u_count = 0;
  double tv_sum = 0, u_sum = 0, em_sum = 0, f1_sum = 0;
  std::vector<int64_t> per_position, drafted_u(kUncertaintyDeciles, 0), accepted_u(kUncertaintyDeciles, 0),
      pardoned_u(kUncertaintyDeciles, 0);
  std::map<std::string, CategoryAcc> categories;

  for (const auto& r : results) {
    if (r.arm != arm) continue;
    ++m.n_requests;
    if (!r.ok()) {
      ++m.n_errors;
      continue;
    }
    m.output_tokens += r.output_tokens;
    m.prompt_tokens += r.prompt_tokens;
    m.steps += r.steps;
    m.drafted += r.drafted;
    m.accepted += r.accepted;
    m.pardoned += r.pardoned;
    emitted += r.emitted();
    efficiency_den += r.steps * (r.gamma + 1);
    latencies.push_back(r.latency_s);
    ttfts.push_back(r.ttft_s);
    if (r.output_tokens > 1) tpots.push_back((r.latency_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1));
    tv_sum += r.distortion_tv_sum;
    tv_positions += r.distortion_positions;
    u_sum += r.uncertainty_sum;
    u_count += r.uncertainty_count;
    add_into(per_position, r.accepted_per_position);
    add_into(m.accept_length_hist, r.accept_length_hist);
    add_into(drafted_u, r.drafted_by_uncertainty);
    add_into(accepted_u, r.accepted_by_uncertainty);
    add_into(pardoned_u, r.pardoned_by_uncertainty);
    m.time_split_s.prefill_s += r.prefill_s;
    m.time_split_s.draft_s += r.draft_s;
    m.time_split_s.verify_s += r.verify_s;
    m.time_split_s.other_s += r.other_s;
    if (r.has_score) {
      ++m.n_scored;
      correct += r.correct;
      strict += r.strict_correct;
      flexible += r.flexible_correct;
      em_sum += r.em;
      f1_sum += r.f1;
    }
    if (!r.category.empty()) {
      auto& c = categories[r.category];
      ++c.n;
      c.out += r.output_tokens;
      c.latency += r.latency_s;
      c.emitted += r.emitted();
      c.steps += r.steps;
      if (r.has_score) {
        ++c.scored;
        c.correct += r.correct;
      }
    }
  }

  const double latency_sum = std::accumulate(latencies.begin(), latencies.end(), 0.0);
  if (std::isfinite(wall_s) && wall_s > 0) {
    m.wall_s = wall_s;
  } else {
    m.wall_s = latency_sum;
    m.wall_from_latencies = true;
  }
  m.output_tokens_per_s = ratio(static_cast<double>(m.output_tokens), m.wall_s);
  m.total_tokens_per_s = ratio(static_cast<double>(m.output_tokens + m.prompt_tokens), m.wall_s);
  m.latency_mean_s = mean(latencies);
  m.latency_p50_s = percentile(latencies, 50);
  m.latency_p90_s = percentile(latencies, 90);
  m.latency_p99_s = percentile(latencies, 99);
  m.ttft_mean_s = mean(ttfts);
  m.tpot_mean_s = mean(tpots);

  m.mean_accept_length = ratio(emitted, m.steps);
  m.acceptance_rate = ratio(m.accepted, m.drafted);
  for (int64_t a : per_position) m.acceptance_per_position.push_back(ratio(a, m.steps));
  m.system_efficiency = ratio(emitted, efficiency_den);
  m.pardon_share = ratio(m.pardoned, m.accepted);
  m.distortion_tv_mean = ratio(tv_sum, static_cast<double>(tv_positions));
  m.mean_uncertainty = ratio(u_sum, static_cast<double>(u_count));

  const int64_t drafted_total = std::accumulate(drafted_u.begin(), drafted_u.end(), int64_t{0});
  for (int d = 0; d < kUncertaintyDeciles; ++d) {
    UncertaintyBucket b;
    b.lo = d / 10.0;
    b.hi = (d + 1) / 10.0;
    b.drafted = drafted_u[d];
    b.accepted = accepted_u[d];
    b.pardoned = pardoned_u[d];
    b.drafted_share = ratio(b.drafted, drafted_total);
    b.acceptance_rate = ratio(b.accepted, b.drafted);
    b.pardon_share = ratio(b.pardoned, b.accepted);
    m.uncertainty_buckets.push_back(b);
  }

  m.accuracy = ratio(correct, m.n_scored);
  m.accuracy_ci95 = wilson_interval(correct, m.n_scored);
  m.strict_accuracy = ratio(strict, m.n_scored);
  m.flexible_accuracy = ratio(flexible, m.n_scored);
  m.em_mean = ratio(em_sum, static_cast<double>(m.n_scored));
  m.f1_mean = ratio(f1_sum, static_cast<double>(m.n_scored));

  for (const auto& [name, c] : categories) {
    CategoryMetrics cm;
    cm.category = name;
    cm.n_requests = c.n;
    cm.n_scored = c.scored;
    cm.accuracy = ratio(c.correct, c.scored);
    cm.accuracy_ci95 = wilson_interval(c.correct, c.scored);
    cm.output_tokens_per_s = ratio(static_cast<double>(c.out), c.latency);
    cm.mean_accept_length = ratio(c.emitted, c.steps);
    m.categories.push_back(cm);
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Paired comparison

namespace {

struct PairSums {
  double out_a = 0, lat_a = 0, out_b = 0, lat_b = 0;
  double emitted_a = 0, steps_a = 0, emitted_b = 0, steps_b = 0;
  double correct_diff = 0, scored = 0;

  void add(const PairSums& o) {
    out_a += o.out_a, lat_a += o.lat_a, out_b += o.out_b, lat_b += o.lat_b;
    emitted_a += o.emitted_a, steps_a += o.steps_a, emitted_b += o.emitted_b, steps_b += o.steps_b;
    correct_diff += o.correct_diff, scored += o.scored;
  }
  double throughput_ratio() const { return ratio(ratio(out_a, lat_a), ratio(out_b, lat_b)); }
  double latency_ratio() const { return ratio(lat_a, lat_b); }
  double tau_ratio() const { return ratio(ratio(emitted_a, steps_a), ratio(emitted_b, steps_b)); }
  double accuracy_delta() const { return ratio(correct_diff, scored); }
};

// 95 % percentile interval of the finite values; NaNs when fewer than half are finite.
Interval percentile_interval(std::vector<double> v, size_t resamples) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty() || v.size() * 2 < resamples) return {};
  return {percentile(v, 2.5), percentile(std::move(v), 97.5)};
}

// Interval of a ratio statistic, carried over to the point estimate `point_ratio`:
// [point · lo/full, point · hi/full].
Interval rescaled(const Interval& boot, double full, double point_ratio) {
  if (!std::isfinite(full) || full <= 0 || !std::isfinite(point_ratio)) return {};
  return {point_ratio * boot.lo / full, point_ratio * boot.hi / full};
}

Interval to_pct(const Interval& ratio_interval) {
  return {100 * (ratio_interval.lo - 1), 100 * (ratio_interval.hi - 1)};
}

}  // namespace

Comparison compare_arms(const std::vector<RequestResult>& results, const std::string& arm, const ArmMetrics& arm_m,
                        const std::string& baseline, const ArmMetrics& base_m, uint64_t seed, int resamples) {
  Comparison c;
  c.arm = arm;
  c.baseline = baseline;
  c.bootstrap_seed = seed;
  c.bootstrap_resamples = std::max(resamples, 0);

  // Successful results by (request_id, repeat); the first one wins if a key repeats.
  using Key = std::pair<std::string, int>;
  std::map<Key, const RequestResult*> a_by_key, b_by_key;
  for (const auto& r : results) {
    if (!r.ok()) continue;
    if (r.arm == arm) a_by_key.emplace(Key{r.request_id, r.repeat}, &r);
    else if (r.arm == baseline) b_by_key.emplace(Key{r.request_id, r.repeat}, &r);
  }
  // Clusters = request ids, in sorted order (std::map), so the resampling is reproducible.
  std::map<std::string, PairSums> clusters;
  PairSums full;
  for (const auto& [key, a] : a_by_key) {
    auto it = b_by_key.find(key);
    if (it == b_by_key.end()) continue;
    const RequestResult* b = it->second;
    PairSums s;
    s.out_a = static_cast<double>(a->output_tokens);
    s.lat_a = a->latency_s;
    s.out_b = static_cast<double>(b->output_tokens);
    s.lat_b = b->latency_s;
    s.emitted_a = static_cast<double>(a->emitted());
    s.steps_a = static_cast<double>(a->steps);
    s.emitted_b = static_cast<double>(b->emitted());
    s.steps_b = static_cast<double>(b->steps);
    if (a->has_score && b->has_score) {
      s.correct_diff = static_cast<double>(a->correct) - static_cast<double>(b->correct);
      s.scored = 1;
      ++c.n_scored_pairs;
      if (a->correct && !b->correct) ++c.arm_only_correct;
      if (!a->correct && b->correct) ++c.baseline_only_correct;
    }
    ++c.n_pairs;
    if (a->output_ids == b->output_ids && a->text == b->text) ++c.identical_outputs;
    clusters[key.first].add(s);
    full.add(s);
  }

  // Point estimates: from the arms' metrics, so they agree with the table.
  c.throughput_gain_pct = 100 * (ratio(arm_m.output_tokens_per_s, base_m.output_tokens_per_s) - 1);
  c.total_throughput_gain_pct = 100 * (ratio(arm_m.total_tokens_per_s, base_m.total_tokens_per_s) - 1);
  c.latency_change_pct = 100 * (ratio(arm_m.latency_mean_s, base_m.latency_mean_s) - 1);
  c.accept_length_ratio = ratio(arm_m.mean_accept_length, base_m.mean_accept_length);
  c.accuracy_delta_pp = 100 * full.accuracy_delta();
  c.mcnemar_p = c.n_scored_pairs > 0 ? mcnemar_exact_p(c.arm_only_correct, c.baseline_only_correct) : nan_value();

  if (clusters.empty() || c.bootstrap_resamples == 0) return c;
  std::vector<PairSums> cluster_sums;
  for (const auto& [id, s] : clusters) cluster_sums.push_back(s);
  Rng rng(seed);
  const size_t n = cluster_sums.size(), B = static_cast<size_t>(c.bootstrap_resamples);
  std::vector<double> tp, lat, tau, acc;
  tp.reserve(B), lat.reserve(B), tau.reserve(B), acc.reserve(B);
  for (size_t i = 0; i < B; ++i) {
    PairSums s;
    for (size_t k = 0; k < n; ++k) s.add(cluster_sums[rng.below(n)]);
    tp.push_back(s.throughput_ratio());
    lat.push_back(s.latency_ratio());
    tau.push_back(s.tau_ratio());
    acc.push_back(100 * s.accuracy_delta());
  }
  c.throughput_gain_ci95 =
      to_pct(rescaled(percentile_interval(tp, B), full.throughput_ratio(), 1 + c.throughput_gain_pct / 100));
  c.latency_change_ci95 =
      to_pct(rescaled(percentile_interval(lat, B), full.latency_ratio(), 1 + c.latency_change_pct / 100));
  c.accept_length_ratio_ci95 = rescaled(percentile_interval(tau, B), full.tau_ratio(), c.accept_length_ratio);
  if (c.n_scored_pairs > 0) c.accuracy_delta_ci95 = percentile_interval(acc, B);
  return c;
}

// ---------------------------------------------------------------------------------------------
// JSON

json json_number(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

double json_to_double(const json& j) {
  if (j.is_null()) return nan_value();
  if (!j.is_number()) fail("expected a number or null, got {} ({})", j.type_name(), j.dump());
  return j.get<double>();
}

namespace {

double get_double(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return nan_value();
  try {
    return json_to_double(*it);
  } catch (const Error&) {
    fail("report key '{}' must be a number or null, got {}", key, it->dump());
  }
}

template <class T>
void get_to(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  try {
    out = it->get<T>();
  } catch (const json::exception& e) {
    fail("report key '{}' has the wrong type ({}): {}", key, it->type_name(), e.what());
  }
}

json doubles(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(json_number(x));
  return a;
}

std::vector<double> get_doubles(const json& j, const char* key) {
  std::vector<double> v;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return v;
  if (!it->is_array()) fail("report key '{}' must be an array", key);
  for (const auto& x : *it) v.push_back(json_to_double(x));
  return v;
}

Interval get_interval(const json& j, const char* key) {
  Interval x;
  auto it = j.find(key);
  if (it != j.end()) from_json(*it, x);
  return x;
}

}  // namespace

void to_json(json& j, const Interval& x) { j = json::array({json_number(x.lo), json_number(x.hi)}); }

void from_json(const json& j, Interval& x) {
  if (j.is_null()) {
    x = Interval{};
    return;
  }
  if (!j.is_array() || j.size() != 2) fail("an interval must be [lo, hi], got {}", j.dump());
  x.lo = json_to_double(j[0]);
  x.hi = json_to_double(j[1]);
}

void to_json(json& j, const ArmMetrics& m) {
  j = json::object();
  j["n_requests"] = m.n_requests;
  j["n_errors"] = m.n_errors;
  j["n_scored"] = m.n_scored;
  j["output_tokens"] = m.output_tokens;
  j["prompt_tokens"] = m.prompt_tokens;
  j["steps"] = m.steps;
  j["drafted"] = m.drafted;
  j["accepted"] = m.accepted;
  j["pardoned"] = m.pardoned;
  j["wall_s"] = json_number(m.wall_s);
  j["wall_from_latencies"] = m.wall_from_latencies;
  j["output_tokens_per_s"] = json_number(m.output_tokens_per_s);
  j["total_tokens_per_s"] = json_number(m.total_tokens_per_s);
  j["latency_mean_s"] = json_number(m.latency_mean_s);
  j["latency_p50_s"] = json_number(m.latency_p50_s);
  j["latency_p90_s"] = json_number(m.latency_p90_s);
  j["latency_p99_s"] = json_number(m.latency_p99_s);
  j["ttft_mean_s"] = json_number(m.ttft_mean_s);
  j["tpot_mean_s"] = json_number(m.tpot_mean_s);
  j["mean_accept_length"] = json_number(m.mean_accept_length);
  j["acceptance_rate"] = json_number(m.acceptance_rate);
  j["acceptance_per_position"] = doubles(m.acceptance_per_position);
  j["system_efficiency"] = json_number(m.system_efficiency);
  j["pardon_share"] = json_number(m.pardon_share);
  j["distortion_tv_mean"] = json_number(m.distortion_tv_mean);
  j["mean_uncertainty"] = json_number(m.mean_uncertainty);
  j["accept_length_hist"] = m.accept_length_hist;
  json buckets = json::array();
  for (const auto& b : m.uncertainty_buckets)
    buckets.push_back({{"lo", b.lo},
                       {"hi", b.hi},
                       {"drafted", b.drafted},
                       {"accepted", b.accepted},
                       {"pardoned", b.pardoned},
                       {"drafted_share", json_number(b.drafted_share)},
                       {"acceptance_rate", json_number(b.acceptance_rate)},
                       {"pardon_share", json_number(b.pardon_share)}});
  j["uncertainty_buckets"] = buckets;
  j["accuracy"] = json_number(m.accuracy);
  j["accuracy_ci95"] = m.accuracy_ci95;
  j["strict_accuracy"] = json_number(m.strict_accuracy);
  j["flexible_accuracy"] = json_number(m.flexible_accuracy);
  j["em_mean"] = json_number(m.em_mean);
  j["f1_mean"] = json_number(m.f1_mean);
  json cats = json::array();
  for (const auto& c : m.categories)
    cats.push_back({{"category", c.category},
                    {"n_requests", c.n_requests},
                    {"n_scored", c.n_scored},
                    {"accuracy", json_number(c.accuracy)},
                    {"accuracy_ci95", c.accuracy_ci95},
                    {"output_tokens_per_s", json_number(c.output_tokens_per_s)},
                    {"mean_accept_length", json_number(c.mean_accept_length)}});
  j["categories"] = cats;
  j["time_split_s"] = {{"prefill", json_number(m.time_split_s.prefill_s)},
                       {"draft", json_number(m.time_split_s.draft_s)},
                       {"verify", json_number(m.time_split_s.verify_s)},
                       {"other", json_number(m.time_split_s.other_s)}};
}

void from_json(const json& j, ArmMetrics& m) {
  if (!j.is_object()) fail("report 'metrics' must be an object, got {}", j.type_name());
  m = ArmMetrics{};
  get_to(j, "n_requests", m.n_requests);
  get_to(j, "n_errors", m.n_errors);
  get_to(j, "n_scored", m.n_scored);
  get_to(j, "output_tokens", m.output_tokens);
  get_to(j, "prompt_tokens", m.prompt_tokens);
  get_to(j, "steps", m.steps);
  get_to(j, "drafted", m.drafted);
  get_to(j, "accepted", m.accepted);
  get_to(j, "pardoned", m.pardoned);
  m.wall_s = get_double(j, "wall_s");
  get_to(j, "wall_from_latencies", m.wall_from_latencies);
  m.output_tokens_per_s = get_double(j, "output_tokens_per_s");
  m.total_tokens_per_s = get_double(j, "total_tokens_per_s");
  m.latency_mean_s = get_double(j, "latency_mean_s");
  m.latency_p50_s = get_double(j, "latency_p50_s");
  m.latency_p90_s = get_double(j, "latency_p90_s");
  m.latency_p99_s = get_double(j, "latency_p99_s");
  m.ttft_mean_s = get_double(j, "ttft_mean_s");
  m.tpot_mean_s = get_double(j, "tpot_mean_s");
  m.mean_accept_length = get_double(j, "mean_accept_length");
  m.acceptance_rate = get_double(j, "acceptance_rate");
  m.acceptance_per_position = get_doubles(j, "acceptance_per_position");
  m.system_efficiency = get_double(j, "system_efficiency");
  m.pardon_share = get_double(j, "pardon_share");
  m.distortion_tv_mean = get_double(j, "distortion_tv_mean");
  m.mean_uncertainty = get_double(j, "mean_uncertainty");
  get_to(j, "accept_length_hist", m.accept_length_hist);
  if (auto it = j.find("uncertainty_buckets"); it != j.end() && it->is_array()) {
    for (const auto& b : *it) {
      UncertaintyBucket u;
      u.lo = get_double(b, "lo");
      u.hi = get_double(b, "hi");
      get_to(b, "drafted", u.drafted);
      get_to(b, "accepted", u.accepted);
      get_to(b, "pardoned", u.pardoned);
      u.drafted_share = get_double(b, "drafted_share");
      u.acceptance_rate = get_double(b, "acceptance_rate");
      u.pardon_share = get_double(b, "pardon_share");
      m.uncertainty_buckets.push_back(u);
    }
  }
  m.accuracy = get_double(j, "accuracy");
  m.accuracy_ci95 = get_interval(j, "accuracy_ci95");
  m.strict_accuracy = get_double(j, "strict_accuracy");
  m.flexible_accuracy = get_double(j, "flexible_accuracy");
  m.em_mean = get_double(j, "em_mean");
  m.f1_mean = get_double(j, "f1_mean");
  if (auto it = j.find("categories"); it != j.end() && it->is_array()) {
    for (const auto& c : *it) {
      CategoryMetrics cm;
      get_to(c, "category", cm.category);
      get_to(c, "n_requests", cm.n_requests);
      get_to(c, "n_scored", cm.n_scored);
      cm.accuracy = get_double(c, "accuracy");
      cm.accuracy_ci95 = get_interval(c, "accuracy_ci95");
      cm.output_tokens_per_s = get_double(c, "output_tokens_per_s");
      cm.mean_accept_length = get_double(c, "mean_accept_length");
      m.categories.push_back(cm);
    }
  }
  if (auto it = j.find("time_split_s"); it != j.end() && it->is_object()) {
    m.time_split_s.prefill_s = get_double(*it, "prefill");
    m.time_split_s.draft_s = get_double(*it, "draft");
    m.time_split_s.verify_s = get_double(*it, "verify");
    m.time_split_s.other_s = get_double(*it, "other");
  }
}

void to_json(json& j, const Comparison& c) {
  j = json::object();
  j["arm"] = c.arm;
  j["baseline"] = c.baseline;
  j["n_pairs"] = c.n_pairs;
  j["n_scored_pairs"] = c.n_scored_pairs;
  j["identical_outputs"] = c.identical_outputs;
  // Derived (not read back): the share a gate can hold to 1 for a T = 0 identity check.
  j["identical_share"] = c.n_pairs > 0 ? json(static_cast<double>(c.identical_outputs) / c.n_pairs) : json(nullptr);
  j["throughput_gain_pct"] = json_number(c.throughput_gain_pct);
  j["throughput_gain_ci95"] = c.throughput_gain_ci95;
  j["total_throughput_gain_pct"] = json_number(c.total_throughput_gain_pct);
  j["latency_change_pct"] = json_number(c.latency_change_pct);
  j["latency_change_ci95"] = c.latency_change_ci95;
  j["accuracy_delta_pp"] = json_number(c.accuracy_delta_pp);
  j["accuracy_delta_ci95"] = c.accuracy_delta_ci95;
  j["mcnemar_p"] = json_number(c.mcnemar_p);
  j["arm_only_correct"] = c.arm_only_correct;
  j["baseline_only_correct"] = c.baseline_only_correct;
  j["accept_length_ratio"] = json_number(c.accept_length_ratio);
  j["accept_length_ratio_ci95"] = c.accept_length_ratio_ci95;
  j["bootstrap_resamples"] = c.bootstrap_resamples;
  j["bootstrap_seed"] = c.bootstrap_seed;
}

void from_json(const json& j, Comparison& c) {
  if (!j.is_object()) fail("report comparison must be an object, got {}", j.type_name());
  c = Comparison{};
  get_to(j, "arm", c.arm);
  get_to(j, "baseline", c.baseline);
  get_to(j, "n_pairs", c.n_pairs);
  get_to(j, "n_scored_pairs", c.n_scored_pairs);
  c.identical_outputs = j.value("identical_outputs", int64_t{0});
  c.throughput_gain_pct = get_double(j, "throughput_gain_pct");
  c.throughput_gain_ci95 = get_interval(j, "throughput_gain_ci95");
  c.total_throughput_gain_pct = get_double(j, "total_throughput_gain_pct");
  c.latency_change_pct = get_double(j, "latency_change_pct");
  c.latency_change_ci95 = get_interval(j, "latency_change_ci95");
  c.accuracy_delta_pp = get_double(j, "accuracy_delta_pp");
  c.accuracy_delta_ci95 = get_interval(j, "accuracy_delta_ci95");
  c.mcnemar_p = get_double(j, "mcnemar_p");
  get_to(j, "arm_only_correct", c.arm_only_correct);
  get_to(j, "baseline_only_correct", c.baseline_only_correct);
  c.accept_length_ratio = get_double(j, "accept_length_ratio");
  c.accept_length_ratio_ci95 = get_interval(j, "accept_length_ratio_ci95");
  get_to(j, "bootstrap_resamples", c.bootstrap_resamples);
  get_to(j, "bootstrap_seed", c.bootstrap_seed);
}

}  // namespace ears
