// The speculative decoding engine's drafters (decoders/eagle3.h, decoders/draft.h) on the golden
// fixtures (shared/fixtures/README.md): EAGLE-3 head numerics (prefill, chain, the raw-rows step on
// every kernel path), the model drafter's greedy chain, and drafter rollback against a fresh start.
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/one_hot.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <cstdio>

#include "decoders/draft.h"
#include "decoders/eagle3.h"
#include "decoders/eagle3_config.h"
#include "decoders/engine.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "harness/base/error.h"
#include "tests/kernel_paths.h"
#include "tests/tensor_test_util.h"
#include "tests/test_util.h"
#include "tests/engine_test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ears;
using ears::test::max_abs;
using ears::test::row_tensor;
using ears::test::to_tensor;
using namespace ears::test::engine_test;

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
// forward_host (the drafter's host steps) is forward()'s rows path bit for bit: a refresh over the
// target's aux list (gathered per row, not concatenated; -1 ids past a sequence's tokens read as 0,
// as the drafter's clamp did) keeping one row per sequence, then a fed-back chain step. Inputs the
// rows path cannot read are refused by host_step_ready, and forward_host fails on them in one line.
TEST_P(Eagle3Rows, HostStepsAreTheTensorStepsBitForBit) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  EARS_SKIP_UNSUPPORTED_PATH(GetParam());
  if (GetParam() == kernels::Path::aten) GTEST_SKIP() << "host steps exist on CPU kernel paths only";
  const test::KernelPathGuard guard(GetParam());
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const CausalLM t = CausalLM::load(fixture("qwen3-tiny"), at::kCPU, dtype);
    const Eagle3Head h = Eagle3Head::load(fixture("eagle3-tiny"), t);
    const int64_t L = 10, T = 6;
    at::Tensor ids = at::arange(L + T, at::kLong).mul_(29).remainder_(t.config().vocab_size).view({1, L + T});
    ids = at::cat({ids, ids.flip(1)}, 0);  // B = 2
    ForwardOptions fo;
    fo.aux_layers = h.aux_layers();
    const std::vector<at::Tensor> aux = t.forward(ids, fo).aux_hidden;  // each [2, L + T, hidden]
    const at::Tensor feats = at::cat(aux, -1);
    KVCache a = h.new_cache(2, L + T + 2), b = h.new_cache(2, L + T + 2);
    h.forward(ids.narrow(1, 0, L), feats.narrow(1, 0, L), /*from_target=*/true, a);
    h.forward(ids.narrow(1, 0, L), feats.narrow(1, 0, L), /*from_target=*/true, b);
    // The refresh: T rows from position L, sequence 1 keeping 2 of them (its ids after: -1).
    at::Tensor step_ids = ids.narrow(1, L, T).clone();
    step_ids[1].narrow(0, 3, T - 3).fill_(-1);
    std::vector<at::Tensor> step_aux;
    for (const at::Tensor& x : aux) step_aux.push_back(x.narrow(1, L, T).contiguous());
    const std::vector<int64_t> pick{T - 1, 2};
    const Eagle3Head::Output ta = h.forward(step_ids.clamp_min(0), feats.narrow(1, L, T), /*from_target=*/true, a,
                                            at::tensor(pick, at::kLong).view({2, 1}));
    // The kept rows are those of the step over every row (past its K/V the rows path computes the
    // kept rows only), and the cache is the same after both (the chain step below gives the same
    // logits from either).
    KVCache c = h.new_cache(2, L + T + 2);
    h.forward(ids.narrow(1, 0, L), feats.narrow(1, 0, L), /*from_target=*/true, c);
    const Eagle3Head::Output all = h.forward(step_ids.clamp_min(0), feats.narrow(1, L, T), /*from_target=*/true, c);
    for (int64_t s = 0; s < 2; ++s) {
      EXPECT_TRUE(at::equal(ta.logits[s][0], all.logits[s][pick[static_cast<size_t>(s)]])) << "sequence " << s;
      EXPECT_TRUE(at::equal(ta.prenorm[s][0], all.prenorm[s][pick[static_cast<size_t>(s)]])) << "sequence " << s;
    }
    ASSERT_TRUE(h.host_step_ready(step_aux, at::Tensor(), T, b));
    const std::vector<int64_t> host_ids(step_ids.data_ptr<int64_t>(), step_ids.data_ptr<int64_t>() + 2 * T);
    const Eagle3Head::Output tb = h.forward_host(host_ids, T, step_aux, at::Tensor(), pick, b);
    EXPECT_TRUE(at::equal(ta.logits, tb.logits));
    EXPECT_TRUE(at::equal(ta.prenorm, tb.prenorm));
    EXPECT_EQ(a.lengths(), b.lengths());
    // A chain step from the kept states.
    const std::vector<int64_t> next{5, 7};
    ASSERT_TRUE(h.host_step_ready({}, tb.prenorm, 1, b));
    const Eagle3Head::Output ca = h.forward(at::tensor(next, at::kLong).view({2, 1}), ta.prenorm, false, a);
    const Eagle3Head::Output cb = h.forward_host(next, 1, {}, tb.prenorm, {0, 0}, b);
    EXPECT_TRUE(at::equal(ca.logits, cb.logits));
    EXPECT_TRUE(at::equal(ca.prenorm, cb.prenorm));
    const Eagle3Head::Output cc = h.forward(at::tensor(next, at::kLong).view({2, 1}), ta.prenorm, false, c);
    EXPECT_TRUE(at::equal(ca.logits, cc.logits));
    // Features in another dtype, or too few rows: not the host step's.
    EXPECT_FALSE(h.host_step_ready({}, tb.prenorm.to(dtype == at::kFloat ? at::kBFloat16 : at::kFloat), 1, b));
    EXPECT_FALSE(h.host_step_ready(step_aux, at::Tensor(), T + 1, b));
    EXPECT_THROW(h.forward_host(host_ids, T + 1, step_aux, at::Tensor(), pick, b), Error);
    EXPECT_THROW(h.forward_host(host_ids, T, step_aux, at::Tensor(), {T, 0}, b), Error);  // a row past the step
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

// config.json in either layout (decoders/eagle3_config.h): the keys read, the defaults (vLLM's:
// norm_before_residual false in the EAGLE layout, true in speculators' when absent), and every key
// the head does not implement refused in one line naming the file and the key (never ignored).
TEST(Eagle3Config, BothLayoutsAndUnsupportedKeys) {
  const fs::path dir = test::source_dir() / "tests" / "data" / "speculators-eagle3";
  const json spec = json::parse(test::read_file(dir / "config.json"));
  Eagle3Config c = Eagle3Config::parse(spec.dump(), "s.json");
  EXPECT_EQ(c.layout, Eagle3Config::Layout::speculators);
  EXPECT_EQ(c.aux_ids, (std::vector<int>{1, 3, 6}));
  EXPECT_TRUE(c.norm_before_residual);
  EXPECT_TRUE(c.norm_before_fc);
  EXPECT_EQ(c.draft_vocab, 48);
  EXPECT_EQ(c.target_hidden, 64);
  EXPECT_EQ(c.layer.hidden_size, 64);
  EXPECT_EQ(c.layer.head_dim, 16);
  EXPECT_EQ(c.layer.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.layer.rope.theta, 500000.0);
  json edited = spec;
  edited.erase("norm_before_residual");
  EXPECT_TRUE(Eagle3Config::parse(edited.dump(), "s.json").norm_before_residual);

  // The EAGLE layout: the same layer at the top level, ids in eagle_config.
  json eagle = spec["transformer_layer_config"];
  eagle["architectures"] = {"LlamaForCausalLMEagle3"};
  eagle["draft_vocab_size"] = 48;
  eagle["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", {2, 3, 3}}, {"use_aux_hidden_state", true}};
  c = Eagle3Config::parse(eagle.dump(), "e.json");
  EXPECT_EQ(c.layout, Eagle3Config::Layout::eagle);
  EXPECT_EQ(c.aux_ids, (std::vector<int>{2, 3, 3}));
  EXPECT_FALSE(c.norm_before_residual);
  EXPECT_FALSE(c.norm_before_fc);
  ModelConfig same_layer = Eagle3Config::parse(spec.dump(), "s.json").layer;
  same_layer.architecture = c.layer.architecture;  // the only key the layouts name differently
  EXPECT_EQ(c.layer, same_layer);
  edited = eagle;
  edited["norm_before_residual"] = true;
  EXPECT_TRUE(Eagle3Config::parse(edited.dump(), "e.json").norm_before_residual);

  auto error = [](const json& j, const std::string& origin) {
    try {
      Eagle3Config::parse(j.dump(), origin);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  // Each edit of `base` must fail in one line starting with its message.
  using Edits = std::vector<std::pair<std::function<void(json&)>, std::string>>;
  auto refused = [&](const json& base, const std::string& origin, const Edits& edits) {
    for (const auto& [edit, message] : edits) {
      json j = base;
      edit(j);
      const std::string msg = error(j, origin);
      EXPECT_EQ(msg.rfind(message, 0), 0u) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  };
  refused(spec, "s.json",
          {{[](json& j) { j["fc_norm"] = true; }, "s.json: fc_norm is true"},
           {[](json& j) { j["norm_output"] = true; }, "s.json: norm_output is true"},
           {[](json& j) { j["speculators_model_type"] = "eagle"; }, "s.json: speculators_model_type is 'eagle'"},
           {[](json& j) { j.erase("transformer_layer_config"); }, "s.json: transformer_layer_config must be an object"},
           {[](json& j) { j["transformer_layer_config"]["model_type"] = "qwen3"; },
            "s.json (transformer_layer_config): model_type is 'qwen3'"},
           {[](json& j) { j["transformer_layer_config"]["num_hidden_layers"] = 2; },
            "s.json (transformer_layer_config): num_hidden_layers is 2"},
           {[](json& j) { j["transformer_layer_config"]["attention_bias"] = true; },
            "s.json (transformer_layer_config): attention_bias / mlp_bias is true"},
           {[](json& j) { j["eagle_aux_hidden_state_layer_ids"] = json::array(); },
            "s.json: eagle_aux_hidden_state_layer_ids must be a non-empty list"},
           // The layer's MLP is SiLU-gated: another activation ran as SiLU without a word.
           {[](json& j) { j["transformer_layer_config"]["hidden_act"] = "gelu"; },
            "s.json (transformer_layer_config): hidden_act 'gelu' is not supported (only silu"}});
  refused(eagle, "e.json",
          {{[](json& j) { j["eagle_config"]["use_aux_hidden_state"] = false; },
            "e.json (eagle_config): use_aux_hidden_state is false"},
           {[](json& j) { j["num_hidden_layers"] = 3; }, "e.json: num_hidden_layers is 3"},
           {[](json& j) { j["fc_norm"] = true; }, "e.json: fc_norm is true"},
           {[](json& j) { j["mlp_bias"] = true; }, "e.json: attention_bias / mlp_bias is true"},
           {[](json& j) { j["hidden_act"] = "gelu"; }, "e.json: hidden_act 'gelu' is not supported (only silu"},
           // vLLM reads top-level ids, EAGLE / sglang eagle_config's: two lists would run two heads.
           {[](json& j) { j["eagle_aux_hidden_state_layer_ids"] = {1, 3, 5}; },
            "e.json: eagle_aux_hidden_state_layer_ids [1, 3, 5] at the top level (read by vLLM) and [2, 3, 3] in "
            "eagle_config"}});
  // hidden_act absent reads as silu.
  edited = eagle;
  edited.erase("hidden_act");
  EXPECT_NO_THROW(Eagle3Config::parse(edited.dump(), "e.json"));
}

// An EAGLE-layout head whose aux ids sit at the top level (where vLLM's speculators conversion puts
// them), the fixture head's config so edited: the loader reads them (they were ignored for the
// target's default [2, 3, 3]); beside the same list in eagle_config they are fine; they are HF ids,
// so the sglang convention (eagle_config's +1) is refused for them.
TEST(Eagle3Config, TopLevelAuxIdsOfTheEagleLayoutAreRead) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  const fs::path dir = test::temp_dir("top-level-ids");
  fs::copy(fixture("eagle3-tiny"), dir, fs::copy_options::recursive);
  fs::permissions(dir / "config.json", fs::perms::owner_write, fs::perm_options::add);
  const json base = json::parse(test::read_file(dir / "config.json"));
  auto load_with = [&](const std::function<void(json&)>& edit, AuxLayerConvention convention = AuxLayerConvention::Hf) {
    json j = base;
    edit(j);
    std::ofstream(dir / "config.json") << j.dump(2);
    Eagle3Options o;
    o.convention = convention;
    return Eagle3Head::load(dir, target(), o).aux_layers();
  };
  EXPECT_EQ(load_with([](json& j) {
              j.erase("eagle_config");
              j["eagle_aux_hidden_state_layer_ids"] = {1, 3, 5};
            }),
            (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(load_with([](json& j) { j["eagle_aux_hidden_state_layer_ids"] = {2, 3, 3}; }), (std::vector<int>{2, 3, 3}));
  EXPECT_EQ(load_with([](json& j) { j["eagle_aux_hidden_state_layer_ids"] = {2, 3, 3}; }, AuxLayerConvention::Sglang),
            (std::vector<int>{3, 4, 4}));
  try {
    load_with(
        [](json& j) {
          j["eagle_config"].erase("eagle_aux_hidden_state_layer_ids");
          j["eagle_aux_hidden_state_layer_ids"] = {1, 3, 4};
        },
        AuxLayerConvention::Sglang);
    ADD_FAILURE() << "top-level ids under the sglang convention must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top-level eagle_aux_hidden_state_layer_ids are vLLM's"), std::string::npos)
        << e.what();
  }
}

// An aux id naming hidden_states[L] of an L-layer target (the post-final-norm output, which EAGLE,
// vLLM and sglang never capture) is refused at load, in the head's config.json (the fixture head
// with [2, 3, 6]; the speculators test head, made with [1, 3, 6]) or after the sglang convention's
// +1 turns the bundled-style ids [1, 3, 5] into [2, 4, 6]: one line naming the ids, the convention
// and the target's layer count. They ran, silently, with worse acceptance.
TEST(Eagle3Config, AuxIdOfTheFinalNormOutputIsRefused) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  const fs::path dir = test::temp_dir("post-norm-id");
  fs::copy(fixture("eagle3-tiny"), dir, fs::copy_options::recursive);
  fs::permissions(dir / "config.json", fs::perms::owner_write, fs::perm_options::add);
  json j = json::parse(test::read_file(dir / "config.json"));
  auto message = [&](const fs::path& d, AuxLayerConvention convention) {
    Eagle3Options o;
    o.convention = convention;
    try {
      Eagle3Head::load(d, target(), o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  j["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = {2, 3, 6};
  std::ofstream(dir / "config.json") << j.dump(2);
  std::string m = message(dir, AuxLayerConvention::Hf);
  EXPECT_NE(m.find((dir / "config.json").string() + ": aux layer ids [2, 3, 6] (hf convention) name layer 6, outside "
                   "the target's 0..5 (num_hidden_layers 6)"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  j["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = {1, 3, 5};
  std::ofstream(dir / "config.json") << j.dump(2);
  m = message(dir, AuxLayerConvention::Sglang);
  EXPECT_NE(m.find("aux layer ids [2, 4, 6] (sglang convention: [1, 3, 5] + 1) name layer 6"), std::string::npos) << m;
  EXPECT_EQ(message(dir, AuxLayerConvention::Hf), "(no error)");
  m = message(test::source_dir() / "tests" / "data" / "speculators-eagle3", AuxLayerConvention::Hf);
  EXPECT_NE(m.find("aux layer ids [1, 3, 6] (hf convention) name layer 6"), std::string::npos) << m;
}

// A head in vLLM speculators' layout (tests/data/speculators-eagle3, made by its make.py with
// speculators 0.9.0: norm_before_residual and norm_before_fc true, aux ids [1, 3, 6], its own
// embed_tokens) against speculators' own modules: the first step's logits at the prompt's last
// position, each chain step's logits and the greedy chain, through the head's tensor step and
// through the drafter's host steps, on every kernel path.
TEST_P(Eagle3Rows, SpeculatorsHeadMatchesSpeculators) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  EARS_SKIP_UNSUPPORTED_PATH(GetParam());
  const test::KernelPathGuard guard(GetParam());
  const fs::path data = test::source_dir() / "tests" / "data" / "speculators-eagle3";
  const json e = json::parse(test::read_file(data / "expected.json"));
  const CausalLM t = CausalLM::load(fixture("qwen3-tiny"), c10::kCPU, at::kFloat);
  // make.py fed hidden_states [1, 3, 6]; 6, the post-final-norm output, is refused as a head's id
  // (Eagle3Config.AuxIdOfTheFinalNormOutputIsRefused), so the head loads from a copy naming
  // [1, 3, 5] and the features make.py used are computed here: what is checked is the head's math.
  const fs::path dir = test::temp_dir("speculators-eagle3");
  fs::copy(data, dir, fs::copy_options::recursive);
  fs::permissions(dir / "config.json", fs::perms::owner_write, fs::perm_options::add);
  json cfg = json::parse(test::read_file(dir / "config.json"));
  cfg["eagle_aux_hidden_state_layer_ids"] = {1, 3, 5};
  std::ofstream(dir / "config.json") << cfg.dump(2);
  const Eagle3Head h = Eagle3Head::load(dir, t);
  EXPECT_EQ(h.aux_layers(), (std::vector<int>{1, 3, 5}));
  EXPECT_TRUE(h.own_embeddings());
  const auto prompt = ids64(e["prompt_ids"]);
  const int64_t L = static_cast<int64_t>(prompt.size());
  ForwardOptions fo;
  fo.aux_layers = e["aux_layers"].get<std::vector<int>>();
  KVCache tcache = t.new_cache(1, L + 8);
  ForwardOutput tout = t.forward(row_tensor(prompt), tcache, fo);
  const int64_t x_L = tout.logits[0][L - 1].argmax().item<int64_t>();
  ASSERT_EQ(x_L, e["target_next_id"].get<int64_t>());
  std::vector<int64_t> tokens(prompt.begin() + 1, prompt.end());
  tokens.push_back(x_L);
  KVCache cache = h.new_cache(1, L + 8);
  Eagle3Head::Output o = h.forward(row_tensor(tokens), at::cat(tout.aux_hidden, -1), /*from_target=*/true, cache);
  EXPECT_LE(max_abs(o.logits[0][L - 1], to_tensor(e["logits_last"])), 1e-4);
  std::vector<int64_t> chain;
  at::Tensor logits = o.logits[0][L - 1], hidden = o.prenorm.narrow(1, L - 1, 1);
  for (size_t j = 0; j < e["chain_target_ids"].size(); ++j) {
    chain.push_back(h.draft_to_target()[logits.argmax().item<int64_t>()].item<int64_t>());
    if (j == e["chain_logits"].size()) break;
    Eagle3Head::Output s = h.forward(row_tensor({chain.back()}), hidden, /*from_target=*/false, cache);
    logits = s.logits[0][0];
    hidden = s.prenorm;
    EXPECT_LE(max_abs(logits, to_tensor(e["chain_logits"][j])), 1e-4) << "chain step " << j + 1;
  }
  EXPECT_EQ(chain, ids64(e["chain_target_ids"]));
  auto d = make_eagle3_drafter(h);
  d->begin(row_tensor(prompt), {L}, at::tensor(std::vector<int64_t>{x_L}, at::kLong), tout.aux_hidden, L + 8);
  SamplingParams sp;
  sp.temperature = 0;
  const int gamma = static_cast<int>(e["chain_target_ids"].size());
  Proposal prop = d->propose(gamma, sp, /*greedy=*/true, at::full({1, gamma}, 0.5f));
  EXPECT_EQ(to_vec(prop.tokens[0]), ids64(e["chain_target_ids"]));
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
