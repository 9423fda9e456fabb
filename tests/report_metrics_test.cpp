// Tests of reports/ statistics, results, per-arm metrics and paired comparisons.
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
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
  EXPECT_LT(mcnemar_exact_p(0, 2000), 1e-300 + 1e-200);  // large n stays finite
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

TEST(Comparison, PairedBootstrapContainsTruthAndIsDeterministic) {
  const auto rs = paired_set();
  const ArmMetrics base = compute_arm_metrics(rs, "base", nan_value());
  const ArmMetrics ears = compute_arm_metrics(rs, "ears", nan_value());
  const Comparison c = compare_arms(rs, "ears", ears, "base", base, 123, 2000);
  EXPECT_EQ(c.n_pairs, 200);
  EXPECT_EQ(c.n_scored_pairs, 200);
  EXPECT_NEAR(c.accuracy_delta_pp, 10.0, 1e-9);
  EXPECT_EQ(c.arm_only_correct, 20);
  EXPECT_EQ(c.baseline_only_correct, 0);
  EXPECT_NEAR(c.mcnemar_p, 2.0 / std::pow(2.0, 20), 1e-15);
  // Paired sd of the delta: sqrt(0.1·0.9/200) = 2.1 pp → half-width ≈ 4.2 pp.
  const double half = 1.96 * std::sqrt(0.09 / 200) * 100;
  EXPECT_LT(c.accuracy_delta_ci95.lo, 10.0);
  EXPECT_GT(c.accuracy_delta_ci95.hi, 10.0);
  EXPECT_NEAR(10.0 - c.accuracy_delta_ci95.lo, half, half * 0.35);
  EXPECT_NEAR(c.accuracy_delta_ci95.hi - 10.0, half, half * 0.35);
  // Throughput: same tokens, 1.25× less time with ±5 % noise → gain ≈ 25 %.
  EXPECT_NEAR(c.throughput_gain_pct, 25.0, 1.0);
  EXPECT_LT(c.throughput_gain_ci95.lo, c.throughput_gain_pct);
  EXPECT_GT(c.throughput_gain_ci95.hi, c.throughput_gain_pct);
  EXPECT_LT(c.throughput_gain_ci95.hi - c.throughput_gain_ci95.lo, 3.0);
  EXPECT_NEAR(c.latency_change_pct, -20.0, 1.0);
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

}  // namespace
}  // namespace ears
