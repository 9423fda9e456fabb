#include "reports/metrics.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include "harness/base/error.h"
#include "reports/field_json.h"

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
  return wilson_interval_of(static_cast<double>(successes) / static_cast<double>(n), n, z);
}

Interval wilson_interval_of(double p, int64_t n, double z) {
  if (n <= 0 || !std::isfinite(p)) return {};
  const double nn = static_cast<double>(n);
  const double z2 = z * z;
  const double denom = 1 + z2 / nn;
  const double centre = (p + z2 / (2 * nn)) / denom;
  const double half = z / denom * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

double paired_sign_flip_p(const std::vector<int64_t>& diffs) {
  // prob[w] = P(the +|d| terms sum to w): a subset-sum distribution, exact in doubles.
  int64_t total = 0, observed = 0;
  for (int64_t d : diffs) total += std::abs(d), observed += d;
  if (total == 0) return 1.0;
  std::vector<double> prob(static_cast<size_t>(total) + 1, 0.0);
  prob[0] = 1;
  int64_t reach = 0;
  for (int64_t d : diffs) {
    const int64_t a = std::abs(d);
    if (a == 0) continue;
    reach += a;
    for (int64_t w = reach; w >= 0; --w) prob[w] = 0.5 * prob[w] + (w >= a ? 0.5 * prob[w - a] : 0.0);
  }
  // Σ ±|d_i| = 2w − total.
  double p = 0;
  for (int64_t w = 0; w <= total; ++w)
    if (std::abs(2 * w - total) >= std::abs(observed)) p += prob[w];
  return std::min(1.0, p);
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
  std::set<std::string> scored_ids;  // the accuracy interval's units (a request's repeats are one)
};

// Everything compute_arm_metrics sums over an arm's successful results (counts go straight into
// the ArmMetrics being built).
struct ArmSums {
  std::vector<double> latencies, ttfts, tpots;
  std::vector<const RequestResult*> ok;  // for latency_wall_s
  int64_t emitted = 0, efficiency_den = 0, correct = 0, strict = 0, flexible = 0;
  int64_t tv_positions = 0, u_count = 0;
  double tv_sum = 0, u_sum = 0, em_sum = 0, f1_sum = 0;
  std::vector<int64_t> per_position, drafted_u = std::vector<int64_t>(kUncertaintyDeciles, 0),
                                     accepted_u = std::vector<int64_t>(kUncertaintyDeciles, 0),
                                     pardoned_u = std::vector<int64_t>(kUncertaintyDeciles, 0);
  std::map<std::string, CategoryAcc> categories;
  std::set<std::string> scored_ids;  // the accuracy interval's units (a request's repeats are one)

  void add(const RequestResult& r, ArmMetrics& m);
};

void ArmSums::add(const RequestResult& r, ArmMetrics& m) {
  m.output_tokens += r.output_tokens;
  m.prompt_tokens += r.prompt_tokens;
  m.steps += r.steps;
  m.decoded_tokens += r.decoded_tokens();
  m.drafted += r.drafted;
  m.accepted += r.accepted;
  m.pardoned += r.pardoned;
  emitted += r.emitted();
  efficiency_den += r.steps * (r.gamma + 1);
  latencies.push_back(r.latency_s);
  ok.push_back(&r);
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
    scored_ids.insert(r.request_id);
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
      c.scored_ids.insert(r.request_id);
      c.correct += r.correct;
    }
  }
}

// Wall time (given, or the batches' latencies), throughput and latency statistics.
void fill_speed(const ArmSums& s, double wall_s, ArmMetrics& m) {
  if (std::isfinite(wall_s) && wall_s > 0) {
    m.wall_s = wall_s;
  } else {
    m.wall_s = latency_wall_s(s.ok);
    m.wall_from_latencies = true;
  }
  // No successful request: no throughput (n/a), not the 0 tok/s a wall time without output would give.
  if (!s.latencies.empty()) {
    m.output_tokens_per_s = ratio(static_cast<double>(m.output_tokens), m.wall_s);
    m.total_tokens_per_s = ratio(static_cast<double>(m.output_tokens + m.prompt_tokens), m.wall_s);
  }
  m.latency_mean_s = mean(s.latencies);
  m.latency_p50_s = percentile(s.latencies, 50);
  m.latency_p90_s = percentile(s.latencies, 90);
  m.latency_p99_s = percentile(s.latencies, 99);
  m.ttft_mean_s = mean(s.ttfts);
  m.ttft_p50_s = percentile(s.ttfts, 50);
  m.ttft_p90_s = percentile(s.ttfts, 90);
  m.ttft_p99_s = percentile(s.ttfts, 99);
  m.tpot_mean_s = mean(s.tpots);
  m.tpot_p50_s = percentile(s.tpots, 50);
  m.tpot_p90_s = percentile(s.tpots, 90);
  m.tpot_p99_s = percentile(s.tpots, 99);
}

}  // namespace

double latency_wall_s(const std::vector<const RequestResult*>& results) {
  double total = 0;
  std::map<double, double> batch_longest;  // start_s -> the batch's longest latency
  for (const RequestResult* r : results) {
    if (r->start_s > 0) batch_longest[r->start_s] = std::max(batch_longest[r->start_s], r->latency_s);
    else total += r->latency_s;  // its own batch
  }
  for (const auto& [start, longest] : batch_longest) total += longest;
  return total;
}

namespace {

// Acceptance, distortion and the uncertainty deciles.
void fill_acceptance(const ArmSums& s, ArmMetrics& m) {
  m.mean_accept_length = ratio(s.emitted, m.steps);
  m.acceptance_rate = ratio(m.accepted, m.drafted);
  for (int64_t a : s.per_position) m.acceptance_per_position.push_back(ratio(a, m.steps));
  m.system_efficiency = ratio(s.emitted, s.efficiency_den);
  m.pardon_share = ratio(m.pardoned, m.accepted);
  m.distortion_tv_mean = ratio(s.tv_sum, static_cast<double>(s.tv_positions));
  m.mean_uncertainty = ratio(s.u_sum, static_cast<double>(s.u_count));
  const int64_t drafted_total = std::accumulate(s.drafted_u.begin(), s.drafted_u.end(), int64_t{0});
  for (int d = 0; d < kUncertaintyDeciles; ++d) {
    UncertaintyBucket b;
    b.lo = d / 10.0;
    b.hi = (d + 1) / 10.0;
    b.drafted = s.drafted_u[d];
    b.accepted = s.accepted_u[d];
    b.pardoned = s.pardoned_u[d];
    b.drafted_share = ratio(b.drafted, drafted_total);
    b.acceptance_rate = ratio(b.accepted, b.drafted);
    b.pardon_share = ratio(b.pardoned, b.accepted);
    m.uncertainty_buckets.push_back(b);
  }
}

// Accuracy (with its Wilson interval), EM / F1, and the per-category rows.
void fill_quality(const ArmSums& s, ArmMetrics& m) {
  m.accuracy = ratio(s.correct, m.n_scored);
  m.accuracy_ci95 = wilson_interval_of(m.accuracy, static_cast<int64_t>(s.scored_ids.size()));
  m.strict_accuracy = ratio(s.strict, m.n_scored);
  m.flexible_accuracy = ratio(s.flexible, m.n_scored);
  m.em_mean = ratio(s.em_sum, static_cast<double>(m.n_scored));
  m.f1_mean = ratio(s.f1_sum, static_cast<double>(m.n_scored));
  for (const auto& [name, c] : s.categories) {
    CategoryMetrics cm;
    cm.category = name;
    cm.n_requests = c.n;
    cm.n_scored = c.scored;
    cm.accuracy = ratio(c.correct, c.scored);
    cm.accuracy_ci95 = wilson_interval_of(cm.accuracy, static_cast<int64_t>(c.scored_ids.size()));
    cm.output_tokens_per_s = ratio(static_cast<double>(c.out), c.latency);
    cm.mean_accept_length = ratio(c.emitted, c.steps);
    m.categories.push_back(cm);
  }
}

}  // namespace

ArmMetrics compute_arm_metrics(const std::vector<RequestResult>& results, const std::string& arm, double wall_s) {
  ArmMetrics m;
  ArmSums sums;
  for (const auto& r : results) {
    if (r.arm != arm) continue;
    ++m.n_requests;
    if (r.ok()) {
      sums.add(r, m);
    } else {
      ++m.n_errors;
    }
  }
  fill_speed(sums, wall_s, m);
  fill_acceptance(sums, m);
  fill_quality(sums, m);
  return m;
}

double ArmMetrics::decode_s_per_token() const {
  const double decode = time_split_s.decode_s();
  return decode > 0 ? ratio(decode, static_cast<double>(decoded_tokens)) : nan_value();
}

// ---------------------------------------------------------------------------------------------
// Paired comparison

namespace {

struct PairSums {
  double out_a = 0, lat_a = 0, out_b = 0, lat_b = 0;
  double emitted_a = 0, steps_a = 0, emitted_b = 0, steps_b = 0;
  double decode_a = 0, decoded_a = 0, decode_b = 0, decoded_b = 0;  // s after the first token, its tokens
  double correct_diff = 0, scored = 0;
  double rate_a = 0, rate_b = 0;  // Σ per-pair output / latency (Spec-Bench's per-request rates)
  double prompt_a = 0, prompt_b = 0;

  void add(const PairSums& o) {
    out_a += o.out_a, lat_a += o.lat_a, out_b += o.out_b, lat_b += o.lat_b;
    rate_a += o.rate_a, rate_b += o.rate_b, prompt_a += o.prompt_a, prompt_b += o.prompt_b;
    emitted_a += o.emitted_a, steps_a += o.steps_a, emitted_b += o.emitted_b, steps_b += o.steps_b;
    decode_a += o.decode_a, decoded_a += o.decoded_a, decode_b += o.decode_b, decoded_b += o.decoded_b;
    correct_diff += o.correct_diff, scored += o.scored;
  }
  double throughput_ratio() const { return ratio(ratio(out_a, lat_a), ratio(out_b, lat_b)); }
  double latency_ratio() const { return ratio(lat_a, lat_b); }
  double tau_ratio() const { return ratio(ratio(emitted_a, steps_a), ratio(emitted_b, steps_b)); }
  double decode_ratio() const { return ratio(ratio(decode_b, decoded_b), ratio(decode_a, decoded_a)); }
  double accuracy_delta() const { return ratio(correct_diff, scored); }
  double specbench_ratio() const { return ratio(rate_a, rate_b); }  // the means' ratio: same count
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

namespace {

// One (arm, baseline) pair's sums.
PairSums pair_sums(const RequestResult& a, const RequestResult& b) {
  PairSums s;
  s.out_a = static_cast<double>(a.output_tokens);
  s.lat_a = a.latency_s;
  s.out_b = static_cast<double>(b.output_tokens);
  s.lat_b = b.latency_s;
  s.emitted_a = static_cast<double>(a.emitted());
  s.steps_a = static_cast<double>(a.steps);
  s.emitted_b = static_cast<double>(b.emitted());
  s.steps_b = static_cast<double>(b.steps);
  s.decode_a = a.decode_s();
  s.decoded_a = static_cast<double>(a.decoded_tokens());
  s.decode_b = b.decode_s();
  s.decoded_b = static_cast<double>(b.decoded_tokens());
  s.prompt_a = static_cast<double>(a.prompt_tokens);
  s.prompt_b = static_cast<double>(b.prompt_tokens);
  s.rate_a = ratio(s.out_a, s.lat_a);
  s.rate_b = ratio(s.out_b, s.lat_b);
  if (!std::isfinite(s.rate_a) || !std::isfinite(s.rate_b)) s.rate_a = s.rate_b = 0;  // no latency: no rate
  if (a.has_score && b.has_score) {
    s.correct_diff = static_cast<double>(a.correct) - static_cast<double>(b.correct);
    s.scored = 1;
  }
  return s;
}

// Successful results paired by (request_id, repeat) (the first one wins if a key repeats), summed
// per request id (the bootstrap's clusters, in sorted order so the resampling is reproducible)
// and over all; counts the pairs, scored pairs, discordant and identical outputs into c.
std::map<std::string, PairSums> pair_up(const std::vector<RequestResult>& results, Comparison& c, PairSums& full) {
  using Key = std::pair<std::string, int>;
  std::map<Key, const RequestResult*> a_by_key, b_by_key;
  for (const auto& r : results) {
    if (!r.ok()) continue;
    if (r.arm == c.arm) a_by_key.emplace(Key{r.request_id, r.repeat}, &r);
    else if (r.arm == c.baseline) b_by_key.emplace(Key{r.request_id, r.repeat}, &r);
  }
  std::map<std::string, PairSums> clusters;
  for (const auto& [key, a] : a_by_key) {
    auto it = b_by_key.find(key);
    if (it == b_by_key.end()) continue;
    const RequestResult* b = it->second;
    const PairSums s = pair_sums(*a, *b);
    if (s.scored > 0) {
      ++c.n_scored_pairs;
      if (a->correct && !b->correct) ++c.arm_only_correct;
      if (!a->correct && b->correct) ++c.baseline_only_correct;
    }
    ++c.n_pairs;
    if (a->output_ids == b->output_ids && a->text == b->text) ++c.identical_outputs;
    clusters[key.first].add(s);
    full.add(s);
  }
  return clusters;
}

// The 95 % intervals: a cluster bootstrap over request ids, each ratio's interval carried over to
// its point estimate.
void bootstrap_intervals(const std::map<std::string, PairSums>& clusters, const PairSums& full, Comparison& c) {
  std::vector<PairSums> cluster_sums;
  for (const auto& [id, s] : clusters) cluster_sums.push_back(s);
  Rng rng(c.bootstrap_seed);
  const size_t n = cluster_sums.size(), B = static_cast<size_t>(c.bootstrap_resamples);
  std::vector<double> tp, lat, tau, dec, acc, sb;
  tp.reserve(B), lat.reserve(B), tau.reserve(B), dec.reserve(B), acc.reserve(B), sb.reserve(B);
  for (size_t i = 0; i < B; ++i) {
    PairSums s;
    for (size_t k = 0; k < n; ++k) s.add(cluster_sums[rng.below(n)]);
    tp.push_back(s.throughput_ratio());
    lat.push_back(s.latency_ratio());
    tau.push_back(s.tau_ratio());
    dec.push_back(s.decode_ratio());
    acc.push_back(100 * s.accuracy_delta());
    sb.push_back(s.specbench_ratio());
  }
  c.throughput_gain_ci95 =
      to_pct(rescaled(percentile_interval(tp, B), full.throughput_ratio(), 1 + c.throughput_gain_pct / 100));
  c.latency_change_ci95 =
      to_pct(rescaled(percentile_interval(lat, B), full.latency_ratio(), 1 + c.latency_change_pct / 100));
  c.accept_length_ratio_ci95 = rescaled(percentile_interval(tau, B), full.tau_ratio(), c.accept_length_ratio);
  c.decode_speedup_ci95 = rescaled(percentile_interval(dec, B), full.decode_ratio(), c.decode_speedup);
  if (c.n_scored_pairs > 0) c.accuracy_delta_ci95 = percentile_interval(acc, B);
  c.specbench_speedup_ci95 = percentile_interval(sb, B);
}

// The point estimates. From the arms' metrics (the table's wall-time rates) when the pairs are
// every success of both arms; else from the pairs alone, or an arm's extra successes (a request
// the other arm failed) would sit in one side of an unpaired ratio.
void point_estimates(const PairSums& full, const ArmMetrics& arm_m, const ArmMetrics& base_m, Comparison& c) {
  const int64_t succ_a = arm_m.n_requests - arm_m.n_errors, succ_b = base_m.n_requests - base_m.n_errors;
  c.pairs_only = c.n_pairs != succ_a || c.n_pairs != succ_b;
  if (c.pairs_only) {
    c.throughput_gain_pct = 100 * (full.throughput_ratio() - 1);
    c.total_throughput_gain_pct = 100 * (ratio(full.out_a + full.prompt_a, full.lat_a) /
                                             ratio(full.out_b + full.prompt_b, full.lat_b) - 1);
    c.latency_change_pct = 100 * (full.latency_ratio() - 1);
    c.accept_length_ratio = full.tau_ratio();
    c.decode_speedup = full.decode_ratio();
  } else {
    c.throughput_gain_pct = 100 * (ratio(arm_m.output_tokens_per_s, base_m.output_tokens_per_s) - 1);
    c.total_throughput_gain_pct = 100 * (ratio(arm_m.total_tokens_per_s, base_m.total_tokens_per_s) - 1);
    c.latency_change_pct = 100 * (ratio(arm_m.latency_mean_s, base_m.latency_mean_s) - 1);
    c.accept_length_ratio = ratio(arm_m.mean_accept_length, base_m.mean_accept_length);
    c.decode_speedup = ratio(base_m.decode_s_per_token(), arm_m.decode_s_per_token());
  }
  c.specbench_speedup = full.specbench_ratio();
  c.accuracy_delta_pp = 100 * full.accuracy_delta();
}

}  // namespace

Comparison compare_arms(const std::vector<RequestResult>& results, const std::string& arm, const ArmMetrics& arm_m,
                        const std::string& baseline, const ArmMetrics& base_m, uint64_t seed, int resamples) {
  Comparison c;
  c.arm = arm;
  c.baseline = baseline;
  c.bootstrap_seed = seed;
  c.bootstrap_resamples = std::max(resamples, 0);
  PairSums full;
  const std::map<std::string, PairSums> clusters = pair_up(results, c, full);
  c.n_paired_requests = static_cast<int64_t>(clusters.size());
  point_estimates(full, arm_m, base_m, c);
  // The test's units are requests: a request's repeats sum into one difference.
  std::vector<int64_t> diffs;
  for (const auto& [id, s] : clusters)
    if (s.scored > 0) diffs.push_back(std::llround(s.correct_diff));
  c.mcnemar_p = c.n_scored_pairs > 0 ? paired_sign_flip_p(diffs) : nan_value();
  if (!clusters.empty() && c.bootstrap_resamples > 0) bootstrap_intervals(clusters, full, c);
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

void to_json(json& j, const ArmMetrics& m) { j = field_json::to_object(m); }

void from_json(const json& j, ArmMetrics& m) {
  if (!j.is_object()) fail("report 'metrics' must be an object, got {}", j.type_name());
  field_json::from_object<ArmMetrics, field_json::ReportReader>(j, m);
}

void to_json(json& j, const Comparison& c) { j = field_json::to_object(c); }

void from_json(const json& j, Comparison& c) {
  if (!j.is_object()) fail("report comparison must be an object, got {}", j.type_name());
  field_json::from_object<Comparison, field_json::ReportReader>(j, c);
}

}  // namespace ears
