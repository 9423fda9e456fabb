// Metrics math: percentiles, intervals, per-arm metrics and paired arm-vs-baseline comparisons.
// Torch-free and deterministic (the bootstrap uses its own seeded PRNG, never std::random_device).
//
// Conventions (docs/report-schema.md has the long form):
//   - failed requests (error non-empty) count in n_errors and are excluded from every other
//     metric; a pair is used in a comparison only when both arms succeeded;
//   - output_tokens_per_s = Σ output tokens / the arm's generation wall time (the runner's
//     measurement); when no wall time is known, latency_wall_s (wall_from_latencies).
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
// The same for a proportion p measured over n independent units: an arm's accuracy over its
// scored requests, each request's repeats averaged into one unit (repeats of a T = 0 request are
// copies; counting them as observations narrowed the interval). Conservative for T > 0 repeats.
Interval wilson_interval_of(double p, int64_t n, double z = 1.959963984540054);
// Exact two-sided McNemar p-value from the discordant counts b and c:
// min(1, 2 · P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2). 1 when b + c == 0.
double mcnemar_exact_p(int64_t b, int64_t c);
// Exact two-sided paired sign-flip test of per-request differences d_i (Σ over the request's
// repeats of correct_arm − correct_base): under H0 each d_i is as likely −|d_i| as +|d_i|, and
// p = P(|Σ ±|d_i|| >= |Σ d_i|). With one repeat each d_i is −1, 0 or 1 and p is
// mcnemar_exact_p(b, c) exactly; with repeats it does not count a request's copies as evidence.
double paired_sign_flip_p(const std::vector<int64_t>& diffs);


struct UncertaintyBucket {
  double lo = 0, hi = 0;
  int64_t drafted = 0, accepted = 0, pardoned = 0;
  double drafted_share = nan_value();
  double acceptance_rate = nan_value();
  double pardon_share = nan_value();

  using FieldListTag = void;  // the field list (reports/fields.h)
  template <class S, class V>
  static void fields(S& b, V& v) {
    v("lo", b.lo, "lower end of the u range [lo, hi)", 0);
    v("hi", b.hi, "upper end of the u range", 0);
    v("drafted", b.drafted, "judged draft positions in the bucket", 0);
    v("accepted", b.accepted, "accepted draft tokens in the bucket", 0);
    v("pardoned", b.pardoned, "pardoned draft tokens in the bucket", 0);
    v("drafted_share", b.drafted_share, "drafted / Σ drafted over buckets", 0);
    v("acceptance_rate", b.acceptance_rate, "accepted / drafted", 0);
    v("pardon_share", b.pardon_share, "pardoned / accepted", 0);
  }
};

struct CategoryMetrics {
  std::string category;
  int64_t n_requests = 0;
  int64_t n_scored = 0;
  double accuracy = nan_value();
  Interval accuracy_ci95;
  double output_tokens_per_s = nan_value();
  double mean_accept_length = nan_value();

  using FieldListTag = void;  // the field list (reports/fields.h)
  template <class S, class V>
  static void fields(S& c, V& v) {
    v("category", c.category, "the dataset category", 0);
    v("n_requests", c.n_requests, "successful requests of the category", 0);
    v("n_scored", c.n_scored, "of them scored", 0);
    v("accuracy", c.accuracy, "mean of correct over scored requests (a fraction)", 0);
    v("accuracy_ci95", c.accuracy_ci95, "95 % Wilson interval of accuracy over the scored requests (repeats of a request are one unit)", 0);
    v("output_tokens_per_s", c.output_tokens_per_s, "Σ output / Σ latency (no per-category wall time)", 0);
    v("mean_accept_length", c.mean_accept_length, "τ of the category", 0);
  }
};

struct TimeSplit {
  double prefill_s = 0, draft_s = 0, verify_s = 0, other_s = 0;

  using FieldListTag = void;  // the field list (reports/fields.h)
  template <class S, class V>
  static void fields(S& t, V& v) {
    v("prefill", t.prefill_s, "Σ prefill_s, s", 0);
    v("draft", t.draft_s, "Σ draft_s, s", 0);
    v("verify", t.verify_s, "Σ verify_s, s", 0);
    v("other", t.other_s, "Σ other_s, s", 0);
  }
  double decode_s() const { return draft_s + verify_s + other_s; }  // RequestResult::decode_s summed
};

struct ArmMetrics {
  // counts
  int64_t n_requests = 0;
  int64_t n_errors = 0;
  int64_t n_scored = 0;
  int64_t output_tokens = 0;
  int64_t prompt_tokens = 0;
  int64_t steps = 0, drafted = 0, accepted = 0, pardoned = 0;
  int64_t decoded_tokens = 0;
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
  double ttft_p50_s = nan_value(), ttft_p90_s = nan_value(), ttft_p99_s = nan_value();
  double tpot_mean_s = nan_value();
  double tpot_p50_s = nan_value(), tpot_p90_s = nan_value(), tpot_p99_s = nan_value();
  // speculation
  double mean_accept_length = nan_value();
  double acceptance_rate = nan_value();
  std::vector<double> acceptance_per_position;
  double system_efficiency = nan_value();
  double pardon_share = nan_value();
  double distortion_tv_mean = nan_value();
  double mean_uncertainty = nan_value();
  std::vector<int64_t> accept_length_hist;
  std::vector<UncertaintyBucket> uncertainty_buckets;
  // quality
  double accuracy = nan_value();
  Interval accuracy_ci95;
  double strict_accuracy = nan_value();
  double flexible_accuracy = nan_value();
  double em_mean = nan_value();
  double f1_mean = nan_value();
  std::vector<CategoryMetrics> categories;
  TimeSplit time_split_s;

  using FieldListTag = void;  // the field list (reports/fields.h): report.json arms[].metrics
  template <class S, class V>
  static void fields(S& m, V& v) {
    v("n_requests", m.n_requests, "all results of the arm, failed ones included", 0);
    v("n_errors", m.n_errors, "failed requests (error non-empty); left out of every other metric", 0);
    v("n_scored", m.n_scored, "successful requests with a gold answer", 0);
    v("output_tokens", m.output_tokens, "Σ output tokens", 0);
    v("prompt_tokens", m.prompt_tokens, "Σ prompt tokens", 0);
    v("steps", m.steps, "Σ steps", 0);
    v("drafted", m.drafted, "Σ drafted", 0);
    v("accepted", m.accepted, "Σ accepted", 0);
    v("pardoned", m.pardoned, "Σ pardoned", 0);
    v("decoded_tokens", m.decoded_tokens, "Σ (output_tokens − 1): the tokens after each request's first (its prefill's)", 0);
    v("wall_s", m.wall_s, "the arm's generation wall time, s (Σ batch latencies when unknown: wall_from_latencies)", 0);
    v("wall_from_latencies", m.wall_from_latencies, "wall_s is latency_wall_s: Σ over batches of the longest latency (no wall time was recorded)", 0);
    v("output_tokens_per_s", m.output_tokens_per_s, "Σ output tokens / wall_s", 0);
    v("total_tokens_per_s", m.total_tokens_per_s, "Σ (output + prompt) tokens / wall_s", 0);
    v("latency_mean_s", m.latency_mean_s, "mean request latency, s", 0);
    v("latency_p50_s", m.latency_p50_s, "median request latency, s (numpy linear)", 0);
    v("latency_p90_s", m.latency_p90_s, "90th percentile latency, s", 0);
    v("latency_p99_s", m.latency_p99_s, "99th percentile latency, s", 0);
    v("ttft_mean_s", m.ttft_mean_s, "mean time to first token, s", 0);
    v("ttft_p50_s", m.ttft_p50_s, "median time to first token, s (numpy linear, as the latency's)", 0);
    v("ttft_p90_s", m.ttft_p90_s, "90th percentile time to first token, s", 0);
    v("ttft_p99_s", m.ttft_p99_s, "99th percentile time to first token, s", 0);
    v("tpot_mean_s", m.tpot_mean_s, "mean over requests of (latency - ttft) / (output - 1), s", 0);
    v("tpot_p50_s", m.tpot_p50_s, "median of the requests' TPOT, s", 0);
    v("tpot_p90_s", m.tpot_p90_s, "90th percentile of the requests' TPOT, s", 0);
    v("tpot_p99_s", m.tpot_p99_s, "99th percentile of the requests' TPOT, s", 0);
    v("mean_accept_length", m.mean_accept_length, "τ = Σ emitted / Σ steps", 0);
    v("acceptance_rate", m.acceptance_rate, "Σ accepted / Σ drafted", 0);
    v("acceptance_per_position", m.acceptance_per_position, "[k] = Σ accepted_per_position[k] / Σ steps; size γ", 0);
    v("system_efficiency", m.system_efficiency, "Σ emitted / Σ steps·(γ+1)", 0);
    v("pardon_share", m.pardon_share, "Σ pardoned / Σ accepted", 0);
    v("distortion_tv_mean", m.distortion_tv_mean, "Σ distortion_tv_sum / Σ distortion_positions", 0);
    v("mean_uncertainty", m.mean_uncertainty, "Σ uncertainty_sum / Σ uncertainty_count", 0);
    v("accept_length_hist", m.accept_length_hist, "Σ over requests; [n] = steps that emitted n tokens", 0);
    v("uncertainty_buckets", m.uncertainty_buckets, "10 deciles of u", 0);
    v("accuracy", m.accuracy, "mean of correct over scored requests (a fraction)", 0);
    v("accuracy_ci95", m.accuracy_ci95, "95 % Wilson interval of accuracy over the scored requests (repeats of a request are one unit)", 0);
    v("strict_accuracy", m.strict_accuracy, "mean of strict_correct over scored requests", 0);
    v("flexible_accuracy", m.flexible_accuracy, "mean of flexible_correct over scored requests", 0);
    v("em_mean", m.em_mean, "mean em over scored requests", 0);
    v("f1_mean", m.f1_mean, "mean f1 over scored requests", 0);
    v("categories", m.categories, "per dataset category, sorted by name; only requests with a category", 0);
    v("time_split_s", m.time_split_s, "Σ of the requests' time split", 0);
    v.derived("decode_ms_per_token", 1000 * m.decode_s_per_token(),
              "1000·Σ (draft + verify + other) / decoded_tokens: decoding after the first token, not read back");
  }
  // Seconds per token of the decoding after each request's first token (the prefill's): Σ (draft_s +
  // verify_s + other_s) / decoded_tokens; NaN without decoded tokens or without a recorded time split.
  double decode_s_per_token() const;
};

// The time `results` took when no wall time was measured: Σ over batches (results sharing a
// start_s) of the batch's longest latency — its requests ran side by side, and summing their
// latencies counted the batch's time once per request. A result without start_s is its own batch.
// Without batching this is Σ latencies. Idle time between batches is not in it.
double latency_wall_s(const std::vector<const RequestResult*>& results);

// Metrics of one arm from its results (only results whose arm field equals `arm` are used).
// wall_s <= 0 or NaN: fall back to Σ latencies.
ArmMetrics compute_arm_metrics(const std::vector<RequestResult>& results, const std::string& arm, double wall_s);

struct Comparison {
  std::string arm, baseline;
  int64_t n_pairs = 0;
  int64_t n_paired_requests = 0;
  int64_t n_scored_pairs = 0;
  bool pairs_only = false;
  int64_t identical_outputs = 0;
  double throughput_gain_pct = nan_value();
  Interval throughput_gain_ci95;
  double total_throughput_gain_pct = nan_value();
  double latency_change_pct = nan_value();
  Interval latency_change_ci95;
  double accuracy_delta_pp = nan_value();
  Interval accuracy_delta_ci95;
  double mcnemar_p = nan_value();
  int64_t arm_only_correct = 0;
  int64_t baseline_only_correct = 0;
  double accept_length_ratio = nan_value();
  Interval accept_length_ratio_ci95;
  double decode_speedup = nan_value();
  Interval decode_speedup_ci95;
  double specbench_speedup = nan_value();
  Interval specbench_speedup_ci95;
  int bootstrap_resamples = 0;
  uint64_t bootstrap_seed = 0;

  using FieldListTag = void;  // the field list (reports/fields.h): report.json comparisons[]
  template <class S, class V>
  static void fields(S& c, V& v) {
    v("arm", c.arm, "the compared arm", 0);
    v("baseline", c.baseline, "the baseline arm", 0);
    v("n_pairs", c.n_pairs, "(request_id, repeat) present and successful in both arms", 0);
    v("n_paired_requests", c.n_paired_requests,
      "distinct request ids among the pairs: the bootstrap's clusters, the small-sample notice's count", 0);
    v("n_scored_pairs", c.n_scored_pairs, "... and scored in both", 0);
    v("pairs_only", c.pairs_only,
      "an arm succeeded on requests the other failed: every figure here is over the pairs (Σ latencies, "
      "not the table's wall-time rates)", 0);
    v("identical_outputs", c.identical_outputs,
      "pairs with the same output ids and text (all of them when both decode greedily at T = 0)", kFieldValue);
    v.derived("identical_share", c.n_pairs > 0 ? static_cast<double>(c.identical_outputs) / c.n_pairs : nan_value(),
              "identical_outputs / n_pairs, not read back (a gate can hold it to 1 at T = 0)");
    v("throughput_gain_pct", c.throughput_gain_pct, "100·(out_tps_arm / out_tps_base − 1)", 0);
    v("throughput_gain_ci95", c.throughput_gain_ci95, "paired cluster bootstrap interval of the gain", 0);
    v("total_throughput_gain_pct", c.total_throughput_gain_pct, "the same for total_tokens_per_s", 0);
    v("latency_change_pct", c.latency_change_pct, "100·(latency_mean_arm / latency_mean_base − 1)", 0);
    v("latency_change_ci95", c.latency_change_ci95, "bootstrap interval of the latency change", 0);
    v("accuracy_delta_pp", c.accuracy_delta_pp, "100·(acc_arm − acc_base) over scored pairs", 0);
    v("accuracy_delta_ci95", c.accuracy_delta_ci95, "bootstrap interval of the accuracy difference", 0);
    v("mcnemar_p", c.mcnemar_p,
      "exact two-sided McNemar p over the discordant pairs; with repeats, the paired sign-flip test over requests "
      "it generalises (paired_sign_flip_p)", 0);
    v("arm_only_correct", c.arm_only_correct, "discordant pairs: arm right, baseline wrong", 0);
    v("baseline_only_correct", c.baseline_only_correct, "discordant pairs: arm wrong, baseline right", 0);
    v("accept_length_ratio", c.accept_length_ratio, "τ_arm / τ_base", 0);
    v("accept_length_ratio_ci95", c.accept_length_ratio_ci95, "bootstrap interval of the τ ratio", 0);
    v("decode_speedup", c.decode_speedup,
      "decode_ms_per_token base / arm: the decoding's speed-up, the prefill (not shortened by drafting) left out", 0);
    v("decode_speedup_ci95", c.decode_speedup_ci95, "bootstrap interval of the decoding speed-up", 0);
    v("specbench_speedup", c.specbench_speedup,
      "Spec-Bench's speedup: the mean over pairs of the arm's output / latency ÷ that mean of the baseline's "
      "(per-request rates, prefill included)", 0);
    v("specbench_speedup_ci95", c.specbench_speedup_ci95, "bootstrap interval of Spec-Bench's speedup", 0);
    v("bootstrap_resamples", c.bootstrap_resamples, "bootstrap resamples", 0);
    v("bootstrap_seed", c.bootstrap_seed, "bootstrap PRNG seed", 0);
  }
};

inline constexpr uint64_t kDefaultBootstrapSeed = 0x5EED0EA45ull;
inline constexpr int kDefaultBootstrapResamples = 2000;

// Paired comparison of `arm` against `baseline`; the point estimates come from the two
// ArmMetrics (so they match the table) when the pairs are every success of both arms, else
// (pairs_only) from the pairs; the intervals from the paired cluster bootstrap.
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
