// The engine's output law, end to end (issue 15, item 4). verify_kinds_test.cpp checks the verifiers
// as pure functions; here the REAL Engine::generate (model drafter, KV caches, rollback, the
// per-step uniforms, prefill sampling, bonus tokens) runs tens of thousands of times on a tiny
// random Qwen3 pair with a 16-token vocabulary, and the joint law of the first 3 emitted tokens
// is compared with the exact law by a chi-square test:
//   baseline  against the target's own sampling law p(y1) p(y2|y1) p(y3|y1,y2), from the
//             target's logits (CausalLM::forward over every 1- and 2-token continuation);
//   ears      against its induced law, derived below in a few lines of double-precision code
//             that share nothing with verify.cpp (not induced_distribution(), not even
//             process_logits: temperature / top-k / top-p are re-implemented here).
// With gamma = 1 and max_new_tokens = 3 the three tokens are: y1 sampled in the prefill; y2 the
// step-1 draft if accepted, else the correction; y3 the bonus (after an accepted draft) or the
// step-2 draft / correction (after a rejected one). A second chi-square test splits each cell
// by whether step 1 accepted its draft (GenStats::steps == 1), so the two branches are checked
// separately, not only their mixture. gamma = 2 adds a correction after an accepted draft within
// one step. Every configuration runs at T = 1 and at T = 0.7 with top-k and top-p.
//
// Thresholds. Cells with expected count < 5 are pooled into one bin (merged into the last bin
// if that pool is itself < 5); the statistic is compared with the chi-square critical value at
// alpha = 1e-4 for df = bins - 1 (computed below), and an observation in a cell of probability
// exactly 0 fails outright. Under a correct engine each comparison fails with probability
// ~1e-4 (the chi-square approximation with every expected count >= 5); this file makes 10
// such comparisons, so its false-alarm rate over seeds is <= 1e-3 (Bonferroni). The seeds are
// fixed: the test is deterministic, and it passes on the real engine (chi-square p-values
// 0.3-0.9). Requests of one run share a random stream only if their 32-bit generator seeds
// collide (sampling.h): ~0.4 expected pairs among 60000 requests, a negligible dependence.
// For EARS the test also requires the samples to REJECT the target's law (beta = 0.5 is
// visible: chi-square 25 000-120 000 against critical values below 800).
//
// Sensitivity, measured by planting bugs in a scratch copy of decoders/engine.cpp (engine_tests
// passes with the first one): each fails the tests it can affect, with chi-square 10 to 1000
// times the critical value:
//   acceptance uniforms = the draft's uniforms                      all 6 tests fail
//   correction / bonus uniform = the first draft uniform            all 6 fail
//   bonus = the draft's (gamma+1)-th token instead of a p_t sample  the 4 gamma-1 tests fail
//                                                                   (gamma 2: bonus is token 4)
//   EARS u = 1 - max softmax(raw logits), not the processed p_t     both EARS T = 0.7 tests fail
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "decoders/aten_operators.h"
#include "decoders/draft.h"
#include "decoders/engine.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "harness/train/checkpoint_writer.h"
#include "harness/train/target.h"
#include "tests/chi2.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace ears;

namespace {

constexpr int64_t V = 16;                         // vocabulary: V^3 = 4096 token cells
const std::vector<int32_t> kPrompt = {3, 9, 4};   // every request decodes from this prompt
constexpr double kAlpha = 1e-4;                   // per-comparison false-alarm rate
constexpr int64_t kChunk = 8192;                  // sequences per generate() call

// ---------------------------------------------------------------- chi-square

using ears::test::chi2_critical;
using ears::test::chi2_sf;

struct Chi2 {
  int64_t n = 0, bins = 0, df = 0;
  double stat = 0, critical = 0, p = 1;
  int64_t impossible = 0;  // observations in cells of probability exactly 0
  bool pass() const { return impossible == 0 && stat <= critical; }
  std::string str() const {
    char buf[256];
    std::snprintf(buf, sizeof buf, "n %ld, bins %ld, chi2 %.1f (df %ld, critical %.1f at alpha %.0e), p %.3g%s",
                  long(n), long(bins), stat, long(df), critical, kAlpha, p,
                  impossible ? ", IMPOSSIBLE OUTCOMES" : "");
    return buf;
  }
};

// Pearson's test of counts against probabilities (need not be normalised: they are).
Chi2 chi2_test(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  Chi2 r;
  const double total_p = std::accumulate(probs.begin(), probs.end(), 0.0);
  for (int64_t c : counts) r.n += c;
  std::vector<std::pair<double, double>> bins;  // (observed, expected)
  double pool_o = 0, pool_e = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = r.n * probs[i] / total_p;
    if (probs[i] == 0) {
      r.impossible += counts[i];
      continue;
    }
    if (e < 5) pool_o += counts[i], pool_e += e;
    else bins.emplace_back(counts[i], e);
  }
  if (pool_e >= 5 || bins.empty()) bins.emplace_back(pool_o, pool_e);
  else bins.back().first += pool_o, bins.back().second += pool_e;
  for (auto [o, e] : bins) r.stat += (o - e) * (o - e) / e;
  r.bins = static_cast<int64_t>(bins.size());
  r.df = std::max<int64_t>(1, r.bins - 1);
  r.critical = chi2_critical(kAlpha, static_cast<double>(r.df));
  r.p = chi2_sf(r.stat, static_cast<double>(r.df));
  return r;
}

// ---------------------------------------------------------------- the model pair

// A tiny random Qwen3 target and a draft that is a perturbed copy of it (so they agree often but
// not always), written with the repo's own checkpoint writer
// (harness/train/checkpoint_writer.h) in float32 and loaded in float32. Weights are scaled up from the training init so the next-token laws are far
// from uniform (logit std ~2.5) and depend on the context through attention and the MLP.
struct Pair {
  fs::path target_dir, draft_dir;
};

const Pair& pair_dirs() {
  static const Pair dirs = [] {
    const fs::path dir = test::temp_dir("engine_law");
    TargetArch a;
    a.hidden = 32, a.layers = 2, a.heads = 2, a.kv_heads = 1, a.head_dim = 16, a.intermediate = 64;
    a.max_position_embeddings = 64;
    a.tie_word_embeddings = false;
    const ModelConfig c = qwen3_config(a, V, /*eos_token_id=*/1);
    at::NoGradGuard no_grad;
    ParamMap t = init_qwen3_params(c, /*seed=*/20250615);
    at::Generator g = at::detail::createCPUGenerator(77);
    for (auto& [name, w] : t) {
      w = w.detach().clone();
      if (name.find("_proj.weight") != std::string::npos) w.mul_(10);  // std 0.2: context matters
    }
    t["model.embed_tokens.weight"] = at::randn({V, a.hidden}, g);
    t["lm_head.weight"] = at::randn({V, a.hidden}, g) * 0.3;
    ParamMap d;
    for (auto& [name, w] : t) d[name] = w.clone();
    d["lm_head.weight"] += at::randn({V, a.hidden}, g) * 0.2;
    d["model.layers.1.mlp.down_proj.weight"] += at::randn(d["model.layers.1.mlp.down_proj.weight"].sizes(), g) * 0.1;
    Pair p{dir / "target", dir / "draft"};
    save_qwen3(p.target_dir, t, c, at::kFloat);
    save_qwen3(p.draft_dir, d, c, at::kFloat);
    return p;
  }();
  return dirs;
}

const CausalLM& target() {
  static CausalLM m = CausalLM::load(pair_dirs().target_dir, at::kCPU, at::kFloat);
  return m;
}
const CausalLM& draft() {
  static CausalLM m = CausalLM::load(pair_dirs().draft_dir, at::kCPU, at::kFloat);
  return m;
}

// ---------------------------------------------------------------- the exact law

using Dist = std::vector<double>;

// Next-token logits of `m` after the prompt followed by every `len`-token continuation (row r:
// the continuation's tokens are r's base-V digits, most significant first): V^len rows of V.
std::vector<Dist> next_logits(const CausalLM& m, int len) {
  int64_t rows = 1;
  for (int i = 0; i < len; ++i) rows *= V;
  const int64_t P = static_cast<int64_t>(kPrompt.size()), T = P + len;
  std::vector<int64_t> ids(rows * T);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(kPrompt.begin(), kPrompt.end(), ids.begin() + r * T);
    for (int64_t k = 0, x = r; k < len; ++k, x /= V) ids[r * T + T - 1 - k] = x % V;
  }
  const at::Tensor in = at::tensor(ids, at::TensorOptions().dtype(at::kLong)).view({rows, T});
  const at::Tensor last = m.forward(in).logits.select(1, T - 1).to(at::kDouble).contiguous();
  std::vector<Dist> out(rows);
  for (int64_t r = 0; r < rows; ++r) out[r].assign(last.data_ptr<double>() + r * V, last.data_ptr<double>() + (r + 1) * V);
  return out;
}

// temperature -> top-k -> top-p -> softmax, in double, written out independently of
// sampling.cpp (HF semantics, sampling.h): top-k keeps the k largest logits; top-p then keeps
// the smallest set of most likely tokens whose mass reaches top_p. `margin` tracks how close any
// top-p cut came to flipping (the engine decides in float32).
Dist process(const Dist& logits, const SamplingParams& s, double& margin) {
  Dist z(V);
  for (int64_t i = 0; i < V; ++i) z[i] = logits[i] / s.temperature;
  std::vector<int64_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return z[a] > z[b]; });
  const int64_t k = s.top_k > 0 ? std::min<int64_t>(s.top_k, V) : V;
  Dist p(V, 0.0);
  double total = 0;
  for (int64_t r = 0; r < k; ++r) total += p[order[r]] = std::exp(z[order[r]] - z[order[0]]);
  for (double& x : p) x /= total;
  if (s.top_p < 1) {
    double before = 0;  // mass of the more likely tokens
    int64_t r = 0;
    for (; r < k && (r == 0 || before < s.top_p); ++r) {
      if (r > 0) margin = std::min(margin, std::fabs(before - s.top_p));
      before += p[order[r]];
    }
    if (r < k) margin = std::min(margin, std::fabs(before - s.top_p));
    for (int64_t j = r; j < k; ++j) p[order[j]] = 0;
    for (double& x : p) x /= before;
  }
  return p;
}

// One verified position: draft x ~ q, accepted with probability min(1, p(x)/q(x) + beta·u),
// u = 1 - max p (beta = 0: baseline's min(1, p/q)); on rejection the engine samples the residual
// norm(max(p - q, 0)), or p itself when that residual is all zero (verify.cpp).
struct Position {
  Dist accepted;  // q(x)·a(x): the draft x is drawn and accepted
  double reject = 0;
  Dist residual;  // the correction's law
  Dist law;       // accepted + reject·residual: the emitted token's law
};
Position position(const Dist& p, const Dist& q, double beta) {
  Position o;
  const double u = 1 - *std::max_element(p.begin(), p.end());
  o.accepted.assign(V, 0.0);
  double acc = 0, resid_mass = 0;
  o.residual.assign(V, 0.0);
  for (int64_t x = 0; x < V; ++x) {
    if (q[x] > 0) acc += o.accepted[x] = q[x] * std::min(1.0, p[x] / q[x] + beta * u);
    resid_mass += o.residual[x] = std::max(p[x] - q[x], 0.0);
  }
  o.reject = 1 - acc;
  for (int64_t x = 0; x < V; ++x) o.residual[x] = resid_mass > 0 ? o.residual[x] / resid_mass : p[x];
  o.law.resize(V);
  for (int64_t x = 0; x < V; ++x) o.law[x] = o.accepted[x] + o.reject * o.residual[x];
  return o;
}

struct Law {
  std::vector<double> target;  // [V^3] p(y1) p(y2|y1) p(y3|y1,y2): the target's own law
  std::vector<double> tokens;  // [V^3] the verifier's law of (y1, y2, y3)
  std::vector<double> split;   // gamma 1: [2, V^3]: step 1 accepted its draft (0) or not (1)
  double accept_rate = 0;      // P(step 1 accepts its draft)
  double margin = 1;           // closest top-p call
};

Law exact_law(const DecodeParams& dp) {
  const double beta = dp.verifier.kind == VerifierSpec::Ears ? dp.verifier.beta : 0.0;
  Law L;
  auto proc = [&](const std::vector<Dist>& rows) {
    std::vector<Dist> out;
    for (const Dist& r : rows) out.push_back(process(r, dp.sampling, L.margin));
    return out;
  };
  const Dist p1 = proc(next_logits(target(), 0))[0];
  const std::vector<Dist> p2 = proc(next_logits(target(), 1)), p3 = proc(next_logits(target(), 2));
  const std::vector<Dist> q2 = proc(next_logits(draft(), 1)), q3 = proc(next_logits(draft(), 2));
  const int64_t V3 = V * V * V;
  L.target.assign(V3, 0.0);
  L.tokens.assign(V3, 0.0);
  L.split.assign(2 * V3, 0.0);
  for (int64_t y1 = 0; y1 < V; ++y1) {
    const Position s2 = position(p2[y1], q2[y1], beta);
    L.accept_rate += p1[y1] * (1 - s2.reject);
    for (int64_t y2 = 0; y2 < V; ++y2) {
      const int64_t h = y1 * V + y2;
      const Position s3 = position(p3[h], q3[h], beta);
      for (int64_t y3 = 0; y3 < V; ++y3) {
        const int64_t cell = h * V + y3;
        L.target[cell] = p1[y1] * p2[y1][y2] * p3[h][y3];
        if (dp.gamma == 1) {
          // accepted: y2 = the draft, y3 = the bonus ~ p; rejected: y2 = the correction, y3 comes
          // from step 2 (a fresh draft, verified).
          L.split[cell] = p1[y1] * s2.accepted[y2] * p3[h][y3];
          L.split[V3 + cell] = p1[y1] * s2.reject * s2.residual[y2] * s3.law[y3];
          L.tokens[cell] = L.split[cell] + L.split[V3 + cell];
        } else {
          // gamma >= 2: y2 and y3 are both verified positions (within step 1, or y3 in step 2).
          L.tokens[cell] = p1[y1] * s2.law[y2] * s3.law[y3];
        }
      }
    }
  }
  return L;
}

// ---------------------------------------------------------------- the engine's samples

struct Sample {
  std::vector<int64_t> tokens, split;
  int64_t accepted_first = 0, n = 0;
  double seconds = 0;
};

Sample run_engine(const DecodeParams& dp, int64_t n, uint64_t seed) {
  std::unique_ptr<Drafter> drafter = make_model_drafter(draft(), V);
  Engine engine(target(), drafter.get(), nullptr);
  const int64_t V3 = V * V * V;
  Sample s;
  s.tokens.assign(V3, 0);
  s.split.assign(2 * V3, 0);
  const double t0 = now_s();
  for (int64_t start = 0; start < n; start += kChunk) {
    std::vector<GenRequest> batch;
    for (int64_t i = start; i < std::min(n, start + kChunk); ++i) {
      GenRequest r;
      r.prompt = kPrompt;
      r.run_seed = seed;
      r.key = "law-" + std::to_string(i);
      batch.push_back(std::move(r));
    }
    const std::vector<GenResult> res = engine.generate(batch, dp);
    for (const GenResult& r : res) {
      if (r.ids.size() != 3 || r.finish_reason != "length" || !r.error.empty()) {
        ADD_FAILURE() << "unexpected result: " << r.ids.size() << " ids, finish " << r.finish_reason << " " << r.error;
        return s;
      }
      const int64_t cell = (int64_t(r.ids[0]) * V + r.ids[1]) * V + r.ids[2];
      s.tokens[cell] += 1;
      const bool accepted = r.stats.steps == 1;  // gamma 1: step 1 emitted draft + bonus
      s.split[(accepted ? 0 : V3) + cell] += 1;
      s.accepted_first += accepted;
      s.n += 1;
    }
  }
  s.seconds = now_s() - t0;
  return s;
}

DecodeParams params(VerifierSpec::Kind kind, int gamma, double temperature, int64_t top_k, double top_p) {
  DecodeParams p;
  p.sampling.temperature = temperature;
  p.sampling.top_k = top_k;
  p.sampling.top_p = top_p;
  p.gamma = gamma;
  p.max_new_tokens = 3;
  p.verifier.kind = kind;
  p.verifier.beta = 0.5;
  p.measure_distortion = false;
  return p;
}

std::string describe(const DecodeParams& p) {
  char beta[32] = "", buf[200];
  if (p.verifier.kind == VerifierSpec::Ears) std::snprintf(beta, sizeof beta, " beta %.2g", p.verifier.beta);
  std::snprintf(buf, sizeof buf, "%s%s gamma %d, T %.2g, top_k %ld, top_p %.2g", to_string(p.verifier.kind).c_str(), beta,
                p.gamma, p.sampling.temperature, long(p.sampling.top_k), p.sampling.top_p);
  return buf;
}

// Runs `n` sequences and checks the token law (and, for gamma 1, the law split by the step-1
// branch). For EARS it also checks that the samples are NOT the target's law: beta 0.5 must be
// visible at this sample size, or the EARS comparison would prove little.
void check_law(const DecodeParams& dp, int64_t n, uint64_t seed) {
  const std::string what = describe(dp);
  SCOPED_TRACE(what);
  const Law law = exact_law(dp);
  ASSERT_GT(law.margin, 1e-5) << "a top-p cut is within float32 noise of flipping; pick another model seed";
  if (dp.verifier.kind == VerifierSpec::Baseline && dp.gamma == 1) {
    // The test's own algebra: baseline's split law sums to the target's law.
    double err = 0;
    for (size_t i = 0; i < law.target.size(); ++i) err = std::max(err, std::fabs(law.tokens[i] - law.target[i]));
    ASSERT_LT(err, 1e-12);
  }
  const Sample s = run_engine(dp, n, seed);
  ASSERT_EQ(s.n, n);
  const bool ears = dp.verifier.kind == VerifierSpec::Ears;
  const Chi2 tok = chi2_test(s.tokens, ears ? law.tokens : law.target);
  std::printf("[law] %s: %.1f s for %ld sequences\n", what.c_str(), s.seconds, long(n));
  std::printf("[law]   tokens vs %s: %s\n", ears ? "EARS induced law" : "target law", tok.str().c_str());
  EXPECT_TRUE(tok.pass()) << "first 3 tokens: " << tok.str();
  if (dp.gamma == 1) {
    const Chi2 sp = chi2_test(s.split, law.split);
    std::printf("[law]   (tokens, step-1 branch): %s; step-1 acceptance %.4f (exact %.4f)\n", sp.str().c_str(),
                double(s.accepted_first) / n, law.accept_rate);
    EXPECT_TRUE(sp.pass()) << "first 3 tokens split by step-1 acceptance: " << sp.str();
  }
  if (ears) {
    const Chi2 off = chi2_test(s.tokens, law.target);
    std::printf("[law]   EARS tokens vs the target law (must be rejected): %s\n", off.str().c_str());
    EXPECT_FALSE(off.pass()) << "EARS beta " << dp.verifier.beta << " is indistinguishable from the target law";
  }
  std::fflush(stdout);
}

constexpr int64_t kN = 60000;

}  // namespace

TEST(EngineLaw, BaselineIsTheTargetLawAtT1) {
  check_law(params(VerifierSpec::Baseline, 1, 1.0, 0, 1.0), kN, 101);
}
TEST(EngineLaw, BaselineIsTheTargetLawAtT07TopKTopP) {
  check_law(params(VerifierSpec::Baseline, 1, 0.7, 8, 0.9), kN, 102);
}
TEST(EngineLaw, EarsIsItsInducedLawAtT1) {
  check_law(params(VerifierSpec::Ears, 1, 1.0, 0, 1.0), kN, 103);
}
TEST(EngineLaw, EarsIsItsInducedLawAtT07TopKTopP) {
  check_law(params(VerifierSpec::Ears, 1, 0.7, 8, 0.9), kN, 104);
}
TEST(EngineLaw, BaselineGamma2IsTheTargetLawAtT1) {
  check_law(params(VerifierSpec::Baseline, 2, 1.0, 0, 1.0), kN, 106);
}
TEST(EngineLaw, EarsGamma2IsItsInducedLawAtT07TopKTopP) {
  check_law(params(VerifierSpec::Ears, 2, 0.7, 8, 0.9), kN, 105);
}
