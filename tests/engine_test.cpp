// The speculative decoding engine (decoders/engine.h) and its drafters (decoders/eagle3.h,
// decoders/draft.h) on the golden fixtures (shared/fixtures/README.md): EAGLE-3 head numerics,
// T = 0 equivalence with plain greedy decoding for every verifier / gamma / draft kind / draft
// sampling mode / batch layout, drafter rollback against a fresh start, self-drafting, statistics
// bookkeeping, host syncs, batch independence, stop conditions and EARS pardons.
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <cstdio>

#include "decoders/draft.h"
#include "decoders/eagle3.h"
#include "decoders/engine.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "harness/base/error.h"
#include "tests/kernel_paths.h"
#include "tests/tensor_test_util.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ears;
using ears::test::max_abs;
using ears::test::row_tensor;
using ears::test::to_tensor;

namespace {

fs::path fixture(const std::string& name) { return test::shared_dir() / "fixtures" / name; }

const json& expected(const std::string& model) {
  static std::map<std::string, json> cache;
  auto it = cache.find(model);
  if (it == cache.end()) it = cache.emplace(model, json::parse(test::read_file(fixture(model) / "expected.json"))).first;
  return it->second;
}

// Loaded once per process. qwen3-tiny-bf16 is upcast to float32 at load: a slightly different
// draft model (bf16-rounded weights, tied embeddings).
const CausalLM& target() {
  static CausalLM m = CausalLM::load(fixture("qwen3-tiny"), at::kCPU, at::kFloat);
  return m;
}
const CausalLM& bf16_draft() {
  static CausalLM m = CausalLM::load(fixture("qwen3-tiny-bf16"), at::kCPU, at::kFloat);
  return m;
}
const Eagle3Head& head() {
  static Eagle3Head h = Eagle3Head::load(fixture("eagle3-tiny"), target());
  return h;
}


std::vector<int64_t> ids64(const json& j) { return j.get<std::vector<int64_t>>(); }
std::vector<int32_t> ids32(const json& j) { return j.get<std::vector<int32_t>>(); }



std::vector<int64_t> to_vec(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous().view({-1});
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Prompts of different lengths: the three qwen3-tiny fixture prompts (1, 7, 33 tokens), the
// eagle3-tiny 12-token prompt and two more.
std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> p;
  for (const auto& c : expected("qwen3-tiny")["cases"]) p.push_back(ids32(c["prompt_ids"]));
  p.push_back(ids32(expected("eagle3-tiny")["cases"][0]["prompt_ids"]));
  p.push_back({5, 77, 150, 9, 230});
  p.push_back({300, 2, 44, 91, 18, 260, 133, 71, 12, 8, 199, 3, 54, 66, 250, 101, 17, 29, 40, 311});
  return p;
}

GenRequest request(const std::vector<int32_t>& prompt, const std::string& key, uint64_t seed = 7) {
  GenRequest r;
  r.prompt = prompt;
  r.run_seed = seed;
  r.key = key;
  return r;
}

std::vector<GenRequest> requests(const std::vector<size_t>& which, uint64_t seed = 7) {
  const auto all = prompts();
  std::vector<GenRequest> out;
  for (size_t i : which) out.push_back(request(all.at(i), "req-" + std::to_string(i), seed));
  return out;
}

DecodeParams params(VerifierSpec::Kind kind, int gamma, double temperature, int64_t max_new, bool draft_greedy,
                    double beta = 0.1) {
  DecodeParams p;
  p.sampling.temperature = temperature;
  p.gamma = gamma;
  p.max_new_tokens = max_new;
  p.draft_greedy = draft_greedy;
  p.verifier.kind = kind;
  p.verifier.beta = beta;
  return p;
}

template <class T>
T sum(const std::vector<T>& v) {
  return std::accumulate(v.begin(), v.end(), T{0});
}
template <class T, size_t N>
T sum(const std::array<T, N>& v) {
  return std::accumulate(v.begin(), v.end(), T{0});
}

// The bookkeeping identities every result must satisfy.
void check_stats(const GenResult& r, int64_t gamma, int64_t max_new, const std::string& ctx) {
  SCOPED_TRACE(ctx);
  const GenStats& s = r.stats;
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(r.finish_reason == "length" || r.finish_reason == "eos") << r.finish_reason;
  EXPECT_EQ(s.emitted(), s.accepted + s.corrections + s.bonus);
  EXPECT_EQ(s.steps, s.corrections + s.bonus);
  ASSERT_EQ(static_cast<int64_t>(s.accept_length_hist.size()), gamma + 2);
  ASSERT_EQ(static_cast<int64_t>(s.accepted_per_position.size()), gamma);
  EXPECT_EQ(sum(s.accept_length_hist), s.steps);
  EXPECT_EQ(s.accept_length_hist[0], 0);  // every step emits at least one token
  int64_t emitted_by_hist = 0;
  for (size_t n = 0; n < s.accept_length_hist.size(); ++n) emitted_by_hist += static_cast<int64_t>(n) * s.accept_length_hist[n];
  EXPECT_EQ(emitted_by_hist, s.emitted());
  EXPECT_EQ(s.accept_length_hist.back(), s.bonus);
  EXPECT_EQ(sum(s.accepted_per_position), s.accepted);
  for (size_t k = 1; k < s.accepted_per_position.size(); ++k)
    EXPECT_LE(s.accepted_per_position[k], s.accepted_per_position[k - 1]);  // accepted prefixes
  EXPECT_EQ(s.drafted, gamma * s.steps);
  EXPECT_LE(s.accepted, s.drafted);
  EXPECT_EQ(sum(s.accepted_by_u), s.accepted);
  EXPECT_EQ(sum(s.pardoned_by_u), s.pardoned);
  EXPECT_EQ(sum(s.drafted_by_u), s.distortion_n);
  EXPECT_LE(s.pardoned, s.accepted);
  // One device->host sync for the prefill and one per step while the request was active (also
  // when it finished before its batch neighbours).
  EXPECT_EQ(s.host_syncs, s.steps + 1);
  const int64_t n_ids = static_cast<int64_t>(r.ids.size());
  EXPECT_LE(n_ids, s.emitted() + 1);
  EXPECT_GT(n_ids, s.emitted() + 1 - (gamma + 1));  // only the last step may be cut short
  EXPECT_LE(n_ids, max_new);
  if (r.finish_reason == "length") {
    EXPECT_EQ(n_ids, max_new);
  }
}

// Plain greedy decoding of the target (Engine without a drafter, T = 0), per prompt, memoised.
const std::vector<int32_t>& greedy_reference(const std::vector<int32_t>& prompt, int64_t max_new) {
  static std::map<std::pair<std::vector<int32_t>, int64_t>, std::vector<int32_t>> memo;
  auto key = std::make_pair(prompt, max_new);
  auto it = memo.find(key);
  if (it == memo.end()) {
    Engine plain(target(), nullptr, nullptr);
    auto res = plain.generate({request(prompt, "ref")}, params(VerifierSpec::Baseline, 1, 0.0, max_new, false));
    check_stats(res.at(0), 0, max_new, "plain greedy");
    EXPECT_EQ(res[0].finish_reason, "length");
    it = memo.emplace(key, res[0].ids).first;
  }
  return it->second;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// 1. EAGLE-3 head and drafter against eagle3-tiny/expected.json

TEST(Eagle3Fixture, HeadMatchesPrefillAndChain) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  const json& e = expected("eagle3-tiny");
  const double tol = 1e-4;
  const CausalLM& t = target();
  const Eagle3Head& h = head();
  EXPECT_EQ(h.aux_layers(), (std::vector<int>{2, 3, 3}));
  EXPECT_FALSE(h.own_embeddings());
  EXPECT_EQ(h.draft_vocab(), 96);
  EXPECT_EQ(to_vec(h.draft_to_target()), ids64(e["hot_target_ids"]));

  for (const auto& c : e["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto prompt = ids64(c["prompt_ids"]);
    const int64_t L = static_cast<int64_t>(prompt.size());
    ForwardOptions fo;
    fo.aux_layers = h.aux_layers();
    ForwardOutput tout = t.forward(row_tensor(prompt), fo);
    const at::Tensor feats = at::cat(tout.aux_hidden, -1);  // [1, L, 192]
    EXPECT_LE(max_abs(feats[0], to_tensor(c["target_aux_features"])), tol);
    const int64_t x_L = tout.logits[0][L - 1].argmax().item<int64_t>();
    EXPECT_EQ(x_L, c["target_next_token"].get<int64_t>());

    std::vector<int64_t> tokens(prompt.begin() + 1, prompt.end());
    tokens.push_back(x_L);
    EXPECT_EQ(tokens, ids64(c["prefill"]["input_token_ids"]));

    // Head alone on the fixture's features, then on ours (what the drafter sees).
    for (int src = 0; src < 2; ++src) {
      SCOPED_TRACE(src == 0 ? "fixture features" : "target features");
      const at::Tensor in_feats = src == 0 ? to_tensor(c["target_aux_features"]).unsqueeze(0) : feats;
      KVCache cache = h.new_cache(1, L + 8);
      Eagle3Head::Output o = h.forward(row_tensor(tokens), in_feats, /*from_target=*/true, cache);
      ASSERT_EQ(o.logits.sizes(), (at::IntArrayRef{1, L, 96}));
      EXPECT_LE(max_abs(o.logits[0], to_tensor(c["prefill"]["logits"])), tol);
      EXPECT_LE(max_abs(o.prenorm[0][L - 1], to_tensor(c["prefill"]["prenorm_hidden_last_position"])), tol);
      EXPECT_EQ(cache.length(0), L);
      int64_t draft_id = o.logits[0][L - 1].argmax().item<int64_t>();
      EXPECT_EQ(draft_id, c["prefill"]["argmax_draft_id"].get<int64_t>());
      int64_t tok = h.draft_to_target()[draft_id].item<int64_t>();
      EXPECT_EQ(tok, c["prefill"]["argmax_target_id"].get<int64_t>());
      std::vector<int64_t> drafts{tok};
      at::Tensor hidden = o.prenorm.narrow(1, L - 1, 1);
      for (const auto& step : c["chain"]) {
        EXPECT_EQ(tok, step["input_token_id"].get<int64_t>());
        Eagle3Head::Output s = h.forward(row_tensor({tok}), hidden, /*from_target=*/false, cache);
        EXPECT_LE(max_abs(s.logits[0][0], to_tensor(step["logits"])), tol);
        EXPECT_LE(max_abs(s.prenorm[0][0], to_tensor(step["prenorm_hidden"])), tol);
        draft_id = s.logits[0][0].argmax().item<int64_t>();
        EXPECT_EQ(draft_id, step["argmax_draft_id"].get<int64_t>());
        tok = h.draft_to_target()[draft_id].item<int64_t>();
        EXPECT_EQ(tok, step["argmax_target_id"].get<int64_t>());
        drafts.push_back(tok);
        hidden = s.prenorm;
      }
      EXPECT_EQ(cache.length(0), L + static_cast<int64_t>(c["chain"].size()));
      EXPECT_EQ(drafts, ids64(c["draft_tokens_target_ids"]));
    }
  }
}

// The head's raw-rows step (decoders/eagle3_rows.cpp, on every CPU kernel path) against its ATen
// path (the same head with the process switched to the aten path: ATen ops over the unpacked
// weights) on the same 24 positions of two sequences: the rows path in one call and in chunks of
// 3, 8 and 13 must give the ATen path's logits and pre-norm states up to rounding (different
// GEMM summation orders; bf16 rounds each op). f32 and bf16 (the bundled pair's dtype).
class Eagle3Rows : public ::testing::TestWithParam<kernels::Path> {};

TEST_P(Eagle3Rows, OneCallAndChunksMatchTheAtenPath) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  EARS_SKIP_UNSUPPORTED_PATH(GetParam());
  const test::KernelPathGuard guard(GetParam());
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const CausalLM t = CausalLM::load(fixture("qwen3-tiny"), at::kCPU, dtype);
    const Eagle3Head h = Eagle3Head::load(fixture("eagle3-tiny"), t);
    const int64_t L = 24;
    at::Tensor ids = at::arange(L, at::kLong).mul_(37).remainder_(t.config().vocab_size).view({1, L});
    ids = at::cat({ids, ids.flip(1)}, 0);  // B = 2
    ForwardOptions fo;
    fo.aux_layers = h.aux_layers();
    const at::Tensor feats = at::cat(t.forward(ids, fo).aux_hidden, -1);  // [2, L, 3 * hidden]
    Eagle3Head::Output aten;
    {
      const test::KernelPathGuard plain(kernels::Path::aten);
      KVCache cache = h.new_cache(2, L);
      aten = h.forward(ids, feats, /*from_target=*/true, cache);
    }
    for (const std::vector<int64_t>& chunks : {std::vector<int64_t>{L}, std::vector<int64_t>{3, 8, 13}}) {
      KVCache cache = h.new_cache(2, L);
      std::vector<at::Tensor> logits, prenorm;
      for (const int64_t n : chunks) {
        const int64_t at_pos = cache.length(0);
        const Eagle3Head::Output o =
            h.forward(ids.narrow(1, at_pos, n), feats.narrow(1, at_pos, n), /*from_target=*/true, cache);
        logits.push_back(o.logits);
        prenorm.push_back(o.prenorm);
      }
      EXPECT_EQ(cache.lengths(), (std::vector<int64_t>{L, L}));
      const double tol = dtype == at::kFloat ? 1e-5 : 0.03;  // relative to the largest value
      EXPECT_LE(max_abs(at::cat(logits, 1), aten.logits), tol * aten.logits.abs().max().item<double>());
      EXPECT_LE(max_abs(at::cat(prenorm, 1), aten.prenorm), tol * aten.prenorm.abs().max().item<double>());
      if (dtype == at::kFloat) EXPECT_TRUE(at::equal(at::cat(logits, 1).argmax(-1), aten.logits.argmax(-1)));
    }
  }
}
INSTANTIATE_TEST_SUITE_P(Paths, Eagle3Rows, EARS_KERNEL_PATHS, test::path_param_name);

TEST(Eagle3Fixture, DrafterProposesFixtureChainSoloAndRagged) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  const json& cases = expected("eagle3-tiny")["cases"];
  const CausalLM& t = target();
  // Both cases in one right-padded batch (lengths 12 and 1), and each alone.
  std::vector<std::vector<size_t>> layouts{{0}, {1}, {0, 1}, {1, 0}};
  for (const auto& layout : layouts) {
    const int64_t B = static_cast<int64_t>(layout.size());
    std::vector<int64_t> lens;
    for (size_t i : layout) lens.push_back(static_cast<int64_t>(cases[i]["prompt_ids"].size()));
    const int64_t Lmax = *std::max_element(lens.begin(), lens.end());
    at::Tensor ids = at::full({B, Lmax}, 3, at::kLong);  // pad id 3
    std::vector<int64_t> first;
    for (int64_t b = 0; b < B; ++b) {
      ids[b].narrow(0, 0, lens[b]).copy_(at::tensor(ids64(cases[layout[b]]["prompt_ids"]), at::kLong));
      first.push_back(cases[layout[b]]["target_next_token"].get<int64_t>());
    }
    KVCache tcache = t.new_cache(B, Lmax + 16);
    ForwardOptions fo;
    fo.aux_layers = head().aux_layers();
    ForwardOutput tout = t.forward(ids, tcache, fo);
    for (bool greedy : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "batch " << B << " first case " << layout[0] << " greedy " << greedy);
      auto d = make_eagle3_drafter(head());
      EXPECT_EQ(d->kind(), "eagle3");
      EXPECT_EQ(d->aux_layers(), head().aux_layers());
      d->begin(ids, lens, at::tensor(first, at::kLong), tout.aux_hidden, Lmax + 16);
      SamplingParams sp;
      sp.temperature = 0;
      Proposal prop = d->propose(5, sp, greedy, at::full({B, 5}, 0.5f));
      ASSERT_EQ(prop.tokens.sizes(), (at::IntArrayRef{B, 5}));
      for (int64_t b = 0; b < B; ++b)
        EXPECT_EQ(to_vec(prop.tokens[b]), ids64(cases[layout[b]]["draft_tokens_target_ids"]));
      if (greedy) {
        EXPECT_FALSE(prop.probs.defined());
      } else {
        ASSERT_EQ(prop.probs.sizes(), (at::IntArrayRef{B, 5, 320}));
        EXPECT_TRUE(at::equal(prop.probs, at::one_hot(prop.tokens, 320).to(at::kFloat)));
      }
    }
  }
}

// The model drafter with a model other than the target (qwen3-tiny-bf16 upcast to fp32): after
// begin(prompt, x_L = its own first greedy token), a greedy proposal of 5 is its own greedy
// continuation (fixture fp32_compute greedy tokens), for each prompt alone and all in a ragged batch.
TEST(ModelDrafterFixture, ProposesDraftModelsGreedyChain) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny-bf16");
  const json& cases = expected("qwen3-tiny-bf16")["cases"];
  std::vector<std::vector<int64_t>> seqs, want;
  std::vector<int64_t> first;
  for (const auto& c : cases) {
    seqs.push_back(ids64(c["prompt_ids"]));
    const auto g = ids64(c["fp32_compute"]["greedy_tokens"]);
    first.push_back(g[0]);
    want.emplace_back(g.begin() + 1, g.begin() + 6);
  }
  const int64_t n = static_cast<int64_t>(seqs.size());
  for (int64_t only = -1; only < n; ++only) {  // -1: all in one batch
    SCOPED_TRACE(::testing::Message() << "case " << only);
    std::vector<std::vector<int64_t>> s, w;
    std::vector<int64_t> f;
    for (int64_t i = 0; i < n; ++i)
      if (only < 0 || only == i) s.push_back(seqs[i]), w.push_back(want[i]), f.push_back(first[i]);
    std::vector<int64_t> lens;
    lens.clear();
    for (const auto& x : s) lens.push_back(static_cast<int64_t>(x.size()));
    const int64_t Lmax = *std::max_element(lens.begin(), lens.end());
    at::Tensor ids = at::full({static_cast<int64_t>(s.size()), Lmax}, 3, at::kLong);
    for (size_t b = 0; b < s.size(); ++b) ids[b].narrow(0, 0, lens[b]).copy_(at::tensor(s[b], at::kLong));
    auto d = make_model_drafter(bf16_draft(), 320);
    EXPECT_EQ(d->kind(), "model");
    EXPECT_TRUE(d->aux_layers().empty());
    d->begin(ids, lens, at::tensor(f, at::kLong), {}, Lmax + 16);
    SamplingParams sp;
    sp.temperature = 0;
    Proposal p = d->propose(5, sp, /*greedy=*/true, at::zeros({static_cast<int64_t>(s.size()), 5}));
    for (size_t b = 0; b < s.size(); ++b) EXPECT_EQ(to_vec(p.tokens[static_cast<int64_t>(b)]), w[b]);
  }
}

// ---------------------------------------------------------------------------------------------
// Drafter rollback: after a verification with n accepted drafts and a correction, the drafter's
// next proposal equals that of a fresh drafter begun on prompt + [x_L, d_1..d_n] with the
// correction as the first token (EAGLE-3: features of the accepted tokens refreshed; model draft:
// its own KV cache rolled back).

namespace {

struct DrafterCase {
  std::string name;
  std::function<std::unique_ptr<Drafter>()> make;
};

std::vector<DrafterCase> drafter_cases() {
  return {{"eagle3", [] { return make_eagle3_drafter(head()); }},
          {"model:bf16", [] { return make_model_drafter(bf16_draft(), 320); }},
          {"model:self", [] { return make_model_drafter(target(), 320); }}};
}

// Right-padded batch of prompts (pad 3) -> [B, Lmax].
at::Tensor padded(const std::vector<std::vector<int64_t>>& seqs, std::vector<int64_t>& lens) {
  lens.clear();
  for (const auto& s : seqs) lens.push_back(static_cast<int64_t>(s.size()));
  const int64_t Lmax = *std::max_element(lens.begin(), lens.end());
  at::Tensor ids = at::full({static_cast<int64_t>(seqs.size()), Lmax}, 3, at::kLong);
  for (size_t b = 0; b < seqs.size(); ++b) ids[b].narrow(0, 0, lens[b]).copy_(at::tensor(seqs[b], at::kLong));
  return ids;
}

}  // namespace

TEST(DrafterRollback, NextProposalMatchesFreshBegin) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  const CausalLM& t = target();
  const auto all = prompts();
  const std::vector<std::vector<int64_t>> base{std::vector<int64_t>(all[1].begin(), all[1].end()),
                                               std::vector<int64_t>(all[4].begin(), all[4].end()),
                                               std::vector<int64_t>(all[0].begin(), all[0].end())};
  const int64_t B = 3, gamma = 4, max_len = 64;
  const std::vector<int64_t> n_acc{0, 2, 4};  // reject at the first / third draft, accept all
  SamplingParams sp;
  sp.temperature = 0.9;
  for (const auto& dc : drafter_cases()) {
    SCOPED_TRACE(dc.name);
    auto d = dc.make();
    ForwardOptions fo;
    fo.aux_layers = d->aux_layers();
    // Target prefill (cache holds the prompt), x_L = 11 + b (any token: the drafter must not care).
    std::vector<int64_t> lens;
    at::Tensor ids = padded(base, lens);
    KVCache tcache = t.new_cache(B, max_len);
    ForwardOutput pre = t.forward(ids, tcache, fo);
    tcache.set_lengths(lens);
    const std::vector<int64_t> x_L{11, 12, 13};
    d->begin(ids, lens, at::tensor(x_L, at::kLong), pre.aux_hidden, max_len);
    at::Tensor u = at::rand({B, gamma}, at::kFloat);
    Proposal p1 = d->propose(static_cast<int>(gamma), sp, /*greedy=*/false, u);
    // Verification forward over [x_L, d_1..d_gamma], emitted = n drafts + a correction, -1 after.
    at::Tensor verify_in = at::cat({at::tensor(x_L, at::kLong).view({B, 1}), p1.tokens}, 1);
    ForwardOutput ver = t.forward(verify_in, tcache, fo);
    at::Tensor emitted = at::full({B, gamma + 1}, -1, at::kLong);
    std::vector<int64_t> correction(B);
    std::vector<std::vector<int64_t>> grown(base);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = n_acc[b];
      const auto drafts = to_vec(p1.tokens[b]);
      correction[b] = n < gamma ? (drafts[n] + 1) % 320 : 200;  // a token different from d_{n+1}
      for (int64_t k = 0; k < n; ++k) emitted[b][k] = drafts[k];
      emitted[b][n] = correction[b];
      grown[b].push_back(x_L[b]);
      for (int64_t k = 0; k < n; ++k) grown[b].push_back(drafts[k]);
    }
    d->accept(emitted, n_acc, ver.aux_hidden);
    at::Tensor u2 = at::rand({B, gamma}, at::kFloat);
    Proposal p2 = d->propose(static_cast<int>(gamma), sp, false, u2);
    Proposal g2 = d->propose(static_cast<int>(gamma), sp, true, u2);  // propose twice: no state kept

    // Fresh drafter on the grown prompts.
    auto fresh = dc.make();
    std::vector<int64_t> glens;
    at::Tensor gids = padded(grown, glens);
    ForwardOutput gpre = t.forward(gids, fo);
    fresh->begin(gids, glens, at::tensor(correction, at::kLong), gpre.aux_hidden, max_len);
    Proposal f2 = fresh->propose(static_cast<int>(gamma), sp, false, u2);
    Proposal fg2 = fresh->propose(static_cast<int>(gamma), sp, true, u2);
    EXPECT_EQ(to_vec(p2.tokens), to_vec(f2.tokens));
    EXPECT_LE(max_abs(p2.probs, f2.probs), 1e-4);
    EXPECT_EQ(to_vec(g2.tokens), to_vec(fg2.tokens));

    // Select keeps rows consistently: drop row 0, reverse the rest.
    d->select({2, 1});
    fresh->select({2, 1});
    at::Tensor u3 = u2.index_select(0, at::tensor(std::vector<int64_t>{2, 1}, at::kLong));
    EXPECT_EQ(to_vec(d->propose(static_cast<int>(gamma), sp, true, u3).tokens),
              to_vec(fresh->propose(static_cast<int>(gamma), sp, true, u3).tokens));
  }
}

// ---------------------------------------------------------------------------------------------
// 2 + 3 + 5. T = 0: speculative output == plain greedy decoding of the target, for every verifier,
// gamma 1..7, batch 1 and a ragged batch of 4, eagle3 / model(self) / model(bf16) drafts, both
// draft sampling modes. The random-weight eagle3 head is usually wrong, so rejections (and the
// rollbacks after them) are exercised: corrections > 0.

TEST(GreedyEquivalence, PlainGreedyMatchesFixture) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  for (const auto& c : expected("qwen3-tiny")["cases"]) {
    const auto want = ids32(c["greedy"]["tokens"]);
    const auto& got = greedy_reference(ids32(c["prompt_ids"]), 24);
    ASSERT_GE(got.size(), want.size());
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + static_cast<long>(want.size())), want)
        << c["name"].get<std::string>();
  }
  // The target-only loop in a ragged batch equals the solo runs.
  Engine plain(target(), nullptr, nullptr);
  const std::vector<size_t> which{2, 0, 5, 1};
  auto res = plain.generate(requests(which), params(VerifierSpec::Baseline, 1, 0.0, 24, false));
  for (size_t i = 0; i < which.size(); ++i) {
    check_stats(res[i], 0, 24, "plain batch");
    EXPECT_EQ(res[i].ids, greedy_reference(prompts()[which[i]], 24));
    EXPECT_EQ(res[i].stats.steps, 23);  // one token from the prefill, then one per step
  }
}

TEST(GreedyEquivalence, SpeculativeEqualsGreedyEverywhere) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny-bf16");
  const int64_t max_new = 16;  // 16 rather than 24 keeps this matrix (~650 generate calls) fast
  const auto all = prompts();
  const std::vector<size_t> batch4{2, 0, 3, 1};  // lengths 33, 1, 12, 7
  struct DraftKind {
    std::string name;
    std::unique_ptr<Drafter> drafter;
    int64_t corrections = 0, drafted = 0, accepted = 0;
  };
  std::vector<DraftKind> drafts;
  drafts.push_back({"eagle3", make_eagle3_drafter(head())});
  drafts.push_back({"model:self", make_model_drafter(target(), 320)});
  drafts.push_back({"model:bf16", make_model_drafter(bf16_draft(), 320)});
  const std::vector<VerifierSpec::Kind> verifiers{VerifierSpec::Baseline, VerifierSpec::Ears, VerifierSpec::Typical,
                                                  VerifierSpec::Greedy};
  for (auto& dk : drafts) {
    Engine engine(target(), dk.drafter.get(), nullptr);
    for (auto kind : verifiers)
      for (int gamma = 1; gamma <= 7; ++gamma)
        for (bool dg : {true, false}) {
          const std::string ctx = fmt::format("{} {} gamma={} draft_greedy={}", dk.name, to_string(kind), gamma, dg);
          SCOPED_TRACE(ctx);
          const DecodeParams p = params(kind, gamma, 0.0, max_new, dg, 0.1);
          // Batch 1 (the prompt rotates with gamma; one draft mode per gamma, alternating, to keep
          // the binary fast), then the ragged batch of 4 (every combination).
          std::vector<GenResult> r1;
          if (dg == (gamma % 2 == 1)) {
            const size_t solo = static_cast<size_t>(gamma) % all.size();
            r1 = engine.generate(requests({solo}), p);
            ASSERT_EQ(r1.size(), 1u);
            check_stats(r1[0], gamma, max_new, ctx + " solo");
            EXPECT_EQ(r1[0].ids, greedy_reference(all[solo], max_new));
          }
          auto r4 = engine.generate(requests(batch4), p);
          ASSERT_EQ(r4.size(), 4u);
          for (size_t i = 0; i < 4; ++i) {
            check_stats(r4[i], gamma, max_new, ctx + " batch row " + std::to_string(i));
            EXPECT_EQ(r4[i].ids, greedy_reference(all[batch4[i]], max_new)) << "row " << i;
          }
          std::vector<const GenResult*> rs{&r4[0], &r4[1], &r4[2], &r4[3]};
          if (!r1.empty()) rs.push_back(&r1[0]);
          for (const auto* r : rs) {
            dk.corrections += r->stats.corrections;
            dk.drafted += r->stats.drafted;
            dk.accepted += r->stats.accepted;
            EXPECT_EQ(r->stats.pardoned, 0);  // u = 0 at T = 0: nothing to pardon
          }
        }
  }
  for (const auto& dk : drafts) {
    std::printf("[ info ] T=0 %-10s drafted %6lld accepted %6lld (%.3f) corrections %lld\n", dk.name.c_str(),
                static_cast<long long>(dk.drafted), static_cast<long long>(dk.accepted),
                static_cast<double>(dk.accepted) / static_cast<double>(dk.drafted),
                static_cast<long long>(dk.corrections));
  }
  // Rollback was exercised: the random-weight head and the bf16 draft get rejected.
  EXPECT_GT(drafts[0].corrections, 100);
  EXPECT_GT(drafts[2].corrections, 0);
  // The self draft is the target: at T = 0 every draft token is accepted.
  EXPECT_EQ(drafts[1].corrections, 0);
  EXPECT_EQ(drafts[1].accepted, drafts[1].drafted);
}

// ---------------------------------------------------------------------------------------------
// 4. Self-draft: the target drafting for itself has every token accepted, at T = 0 and T = 0.9.

TEST(SelfDraft, EveryDraftTokenAccepted) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  auto d = make_model_drafter(target(), 320);
  Engine engine(target(), d.get(), nullptr);
  const std::vector<size_t> which{0, 1, 2, 3, 4, 5};
  for (double temp : {0.0, 0.9})
    for (int gamma : {1, 3, 5}) {
      const int64_t max_new = 40;
      const std::string ctx = fmt::format("T={} gamma={}", temp, gamma);
      SCOPED_TRACE(ctx);
      auto res = engine.generate(requests(which, 11), params(VerifierSpec::Baseline, gamma, temp, max_new, false));
      for (const auto& r : res) {
        check_stats(r, gamma, max_new, ctx);
        EXPECT_EQ(r.stats.accepted, r.stats.drafted);
        EXPECT_EQ(r.stats.corrections, 0);
        EXPECT_EQ(r.stats.bonus, r.stats.steps);
        EXPECT_EQ(r.stats.accept_length_hist[gamma + 1], r.stats.steps);  // tau = gamma + 1
        // Every step but the last emits gamma + 1 tokens of which all are kept.
        EXPECT_EQ(r.stats.steps, (max_new - 1 + gamma) / (gamma + 1));
        if (temp == 0) {
          EXPECT_EQ(r.ids, greedy_reference(prompts()[static_cast<size_t>(&r - &res[0])], max_new));
        }
      }
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Host syncs: one for the prefill, one per speculative step.

TEST(HostSyncs, OnePerStepPlusPrefill) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto eagle = make_eagle3_drafter(head());
  auto model = make_model_drafter(bf16_draft(), 320);
  for (Drafter* d : {static_cast<Drafter*>(nullptr), eagle.get(), model.get()}) {
    SCOPED_TRACE(d ? d->kind() : "none");
    Engine engine(target(), d, nullptr);
    for (auto kind : {VerifierSpec::Baseline, VerifierSpec::Ears}) {
      const int64_t before = host_sync_count();
      auto res = engine.generate(requests({3}), params(kind, 4, 0.9, 30, false));
      const int64_t delta = host_sync_count() - before;
      const int64_t gamma = d ? 4 : 0;
      check_stats(res[0], gamma, 30, "host syncs");
      EXPECT_LE(delta, res[0].stats.steps + 1);
      EXPECT_EQ(delta, res[0].stats.steps + 1);
      EXPECT_EQ(res[0].stats.host_syncs, delta);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 7. Batch independence: at T = 0.9 each request's output in a batch equals its output alone.

TEST(BatchIndependence, SameOutputAloneAndBatched) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto eagle = make_eagle3_drafter(head());
  const std::vector<size_t> which{2, 0, 3, 1};
  struct Arm {
    Drafter* d;
    VerifierSpec::Kind kind;
  };
  for (const Arm& arm : {Arm{nullptr, VerifierSpec::Baseline}, Arm{eagle.get(), VerifierSpec::Baseline},
                         Arm{eagle.get(), VerifierSpec::Ears}}) {
    const std::string ctx = fmt::format("{} {}", arm.d ? arm.d->kind() : "none", to_string(arm.kind));
    SCOPED_TRACE(ctx);
    Engine engine(target(), arm.d, nullptr);
    const int gamma = 4;
    const DecodeParams p = params(arm.kind, gamma, 0.9, 24, false, 0.5);
    auto batched = engine.generate(requests(which, 1234), p);
    std::set<std::vector<int32_t>> distinct;
    for (size_t i = 0; i < which.size(); ++i) {
      auto alone = engine.generate(requests({which[i]}, 1234), p);
      check_stats(batched[i], arm.d ? gamma : 0, 24, ctx);
      EXPECT_EQ(batched[i].ids, alone[0].ids) << "row " << i;
      EXPECT_EQ(batched[i].stats.accepted, alone[0].stats.accepted) << "row " << i;
      EXPECT_EQ(batched[i].stats.steps, alone[0].stats.steps) << "row " << i;
      distinct.insert(alone[0].ids);
    }
    EXPECT_EQ(distinct.size(), which.size());
    // Another run seed gives another sample (the seed is used at all).
    auto other = engine.generate(requests(which, 99), p);
    int same = 0;
    for (size_t i = 0; i < which.size(); ++i) same += other[i].ids == batched[i].ids;
    EXPECT_LT(same, 2);
  }
}

// ---------------------------------------------------------------------------------------------
// 8. Stop conditions.

TEST(StopConditions, StopIdEndsWithEos) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto eagle = make_eagle3_drafter(head());
  auto self = make_model_drafter(target(), 320);
  const auto all = prompts();
  for (Drafter* d : {static_cast<Drafter*>(nullptr), eagle.get(), self.get()}) {
    SCOPED_TRACE(d ? d->kind() : "none");
    Engine engine(target(), d, nullptr);
    for (size_t pi : {1, 2}) {
      const auto& ref = greedy_reference(all[pi], 24);
      const int32_t stop = ref[6];
      const auto first = std::find(ref.begin(), ref.end(), stop);
      const std::vector<int32_t> want(ref.begin(), first + 1);
      DecodeParams p = params(VerifierSpec::Baseline, 5, 0.0, 24, true);
      p.stop_ids = {stop};
      auto res = engine.generate(requests({pi, 0}), p);  // with a companion that keeps going
      EXPECT_EQ(res[0].ids, want);
      EXPECT_EQ(res[0].finish_reason, "eos");
      EXPECT_EQ(res[0].ids.back(), stop);
      check_stats(res[0], d ? 5 : 0, 24, "stop id");
      // The companion request is unaffected by its neighbour finishing early (unless it stops too).
      const auto& ref0 = greedy_reference(all[0], 24);
      const auto f0 = std::find(ref0.begin(), ref0.end(), stop);
      EXPECT_EQ(res[1].ids, std::vector<int32_t>(ref0.begin(), f0 == ref0.end() ? f0 : f0 + 1));
      EXPECT_EQ(res[1].finish_reason, f0 == ref0.end() ? "length" : "eos");
    }
  }
}

// Regression (issue: multi-arm runs with a `model` draft crashed in the second arm): one drafter
// serves generate() after generate(); when a request of the second batch stops at its first
// token, the engine drops it before any proposal, and the drafter must not carry the previous
// batch's drafts into that select().
TEST(StopConditions, DrafterReusedAcrossGenerateCallsWithAFirstTokenStop) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto eagle = make_eagle3_drafter(head());
  auto self = make_model_drafter(target(), 320);
  const auto all = prompts();
  for (Drafter* d : {eagle.get(), self.get()}) {
    SCOPED_TRACE(d->kind());
    Engine engine(target(), d, nullptr);
    const auto first = engine.generate(requests({0, 1, 2}), params(VerifierSpec::Baseline, 5, 0.0, 12, true));
    ASSERT_EQ(first.size(), 3u);
    const int32_t stop = greedy_reference(all[1], 24)[0];  // request 1 stops at its first token
    DecodeParams p = params(VerifierSpec::Baseline, 5, 0.0, 12, true);
    p.stop_ids = {stop};
    const auto res = engine.generate(requests({1, 0}), p);
    ASSERT_EQ(res.size(), 2u);
    EXPECT_EQ(res[0].ids, std::vector<int32_t>{stop});
    EXPECT_EQ(res[0].finish_reason, "eos");
    const auto& ref0 = greedy_reference(all[0], 24);
    const auto f0 = std::find(ref0.begin(), ref0.begin() + 12, stop);
    EXPECT_EQ(res[1].ids, std::vector<int32_t>(ref0.begin(), f0 == ref0.begin() + 12 ? f0 : f0 + 1));
  }
}

TEST(StopConditions, MaxNewTokensExactEvenMidStep) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto self = make_model_drafter(target(), 320);  // emits gamma + 1 tokens per step
  auto eagle = make_eagle3_drafter(head());
  const auto all = prompts();
  for (Drafter* d : {self.get(), eagle.get()}) {
    Engine engine(target(), d, nullptr);
    for (int64_t max_new : {1, 2, 3, 5, 8, 13}) {
      const std::string ctx = fmt::format("{} max_new={}", d->kind(), max_new);
      SCOPED_TRACE(ctx);
      auto res = engine.generate(requests({1, 3, 0}), params(VerifierSpec::Baseline, 5, 0.0, max_new, true));
      for (size_t i = 0; i < res.size(); ++i) {
        EXPECT_EQ(static_cast<int64_t>(res[i].ids.size()), max_new);
        EXPECT_EQ(res[i].finish_reason, "length");
        check_stats(res[i], 5, max_new, ctx);
        const auto& ref = greedy_reference(all[std::vector<size_t>{1, 3, 0}[i]], 24);
        EXPECT_EQ(res[i].ids, std::vector<int32_t>(ref.begin(), ref.begin() + max_new));
      }
    }
  }
  // Invalid settings are clear errors.
  Engine engine(target(), self.get(), nullptr);
  EXPECT_THROW(engine.generate(requests({1}), params(VerifierSpec::Baseline, 5, 0.0, 0, true)), Error);
  EXPECT_THROW(engine.generate(requests({1}), params(VerifierSpec::Baseline, 0, 0.0, 4, true)), Error);
  EXPECT_TRUE(engine.generate({}, params(VerifierSpec::Baseline, 5, 0.0, 4, true)).empty());
}

// A request beyond the context fails alone: its error is recorded, its neighbours decode as if
// it were not there.
TEST(StopConditions, OverContextRequestFailsAloneInItsBatch) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto eagle = make_eagle3_drafter(head());
  Engine engine(target(), eagle.get(), nullptr);
  const int64_t context = target().config().max_position_embeddings;
  ASSERT_GT(context, 0);
  std::vector<GenRequest> batch = requests({0, 1, 2}, 5);
  batch[1].prompt.assign(static_cast<size_t>(context), 7);  // context tokens + any new one > context
  const DecodeParams p = params(VerifierSpec::Baseline, 5, 0.9, 12, false);
  auto res = engine.generate(batch, p);
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[1].finish_reason, "error");
  EXPECT_NE(res[1].error.find("context"), std::string::npos) << res[1].error;
  EXPECT_TRUE(res[1].ids.empty());
  EXPECT_EQ(res[1].prompt_tokens, context);
  EXPECT_EQ(res[1].stats.accept_length_hist.size(), 7u);
  auto alone = engine.generate({batch[0], batch[2]}, p);
  EXPECT_EQ(res[0].ids, alone[0].ids);
  EXPECT_EQ(res[2].ids, alone[1].ids);
  EXPECT_TRUE(res[0].error.empty());
  // Every request too long: all recorded, nothing decoded.
  auto none = engine.generate({batch[1], batch[1]}, p);
  EXPECT_EQ(none[0].finish_reason, "error");
  EXPECT_EQ(none[1].finish_reason, "error");
}

// ---------------------------------------------------------------------------------------------
// 9. EARS pardons at T = 0.9 with a large beta; baseline has no distortion (up to rounding).

TEST(EarsPardons, LargeBetaPardonsAndDistorts) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  auto eagle = make_eagle3_drafter(head());
  Engine engine(target(), eagle.get(), nullptr);
  const std::vector<size_t> which{0, 1, 2, 3};
  const int gamma = 4;
  auto total = [](const std::vector<GenResult>& rs, auto field) {
    double s = 0;
    for (const auto& r : rs) s += static_cast<double>(r.stats.*field);
    return s;
  };
  auto base = engine.generate(requests(which, 5), params(VerifierSpec::Baseline, gamma, 0.9, 24, false));
  auto ears = engine.generate(requests(which, 5), params(VerifierSpec::Ears, gamma, 0.9, 24, false, 1.0));
  for (size_t i = 0; i < which.size(); ++i) {
    check_stats(base[i], gamma, 24, "baseline");
    check_stats(ears[i], gamma, 24, "ears");
    EXPECT_LT(base[i].stats.distortion_sum, 1e-4 * static_cast<double>(base[i].stats.distortion_n));  // 0 up to rounding
    EXPECT_EQ(base[i].stats.pardoned, 0);
    EXPECT_GT(base[i].stats.distortion_n, 0);
    EXPECT_GE(ears[i].stats.distortion_sum, 0.0);
    EXPECT_LE(ears[i].stats.distortion_sum, static_cast<double>(ears[i].stats.distortion_n));
  }
  std::printf("[ info ] T=0.9 gamma=4: baseline accepted %.0f / %.0f; ears(beta=1) accepted %.0f / %.0f, pardoned %.0f, "
              "distortion_sum %.3f over %.0f\n",
              total(base, &GenStats::accepted), total(base, &GenStats::drafted), total(ears, &GenStats::accepted),
              total(ears, &GenStats::drafted), total(ears, &GenStats::pardoned), total(ears, &GenStats::distortion_sum),
              total(ears, &GenStats::distortion_n));
  EXPECT_GT(total(ears, &GenStats::pardoned), 0);
  EXPECT_GT(total(ears, &GenStats::distortion_sum), 0);
  EXPECT_GT(total(ears, &GenStats::accepted) / total(ears, &GenStats::drafted),
            total(base, &GenStats::accepted) / total(base, &GenStats::drafted));
  // beta = 0 is baseline exactly (same uniforms, same decisions).
  auto ears0 = engine.generate(requests(which, 5), params(VerifierSpec::Ears, gamma, 0.9, 24, false, 0.0));
  for (size_t i = 0; i < which.size(); ++i) {
    EXPECT_EQ(ears0[i].ids, base[i].ids);
    EXPECT_EQ(ears0[i].stats.pardoned, 0);
  }
}
