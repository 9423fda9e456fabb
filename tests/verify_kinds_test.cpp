// Tests for decoders/verify (baseline, EARS, typical, greedy; induced distributions). The
// statistical tests use fixed seeds, run verify on large batches (rows are independent trials)
// and compare empirical distributions to the exact ones with a chi-square goodness-of-fit test
// or binomial z-tests (5σ). The exact output law of a position is computed by position_law()
// below, in double precision and from the rules as verify.h states them: it shares nothing with
// verify.cpp (not induced_distribution(), which is itself checked against it). Each chi-square
// test makes several comparisons and passes each at p > 1e-3 / (its number of comparisons)
// (Bonferroni, as engine_law_test does), so a correct verify fails a test with probability
// <= 1e-3; every position it compares must be reached at least 1000 times.
//
// Sensitivity, measured by planting bugs in a scratch copy of decoders/verify.cpp (each fails
// only the tests listed; chi-square p-values of the failing positions 1e-13 and below):
//   EARS entropy u = H / log(V - 1), not H / log V        VerifyEars.AcceptanceAndOutputFollowTheIndependentLaw
//                                                          (entropy positions 0-2, acceptance rates),
//                                                          InducedDistribution.EqualsTheIndependentLaw
//   EARS max_prob u = max p_t, not 1 - max p_t             VerifyEars.AcceptanceAndOutput... (max_prob
//                                                          positions 0-2), InducedDistribution.Equals...,
//                                                          and three older exact tests (EntropyMode...,
//                                                          BaselineIsTarget..., TemperatureZero)
//   verify: typical accepts p_t(x) >= threshold, not >     VerifyTypical.EmittedTokensFollowTheIndependentLaw
//                                                          (position 0, on the threshold)
//   induced_distribution: the same >=                      InducedDistribution.EqualsTheIndependentLaw
//   induced_distribution: residual not normalised          InducedDistribution.EqualsTheIndependentLaw and
//                                                          .BaselineIsTargetAndOthersAreDistributions
//                                                          (verify() needs no normalisation: sample_from_probs
//                                                          normalises)
//   verify: correction drawn from p_t, not the residual    VerifyBaseline.EmittedTokens...,
//                                                          VerifyEars.AcceptanceAndOutput..., EntropyMode...
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

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
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

// ---------------------------------------------------------------- the exact law, independently

using Dist = std::vector<double>;

// u of EARS at one position: 1 - max p (MaxProb; the tests pass target_max = max p) or the
// entropy -Σ p ln p over ln V, V counting the zero-probability ids too (Entropy).
double ears_uncertainty(const VerifierSpec& spec, const Dist& p) {
  if (spec.uncertainty == VerifierSpec::MaxProb) return 1 - *std::max_element(p.begin(), p.end());
  double h = 0;
  for (double x : p) h -= x > 0 ? x * std::log(x) : 0.0;
  return std::min(1.0, h / std::log(double(p.size())));
}

// Typical's threshold min(ε, δ·exp(-H)), H = -Σ p log(p + 1e-5).
double typical_threshold(const VerifierSpec& spec, const Dist& p) {
  double h = 0;
  for (double x : p) h -= x * std::log(x + 1e-5);
  return std::min(spec.typical_eps, spec.typical_delta * std::exp(-h));
}

// The law of the token one verified position emits when its draft x is drawn from q, in double
// precision, from verify.h's rules: P(out = v) = q(v)·a(v) + (1 - Σ_x q(x)·a(x))·r(v), with
//   a(x) = P(accept x): baseline accepts iff U <= p/q (and p > 0): min(1, p/q); EARS accepts iff
//          p/q >= max(U - β·u, 0), U ~ Uniform[0, 1): iff U <= p/q + β·u, so min(1, p/q + β·u)
//          (q(x) > 0 for every drawn x: the 1e-10 floor never applies); typical: 1 iff
//          p(x) > min(ε, δ·exp(-H)); greedy: 1 iff x is the argmax.
//   r      the correction's law: norm(max(0, p - q)) for baseline and EARS, p itself when that
//          residual is all zero; p for typical; one-hot at the argmax for greedy.
// Baseline must come out as p (checked by the tests that use it).
Dist position_law(const VerifierSpec& spec, const Dist& p, const Dist& q) {
  const size_t V = p.size();
  const size_t top = size_t(std::max_element(p.begin(), p.end()) - p.begin());
  const double slack = spec.kind == VerifierSpec::Ears ? spec.beta * ears_uncertainty(spec, p) : 0.0;
  const double thr = spec.kind == VerifierSpec::Typical ? typical_threshold(spec, p) : 0.0;
  Dist accepted(V, 0.0), r(V, 0.0);
  double acc = 0, resid_mass = 0;
  for (size_t x = 0; x < V; ++x) {
    double a = 0;
    switch (spec.kind) {
      case VerifierSpec::Baseline:
      case VerifierSpec::Ears: a = q[x] > 0 ? std::min(1.0, p[x] / q[x] + slack) : 0.0; break;
      case VerifierSpec::Typical: a = p[x] > thr ? 1.0 : 0.0; break;
      case VerifierSpec::Greedy: a = x == top ? 1.0 : 0.0; break;
    }
    acc += accepted[x] = q[x] * a;
    resid_mass += r[x] = std::max(p[x] - q[x], 0.0);
  }
  for (size_t x = 0; x < V; ++x) {
    if (spec.kind == VerifierSpec::Greedy) r[x] = x == top ? 1.0 : 0.0;
    else if (spec.kind == VerifierSpec::Typical || resid_mass == 0) r[x] = p[x];
    else r[x] /= resid_mass;
  }
  Dist law(V);
  for (size_t x = 0; x < V; ++x) law[x] = accepted[x] + (1 - acc) * r[x];
  return law;
}

// Chi-square of every position's emitted tokens against `expected` (one law per position) at
// per-comparison level `alpha`; every position must be reached >= 1000 times (the sample is sized
// so that it is: a position too rare to test is a failure, not a silent skip).
void expect_positions_match(const Counts& k, const std::vector<Dist>& expected, const std::string& what,
                            double alpha) {
  for (size_t i = 0; i < expected.size(); ++i) {
    int64_t n = 0;
    for (auto v : k.emitted[i]) n += v;
    EXPECT_GE(n, 1000) << what << " position " << i << " reached too rarely to test";
    const double pv = chi2_pvalue(k.emitted[i], expected[i]);
    if (std::getenv("EARS_VERIFY_TEST_VERBOSE")) std::printf("%s pos %zu n %ld p %.4g\n", what.c_str(), i, long(n), pv);
    EXPECT_GT(pv, alpha) << what << " position " << i << " (n = " << n << ")";
  }
}

// The one-hot q the fixed-draft modes propose from (the drafter's argmax per position).
at::Tensor drafting_q(const Case& c, Drafting mode) {
  return mode == Drafting::Sampled ? c.q : at::zeros_like(c.q).scatter_(1, c.q.argmax(-1, true), 1.0);
}

// position_law at every draft position of c, then the bonus position's p_t.
std::vector<Dist> case_law(const VerifierSpec& spec, const Case& c, Drafting mode) {
  const at::Tensor q = drafting_q(c, mode);
  std::vector<Dist> want;
  for (int64_t i = 0; i < q.size(0); ++i) want.push_back(position_law(spec, to_vec(c.p[i]), to_vec(q[i])));
  want.push_back(to_vec(c.p[q.size(0)]));  // the bonus is drawn from p_t itself
  return want;
}

TEST(VerifyBaseline, EmittedTokensAreDistributedAsTarget) {
  VerifierSpec spec;  // baseline
  uint64_t seed = 100;
  const double alpha = 1e-3 / (2 * (6 + 4 + 6));  // 2 modes x (G + 1) positions per V below
  for (int64_t V : {8, 16, 64}) {
    for (Drafting mode : {Drafting::Sampled, Drafting::OneHot}) {
      const int64_t G = V == 16 ? 3 : 5;
      auto g = gen(seed++);
      // One-hot drafts are accepted with probability p_t(argmax q): sharper targets at V = 64, so
      // that all G + 1 positions are reached often enough to test.
      Case c = mode == Drafting::Sampled ? make_case(g, V, G, 1.0, 0.8) : make_case(g, V, G, V == 64 ? 4.0 : 2.5, 0.5);
      Counts k = run_trials(spec, c, mode, 200000, seed++);
      std::vector<Dist> want;
      for (int64_t i = 0; i <= G; ++i) want.push_back(to_vec(c.p[i]));
      // The test's own algebra: position_law of baseline is p_t (up to the float32 rows' sums).
      const std::vector<Dist> law = case_law(spec, c, mode);
      for (int64_t i = 0; i <= G; ++i)
        for (int64_t v = 0; v < V; ++v) ASSERT_NEAR(law[i][v], want[i][v], 1e-6);
      expect_positions_match(k, want, "baseline V=" + std::to_string(V) +
                                          (mode == Drafting::Sampled ? " sampled" : " one-hot"), alpha);
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

// EARS end to end, max_prob and entropy uncertainty: the emitted tokens at every position follow
// position_law (computed here, not by induced_distribution), per-id acceptance and pardon rates
// are min(1, p/q + β·u) and its gap to min(1, p/q), and the output is measurably not p_t. Entropy
// runs at V = 6, where dividing by log(V - 1) instead of log V changes u by 11% (at V = 16, 2%).
TEST(VerifyEars, AcceptanceAndOutputFollowTheIndependentLaw) {
  uint64_t seed = 300;
  const int64_t G = 3;
  const double alpha = 1e-3 / (2 * 2 * (G + 1));  // 2 uncertainties x 2 modes x (G + 1) positions
  for (auto unc : {VerifierSpec::MaxProb, VerifierSpec::Entropy}) {
    for (Drafting mode : {Drafting::Sampled, Drafting::OneHot}) {
      VerifierSpec spec;
      spec.kind = VerifierSpec::Ears;
      spec.beta = 0.25;
      spec.uncertainty = unc;
      const int64_t V = unc == VerifierSpec::Entropy ? 6 : 16;
      auto g = gen(seed++);
      Case c = make_case(g, V, G, 0.6, 0.8);  // flat-ish target: large uncertainty
      Counts k = run_trials(spec, c, mode, 200000, seed++);
      const std::vector<Dist> want = case_law(spec, c, mode);
      const std::string what = std::string("ears ") + ears::to_string(unc) +
                               (mode == Drafting::Sampled ? " sampled" : " one-hot");
      expect_positions_match(k, want, what, alpha);
      expect_acceptance_rates(k, c, spec.beta, ears_uncertainty(spec, to_vec(c.p[0])), mode);
      // Power: the output at position 0 is measurably not p_t.
      double tv = 0;
      const Dist p0 = to_vec(c.p[0]);
      for (int64_t v = 0; v < V; ++v) tv += 0.5 * std::fabs(want[0][v] - p0[v]);
      EXPECT_GT(tv, 0.01) << what;
      EXPECT_LT(chi2_pvalue(k.emitted[0], p0), alpha) << what;
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

// induced_distribution() (the engine's distortion metric) is position_law, for every kind: EARS
// with both uncertainties, at a β small enough that few acceptances clip at 1 and at one large
// enough that many do; random rows with zeros in p and q, one-hot q rows, rows with q = p (the
// all-zero residual), and a row with three tokens exactly at typical's threshold ε = 2^-4 (for the
// last spec; exact in float and double). Typical rows with a token within 1e-5 of the threshold but
// not on it are left out: float32 and double may call those differently.
TEST(InducedDistribution, EqualsTheIndependentLaw) {
  auto g = gen(10);
  const int64_t N = 300, V = 12;
  at::Tensor p = random_dist(g, N, V, 1.0, 0.25), q = random_dist(g, N, V, 1.5, 0.25);
  q.narrow(0, 0, 30).zero_().scatter_(1, at::randint(V, {30, 1}, g), 1.0);
  q.narrow(0, 30, 30).copy_(p.narrow(0, 30, 30));
  p[60].zero_().narrow(0, 0, 6).copy_(at::tensor({0.75f, 0.0625f, 0.0625f, 0.0625f, 0.03125f, 0.03125f}));
  q[60].zero_().narrow(0, 0, 7).copy_(at::tensor({0.1f, 0.2f, 0.2f, 0.2f, 0.1f, 0.1f, 0.1f}));
  const at::Tensor m = std::get<0>(p.max(-1));
  std::vector<VerifierSpec> specs(8);
  specs[1].kind = specs[2].kind = specs[3].kind = specs[4].kind = VerifierSpec::Ears;
  specs[2].uncertainty = specs[4].uncertainty = VerifierSpec::Entropy;
  specs[3].beta = specs[4].beta = 0.9;
  specs[5].kind = specs[7].kind = VerifierSpec::Typical;
  specs[6].kind = VerifierSpec::Greedy;
  specs[7].typical_eps = 0.0625;
  ASSERT_EQ(typical_threshold(specs[7], to_vec(p[60])), 0.0625);
  for (const VerifierSpec& spec : specs) {
    const std::string what = ears::to_string(spec.kind) + " " + ears::to_string(spec.uncertainty) +
                             " beta " + std::to_string(spec.beta);
    const at::Tensor got = ears::induced_distribution(spec, p, q, m);
    int checked = 0;
    for (int64_t b = 0; b < N; ++b) {
      const Dist pb = to_vec(p[b]), want = position_law(spec, pb, to_vec(q[b])), have = to_vec(got[b]);
      const double thr = typical_threshold(spec, pb);
      if (spec.kind == VerifierSpec::Typical &&
          std::any_of(pb.begin(), pb.end(), [&](double x) { return x != thr && std::fabs(x - thr) < 1e-5; }))
        continue;
      ++checked;
      for (int64_t v = 0; v < V; ++v) ASSERT_NEAR(have[v], want[v], 1e-5) << what << " row " << b << " id " << v;
    }
    EXPECT_GT(checked, N * 9 / 10) << what;
  }
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

// Typical acceptance, statistically: the emitted tokens at every position follow position_law.
// ε = 2^-4 is exact in float and double, and position 0's target puts three tokens at exactly
// p = ε, its threshold (δ·e^-H ≈ 0.116 > ε), drafted with probability 0.6 in all: accepting
// p >= threshold instead of p > threshold moves most of the output's mass. The other draft
// positions are random, with thresholds on the entropy branch and no token within 1e-4 of them
// (so float32 and double decide alike).
TEST(VerifyTypical, EmittedTokensFollowTheIndependentLaw) {
  const int64_t V = 8, G = 3;
  auto g = gen(400);
  Case c = make_case(g, V, G, 0.6, 0.8);
  c.p[0].copy_(at::tensor({0.75f, 0.0625f, 0.0625f, 0.0625f, 0.03125f, 0.03125f, 0.f, 0.f}));
  c.q[0].copy_(at::tensor({0.1f, 0.2f, 0.2f, 0.2f, 0.1f, 0.1f, 0.1f, 0.f}));
  c.m = std::get<0>(c.p.max(-1));
  VerifierSpec spec;
  spec.kind = VerifierSpec::Typical;
  spec.typical_eps = 0.0625;
  ASSERT_EQ(typical_threshold(spec, to_vec(c.p[0])), 0.0625);
  for (int64_t i = 1; i < G; ++i) {
    const Dist p = to_vec(c.p[i]);
    const double thr = typical_threshold(spec, p);
    ASSERT_LT(thr, spec.typical_eps) << "position " << i;
    for (double x : p) ASSERT_GT(std::fabs(x - thr), 1e-4) << "position " << i;
  }
  Counts k = run_trials(spec, c, Drafting::Sampled, 200000, 401);
  expect_positions_match(k, case_law(spec, c, Drafting::Sampled), "typical", 1e-3 / (G + 1));
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
  // A positive temperature below 0.01 overflows logits / T (1e-39 was a LibTorch "cannot be
  // converted to float" error, 1e-30 "non-finite logits").
  for (Case c : {Case{0, true}, {0.01, true}, {0.0099, false}, {1e-39, false}})
    EXPECT_EQ(error_of([&] { ears::validate(ears::SamplingParams{c.v}); }).empty(), c.ok) << c.v;
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
