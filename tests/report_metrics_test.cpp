// Tests of reports/ statistics, results, per-arm metrics and paired comparisons.
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "harness/base/error.h"
#include "reports/gate.h"
#include "reports/metrics.h"
#include "reports/markdown.h"
#include "reports/report.h"
#include "reports/result.h"
#include "reports/svg.h"
#include "tests/test_util.h"
#include "tests/report_test_util.h"

namespace ears {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

using report_test::make_result;

// ---------------------------------------------------------------------------------------------
// basic statistics

TEST(Stats, PercentileMatchesNumpyLinear) {
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 25), 1.75);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({5}, 99), 5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, 99), 2.98);
  EXPECT_TRUE(std::isnan(percentile({}, 50)));
  EXPECT_DOUBLE_EQ(mean({1, 2, 3, 6}), 3);
  EXPECT_THROW(percentile(v, 101), Error);
}

TEST(Stats, WilsonIntervalKnownValues) {
  const Interval a = wilson_interval(8, 10);
  EXPECT_NEAR(a.lo, 0.4902, 1e-4);
  EXPECT_NEAR(a.hi, 0.9433, 1e-4);
  const Interval b = wilson_interval(0, 10);
  EXPECT_NEAR(b.lo, 0.0, 1e-12);
  EXPECT_NEAR(b.hi, 0.2775, 1e-4);
  const Interval c = wilson_interval(50, 100);
  EXPECT_NEAR(c.lo, 0.4038, 1e-4);
  EXPECT_NEAR(c.hi, 0.5962, 1e-4);
  EXPECT_TRUE(std::isnan(wilson_interval(0, 0).lo));
}

TEST(Stats, McNemarExactKnownTables) {
  EXPECT_NEAR(mcnemar_exact_p(10, 2), 158.0 / 4096.0, 1e-12);
  EXPECT_NEAR(mcnemar_exact_p(2, 10), 158.0 / 4096.0, 1e-12);
  EXPECT_NEAR(mcnemar_exact_p(0, 6), 2.0 / 64.0, 1e-12);
  EXPECT_NEAR(mcnemar_exact_p(1, 8), 20.0 / 512.0, 1e-12);
  EXPECT_DOUBLE_EQ(mcnemar_exact_p(5, 5), 1.0);
  EXPECT_DOUBLE_EQ(mcnemar_exact_p(0, 0), 1.0);
  // A large n (1000 discordant pairs, where naive factorials overflow). The reference is exact:
  // python3 -c "from math import comb; from fractions import Fraction as F;
  //   print(float(F(2 * sum(comb(1000, i) for i in range(451)), 2**1000)))"  -> 0.0017305360849763176
  EXPECT_NEAR(mcnemar_exact_p(450, 550), 0.0017305360849763176, 1e-9 * 0.0017305360849763176);
  EXPECT_NEAR(mcnemar_exact_p(550, 450), 0.0017305360849763176, 1e-9 * 0.0017305360849763176);
}

TEST(Stats, RngIsDeterministicAndUniform) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 5; ++i) {
    const uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    EXPECT_NE(x, c.next());
  }
  Rng r(1);
  std::vector<int> counts(10, 0);
  const int n = 100000;
  for (int i = 0; i < n; ++i) ++counts[r.below(10)];
  // each count ~ Bin(n, 0.1): sd = 95; 5 sd tolerance
  for (int k : counts) EXPECT_NEAR(k, n / 10, 5 * std::sqrt(n * 0.09));
}

// ---------------------------------------------------------------------------------------------
// results

TEST(Result, ValidateCatchesInconsistentCounters) {
  RequestResult r = make_result("a", "1", 2, {3, 1, 2}, 1.0);
  EXPECT_NO_THROW(r.validate());
  RequestResult bad = r;
  bad.bonus += 1;  // emitted no longer matches the histogram
  EXPECT_THROW(bad.validate("x.jsonl:3"), Error);
  try {
    bad.validate("x.jsonl:3");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.jsonl:3"), std::string::npos);
    EXPECT_EQ(e.exit_code, 2);
  }
  bad = r;
  bad.accepted_per_position = {1, 2};  // not a prefix, wrong sum
  EXPECT_THROW(bad.validate(), Error);
  bad = r;
  bad.output_tokens = r.emitted() + 2;
  EXPECT_THROW(bad.validate(), Error);
  bad = r;
  bad.pardoned = r.accepted + 1;
  EXPECT_THROW(bad.validate(), Error);
  bad = r;
  bad.error = "NaN logits";
  bad.bonus += 5;  // failed requests only get the basic checks
  EXPECT_NO_THROW(bad.validate());
}

TEST(Result, JsonRoundTrip) {
  RequestResult r = make_result("ears", "q7", 2, {3, 2}, 1.5, 1);
  r.text = "The answer is 42.";
  r.output_ids = {1, 2, 3};
  r.has_score = true;
  r.correct = r.flexible_correct = true;
  r.category = "math";
  r.seed = 18446744073709551615ull;
  r.drafted_by_uncertainty[3] = 4;
  r.accepted_by_uncertainty[3] = 3;
  r.pardoned_by_uncertainty[3] = 1;
  r.pardoned = 1;
  const std::string line = result_to_jsonl_line(r);
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  const RequestResult back = json::parse(line).get<RequestResult>();
  EXPECT_EQ(json(back), json(r));
  EXPECT_EQ(back.seed, r.seed);
  EXPECT_EQ(back.output_ids, r.output_ids);
  EXPECT_THROW(json::parse(R"({"arm": "a"})").get<RequestResult>(), Error);  // missing request_id
  EXPECT_THROW(json::parse(R"({"arm": "a", "request_id": "1", "output_tokens": "x", "latency_s": 1})").get<RequestResult>(),
               Error);
}

// ---------------------------------------------------------------------------------------------
// per-arm metrics on a hand-computed toy set

TEST(Metrics, HandComputedToySet) {
  // γ = 2. r1: steps emit 3, 1, 2 → accepted 2+0+1 = 3, 1 bonus, 2 corrections.
  //        r2: steps emit 3, 3    → accepted 4, 2 bonus.
  // Σ emitted = 12 over 5 steps → τ = 2.4; acceptance = 7 / 10; per position = [4/5, 3/5].
  std::vector<RequestResult> rs = {make_result("a", "r1", 2, {3, 1, 2}, 1.0), make_result("a", "r2", 2, {3, 3}, 3.0)};
  rs[0].has_score = true;
  rs[0].correct = true;
  rs[1].has_score = true;
  rs[1].correct = false;
  rs[0].pardoned = 1;
  rs[0].distortion_tv_sum = 0.3;
  rs[0].distortion_positions = 3;
  rs[1].distortion_tv_sum = 0.1;
  rs[1].distortion_positions = 2;
  rs[0].uncertainty_sum = 1.0;
  rs[0].uncertainty_count = 4;
  RequestResult failed = make_result("a", "r3", 2, {3}, 9.0);
  failed.error = "NaN logits";
  rs.push_back(failed);
  rs.push_back(make_result("other", "r1", 2, {1}, 100.0));  // another arm: ignored

  const ArmMetrics m = compute_arm_metrics(rs, "a", 5.0);
  EXPECT_EQ(m.n_requests, 3);
  EXPECT_EQ(m.n_errors, 1);
  EXPECT_EQ(m.output_tokens, 14);
  EXPECT_EQ(m.prompt_tokens, 20);
  EXPECT_DOUBLE_EQ(m.output_tokens_per_s, 14.0 / 5.0);
  EXPECT_DOUBLE_EQ(m.total_tokens_per_s, 34.0 / 5.0);
  EXPECT_FALSE(m.wall_from_latencies);
  EXPECT_DOUBLE_EQ(m.latency_mean_s, 2.0);
  EXPECT_DOUBLE_EQ(m.latency_p50_s, 2.0);
  EXPECT_DOUBLE_EQ(m.latency_p90_s, 2.8);
  EXPECT_DOUBLE_EQ(m.latency_p99_s, 2.98);
  EXPECT_DOUBLE_EQ(m.ttft_mean_s, 0.2);
  // TTFTs 0.1, 0.3; TPOTs (1.0 − 0.1) / 6 = 0.15 and (3.0 − 0.3) / 6 = 0.45 (7 output tokens each).
  EXPECT_NEAR(m.ttft_p50_s, 0.2, 1e-12);
  EXPECT_NEAR(m.ttft_p90_s, 0.28, 1e-12);
  EXPECT_NEAR(m.ttft_p99_s, 0.298, 1e-12);
  EXPECT_NEAR(m.tpot_mean_s, 0.3, 1e-12);
  EXPECT_NEAR(m.tpot_p50_s, 0.3, 1e-12);
  EXPECT_NEAR(m.tpot_p90_s, 0.42, 1e-12);
  EXPECT_NEAR(m.tpot_p99_s, 0.447, 1e-12);
  EXPECT_DOUBLE_EQ(m.mean_accept_length, 2.4);
  EXPECT_DOUBLE_EQ(m.acceptance_rate, 0.7);
  ASSERT_EQ(m.acceptance_per_position.size(), 2u);
  EXPECT_DOUBLE_EQ(m.acceptance_per_position[0], 0.8);
  EXPECT_DOUBLE_EQ(m.acceptance_per_position[1], 0.6);
  EXPECT_DOUBLE_EQ(m.system_efficiency, 12.0 / 15.0);
  EXPECT_DOUBLE_EQ(m.pardon_share, 1.0 / 7.0);
  EXPECT_DOUBLE_EQ(m.distortion_tv_mean, 0.4 / 5.0);
  EXPECT_DOUBLE_EQ(m.mean_uncertainty, 0.25);
  EXPECT_EQ(m.accept_length_hist, (std::vector<int64_t>{0, 1, 1, 3}));
  EXPECT_DOUBLE_EQ(m.accuracy, 0.5);
  EXPECT_EQ(m.n_scored, 2);

  // No wall time: Σ latencies of the successful requests.
  const ArmMetrics w = compute_arm_metrics(rs, "a", nan_value());
  EXPECT_TRUE(w.wall_from_latencies);
  EXPECT_DOUBLE_EQ(w.output_tokens_per_s, 14.0 / 4.0);

  // Every request failed: no throughput (n/a in the report), not 0 tok/s over the wall time.
  const ArmMetrics none = compute_arm_metrics({failed}, "a", 5.0);
  EXPECT_EQ(none.n_errors, 1);
  EXPECT_TRUE(std::isnan(none.output_tokens_per_s));
  EXPECT_TRUE(std::isnan(none.total_tokens_per_s));
}

// The decoding: every token after a request's first (its prefill gives that one), timed by draft +
// verify + other; the prefill and failed requests are left out.
TEST(Metrics, DecodingLeavesOutThePrefillAndTheFirstToken) {
  std::vector<RequestResult> rs = {make_result("a", "r1", 2, {3, 1, 2}, 1.0), make_result("a", "r2", 2, {3, 3}, 3.0)};
  // r1: 7 output tokens, r2: 7; decoding 0.5 + 0.3 + 0.05 and 1.0 + 0.6 + 0.25 s.
  rs[0].prefill_s = 0.15, rs[0].draft_s = 0.5, rs[0].verify_s = 0.3, rs[0].other_s = 0.05;
  rs[1].prefill_s = 1.15, rs[1].draft_s = 1.0, rs[1].verify_s = 0.6, rs[1].other_s = 0.25;
  RequestResult failed = make_result("a", "r3", 2, {3}, 9.0);
  failed.error = "NaN logits";
  failed.verify_s = 8.0;
  rs.push_back(failed);
  const ArmMetrics m = compute_arm_metrics(rs, "a", 5.0);
  ASSERT_EQ(m.output_tokens, 14);
  EXPECT_EQ(m.decoded_tokens, 12);
  EXPECT_DOUBLE_EQ(m.decode_s_per_token(), (0.85 + 1.85) / 12);
  EXPECT_DOUBLE_EQ(json(m)["decode_ms_per_token"].get<double>(), 1000 * (0.85 + 1.85) / 12);

  // A request of one token decodes nothing; no time split recorded: undefined (null), not 0 ms.
  RequestResult one = make_result("a", "r4", 2, {}, 1.0);
  one.output_tokens = 1;
  EXPECT_EQ(compute_arm_metrics({one}, "a", 1.0).decoded_tokens, 0);
  const ArmMetrics unsplit = compute_arm_metrics({make_result("a", "r1", 2, {3, 1, 2}, 1.0)}, "a", 1.0);
  EXPECT_TRUE(std::isnan(unsplit.decode_s_per_token()));
  EXPECT_TRUE(json(unsplit)["decode_ms_per_token"].is_null());
}

TEST(Metrics, UncertaintyBucketsAndCategories) {
  RequestResult a = make_result("a", "1", 2, {3, 1}, 1.0);  // drafted 4, accepted 2
  a.drafted_by_uncertainty = {3, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  a.accepted_by_uncertainty = {2, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  a.pardoned_by_uncertainty = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  a.pardoned = 1;
  a.category = "math";
  RequestResult b = make_result("a", "2", 2, {2}, 2.0);
  b.category = "qa";
  const ArmMetrics m = compute_arm_metrics({a, b}, "a", 3.0);
  ASSERT_EQ(m.uncertainty_buckets.size(), 10u);
  EXPECT_DOUBLE_EQ(m.uncertainty_buckets[0].drafted_share, 0.75);
  EXPECT_DOUBLE_EQ(m.uncertainty_buckets[0].acceptance_rate, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.uncertainty_buckets[0].pardon_share, 0.5);
  EXPECT_DOUBLE_EQ(m.uncertainty_buckets[9].acceptance_rate, 0.0);
  EXPECT_TRUE(std::isnan(m.uncertainty_buckets[5].acceptance_rate));
  ASSERT_EQ(m.categories.size(), 2u);
  EXPECT_EQ(m.categories[0].category, "math");
  EXPECT_DOUBLE_EQ(m.categories[0].output_tokens_per_s, 5.0 / 1.0);
  EXPECT_DOUBLE_EQ(m.categories[0].mean_accept_length, 2.0);
  EXPECT_DOUBLE_EQ(m.categories[1].mean_accept_length, 2.0);
}

// ---------------------------------------------------------------------------------------------
// paired comparisons

// 200 pairs: baseline right on even i (100), the arm additionally right on i % 10 == 1 (20 more):
// true delta +10 pp, all discordant pairs favour the arm. The arm is 1.25× faster per request
// with ±5 % deterministic noise, same output lengths.
std::vector<RequestResult> paired_set() {
  std::vector<RequestResult> rs;
  Rng noise(7);
  for (int i = 0; i < 200; ++i) {
    const std::string id = fmt::format("q{}", i);
    const double base_latency = 1.0 + (i % 7) * 0.25;
    RequestResult b = make_result("base", id, 0, std::vector<int>(9, 1), base_latency);
    RequestResult a = make_result("ears", id, 2, {3, 3, 3}, base_latency / 1.25 * (1 + 0.1 * (noise.uniform() - 0.5)));
    b.has_score = a.has_score = true;
    b.correct = (i % 2 == 0);
    a.correct = (i % 2 == 0) || (i % 10 == 1);
    rs.push_back(b);
    rs.push_back(a);
  }
  return rs;
}

// Smallest k with P(K <= k) >= q for K ~ Binomial(n, p): the pmf summed up from k = 0, with
// pmf(k + 1) = pmf(k)·(n − k)/(k + 1)·p/(1 − p).
int binomial_quantile(int n, double p, double q) {
  double pmf = std::pow(1 - p, n), cdf = pmf;
  int k = 0;
  for (; cdf < q && k < n; ++k) {
    pmf *= (n - k) / (k + 1.0) * p / (1 - p);
    cdf += pmf;
  }
  return k;
}

// The sd of Σ y / Σ x when the pairs (x_i, y_i) are resampled with replacement, by the delta
// method: sqrt(Σ (y_i − T·x_i)²) / Σ x_i with T = Σ y / Σ x.
double ratio_bootstrap_sd(const std::vector<double>& x, const std::vector<double>& y) {
  const double sx = std::accumulate(x.begin(), x.end(), 0.0), t = std::accumulate(y.begin(), y.end(), 0.0) / sx;
  double ss = 0;
  for (size_t i = 0; i < x.size(); ++i) ss += std::pow(y[i] - t * x[i], 2);
  return std::sqrt(ss) / sx;
}

TEST(Comparison, PairedBootstrapContainsTruthAndIsDeterministic) {
  const auto rs = paired_set();
  const ArmMetrics base = compute_arm_metrics(rs, "base", nan_value());
  const ArmMetrics ears = compute_arm_metrics(rs, "ears", nan_value());
  const Comparison c = compare_arms(rs, "ears", ears, "base", base, 123, 2000);
  ASSERT_EQ(c.bootstrap_resamples, 2000);
  EXPECT_EQ(c.n_pairs, 200);
  EXPECT_EQ(c.n_scored_pairs, 200);
  EXPECT_NEAR(c.accuracy_delta_pp, 10.0, 1e-9);
  EXPECT_EQ(c.arm_only_correct, 20);
  EXPECT_EQ(c.baseline_only_correct, 0);
  EXPECT_NEAR(c.mcnemar_p, 2.0 / std::pow(2.0, 20), 1e-15);
  EXPECT_LT(c.accuracy_delta_ci95.lo, 10.0);
  EXPECT_GT(c.accuracy_delta_ci95.hi, 10.0);
  // A resample's delta is exactly 0.5 pp · K, K ~ Binomial(200, 0.1) (each resampled pair is one
  // of the 20 +100 pp pairs with probability 0.1). lo interpolates order statistics 49 and 50 of
  // B = 2000 resamples, and the number of resamples <= x is Binomial(B, F(x)). With δ = 0.02: at
  // q = 0.045 that count has mean >= 90, sd 9.3, 4.2 sd above the 51 needed for lo <= Q(q); at
  // q = 0.005 the count below Q(q) has mean <= 10, sd 3.2, 12 sd under the 50 needed for lo < Q(q).
  // So lo is in [Q(0.005), Q(0.045)] = [5, 6.5] pp but for a 4-sd event; hi likewise.
  auto delta_quantile = [](double q) { return 0.5 * binomial_quantile(200, 0.1, q); };
  EXPECT_GE(c.accuracy_delta_ci95.lo, delta_quantile(0.025 - 0.02));
  EXPECT_LE(c.accuracy_delta_ci95.lo, delta_quantile(0.025 + 0.02));
  EXPECT_GE(c.accuracy_delta_ci95.hi, delta_quantile(0.975 - 0.02));
  EXPECT_LE(c.accuracy_delta_ci95.hi, delta_quantile(0.975 + 0.02));
  // Throughput: same tokens, arm latency w_i/1.25 · f_i with w_i the base latency and f_i =
  // 1 + 0.1·(U − 0.5) (sd σ_f = 0.1/√12) → gain = 100·(1.25/f̄ − 1) with f̄ = Σ w f / Σ w, whose
  // sd is σ_f·sqrt(Σ w²)/Σ w; the gain's sd is 125× that (0.27 pp), the latency change's 80×.
  double w_sum = 0, w2_sum = 0;
  for (int i = 0; i < 200; ++i) w_sum += 1.0 + (i % 7) * 0.25, w2_sum += std::pow(1.0 + (i % 7) * 0.25, 2);
  const double f_bar_sd = 0.1 / std::sqrt(12.0) * std::sqrt(w2_sum) / w_sum;
  EXPECT_NEAR(c.throughput_gain_pct, 25.0, 4 * 125 * f_bar_sd);
  EXPECT_LT(c.throughput_gain_ci95.lo, c.throughput_gain_pct);
  EXPECT_GT(c.throughput_gain_ci95.hi, c.throughput_gain_pct);
  // Its interval is 100·(the bootstrap interval of Σ lat_base / Σ lat_arm), 3.92 sd wide, the sd
  // from the delta method on this data. Each end, a sample quantile of B resamples, has sd
  // sqrt(0.025·0.975/B)/φ(1.96) = 0.060 sd, so the width has a relative sd of
  // sqrt(2)·0.060/3.92 = 0.022: 4 sd plus 1 % for the linearisation -> ±10 %.
  std::vector<double> arm_latency, base_latency;
  for (const auto& r : rs) (r.arm == "ears" ? arm_latency : base_latency).push_back(r.latency_s);
  const double expected_width = 100 * 2 * 1.959964 * ratio_bootstrap_sd(arm_latency, base_latency);
  EXPECT_NEAR(c.throughput_gain_ci95.hi - c.throughput_gain_ci95.lo, expected_width, 0.10 * expected_width);
  EXPECT_NEAR(c.latency_change_pct, -20.0, 4 * 80 * f_bar_sd);
  EXPECT_LT(c.latency_change_ci95.lo, c.latency_change_pct);
  EXPECT_GT(c.latency_change_ci95.hi, c.latency_change_pct);
  EXPECT_DOUBLE_EQ(c.accept_length_ratio, 3.0);  // τ 3 vs 1
  EXPECT_NEAR(c.accept_length_ratio_ci95.lo, 3.0, 1e-9);
  EXPECT_NEAR(c.accept_length_ratio_ci95.hi, 3.0, 1e-9);

  const Comparison again = compare_arms(rs, "ears", ears, "base", base, 123, 2000);
  EXPECT_EQ(json(again), json(c));
  const Comparison other = compare_arms(rs, "ears", ears, "base", base, 124, 2000);
  EXPECT_NE(json(other)["throughput_gain_ci95"], json(c)["throughput_gain_ci95"]);  // the seed matters
  // Result order does not matter (pairs are sorted by request id).
  auto reversed = rs;
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(json(compare_arms(reversed, "ears", ears, "base", base, 123, 2000)), json(c));
}

// The decoding's speed-up leaves the prefill out: both arms prefill alike (1 s), the arm decodes the
// same 9 tokens 2× as fast, ±5 % deterministic noise. The whole request's gain is diluted; the
// decoding speed-up is Σ decode_base / Σ decode_arm (same token counts), with an interval 3.92
// delta-method sd wide (±10 %, as for the throughput above).
TEST(Comparison, DecodeSpeedupLeavesThePrefillOut) {
  std::vector<RequestResult> rs;
  std::vector<double> base_decode, arm_decode;
  Rng noise(11);
  for (int i = 0; i < 200; ++i) {
    const std::string id = fmt::format("q{}", i);
    const double decode = 0.5 + (i % 5) * 0.2, fast = decode / 2 * (1 + 0.1 * (noise.uniform() - 0.5));
    RequestResult b = make_result("base", id, 0, std::vector<int>(9, 1), 1.0 + decode);
    RequestResult a = make_result("ears", id, 2, {3, 3, 3}, 1.0 + fast);
    b.prefill_s = a.prefill_s = 1.0;
    b.verify_s = decode;
    a.verify_s = 0.6 * fast, a.draft_s = 0.4 * fast;
    base_decode.push_back(decode);
    arm_decode.push_back(fast);
    rs.push_back(b);
    rs.push_back(a);
  }
  const ArmMetrics base = compute_arm_metrics(rs, "base", nan_value());
  const ArmMetrics ears = compute_arm_metrics(rs, "ears", nan_value());
  const Comparison c = compare_arms(rs, "ears", ears, "base", base, 123, 2000);
  const double expected = std::accumulate(base_decode.begin(), base_decode.end(), 0.0) /
                          std::accumulate(arm_decode.begin(), arm_decode.end(), 0.0);
  EXPECT_NEAR(c.decode_speedup, expected, 1e-12);
  EXPECT_NEAR(c.decode_speedup, 2.0, 0.05);
  EXPECT_LT(c.throughput_gain_pct, 50.0);  // the prefill dilutes the whole request's gain
  EXPECT_LT(c.decode_speedup_ci95.lo, c.decode_speedup);
  EXPECT_GT(c.decode_speedup_ci95.hi, c.decode_speedup);
  const double width = 2 * 1.959964 * ratio_bootstrap_sd(arm_decode, base_decode);
  EXPECT_NEAR(c.decode_speedup_ci95.hi - c.decode_speedup_ci95.lo, width, 0.10 * width);
}

TEST(Comparison, WallTimePointEstimateCarriesTheInterval) {
  const auto rs = paired_set();
  // Batched arm: its wall time is half its Σ latency → the gain doubles; the interval follows.
  double lat_sum = 0, base_sum = 0;
  for (const auto& r : rs) (r.arm == "ears" ? lat_sum : base_sum) += r.latency_s;
  const ArmMetrics base = compute_arm_metrics(rs, "base", base_sum);
  const ArmMetrics ears = compute_arm_metrics(rs, "ears", lat_sum / 2);
  const Comparison c = compare_arms(rs, "ears", ears, "base", base);
  EXPECT_NEAR(c.throughput_gain_pct, 150.0, 2.0);
  EXPECT_LT(c.throughput_gain_ci95.lo, c.throughput_gain_pct);
  EXPECT_GT(c.throughput_gain_ci95.hi, c.throughput_gain_pct);
  EXPECT_EQ(c.bootstrap_resamples, kDefaultBootstrapResamples);
}

// `rs` with every result repeated `repeats` times (repeat 0 .. repeats − 1, the same outcome).
std::vector<RequestResult> repeated(const std::vector<RequestResult>& rs, int repeats) {
  std::vector<RequestResult> out;
  for (const auto& r : rs)
    for (int k = 0; k < repeats; ++k) {
      out.push_back(r);
      out.back().repeat = k;
    }
  return out;
}

Comparison ears_vs_base(const std::vector<RequestResult>& rs, int resamples) {
  return compare_arms(rs, "ears", compute_arm_metrics(rs, "ears", nan_value()), "base",
                      compute_arm_metrics(rs, "base", nan_value()), 123, resamples);
}

// The bootstrap resamples requests, all repeats of a request together. Three identical repeats
// of every request add no information, so the intervals keep their width; resampling the
// (request, repeat) pairs as if independent would shrink them by 1/√3 = 0.577.
// Bound: each end of a percentile interval of B = 2000 resamples is a sample quantile with sd
// sqrt(0.025·0.975/B)/φ(1.96) = 0.060 bootstrap sd; the width (3.92 sd) then has a relative sd
// <= 2·0.060/3.92 = 0.031 and a ratio of two widths <= √2·0.031 = 0.043, even when the two
// bootstraps draw independently: 4 sd -> [0.83, 1.17]. (With one seed over the same number of
// clusters, the cluster bootstrap's ratio is 1 up to rounding.)
TEST(Comparison, RepeatsOfARequestResampleTogether) {
  const auto once = paired_set(), thrice = repeated(once, 3);
  const Comparison c1 = ears_vs_base(once, 2000), c3 = ears_vs_base(thrice, 2000);
  ASSERT_EQ(c3.n_pairs, 3 * c1.n_pairs);
  EXPECT_NEAR(c3.throughput_gain_pct, c1.throughput_gain_pct, 1e-9);
  auto width = [](const Interval& i) { return i.hi - i.lo; };
  const double throughput = width(c3.throughput_gain_ci95) / width(c1.throughput_gain_ci95);
  const double latency = width(c3.latency_change_ci95) / width(c1.latency_change_ci95);
  EXPECT_GT(throughput, 0.83);
  EXPECT_LT(throughput, 1.17);
  EXPECT_GT(latency, 0.83);
  EXPECT_LT(latency, 1.17);
}

// Pairs are (request, repeat): repeat r of the arm meets repeat r of the baseline. 4 requests ×
// 3 repeats; the arm is right on repeat 0 only, the baseline on repeats 1 and 2, the outputs
// equal within a repeat, and the arm's extra repeat 3 of q0 has no partner. Pairing by request
// alone or with another repeat changes every count below.
TEST(Comparison, PairsMatchRequestAndRepeat) {
  std::vector<RequestResult> rs;
  for (int i = 0; i < 4; ++i)
    for (int rep = 0; rep < 3; ++rep) {
      RequestResult b = make_result("base", fmt::format("q{}", i), 0, {1, 1}, 1.0, rep);
      RequestResult a = make_result("ears", fmt::format("q{}", i), 2, {3}, 0.5, rep);
      a.has_score = b.has_score = true;
      a.correct = rep == 0;
      b.correct = rep != 0;
      a.text = b.text = fmt::format("answer {}", rep);
      rs.push_back(b);
      rs.push_back(a);
    }
  RequestResult extra = make_result("ears", "q0", 2, {3}, 0.5, 3);
  extra.has_score = extra.correct = true;
  extra.text = "answer 1";
  rs.push_back(extra);
  const Comparison c = ears_vs_base(rs, 200);
  EXPECT_EQ(c.n_pairs, 12);
  EXPECT_EQ(c.n_scored_pairs, 12);
  EXPECT_EQ(c.identical_outputs, 12);
  EXPECT_EQ(c.arm_only_correct, 4);       // repeat 0 of each request
  EXPECT_EQ(c.baseline_only_correct, 8);  // repeats 1 and 2
  EXPECT_DOUBLE_EQ(c.accuracy_delta_pp, 100.0 * (4 - 8) / 12);
  // The test's units are the 4 requests, each −1 over its repeats (right once, wrong twice):
  // P(|Σ ±1| >= 4) = 2 / 16. (Over the 12 pairs as if independent: 2·P(X <= 4), X ~ Bin(12, 1/2).)
  EXPECT_NEAR(c.mcnemar_p, 2.0 / 16, 1e-15);
  EXPECT_EQ(c.n_paired_requests, 4);
  EXPECT_TRUE(c.pairs_only);  // the arm's extra repeat has no partner
}

// Without a wall time, the requests' batches: a batch's requests ran side by side, so it took its
// longest latency (summing them counted it once per request: 7× at batch 8 in an audit); a result
// without start_s is its own batch, and at batch 1 the sum is Σ latencies.
TEST(ArmMetrics, WallFromLatenciesTakesEachBatchOnce) {
  std::vector<RequestResult> rs;
  const std::vector<std::pair<double, double>> start_latency = {
      {100.0, 0.5}, {100.0, 0.8}, {100.0, 0.6}, {200.0, 0.3}, {200.0, 0.9}, {0.0, 0.4}, {0.0, 0.2}};
  for (size_t i = 0; i < start_latency.size(); ++i) {
    rs.push_back(make_result("a", fmt::format("q{}", i), 0, {1, 1}, start_latency[i].second));
    rs.back().start_s = start_latency[i].first;
  }
  const ArmMetrics m = compute_arm_metrics(rs, "a", nan_value());
  EXPECT_TRUE(m.wall_from_latencies);
  EXPECT_NEAR(m.wall_s, 0.8 + 0.9 + 0.4 + 0.2, 1e-12);
  EXPECT_NEAR(m.output_tokens_per_s, static_cast<double>(m.output_tokens) / 2.3, 1e-9);
  for (auto& r : rs) r.start_s = 0;  // unbatched (or not recorded): Σ latencies
  EXPECT_NEAR(compute_arm_metrics(rs, "a", nan_value()).wall_s, 3.7, 1e-12);
  EXPECT_DOUBLE_EQ(compute_arm_metrics(rs, "a", 9.0).wall_s, 9.0);  // a measured wall time wins
}

// The paired sign-flip test against its definition, enumerated: every sign pattern of up to 12
// per-request differences (seeded draws in [−3, 3], zeros included), p = the share of patterns
// with |Σ| >= |Σ observed|. And at one repeat it is McNemar's exact test.
TEST(Stats, PairedSignFlipMatchesEnumerationAndMcNemar) {
  Rng rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int64_t> d(1 + rng.below(12));
    for (auto& x : d) x = static_cast<int64_t>(rng.below(7)) - 3;
    int64_t observed = 0;
    for (int64_t x : d) observed += x;
    int64_t at_least = 0;
    const uint64_t patterns = uint64_t{1} << d.size();
    for (uint64_t m = 0; m < patterns; ++m) {
      int64_t sum = 0;
      for (size_t i = 0; i < d.size(); ++i) sum += (m >> i & 1) ? std::abs(d[i]) : -std::abs(d[i]);
      at_least += std::abs(sum) >= std::abs(observed);
    }
    EXPECT_NEAR(paired_sign_flip_p(d), static_cast<double>(at_least) / static_cast<double>(patterns), 1e-12)
        << "trial " << trial;
  }
  for (auto [b, c] : {std::pair{10, 2}, {2, 10}, {0, 6}, {1, 8}, {5, 5}, {0, 0}, {450, 550}}) {
    std::vector<int64_t> d(static_cast<size_t>(b), 1);
    d.insert(d.end(), static_cast<size_t>(c), -1);
    d.insert(d.end(), 7, 0);  // concordant requests
    EXPECT_NEAR(paired_sign_flip_p(d), mcnemar_exact_p(b, c), 1e-12 * mcnemar_exact_p(b, c)) << b << " " << c;
  }
}

// Repeats of a T = 0 request are copies: three of each must leave the accuracy interval and the
// test where one repeat puts them (counting copies as observations narrowed the Wilson interval
// and made p = 2^-20 into 2^-60), and the small-sample notice counts requests.
TEST(Comparison, CopiesOfARequestAreNotMoreEvidence) {
  const auto once = paired_set(), thrice = repeated(once, 3);
  const Comparison c1 = ears_vs_base(once, 200), c3 = ears_vs_base(thrice, 200);
  EXPECT_EQ(c3.n_scored_pairs, 600);
  EXPECT_EQ(c3.n_paired_requests, 200);
  EXPECT_NEAR(c3.mcnemar_p, c1.mcnemar_p, 1e-12 * c1.mcnemar_p);
  for (const char* arm : {"base", "ears"}) {
    const ArmMetrics m1 = compute_arm_metrics(once, arm, nan_value()), m3 = compute_arm_metrics(thrice, arm, nan_value());
    EXPECT_DOUBLE_EQ(m3.accuracy, m1.accuracy);
    EXPECT_NEAR(m3.accuracy_ci95.lo, m1.accuracy_ci95.lo, 1e-12) << arm;
    EXPECT_NEAR(m3.accuracy_ci95.hi, m1.accuracy_ci95.hi, 1e-12) << arm;
  }
  EXPECT_FALSE(c3.pairs_only);
}

// A request the arm failed and the baseline finished (or the reverse) is left out of both sides:
// the gains are the pairs' (Σ over the pairs), not the arms' own rates over different requests.
// Spec-Bench's speedup is the mean of per-request rates over the pairs.
TEST(Comparison, OneSidedFailuresArePairedOut) {
  std::vector<RequestResult> rs;
  double rate_a = 0, rate_b = 0, out_a = 0, lat_a = 0, out_b = 0, lat_b = 0;
  for (int i = 0; i < 6; ++i) {
    const std::string id = fmt::format("q{}", i);
    RequestResult b = make_result("base", id, 0, std::vector<int>(4 + i, 1), 1.0 + 0.5 * i);
    RequestResult a = make_result("ears", id, 2, {3, 2}, 0.4 + 0.1 * i);
    if (i == 5) a.error = "context overflow";  // the longest, slowest request: only the baseline has it
    if (i < 5) {
      rate_a += a.output_tokens / a.latency_s, rate_b += b.output_tokens / b.latency_s;
      out_a += a.output_tokens, lat_a += a.latency_s, out_b += b.output_tokens, lat_b += b.latency_s;
    }
    rs.push_back(b);
    rs.push_back(a);
  }
  const Comparison c = ears_vs_base(rs, 200);
  EXPECT_TRUE(c.pairs_only);
  EXPECT_EQ(c.n_pairs, 5);
  EXPECT_NEAR(c.throughput_gain_pct, 100 * ((out_a / lat_a) / (out_b / lat_b) - 1), 1e-9);
  EXPECT_NEAR(c.latency_change_pct, 100 * (lat_a / lat_b - 1), 1e-9);
  EXPECT_NEAR(c.specbench_speedup, rate_a / rate_b, 1e-12);
  EXPECT_LE(c.throughput_gain_ci95.lo, c.throughput_gain_pct);
  EXPECT_GE(c.throughput_gain_ci95.hi, c.throughput_gain_pct);
}

// An interval needs at least half of the resamples to give a finite statistic, and is taken
// over the finite ones. 20 requests: on q0 only the arm drafted and only that pair is scored
// (the arm right), on q1 only the baseline drafted, on the rest neither. A resample's τ ratio
// is finite only when it holds q0 and q1: P = 1 − 2·0.95^20 + 0.90^20 = 0.405; its accuracy
// delta only when it holds q0: P = 1 − 0.95^20 = 0.642, and is then 100 pp. The finite count of
// B = 2000 resamples is Binomial(B, P): 809 ± 22 and 1283 ± 21, each > 8 sd from B/2 (checked).
TEST(Comparison, IntervalUndefinedWhenFewerThanHalfTheResamplesAreFinite) {
  std::vector<RequestResult> rs;
  for (int i = 0; i < 20; ++i) {
    const std::string id = fmt::format("q{}", i);
    RequestResult b = make_result("base", id, 2, i == 1 ? std::vector<int>{1} : std::vector<int>{}, 1.0);
    RequestResult a = make_result("ears", id, 2, i == 0 ? std::vector<int>{3} : std::vector<int>{}, 1.0);
    a.has_score = b.has_score = a.correct = (i == 0);
    rs.push_back(b);
    rs.push_back(a);
  }
  const int B = 2000;
  for (double p : {1 - 2 * std::pow(0.95, 20) + std::pow(0.9, 20), 1 - std::pow(0.95, 20)})
    ASSERT_GT(std::abs(B * p - B / 2.0), 8 * std::sqrt(B * p * (1 - p))) << p;
  const Comparison c = ears_vs_base(rs, B);
  EXPECT_DOUBLE_EQ(c.accept_length_ratio, 3.0);  // the point estimate is defined ...
  EXPECT_TRUE(std::isnan(c.accept_length_ratio_ci95.lo));  // ... its interval is not
  EXPECT_TRUE(std::isnan(c.accept_length_ratio_ci95.hi));
  EXPECT_EQ(json(c)["accept_length_ratio_ci95"], json::parse("[null, null]"));
  EXPECT_EQ(c.n_scored_pairs, 1);
  EXPECT_DOUBLE_EQ(c.accuracy_delta_ci95.lo, 100.0);
  EXPECT_DOUBLE_EQ(c.accuracy_delta_ci95.hi, 100.0);
}

}  // namespace
}  // namespace ears
