// Metrics math: percentiles, intervals, per-arm metrics and paired arm-vs-baseline comparisons.
// Torch-free and deterministic (the bootstrap uses its own seeded PRNG, never std::random_device).
//
// Conventions (docs/report-schema.md has the long form):
//   - failed requests (error non-empty) count in n_errors and are excluded from every other
//     metric; a pair is used in a comparison only when both arms succeeded;
//   - output_tokens_per_s = Σ output tokens / the arm's generation wall time (the runner's
//     measurement); when no wall time is known, Σ latencies is used (wall_from_latencies).
//   - τ (mean_accept_length) = Σ (accepted + corrections + bonus) / Σ steps, like vLLM / Spec-Bench;
//   - comparison intervals are paired *cluster* bootstrap percentile intervals: the clusters are
//     request ids (all repeats of a request move together), resampled with replacement;
//   - throughput_gain_ci95: the statistic is the ratio of per-pair aggregate throughputs
//     (Σ out_arm / Σ latency_arm) / (Σ out_base / Σ latency_base) over the resampled pairs
//     (a ratio of sums, weighting long requests by their time, like the headline tokens/s);
//     its bootstrap distribution relative to its full-sample value is applied to the
//     wall-time point estimate, so the interval is centred where the table's number is.
//     latency_change_ci95 and accept_length_ratio_ci95 are built the same way.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/base/rng.h"
#include "reports/result.h"

namespace ears {

inline double nan_value() { return std::nan(""); }

struct Interval {
  double lo = nan_value();
  double hi = nan_value();
};

// numpy.percentile(v, q) with the default 'linear' method; q in [0, 100]. NaN when v is empty.
double percentile(std::vector<double> v, double q);
// Arithmetic mean; NaN when v is empty.
double mean(const std::vector<double>& v);
// Wilson score interval for a binomial proportion (z = 1.96 → 95 %). NaNs when n == 0.
Interval wilson_interval(int64_t successes, int64_t n, double z = 1.959963984540054);
// Exact two-sided McNemar p-value from the discordant counts b and c:
// min(1, 2 · P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2). 1 when b + c == 0.
double mcnemar_exact_p(int64_t b, int64_t c);


struct UncertaintyBucket {
  double lo = 0, hi = 0;  // u range [lo, hi)
  int64_t drafted = 0, accepted = 0, pardoned = 0;
  double drafted_share = nan_value();    // drafted / Σ drafted over buckets
  double acceptance_rate = nan_value();  // accepted / drafted
  double pardon_share = nan_value();     // pardoned / accepted
};

struct CategoryMetrics {
  std::string category;
  int64_t n_requests = 0;  // successful requests
  int64_t n_scored = 0;
  double accuracy = nan_value();
  Interval accuracy_ci95;
  double output_tokens_per_s = nan_value();  // Σ output / Σ latency (no per-category wall time)
  double mean_accept_length = nan_value();
};

struct TimeSplit {
  double prefill_s = 0, draft_s = 0, verify_s = 0, other_s = 0;
};

struct ArmMetrics {
  // counts
  int64_t n_requests = 0;  // all results of the arm, failed ones included
  int64_t n_errors = 0;
  int64_t n_scored = 0;
  int64_t output_tokens = 0;
  int64_t prompt_tokens = 0;
  int64_t steps = 0, drafted = 0, accepted = 0, pardoned = 0;
  double wall_s = nan_value();
  bool wall_from_latencies = false;
  // throughput and latency
  double output_tokens_per_s = nan_value();
  double total_tokens_per_s = nan_value();
  double latency_mean_s = nan_value();
  double latency_p50_s = nan_value();
  double latency_p90_s = nan_value();
  double latency_p99_s = nan_value();
  double ttft_mean_s = nan_value();
  double tpot_mean_s = nan_value();  // mean over requests of (latency - ttft) / (output - 1)
  // speculation
  double mean_accept_length = nan_value();  // τ
  double acceptance_rate = nan_value();
  std::vector<double> acceptance_per_position;  // [k] = Σ accepted_per_position[k] / Σ steps
  double system_efficiency = nan_value();       // Σ emitted / Σ steps·(γ+1)
  double pardon_share = nan_value();
  double distortion_tv_mean = nan_value();
  double mean_uncertainty = nan_value();
  std::vector<int64_t> accept_length_hist;  // Σ over requests; [n] = steps that emitted n tokens
  std::vector<UncertaintyBucket> uncertainty_buckets;  // 10 deciles of u
  // quality
  double accuracy = nan_value();
  Interval accuracy_ci95;
  double strict_accuracy = nan_value();
  double flexible_accuracy = nan_value();
  double em_mean = nan_value();
  double f1_mean = nan_value();
  std::vector<CategoryMetrics> categories;  // sorted by name; only requests with a category
  TimeSplit time_split_s;
};

// Metrics of one arm from its results (only results whose arm field equals `arm` are used).
// wall_s <= 0 or NaN: fall back to Σ latencies.
ArmMetrics compute_arm_metrics(const std::vector<RequestResult>& results, const std::string& arm, double wall_s);

struct Comparison {
  std::string arm, baseline;
  int64_t n_pairs = 0;         // (request_id, repeat) present and successful in both arms
  int64_t n_scored_pairs = 0;  // ... and scored in both
  int64_t identical_outputs = 0;  // pairs with the same output ids and text (all of them when
                                  // both arms decode greedily at T = 0: a correctness check)
  double throughput_gain_pct = nan_value();  // 100·(out_tps_arm / out_tps_base − 1)
  Interval throughput_gain_ci95;
  double total_throughput_gain_pct = nan_value();
  double latency_change_pct = nan_value();  // 100·(latency_mean_arm / latency_mean_base − 1)
  Interval latency_change_ci95;
  double accuracy_delta_pp = nan_value();  // 100·(acc_arm − acc_base) over scored pairs
  Interval accuracy_delta_ci95;
  double mcnemar_p = nan_value();
  int64_t arm_only_correct = 0;       // discordant pairs: arm right, baseline wrong
  int64_t baseline_only_correct = 0;  // discordant pairs: arm wrong, baseline right
  double accept_length_ratio = nan_value();  // τ_arm / τ_base
  Interval accept_length_ratio_ci95;
  int bootstrap_resamples = 0;
  uint64_t bootstrap_seed = 0;
};

inline constexpr uint64_t kDefaultBootstrapSeed = 0x5EED0EA45ull;
inline constexpr int kDefaultBootstrapResamples = 2000;

// Paired comparison of `arm` against `baseline`; the point estimates come from the two
// ArmMetrics (so they match the table), the intervals from the paired cluster bootstrap.
Comparison compare_arms(const std::vector<RequestResult>& results, const std::string& arm, const ArmMetrics& arm_m,
                        const std::string& baseline, const ArmMetrics& base_m,
                        uint64_t seed = kDefaultBootstrapSeed, int resamples = kDefaultBootstrapResamples);

// JSON helpers shared by the report code: non-finite doubles <-> null.
nlohmann::json json_number(double x);
double json_to_double(const nlohmann::json& j);  // null -> NaN; throws ears::Error on non-numbers

// JSON (non-finite numbers are written as null and read back as NaN; intervals as [lo, hi]).
void to_json(nlohmann::json& j, const Interval& x);
void from_json(const nlohmann::json& j, Interval& x);
void to_json(nlohmann::json& j, const ArmMetrics& m);
void from_json(const nlohmann::json& j, ArmMetrics& m);
void to_json(nlohmann::json& j, const Comparison& c);
void from_json(const nlohmann::json& j, Comparison& c);

}  // namespace ears
