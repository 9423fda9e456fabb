// Tests for decoders/verify (baseline, EARS, typical, greedy; induced distributions). The
// statistical tests use fixed seeds, run verify on large batches (rows are independent trials)
// and compare empirical distributions to the exact ones with a chi-square goodness-of-fit test
// (p > 1e-3) or binomial z-tests (5σ).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/log.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/xlogy.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

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

using namespace ears::test::verify_test;

// Inverse-CDF draws from one distribution q [V] (float64 CDF, so zero-prob ids never appear).
at::Tensor draw(const at::Tensor& q, const at::Tensor& u) {
  at::Tensor cdf = q.to(at::kDouble).cumsum(0);
  at::Tensor t = u.to(at::kDouble) * cdf[-1];
  return at::searchsorted(cdf, t, false, true).clamp_max(q.size(0) - 1);
}

// ---------------------------------------------------------------- verify: exactness

struct Case {
  at::Tensor p;  // [G+1, V]
  at::Tensor q;  // [G, V]
  at::Tensor m;  // [G+1] max p
};

// A draft q close to the target (logits + noise), sharing its zeros, plus one extra zero in p at
// a token q can propose (so rejections of p = 0 drafts are exercised): acceptance stays high
// enough that every position is reached often.
Case make_case(at::Generator& g, int64_t V, int64_t G, double p_scale, double noise) {
  at::Tensor logits = at::randn({G + 1, V}, g) * p_scale;
  at::Tensor drop = at::rand({G + 1, V}, g) < 0.15;
  drop.scatter_(1, logits.argmax(1, true), false);
  at::Tensor q_logits = (logits + at::randn({G + 1, V}, g) * noise).masked_fill(drop, -INFINITY);
  at::Tensor q_top = q_logits.argmax(1, true);
  at::Tensor extra = at::randint(V, {G + 1, 1}, g);
  extra = at::where(extra == q_top, (extra + 1) % V, extra);
  at::Tensor p_drop = drop.scatter(1, extra, true);
  p_drop.scatter_(1, logits.argmax(1, true), false);
  at::Tensor p = at::softmax(logits.masked_fill(p_drop, -INFINITY), -1);
  at::Tensor q = at::softmax(q_logits, -1).narrow(0, 0, G).contiguous();
  return {p, q, std::get<0>(p.max(-1))};
}

enum class Drafting { Sampled, OneHot, Implicit };

struct Counts {
  std::vector<std::vector<int64_t>> emitted;  // per position: histogram of the emitted token
  std::vector<std::vector<int64_t>> drafted, accepted0, pardoned0;  // position 0 per draft id
};

// Runs `rows` independent verifications of the fixed case in chunks and tallies the output.
Counts run_trials(const VerifierSpec& spec, const Case& c, Drafting mode, int64_t rows, uint64_t seed) {
  auto g = gen(seed);
  const int64_t G = c.q.size(0), V = c.p.size(1), chunk = 50000;
  Counts out;
  out.emitted.assign(G + 1, std::vector<int64_t>(V, 0));
  out.drafted.assign(1, std::vector<int64_t>(V, 0));
  out.accepted0 = out.pardoned0 = out.drafted;
  // One-hot drafting: the drafter's argmax token at each position (a fixed id per position).
  at::Tensor q_eff = c.q;
  at::Tensor fixed = c.q.argmax(-1);
  if (mode != Drafting::Sampled) q_eff = at::zeros_like(c.q).scatter_(1, fixed.unsqueeze(1), 1.0);
  for (int64_t done = 0; done < rows; done += chunk) {
    const int64_t N = std::min(chunk, rows - done);
    std::vector<at::Tensor> cols;
    for (int64_t i = 0; i < G; ++i)
      cols.push_back(mode == Drafting::Sampled ? draw(c.q[i], at::rand({N}, g)) : fixed[i].expand({N}));
    ears::VerifyInput in;
    in.draft_tokens = at::stack(cols, 1).contiguous();
    in.target_probs = c.p.expand({N, G + 1, V});
    in.target_max = c.m.expand({N, G + 1});
    if (mode != Drafting::Implicit) in.draft_probs = q_eff.expand({N, G, V});
    in.uniforms_accept = at::rand({N, G}, g);
    in.uniforms_sample = at::rand({N}, g);
    auto o = ears::verify(spec, in);
    for (int64_t i = 0; i <= G; ++i) {
      at::Tensor tok = o.emitted.select(1, i).masked_select(o.accepted >= i);
      auto h = to_lvec(at::bincount(tok, {}, V));
      for (int64_t v = 0; v < V; ++v) out.emitted[i][v] += h[v];
    }
    at::Tensor x0 = in.draft_tokens.select(1, 0);
    auto add = [&](std::vector<int64_t>& dst, const at::Tensor& ids) {
      auto h = to_lvec(at::bincount(ids, {}, V));
      for (int64_t v = 0; v < V; ++v) dst[v] += h[v];
    };
    add(out.drafted[0], x0);
    add(out.accepted0[0], x0.masked_select(o.path.select(1, 0) > 0));
    add(out.pardoned0[0], x0.masked_select(o.path.select(1, 0) == 2));
  }
  return out;
}

void expect_positions_match(const Counts& k, const std::vector<at::Tensor>& expected, const std::string& what) {
  for (size_t i = 0; i < expected.size(); ++i) {
    int64_t n = 0;
    for (auto v : k.emitted[i]) n += v;
    if (i <= 2) {
      ASSERT_GT(n, 2000) << what << " position " << i << " reached too rarely to test";
    }
    if (n < 1000) continue;
    const double pv = chi2_pvalue(k.emitted[i], to_vec(expected[i]));
    if (std::getenv("EARS_VERIFY_TEST_VERBOSE")) std::printf("%s pos %zu n %ld p %.4g\n", what.c_str(), i, long(n), pv);
    EXPECT_GT(pv, 1e-3) << what << " position " << i << " (n = " << n << ")";
  }
}

TEST(VerifyBaseline, EmittedTokensAreDistributedAsTarget) {
  VerifierSpec spec;  // baseline
  uint64_t seed = 100;
  for (int64_t V : {8, 16, 64}) {
    for (Drafting mode : {Drafting::Sampled, Drafting::OneHot}) {
      const int64_t G = V == 16 ? 3 : 5;
      auto g = gen(seed++);
      Case c = mode == Drafting::Sampled ? make_case(g, V, G, 1.0, 0.8) : make_case(g, V, G, 2.5, 0.5);
      Counts k = run_trials(spec, c, mode, 200000, seed++);
      std::vector<at::Tensor> want;
      for (int64_t i = 0; i <= G; ++i) want.push_back(c.p[i]);
      expect_positions_match(k, want, "baseline V=" + std::to_string(V) +
                                          (mode == Drafting::Sampled ? " sampled" : " one-hot"));
    }
  }
}

TEST(VerifyBaseline, ImplicitOneHotEqualsExplicitOneHot) {
  auto g = gen(5);
  const int64_t B = 4000, G = 4, V = 32;
  at::Tensor p = random_dist(g, B * (G + 1), V, 1.0, 0.2).view({B, G + 1, V});
  at::Tensor x = at::randint(V, {B, G}, g);
  ears::VerifyInput in;
  in.draft_tokens = x;
  in.target_probs = p;
  in.target_max = std::get<0>(p.max(-1));
  in.uniforms_accept = at::rand({B, G}, g);
  in.uniforms_sample = at::rand({B}, g);
  for (auto kind : {VerifierSpec::Baseline, VerifierSpec::Ears}) {
    VerifierSpec spec;
    spec.kind = kind;
    auto implicit = ears::verify(spec, in);
    ears::VerifyInput ex = in;
    ex.draft_probs = at::zeros({B, G, V}).scatter_(2, x.unsqueeze(2), 1.0);
    auto explicit_ = ears::verify(spec, ex);
    EXPECT_TRUE(at::equal(implicit.accepted, explicit_.accepted));
    EXPECT_TRUE(at::equal(implicit.emitted, explicit_.emitted));
    EXPECT_TRUE(at::equal(implicit.path, explicit_.path));
  }
}

// ---------------------------------------------------------------- verify: EARS

TEST(VerifyEars, BetaZeroIsBaselineBitForBit) {
  auto g = gen(6);
  const int64_t B = 20000, G = 5, V = 40;
  at::Tensor p = random_dist(g, B * (G + 1), V, 1.0, 0.2).view({B, G + 1, V});
  at::Tensor q = random_dist(g, B * G, V, 2.0, 0.2).view({B, G, V});
  ears::VerifyInput in;
  in.draft_tokens = ears::sample_from_probs(q.view({B * G, V}), at::rand({B * G}, g)).view({B, G});
  in.target_probs = p;
  in.target_max = std::get<0>(p.max(-1));
  in.draft_probs = q;
  in.uniforms_accept = at::rand({B, G}, g);
  in.uniforms_sample = at::rand({B}, g);
  auto base = ears::verify(VerifierSpec{}, in);
  for (auto unc : {VerifierSpec::MaxProb, VerifierSpec::Entropy}) {
    VerifierSpec ears_spec;
    ears_spec.kind = VerifierSpec::Ears;
    ears_spec.beta = 0;
    ears_spec.uncertainty = unc;
    auto e = ears::verify(ears_spec, in);
    EXPECT_TRUE(at::equal(base.accepted, e.accepted));
    EXPECT_TRUE(at::equal(base.emitted, e.emitted));
    EXPECT_TRUE(at::equal(base.path, e.path));
  }
  // And β > 0 accepts at least as much, strictly more somewhere.
  VerifierSpec loose;
  loose.kind = VerifierSpec::Ears;
  loose.beta = 0.3;
  auto e = ears::verify(loose, in);
  EXPECT_TRUE((e.accepted >= base.accepted).all().item<bool>());
  EXPECT_GT(e.accepted.sum().item<int64_t>(), base.accepted.sum().item<int64_t>());
  EXPECT_GT((e.path == 2).sum().item<int64_t>(), 0);
}

// Per-draft-id acceptance rate at position 0 equals min(1, p/q + β·u); pardons equal the gap.
void expect_acceptance_rates(const Counts& k, const Case& c, double beta, double u0, Drafting mode) {
  const int64_t V = c.p.size(1);
  auto p = to_vec(c.p[0]), q = to_vec(c.q[0]);
  if (mode != Drafting::Sampled) {
    q.assign(V, 0.0);
    q[c.q[0].argmax().item<int64_t>()] = 1.0;
  }
  int tested = 0;
  for (int64_t v = 0; v < V; ++v) {
    const double n = static_cast<double>(k.drafted[0][v]);
    if (n < 200) continue;
    ++tested;
    const double primary = std::min(1.0, p[v] / q[v]);
    const double a = std::min(1.0, p[v] / q[v] + beta * u0);
    const double acc = k.accepted0[0][v] / n, par = k.pardoned0[0][v] / n;
    const double sd_a = std::sqrt(a * (1 - a) / n), gap = a - primary;
    const double sd_g = std::sqrt(gap * (1 - gap) / n);
    EXPECT_NEAR(acc, a, 5 * sd_a + 1.0 / n) << "id " << v << " n " << n;
    EXPECT_NEAR(par, gap, 5 * sd_g + 1.0 / n) << "id " << v << " n " << n;
  }
  EXPECT_GT(tested, 0);
}

TEST(VerifyEars, AcceptanceAndOutputMatchInducedDistribution) {
  uint64_t seed = 300;
  for (auto unc : {VerifierSpec::MaxProb, VerifierSpec::Entropy}) {
    for (Drafting mode : {Drafting::Sampled, Drafting::OneHot}) {
      VerifierSpec spec;
      spec.kind = VerifierSpec::Ears;
      spec.beta = 0.25;
      spec.uncertainty = unc;
      const int64_t V = 16, G = 3;
      auto g = gen(seed++);
      Case c = make_case(g, V, G, 0.6, 0.8);  // flat-ish target: large uncertainty
      Counts k = run_trials(spec, c, mode, 200000, seed++);
      at::Tensor q_eff = mode == Drafting::Sampled
                             ? c.q
                             : at::zeros_like(c.q).scatter_(1, c.q.argmax(-1, true), 1.0);
      std::vector<at::Tensor> want;
      for (int64_t i = 0; i < G; ++i) want.push_back(ears::induced_distribution(spec, c.p[i], q_eff[i], c.m[i]));
      want.push_back(c.p[G]);  // the bonus is drawn from p_t itself
      const std::string what = std::string("ears ") + ears::to_string(unc) +
                               (mode == Drafting::Sampled ? " sampled" : " one-hot");
      expect_positions_match(k, want, what);
      double u0 = 1 - c.m[0].item<double>();
      if (unc == VerifierSpec::Entropy)
        u0 = -at::xlogy(c.p[0], c.p[0]).sum().item<double>() / std::log(double(V));
      expect_acceptance_rates(k, c, spec.beta, u0, mode);
      // Power: the output at position 0 is measurably not p_t.
      EXPECT_GT(ears::tv_distance(c.p[0], want[0]).item<double>(), 0.01) << what;
      EXPECT_LT(chi2_pvalue(k.emitted[0], to_vec(c.p[0])), 1e-3) << what;
    }
  }
}

TEST(VerifyEars, EntropyModeUsesEntropyNotTargetMax) {
  // p uniform over 4 -> H/log V = 1; 1 - max p = 0.75. q one-hot at 0 -> ratio = 0.25.
  const int64_t V = 4;
  ears::VerifyInput in;
  in.draft_tokens = at::zeros({1, 1}, at::kLong);
  in.target_probs = at::full({1, 2, V}, 0.25f);
  in.target_max = at::ones({1, 2});  // deliberately inconsistent: MaxProb would see u = 0
  in.uniforms_accept = at::full({1, 1}, 0.7f);
  in.uniforms_sample = at::full({1}, 0.1f);
  VerifierSpec spec;
  spec.kind = VerifierSpec::Ears;
  spec.beta = 0.5;
  spec.uncertainty = VerifierSpec::Entropy;  // accept: 0.25 >= 0.7 - 0.5·1
  auto o = ears::verify(spec, in);
  EXPECT_EQ(o.accepted.item<int64_t>(), 1);
  EXPECT_EQ(o.path[0][0].item<int8_t>(), 2);
  spec.uncertainty = VerifierSpec::MaxProb;  // reject: 0.25 < 0.7 - 0.5·0
  o = ears::verify(spec, in);
  EXPECT_EQ(o.accepted.item<int64_t>(), 0);
  EXPECT_EQ(o.path[0][0].item<int8_t>(), 0);
  // Residual = p with the draft id removed: ids 1..3 renormalised; u = 0.1 -> id 1.
  EXPECT_EQ(o.emitted[0][0].item<int64_t>(), 1);
  in.target_max = at::full({1, 2}, 0.25f);  // consistent: u = 0.75, accept iff 0.25 >= 0.7 - 0.375
  o = ears::verify(spec, in);
  EXPECT_EQ(o.accepted.item<int64_t>(), 0);
  in.uniforms_accept.fill_(0.6f);
  o = ears::verify(spec, in);
  EXPECT_EQ(o.accepted.item<int64_t>(), 1);
}

// ---------------------------------------------------------------- induced distribution

TEST(InducedDistribution, BaselineIsTargetAndOthersAreDistributions) {
  auto g = gen(7);
  const int64_t N = 500, V = 24;
  at::Tensor p = random_dist(g, N, V, 0.8, 0.2), q = random_dist(g, N, V, 2.0, 0.3);
  at::Tensor m = std::get<0>(p.max(-1));
  VerifierSpec spec;
  at::Tensor base = ears::induced_distribution(spec, p, q, m);
  EXPECT_LT((base - p).abs().max().item<double>(), 1e-6);
  EXPECT_LT(ears::tv_distance(p, base).max().item<double>(), 1e-6);
  // One-hot q too.
  at::Tensor oh = at::zeros_like(q).scatter_(1, q.argmax(1, true), 1.0);
  EXPECT_LT((ears::induced_distribution(spec, p, oh, m) - p).abs().max().item<double>(), 1e-6);

  for (auto kind : {VerifierSpec::Ears, VerifierSpec::Typical, VerifierSpec::Greedy}) {
    spec.kind = kind;
    at::Tensor d = ears::induced_distribution(spec, p, q, m);
    EXPECT_LT((d.sum(-1) - 1).abs().max().item<double>(), 1e-5) << ears::to_string(kind);
    EXPECT_GE(d.min().item<double>(), 0.0);
  }
  spec.kind = VerifierSpec::Ears;
  at::Tensor tv = ears::tv_distance(p, ears::induced_distribution(spec, p, q, m));
  EXPECT_GT(tv.mean().item<double>(), 1e-3);
  spec.beta = 0;
  EXPECT_LT(ears::tv_distance(p, ears::induced_distribution(spec, p, q, m)).max().item<double>(), 1e-6);
  // A confident target (max p = 1) has u = 0: EARS is exact there.
  spec.beta = 0.5;
  at::Tensor sure = at::zeros({1, V}).index_fill_(1, at::tensor({3L}), 1.0);
  EXPECT_LT(ears::tv_distance(sure, ears::induced_distribution(spec, sure, q.narrow(0, 0, 1), at::ones({1})))
                .item<double>(), 1e-6);
  spec.kind = VerifierSpec::Greedy;
  EXPECT_TRUE(at::equal(ears::induced_distribution(spec, p, q, m).argmax(-1), p.argmax(-1)));
  EXPECT_LT((ears::tv_distance(at::tensor({0.5f, 0.5f, 0.f}), at::tensor({0.f, 0.5f, 0.5f})) - 0.5)
                .abs().item<double>(), 1e-7);
}

// ---------------------------------------------------------------- typical, greedy

TEST(VerifyTypical, ThresholdAcceptanceAndSampledCorrection) {
  at::Tensor p = at::tensor({0.7f, 0.2f, 0.05f, 0.05f,   // thr = min(0.09, 0.3·e^-H) = 0.09
                             0.1f, 0.2f, 0.3f, 0.4f,     // thr = 0.3·e^-H ≈ 0.084
                             0.0f, 0.0f, 1.0f, 0.0f})
                     .view({1, 3, 4}).expand({3, 3, 4}).contiguous();
  auto thr = [](std::vector<double> v) {
    double h = 0;
    for (double x : v) h -= x * std::log(x + 1e-5);
    return std::min(0.09, 0.3 * std::exp(-h));
  };
  ASSERT_NEAR(thr({0.7, 0.2, 0.05, 0.05}), 0.09, 1e-12);
  ASSERT_LT(thr({0.1, 0.2, 0.3, 0.4}), 0.1);
  ears::VerifyInput in;
  in.draft_tokens = at::tensor({1L, 2L, /**/ 0L, 0L, /**/ 3L, 0L}).view({3, 2});
  in.target_probs = p;
  in.uniforms_sample = at::tensor({0.35f, 0.5f, 0.2f});
  VerifierSpec spec;
  spec.kind = VerifierSpec::Typical;
  auto o = ears::verify(spec, in);  // q and uniforms_accept are not needed
  // row 0: 0.2 > 0.09 accept; p[1][2] = 0.3 > 0.084 accept -> bonus from p[2] = id 2.
  // row 1: 0.7 accept; p[1][0] = 0.1 > 0.084 accept -> bonus id 2.
  // row 2: 0.05 < 0.09 reject -> correction ~ p[0] with u = 0.2 -> id 0 (cdf 0.7).
  EXPECT_EQ(to_lvec(o.accepted), (std::vector<int64_t>{2, 2, 0}));
  EXPECT_EQ(to_lvec(o.emitted), (std::vector<int64_t>{1, 2, 2, 0, 0, 2, 0, -1, -1}));
  // Rejection: correction is sampled from p[j] (not the residual): u = 0.8 -> id 1 (cdf .7, .9).
  in.uniforms_sample = at::tensor({0.35f, 0.5f, 0.8f});
  o = ears::verify(spec, in);
  EXPECT_EQ(o.emitted[2][0].item<int64_t>(), 1);
  spec.typical_eps = 0.01;  // lower ε: 0.05 > 0.01 and then 0.1 > 0.01 are accepted
  o = ears::verify(spec, in);
  EXPECT_EQ(o.accepted[2].item<int64_t>(), 2);
}

TEST(VerifyTypical, MatchesDoublePrecisionReferenceOnRandomRows) {
  auto g = gen(9);
  const int64_t B = 4000, V = 50;
  // Mixed sharpness so both branches of min(ε, δ·exp(-H)) occur; many tiny probabilities so the
  // 1e-5 inside the log matters.
  at::Tensor scale = at::rand({B, 1}, g) * 6;
  at::Tensor p = random_dist(g, B * 2, V, 1.0, 0.3).view({B, 2, V});
  p = at::softmax(at::log(p) * scale.unsqueeze(2), -1);
  // Draft the token nearest to the threshold from above (even rows) or below (odd rows), so a
  // slightly wrong threshold flips decisions.
  auto pd = to_vec(p.select(1, 0));
  std::vector<int64_t> xs(B, 0);
  for (int64_t b = 0; b < B; ++b) {
    double h = 0;
    for (int64_t v = 0; v < V; ++v) h -= pd[b * V + v] * std::log(pd[b * V + v] + 1e-5);
    const double thr = std::min(0.09, 0.3 * std::exp(-h));
    double best = INFINITY;
    for (int64_t v = 0; v < V; ++v) {
      const double d = b % 2 == 0 ? pd[b * V + v] - thr : thr - pd[b * V + v];
      if (d > 0 && d < best) best = d, xs[b] = v;
    }
  }
  ears::VerifyInput in;
  in.draft_tokens = at::tensor(at::ArrayRef<int64_t>(xs)).view({B, 1});
  in.target_probs = p;
  in.uniforms_sample = at::rand({B}, g);
  VerifierSpec spec;
  spec.kind = VerifierSpec::Typical;
  auto acc = to_lvec(ears::verify(spec, in).accepted);
  int checked = 0, accepted = 0, eps_branch = 0;
  for (int64_t b = 0; b < B; ++b) {
    double h = 0;
    for (int64_t v = 0; v < V; ++v) h -= pd[b * V + v] * std::log(pd[b * V + v] + 1e-5);
    const double thr = std::min(0.09, 0.3 * std::exp(-h));
    const double px = pd[b * V + xs[b]];
    if (std::fabs(px - thr) < 1e-5) continue;  // too close to call in float
    ++checked;
    accepted += px > thr;
    eps_branch += thr == 0.09;
    EXPECT_EQ(acc[b], px > thr ? 1 : 0) << "row " << b << " p(x) " << px << " thr " << thr;
  }
  if (std::getenv("EARS_VERIFY_TEST_VERBOSE")) std::printf("typical checked %d accepted %d eps %d\n", checked, accepted, eps_branch);
  EXPECT_GT(checked, B * 8 / 10);
  EXPECT_GT(accepted, B / 4);
  EXPECT_GT(eps_branch, B / 20);
  EXPECT_LT(eps_branch, B * 19 / 20);
}

TEST(VerifyGreedy, AcceptsArgmaxPrefix) {
  // argmax per position: 2, 0, 3, 1
  at::Tensor p = at::tensor({0.1f, 0.2f, 0.7f, 0.0f, 0.5f, 0.2f, 0.2f, 0.1f,
                             0.1f, 0.1f, 0.1f, 0.7f, 0.2f, 0.6f, 0.1f, 0.1f})
                     .view({1, 4, 4}).expand({3, 4, 4});
  ears::VerifyInput in;
  in.draft_tokens = at::tensor({2L, 0L, 3L, /**/ 2L, 1L, 3L, /**/ 0L, 0L, 0L}).view({3, 3});
  in.target_probs = p;
  VerifierSpec spec;
  spec.kind = VerifierSpec::Greedy;
  auto o = ears::verify(spec, in);  // no uniforms needed
  EXPECT_EQ(to_lvec(o.accepted), (std::vector<int64_t>{3, 1, 0}));
  EXPECT_EQ(to_lvec(o.emitted), (std::vector<int64_t>{2, 0, 3, 1, 2, 0, -1, -1, 2, -1, -1, -1}));
  EXPECT_EQ(to_lvec(o.path), (std::vector<int64_t>{1, 1, 1, 1, 0, 0, 0, 0, 0}));
}

// Temperature 0 (verify.h): one-hot p_t and q. For U > 0 every verifier emits what the greedy one
// does, and greedy_accepted (the engine's host verdict) counts what verify(greedy) accepts; EARS at
// U = 0 exactly is the corner the engine does not reproduce: its threshold is 0, so it accepts a
// token the target gives probability 0 (a pardon), where greedy rejects it.
TEST(VerifyTemperatureZero, EveryVerifierIsGreedyExceptEarsAtUZero) {
  auto g = gen(31);
  const int64_t B = 2000, G = 5, V = 12;
  const at::Tensor logits = at::randn({B, G + 1, V}, g);
  const ears::ProcessedProbs pp = ears::process_logits(logits, {0.0, 0, 1});
  const at::Tensor top = logits.argmax(2);
  // Drafts: the argmax with probability 0.8 per position, else a random id (often a rejection).
  const at::Tensor random_ids = at::randint(V, {B, G}, g);
  const at::Tensor drafts = at::where(at::rand({B, G}, g) < 0.8, top.narrow(1, 0, G), random_ids);
  ears::VerifyInput in{drafts, pp.probs, pp.max_prob, at::Tensor(), at::rand({B, G}, g) * 0.999 + 0.001,
                       at::rand({B}, g)};
  VerifierSpec greedy;
  greedy.kind = VerifierSpec::Greedy;
  const ears::VerifyOutput want = ears::verify(greedy, in);
  const std::vector<int64_t> want_n = to_lvec(want.accepted), ids = to_lvec(top), x = to_lvec(drafts);
  for (int64_t b = 0; b < B; ++b)
    ASSERT_EQ(ears::greedy_accepted(&ids[b * (G + 1)], &x[b * G], G), want_n[b]) << "row " << b;
  EXPECT_GT(want.accepted.sum().item<int64_t>(), B);  // accepts and rejections both exercised
  EXPECT_LT(want.accepted.sum().item<int64_t>(), B * G);
  for (auto kind : {VerifierSpec::Baseline, VerifierSpec::Ears, VerifierSpec::Typical}) {
    VerifierSpec spec;
    spec.kind = kind;
    spec.beta = 0.5;
    const ears::VerifyOutput got = ears::verify(spec, in);
    EXPECT_TRUE(at::equal(got.accepted, want.accepted)) << to_string(kind);
    EXPECT_TRUE(at::equal(got.emitted, want.emitted)) << to_string(kind);
    EXPECT_TRUE(at::equal(got.path, want.path)) << to_string(kind);
  }
  // U = 0 at a rejected first position: EARS pardons it, greedy does not.
  const int64_t b = (at::arange(B) * (drafts.select(1, 0) != top.select(1, 0))).argmax().item<int64_t>();
  ASSERT_NE(x[b * G], ids[b * (G + 1)]);
  in.uniforms_accept[b][0] = 0.0f;
  VerifierSpec ears_spec;
  ears_spec.kind = VerifierSpec::Ears;
  EXPECT_EQ(ears::verify(ears_spec, in).path[b][0].item<int64_t>(), 2);
  EXPECT_EQ(ears::verify(greedy, in).accepted[b].item<int64_t>(), 0);
}

// ---------------------------------------------------------------- invariants, names, errors

TEST(Verify, OutputsAreConsistentForEveryKind) {
  auto g = gen(8);
  const int64_t B = 3000, G = 4, V = 20;
  at::Tensor p = random_dist(g, B * (G + 1), V, 1.0, 0.3).view({B, G + 1, V});
  at::Tensor q = random_dist(g, B * G, V, 1.5, 0.3).view({B, G, V});
  ears::VerifyInput in;
  in.draft_tokens = ears::sample_from_probs(q.view({B * G, V}), at::rand({B * G}, g)).view({B, G});
  in.target_probs = p;
  in.target_max = std::get<0>(p.max(-1));
  in.draft_probs = q;
  in.uniforms_accept = at::rand({B, G}, g);
  in.uniforms_sample = at::rand({B}, g);
  for (auto kind : {VerifierSpec::Baseline, VerifierSpec::Ears, VerifierSpec::Typical, VerifierSpec::Greedy}) {
    VerifierSpec spec;
    spec.kind = kind;
    spec.beta = 0.3;
    auto o = ears::verify(spec, in);
    const std::string name = ears::to_string(kind);
    ASSERT_EQ(o.accepted.sizes(), at::IntArrayRef({B})) << name;
    ASSERT_EQ(o.emitted.sizes(), at::IntArrayRef({B, G + 1})) << name;
    ASSERT_EQ(o.path.sizes(), at::IntArrayRef({B, G})) << name;
    EXPECT_EQ(o.path.scalar_type(), at::kChar);
    EXPECT_TRUE(at::equal((o.emitted >= 0).sum(1), o.accepted + 1)) << name;
    at::Tensor idx = at::arange(G).unsqueeze(0);
    at::Tensor acc_mask = idx < o.accepted.unsqueeze(1);
    EXPECT_TRUE(at::equal(o.path != 0, acc_mask)) << name;
    EXPECT_TRUE(at::equal(o.emitted.narrow(1, 0, G).masked_select(acc_mask),
                          in.draft_tokens.masked_select(acc_mask))) << name;
    if (kind != VerifierSpec::Ears) {
      EXPECT_LE(o.path.max().item<int8_t>(), 1) << name;
    }
    // The verifier's own token always has target probability > 0.
    at::Tensor own = o.emitted.gather(1, o.accepted.unsqueeze(1));
    at::Tensor p_own = p.gather(1, o.accepted.view({B, 1, 1}).expand({B, 1, V})).squeeze(1).gather(1, own);
    EXPECT_TRUE((p_own > 0).all().item<bool>()) << name;
    if (kind == VerifierSpec::Baseline) {  // so do its accepted drafts
      at::Tensor p_x = p.narrow(1, 0, G).gather(2, in.draft_tokens.unsqueeze(2)).squeeze(2);
      EXPECT_TRUE((p_x.masked_select(acc_mask) > 0).all().item<bool>());
    }
  }
}

TEST(Verify, GammaZeroEmitsOneTargetToken) {
  ears::VerifyInput in;
  in.draft_tokens = at::zeros({2, 0}, at::kLong);
  in.target_probs = at::tensor({0.f, 1.f, 0.f, 0.f, 0.f, 1.f}).view({2, 1, 3});
  in.target_max = at::ones({2, 1});
  in.draft_probs = at::zeros({2, 0, 3});
  in.uniforms_accept = at::zeros({2, 0});
  in.uniforms_sample = at::full({2}, 0.5f);
  for (auto kind : {VerifierSpec::Baseline, VerifierSpec::Ears, VerifierSpec::Typical, VerifierSpec::Greedy}) {
    VerifierSpec spec;
    spec.kind = kind;
    auto o = ears::verify(spec, in);
    EXPECT_EQ(to_lvec(o.accepted), (std::vector<int64_t>{0, 0}));
    EXPECT_EQ(to_lvec(o.emitted), (std::vector<int64_t>{1, 2}));
  }
}

// The run-time validate()s refuse exactly the values outside decoders/param_ranges.h (the config
// tables check the same ranges at load time; config_parse_test pins their messages).
TEST(Verify, ValidateRefusesExactlyTheOutOfRangeValues) {
  const auto error_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const ears::Error& e) {
      return e.what();
    }
    return "";
  };
  const double inf = std::numeric_limits<double>::infinity();
  struct Case { double v; bool ok; };
  for (Case c : {Case{0, true}, {2.5, true}, {-1e-9, false}, {inf, false}, {std::nan(""), false}}) {
    ears::SamplingParams p;
    p.temperature = c.v;
    EXPECT_EQ(error_of([&] { ears::validate(p); }).empty(), c.ok) << c.v;
    VerifierSpec v;
    v.beta = c.v;
    const std::string e = error_of([&] { ears::validate(v); });
    EXPECT_EQ(e.empty(), c.ok) << c.v;
    if (!c.ok) EXPECT_NE(e.find("verifier.beta = "), std::string::npos) << e;
  }
  for (Case c : {Case{1, true}, {1e-9, true}, {0, false}, {1.0000001, false}, {std::nan(""), false}}) {
    ears::SamplingParams p;
    p.top_p = c.v;
    const std::string e = error_of([&] { ears::validate(p); });
    EXPECT_EQ(e.empty(), c.ok) << c.v;
    if (!c.ok) EXPECT_NE(e.find("is invalid; top_p must be > 0 and <= 1"), std::string::npos) << e;
    VerifierSpec v;
    v.typical_eps = c.v;
    EXPECT_EQ(error_of([&] { ears::validate(v); }).empty(), c.ok) << c.v;
  }
  VerifierSpec d;
  d.typical_delta = 0;
  EXPECT_NE(error_of([&] { ears::validate(d); }).find("delta must be > 0"), std::string::npos);
  ears::SamplingParams k;
  k.top_k = -1;
  EXPECT_NE(error_of([&] { ears::validate(k); }).find("sampling.top_k = -1 is invalid"), std::string::npos);
}

TEST(Verify, NamesRoundTripAndErrorsAreClear) {
  for (const char* n : {"baseline", "ears", "typical", "greedy"})
    EXPECT_EQ(ears::to_string(ears::parse_verifier_kind(n)), n);
  for (const char* n : {"max_prob", "entropy"}) EXPECT_EQ(ears::to_string(ears::parse_uncertainty(n)), n);
  try {
    ears::parse_verifier_kind("eagle");
    FAIL() << "no throw";
  } catch (const ears::Error& e) {
    EXPECT_NE(std::string(e.what()).find("baseline, ears, typical, greedy"), std::string::npos);
  }
  VerifierSpec bad;
  bad.beta = -1;
  EXPECT_THROW(ears::validate(bad), ears::Error);
  ears::VerifyInput in;
  in.target_probs = at::zeros({2, 3, 5});
  in.draft_tokens = at::zeros({2, 3}, at::kLong);  // should be [2, 2]
  in.uniforms_accept = at::zeros({2, 2});
  in.uniforms_sample = at::zeros({2});
  try {
    ears::verify(VerifierSpec{}, in);
    FAIL() << "no throw";
  } catch (const ears::Error& e) {
    EXPECT_NE(std::string(e.what()).find("draft_tokens must be [2, 2]"), std::string::npos) << e.what();
  }
}

}  // namespace
