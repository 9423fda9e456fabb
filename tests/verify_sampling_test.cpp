// Tests for decoders/sampling (process_logits, sample_from_probs, RequestRng) and the chi-square
// helper. The statistical tests use fixed seeds and compare empirical distributions to the exact
// ones with a chi-square goodness-of-fit test (p > 1e-3).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/log.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "decoders/aten_operators.h"
#include "decoders/sampling.h"
#include "decoders/verify.h"
#include "harness/base/error.h"
#include "tests/chi2.h"
#include "tests/test_util.h"
#include "tests/verify_test_util.h"

namespace {

using ears::VerifierSpec;

// ---------------------------------------------------------------- statistics helpers

using ears::test::chi2_sf;

using namespace ears::test::verify_test;

// ---------------------------------------------------------------- chi-square helper itself

TEST(Stats, Chi2SurvivalMatchesKnownValues) {
  EXPECT_NEAR(chi2_sf(3.841458820694124, 1), 0.05, 1e-9);
  EXPECT_NEAR(chi2_sf(18.307038053275146, 10), 0.05, 1e-9);
  EXPECT_NEAR(chi2_sf(2.0, 2), std::exp(-1.0), 1e-12);
  EXPECT_NEAR(chi2_sf(10.827566170662733, 1), 1e-3, 1e-9);
  EXPECT_NEAR(chi2_sf(124.34211340400407, 100), 0.05, 1e-8);
  EXPECT_NEAR(chi2_sf(15.08627246938899, 5), 0.01, 1e-9);
  EXPECT_NEAR(chi2_sf(0.0, 7), 1.0, 1e-15);
  EXPECT_NEAR(chi2_sf(1.1454762260617692, 5), 0.95, 1e-9);  // lower tail, series branch
  EXPECT_LT(chi2_sf(500, 10), 1e-90);
}

TEST(Stats, Chi2PvalueDetectsMismatch) {
  std::vector<int64_t> fair{2500, 2480, 2520, 2500};
  std::vector<double> p{0.25, 0.25, 0.25, 0.25};
  EXPECT_GT(chi2_pvalue(fair, p), 0.5);
  std::vector<int64_t> biased{2800, 2400, 2300, 2500};
  EXPECT_LT(chi2_pvalue(biased, p), 1e-5);
  EXPECT_GT(chi2_pvalue({10, 0, 5}, {0.5, 0.0, 0.5}), 0.0);
  EXPECT_EQ(chi2_pvalue({10, 1, 5}, {0.5, 0.0, 0.5}), 0.0);
}

// ---------------------------------------------------------------- process_logits

at::Tensor row(std::vector<float> v) { return at::tensor(at::ArrayRef<float>(v)); }

void expect_close(const at::Tensor& got, std::vector<double> want, double tol = 1e-6) {
  auto g = to_vec(got);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << "index " << i;
}

TEST(ProcessLogits, TemperatureMatchesHandComputed) {
  const double l2 = std::log(2.0);
  auto r = ears::process_logits(row({0.0f, float(l2)}), {0.5, 0, 1});
  expect_close(r.probs, {0.2, 0.8});
  expect_close(r.max_prob, {0.8});
  r = ears::process_logits(row({0.0f, float(l2)}), {2.0, 0, 1});
  const double s2 = std::sqrt(2.0);
  expect_close(r.probs, {1 / (1 + s2), s2 / (1 + s2)});
}

TEST(ProcessLogits, TopKKeepsTheKLargestAndTies) {
  auto r = ears::process_logits(row({1, 2, 3, 4}), {1.0, 2, 1});
  const double e = std::exp(1.0);
  expect_close(r.probs, {0, 0, 1 / (1 + e), e / (1 + e)});
  expect_close(r.max_prob, {e / (1 + e)});
  // HF semantics: everything tied with the k-th largest logit survives.
  r = ears::process_logits(row({1, 1, 0, 1}), {1.0, 2, 1});
  expect_close(r.probs, {1 / 3.0, 1 / 3.0, 0, 1 / 3.0});
  // k >= V is a no-op.
  r = ears::process_logits(row({1, 2}), {1.0, 5, 1});
  expect_close(r.probs, {1 / (1 + e), e / (1 + e)});
}

TEST(ProcessLogits, TopPKeepsSmallestSetReachingP) {
  at::Tensor l = row({float(std::log(0.5)), float(std::log(0.2)), float(std::log(0.3))});
  auto r = ears::process_logits(l, {1.0, 0, 0.7});  // 0.5 < 0.7, 0.5+0.3 >= 0.7 -> {0, 2}
  expect_close(r.probs, {0.625, 0, 0.375});
  expect_close(r.max_prob, {0.625});
  r = ears::process_logits(l, {1.0, 0, 0.45});  // the top token alone reaches 0.45
  expect_close(r.probs, {1, 0, 0});
  r = ears::process_logits(l, {1.0, 0, 0.85});  // needs all three
  expect_close(r.probs, {0.5, 0.2, 0.3});
  r = ears::process_logits(l, {1.0, 0, 1e-6});  // always keeps the top token
  expect_close(r.probs, {1, 0, 0});
  // Exact boundaries (probabilities 0.5, 0.25, 0.25 are exact in float): a set whose mass equals
  // top_p is enough, nothing more is added.
  at::Tensor exact = row({float(std::log(2.0)), 0.f, 0.f});
  expect_close(ears::process_logits(exact, {1.0, 0, 0.5}).probs, {1, 0, 0});
  expect_close(ears::process_logits(exact, {1.0, 0, 0.75}).probs, {2 / 3.0, 1 / 3.0, 0});
}

TEST(ProcessLogits, TopKThenTopPOnRenormalised) {
  // probs 0.4, 0.3, 0.2, 0.1; top-k 3 -> 4/9, 3/9, 2/9; top-p 0.7: 4/9 < 0.7, 7/9 >= 0.7 -> {0,1}
  at::Tensor l = at::log(row({0.4f, 0.3f, 0.2f, 0.1f}));
  auto r = ears::process_logits(l, {1.0, 3, 0.7});
  expect_close(r.probs, {4 / 7.0, 3 / 7.0, 0, 0});
  // Without top-k the same top-p keeps 0.4 + 0.3 = 0.7 -> also {0, 1} (0.4 < 0.7 <= 0.7)? The
  // boundary is fragile in float; use 0.75 -> {0, 1, 2}.
  r = ears::process_logits(l, {1.0, 0, 0.75});
  expect_close(r.probs, {4 / 9.0, 3 / 9.0, 2 / 9.0, 0});
}

TEST(ProcessLogits, GreedyIsOneHot) {
  at::Tensor l = at::tensor({0.1f, 3.0f, -2.0f, 2.9f, 1.0f, 5.0f}).view({2, 3});
  auto r = ears::process_logits(l, {0.0, 0, 1});
  EXPECT_TRUE(at::equal(r.probs, at::tensor({0.f, 1.f, 0.f, 0.f, 0.f, 1.f}).view({2, 3})));
  EXPECT_TRUE(at::equal(r.max_prob, at::ones({2})));
}

// process_logits works in place on its own float32 copy of reduced-precision logits; a float32
// input must come back untouched. NaN or +inf in a row shows as a NaN max_prob (the engine's
// non-finite check), at every temperature; -inf (a masked token) is an ordinary zero.
TEST(ProcessLogits, LeavesItsInputAloneAndFlagsNonFiniteRowsInMaxProb) {
  auto g = gen(12);
  const at::Tensor l = at::randn({2, 3, 50}, g) * 2;
  const at::Tensor copy = l.clone();
  for (double t : {0.0, 0.7, 1.0})
    for (int64_t k : {0, 5}) {
      (void)ears::process_logits(l, {t, k, 1});
      ASSERT_TRUE(at::equal(l, copy)) << "temperature " << t << " top_k " << k;
    }
  at::Tensor bad = l.clone();
  bad[0][1][7] = std::numeric_limits<float>::quiet_NaN();
  bad[1][0][3] = std::numeric_limits<float>::infinity();
  bad[1][2][9] = -std::numeric_limits<float>::infinity();
  for (auto dtype : {at::kFloat, at::kBFloat16})
    for (double t : {0.0, 0.7, 1.0}) {
      const at::Tensor finite = at::isfinite(ears::process_logits(bad.to(dtype), {t, 0, 1}).max_prob);
      EXPECT_TRUE(at::equal(finite, at::tensor({1, 0, 1, 0, 1, 1}).to(at::kBool).view({2, 3})))
          << "temperature " << t << ": " << finite;
    }
}

// host_argmax is torch.argmax (the first maximum, NaN counting as the maximum) and flags exactly the
// rows process_logits gives a NaN max_prob at temperature 0. Ties are planted: bf16 rounding of
// small integers makes many, and the first of them must win.
TEST(HostArgmax, IsTorchArgmaxAndFlagsTheRowsProcessLogitsCallsNonFinite) {
  auto g = gen(21);
  at::Tensor l = (at::randn({40, 300}, g) * 3).round_();  // ties in every row
  l[3][17] = std::numeric_limits<float>::quiet_NaN();
  l[3][5] = std::numeric_limits<float>::quiet_NaN();  // the first NaN is the argmax
  l[7][250] = std::numeric_limits<float>::infinity();
  l[9][0] = -std::numeric_limits<float>::infinity();  // a masked token: an ordinary row
  l[11].fill_(-std::numeric_limits<float>::infinity());
  l[13].fill_(2.0f);  // all tied: id 0
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const at::Tensor x = l.to(dtype);
    const ears::HostArgmax h = ears::host_argmax(x);
    EXPECT_EQ(h.ids, to_lvec(x.argmax(1)));
    EXPECT_EQ(h.ids[3], 5);
    EXPECT_EQ(h.ids[13], 0);
    const at::Tensor finite = at::isfinite(ears::process_logits(x, {0.0, 0, 1}).max_prob);
    EXPECT_EQ(std::vector<int64_t>(h.finite.begin(), h.finite.end()), to_lvec(finite));
    EXPECT_EQ(h.finite[3] + h.finite[7] + h.finite[11], 0);
    EXPECT_EQ(h.finite[9], 1);
  }
  EXPECT_THROW(ears::host_argmax(l.to(at::kDouble)), ears::Error);
  EXPECT_THROW(ears::host_argmax(l.view({-1})), ears::Error);
}

// The same over rows as wide as a real vocabulary part (the 8-lane passes and a 3-element tail),
// with the maximum, NaNs, infinities and signed zeros planted in the lanes and in the tail, and
// rows shorter than one pass.
TEST(HostArgmax, IsTorchArgmaxOnWideRowsWithThePlantsAnywhere) {
  auto g = gen(22);
  const int64_t V = 2048 + 3;
  at::Tensor l = (at::randn({12, V}, g) * 3).round_() - 20;  // ties; every value below the plants
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  l[0][V - 1] = 50;                         // the maximum in the tail
  l[1][1000] = 50, l[1][1001] = 50;         // tied in one pass: the first
  l[2][7] = 50, l[2][V - 2] = 50;           // tied across lanes and tail
  l[3][V - 1] = nan, l[3][9] = 50;          // a NaN in the tail beats any maximum
  l[4][1500] = nan, l[4][V - 3] = nan;      // the first NaN
  l[5][600] = inf, l[5][601] = inf;         // +inf: the first
  l[6].fill_(-inf);                         // all -inf: id 0
  l[7].fill_(-1), l[7][300] = -0.0f, l[7][200] = 0.0f, l[7][100] = -0.0f;  // +0 == -0: the first zero
  l[8].fill_(-1), l[8][V - 1] = 0.0f, l[8][V - 2] = -0.0f;
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    for (int64_t width : {V, int64_t{7}, int64_t{8}, int64_t{9}}) {
      const at::Tensor x = l.narrow(1, 0, width).to(dtype).contiguous();
      const ears::HostArgmax h = ears::host_argmax(x);
      EXPECT_EQ(h.ids, to_lvec(x.argmax(1))) << "width " << width;
      const at::Tensor finite = at::isfinite(std::get<0>(x.to(at::kFloat).max(1)));
      EXPECT_EQ(std::vector<int64_t>(h.finite.begin(), h.finite.end()), to_lvec(finite)) << "width " << width;
    }
  }
}

TEST(ProcessLogits, MaxProbEqualsMaxOfProbsForRandomInputs) {
  auto g = gen(11);
  at::Tensor l = at::randn({3, 7, 300}, g) * 3;
  const std::vector<ears::SamplingParams> params{{1.0, 0, 1},   {0.7, 0, 1},    {1.3, 20, 1},
                                                 {0.8, 0, 0.9}, {1.0, 50, 0.5}, {0.0, 0, 1}};
  for (const auto& sp : params) {
    for (auto dtype : {at::kFloat, at::kHalf, at::kDouble}) {
      auto r = ears::process_logits(l.to(dtype), sp);
      ASSERT_EQ(r.probs.scalar_type(), at::kFloat);
      ASSERT_EQ(r.probs.sizes(), l.sizes());
      ASSERT_EQ(r.max_prob.sizes(), at::IntArrayRef({3, 7}));
      EXPECT_LT((r.max_prob - std::get<0>(r.probs.max(-1))).abs().max().item<double>(), 1e-6);
      EXPECT_LT((r.probs.sum(-1) - 1).abs().max().item<double>(), 1e-5);
      if (sp.top_k > 0 && dtype != at::kHalf) {  // half rounding creates ties, which are kept
        EXPECT_LE((r.probs > 0).sum(-1).max().item<int64_t>(), sp.top_k);
      }
    }
  }
}

TEST(ProcessLogits, RejectsInvalidParams) {
  at::Tensor l = row({1, 2});
  EXPECT_THROW(ears::process_logits(l, {-1.0, 0, 1}), ears::Error);
  EXPECT_THROW(ears::process_logits(l, {1.0, -3, 1}), ears::Error);
  EXPECT_THROW(ears::process_logits(l, {1.0, 0, 0.0}), ears::Error);
  EXPECT_THROW(ears::process_logits(l, {1.0, 0, 1.5}), ears::Error);
}

// ---------------------------------------------------------------- sample_from_probs

TEST(SampleFromProbs, MatchesDistributionChiSquare) {
  auto g = gen(21);
  const int64_t V = 50, N = 200000;
  at::Tensor p = random_dist(g, 1, V, 1.5, 0.2);
  at::Tensor ids = ears::sample_from_probs(p.expand({N, V}), at::rand({N}, g));
  ASSERT_EQ(ids.scalar_type(), at::kLong);
  auto counts = to_lvec(at::bincount(ids, {}, V));
  auto probs = to_vec(p[0]);
  EXPECT_GT(chi2_pvalue(counts, probs), 1e-3);
  // Power: the same draws are clearly not from a distribution with 3% of the mass moved.
  auto shifted = probs;
  int64_t hi = p[0].argmax().item<int64_t>(), lo = (p[0] > 0).nonzero()[-1][0].item<int64_t>();
  if (lo == hi) lo = (p[0] > 0).nonzero()[0][0].item<int64_t>();
  shifted[hi] -= 0.03, shifted[lo] += 0.03;
  EXPECT_LT(chi2_pvalue(counts, shifted), 1e-3);
}

TEST(SampleFromProbs, NeverReturnsZeroProbabilityIds) {
  const float third = 1.0f / 3.0f;
  const float top_u = 1.0f - std::ldexp(1.0f, -24);  // largest float32 below 1
  at::Tensor p = at::tensor({third, third, third, 0.f, 0.f,      // sums to < 1 in float, zeros at end
                             0.f, 0.f, 1.f, 0.f, 0.f,            // zeros on both sides
                             0.f, 1e-30f, 0.f, 0.f, 0.f,         // a single tiny mass
                             0.f, 0.f, 0.f, 0.f, 0.f,            // all zero -> argmax (0)
                             0.5f, 0.f, 0.f, 0.f, 0.5f})         // gap in the middle
                     .view({5, 5});
  for (float u : {0.0f, 1e-8f, 0.3333333f, 0.5f, 0.6666667f, 0.9999f, top_u, 1.0f, 1.5f}) {
    at::Tensor ids = ears::sample_from_probs(p, at::full({5}, u));
    auto v = to_lvec(ids);
    for (int r = 0; r < 4; ++r)
      if (r != 3) {
        EXPECT_GT(p[r][v[r]].item<float>(), 0.f) << "row " << r << " u " << u;
      }
    EXPECT_GT(p[4][v[4]].item<float>(), 0.f) << "u " << u;
    EXPECT_EQ(v[3], 0);
    EXPECT_EQ(v[1], 2);  // the only nonzero id of row 1
  }
  // u = 0 picks the first id with mass (exact inverse CDF), not a leading zero.
  EXPECT_EQ(to_lvec(ears::sample_from_probs(at::tensor({0.f, 0.3f, 0.7f}).view({1, 3}), at::zeros({1})))[0], 1);
  // u = 0 must not pick a leading zero; u just below 1 must not pick a trailing zero.
  EXPECT_EQ(to_lvec(ears::sample_from_probs(p, at::zeros({5})))[1], 2);
  EXPECT_EQ(to_lvec(ears::sample_from_probs(p, at::full({5}, top_u)))[0], 2);
  // Random rows with many zeros and random uniforms.
  auto g = gen(22);
  at::Tensor q = random_dist(g, 20000, 30, 4.0, 0.7);
  at::Tensor ids = ears::sample_from_probs(q, at::rand({20000}, g));
  EXPECT_TRUE((q.gather(1, ids.unsqueeze(1)) > 0).all().item<bool>());
}

// ---------------------------------------------------------------- RequestRng

TEST(RequestRng, SeedingIsDeterministicAndDistinct) {
  EXPECT_EQ(ears::splitmix64(0), 0xe220a8397b1dcdafULL);  // first output of splitmix64(seed 0)
  ears::RequestRng a(7, 42), b(7, 42), c(7, 43), d(8, 42);
  at::Tensor ua = a.uniforms(64);
  EXPECT_TRUE(at::equal(ua, b.uniforms(64)));
  EXPECT_FALSE(at::equal(ua, c.uniforms(64)));
  EXPECT_FALSE(at::equal(ua, d.uniforms(64)));
  EXPECT_FALSE(at::equal(ua, a.uniforms(64)));  // the stream advances
  EXPECT_EQ(ua.scalar_type(), at::kFloat);
  EXPECT_GE(ua.min().item<float>(), 0.f);
  EXPECT_LT(ua.max().item<float>(), 1.f);
  ears::RequestRng s(7, std::string_view("gsm8k-12")), t(7, ears::fnv1a64("gsm8k-12"));
  EXPECT_EQ(s.seed(), t.seed());
  EXPECT_EQ(ears::fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(ears::fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
}

TEST(RequestRng, BatchRowsIndependentOfBatchCompositionAndThreads) {
  const int threads = at::get_num_threads();
  std::vector<at::Tensor> alone;
  for (uint64_t id : {1, 2, 3}) {
    ears::RequestRng r(99, id);
    r.uniforms(5);  // one step already taken
    alone.push_back(r.uniforms(8));
  }
  for (int nthreads : {1, 2}) {
    at::set_num_threads(nthreads);
    ears::RequestRng r1(99, 1), r2(99, 2), r3(99, 3);
    for (auto* r : {&r1, &r2, &r3}) r->uniforms(5);
    std::vector<ears::RequestRng*> order{&r3, &r1, &r2};
    at::Tensor u = ears::batch_uniforms(order, 8, at::kCPU);
    ASSERT_EQ(u.sizes(), at::IntArrayRef({3, 8}));
    EXPECT_TRUE(at::equal(u[0], alone[2]));
    EXPECT_TRUE(at::equal(u[1], alone[0]));
    EXPECT_TRUE(at::equal(u[2], alone[1]));
  }
  at::set_num_threads(threads);
}

}  // namespace
