// CausalLM / KVCache against the golden fixtures (shared/fixtures/README.md), and model config /
// checkpoint errors.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <memory>

#include "decoders/cpu_bf16.h"
#include "decoders/layers.h"
#include "decoders/model.h"
#include "decoders/model_config.h"
#include "decoders/safetensors_header.h"
#include "harness/base/error.h"
#include "tests/tensor_test_util.h"
#include "tests/kernel_paths.h"
#include "tests/test_util.h"
#include "tests/model_test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using ears::CausalLM;
using ears::ForwardOptions;
using ears::KVCache;
using ears::test::max_abs;
using ears::test::mean_abs;
using ears::test::row_tensor;
using ears::test::to_tensor;
using ears::test::model_test::load_error;

namespace {

fs::path fixture(const std::string& name) { return ears::test::shared_dir() / "fixtures" / name; }

const json& expected(const std::string& model) {
  static std::map<std::string, json> cache;
  auto it = cache.find(model);
  if (it == cache.end())
    it = cache.emplace(model, json::parse(ears::test::read_file(fixture(model) / "expected.json"))).first;
  return it->second;
}

// Models are loaded once per process (loading is cheap but not free).
const CausalLM& model(const std::string& name, c10::ScalarType dtype) {
  static std::map<std::pair<std::string, int>, CausalLM> models;
  auto key = std::make_pair(name, static_cast<int>(dtype));
  auto it = models.find(key);
  if (it == models.end()) it = models.emplace(key, CausalLM::load(fixture(name), at::kCPU, dtype)).first;
  return it->second;
}


std::vector<int64_t> ids_of(const json& j) { return j.get<std::vector<int64_t>>(); }


int64_t argmax_last(const at::Tensor& logits) { return logits[0][-1].argmax().item<int64_t>(); }

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Greedy decode with a KV cache: prefill, then one token per forward. Returns the tokens and the
// [n, V] rows they were taken from. With `teacher` the reference tokens are fed instead.
std::pair<std::vector<int64_t>, at::Tensor> greedy(const CausalLM& m, const std::vector<int64_t>& prompt, int n,
                                                   const std::vector<int64_t>* teacher = nullptr) {
  KVCache cache = m.new_cache(1, static_cast<int64_t>(prompt.size()) + n);
  at::Tensor logits = m.forward(row_tensor(prompt), cache).logits;
  std::vector<int64_t> tokens;
  std::vector<at::Tensor> rows;
  for (int k = 0; k < n; ++k) {
    rows.push_back(logits[0][-1]);
    tokens.push_back(argmax_last(logits));
    if (k + 1 == n) break;
    const int64_t next = teacher ? (*teacher)[static_cast<size_t>(k)] : tokens.back();
    logits = m.forward(row_tensor({next}), cache).logits;
  }
  EXPECT_EQ(cache.length(0), static_cast<int64_t>(prompt.size()) + n - 1);
  return {tokens, at::stack(rows)};
}

// Rows `positions` of a [1, T, V] logits tensor.
at::Tensor rows_at(const at::Tensor& logits, const std::vector<int64_t>& positions) {
  return logits[0].index_select(0, at::tensor(positions, at::kLong));
}

fs::path temp_copy(const std::string& name, const std::string& tag) {
  const fs::path dst = fs::temp_directory_path() / ("ears_model_test_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dst);
  fs::copy(fixture(name), dst, fs::copy_options::recursive);
  return dst;
}

void edit_config(const fs::path& dir, const std::function<void(json&)>& edit) {
  json cfg = json::parse(ears::test::read_file(dir / "config.json"));
  edit(cfg);
  std::ofstream(dir / "config.json") << cfg.dump(2);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// qwen3-tiny (fp32)

TEST(Qwen3Tiny, FullForwardLogitsAndHiddenStates) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const json& ex = expected("qwen3-tiny");
  const CausalLM& m = model("qwen3-tiny", at::kFloat);
  const int N = ex["num_hidden_layers"].get<int>();
  ASSERT_EQ(m.config().num_hidden_layers, N);
  ASSERT_EQ(m.config().head_dim, 24);
  const auto aux_ids = ex["aux_hidden_layer_ids"].get<std::vector<int>>();
  EXPECT_EQ(m.default_eagle_aux_layers(), aux_ids);
  ForwardOptions opt;
  opt.aux_layers = aux_ids;
  for (int i = 0; i <= N; ++i) opt.aux_layers.push_back(i);
  for (const auto& c : ex["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto prompt = ids_of(c["prompt_ids"]);
    const auto out = m.forward(row_tensor(prompt), opt);
    ASSERT_EQ(out.logits.dim(), 3);
    EXPECT_EQ(out.logits.size(1), static_cast<int64_t>(prompt.size()));
    EXPECT_EQ(out.logits.scalar_type(), at::kFloat);
    const auto positions = ids_of(c["logits_positions"]);
    EXPECT_LE(max_abs(rows_at(out.logits, positions), to_tensor(c["logits"])), 1e-4);
    ASSERT_EQ(out.aux_hidden.size(), aux_ids.size() + N + 1);
    const at::Tensor aux_ex = to_tensor(c["aux_hidden_states_last_position"]);
    for (size_t a = 0; a < aux_ids.size(); ++a)
      EXPECT_LE(max_abs(out.aux_hidden[a][0][-1], aux_ex[a]), 1e-4) << "aux " << a;
    const at::Tensor hs_ex = to_tensor(c["hidden_states_last_position"]);
    for (int i = 0; i <= N; ++i)
      EXPECT_LE(max_abs(out.aux_hidden[aux_ids.size() + i][0][-1], hs_ex[i]), 1e-4) << "hs[" << i << "]";

    // logits_rows: only the listed rows, identical to the full result.
    ForwardOptions rows_opt;
    rows_opt.logits_rows = at::tensor(positions, at::kLong).view({1, -1});
    const auto picked = m.forward(row_tensor(prompt), rows_opt).logits;
    ASSERT_EQ(picked.size(1), static_cast<int64_t>(positions.size()));
    EXPECT_LE(max_abs(picked[0], rows_at(out.logits, positions)), 1e-5);
  }
}

TEST(Qwen3Tiny, GreedyWithKVCache) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const CausalLM& m = model("qwen3-tiny", at::kFloat);
  for (const auto& c : expected("qwen3-tiny")["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto& g = c["greedy"];
    const auto [tokens, rows] = greedy(m, ids_of(c["prompt_ids"]), g["n_new_tokens"].get<int>());
    EXPECT_EQ(tokens, ids_of(g["tokens"]));
    EXPECT_LE(max_abs(rows, to_tensor(g["step_logits"])), 1e-4);
  }
}

TEST(Qwen3Tiny, ShardedIsBitIdentical) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny-sharded");
  const CausalLM& a = model("qwen3-tiny", at::kFloat);
  const CausalLM& b = model("qwen3-tiny-sharded", at::kFloat);
  for (const auto& c : expected("qwen3-tiny")["cases"]) {
    const at::Tensor ids = row_tensor(ids_of(c["prompt_ids"]));
    EXPECT_TRUE(at::equal(a.forward(ids).logits, b.forward(ids).logits));
  }
}

TEST(Qwen3Tiny, CachedDecodeMatchesFullRecompute) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const CausalLM& m = model("qwen3-tiny", at::kFloat);
  const auto& c = expected("qwen3-tiny")["cases"][2];
  const auto seq = concat(ids_of(c["prompt_ids"]), ids_of(c["greedy"]["tokens"]));  // 45 tokens
  const at::Tensor full = m.forward(row_tensor(seq)).logits;
  // Chunks of uneven size through one cache: 20, 1, 5, 1, 13, 5.
  KVCache cache = m.new_cache(1, 64);
  int64_t start = 0;
  for (int64_t n : {20, 1, 5, 1, 13, 5}) {
    std::vector<int64_t> chunk(seq.begin() + start, seq.begin() + start + n);
    const at::Tensor got = m.forward(row_tensor(chunk), cache).logits;
    EXPECT_LE(max_abs(got[0], full[0].narrow(0, start, n)), 1e-4) << "chunk at " << start;
    start += n;
    EXPECT_EQ(cache.length(0), start);
  }
}

TEST(Qwen3Tiny, RaggedBatchMatchesSoloRuns) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const CausalLM& m = model("qwen3-tiny", at::kFloat);
  const auto& cases = expected("qwen3-tiny")["cases"];
  const auto a = ids_of(cases[1]["prompt_ids"]);  // 7
  const auto b = ids_of(cases[2]["prompt_ids"]);  // 33
  const int64_t La = static_cast<int64_t>(a.size()), Lb = static_cast<int64_t>(b.size());
  const std::vector<int64_t> extra_a = {5, 77, 300}, extra_b = {12, 9, 250};
  const at::Tensor solo_a = m.forward(row_tensor(concat(a, extra_a))).logits[0];
  const at::Tensor solo_b = m.forward(row_tensor(concat(b, extra_b))).logits[0];

  // Right-padded prefill (pad id 2), then truncate to the real lengths.
  std::vector<int64_t> padded_a = a;
  padded_a.resize(static_cast<size_t>(Lb), 2);
  const at::Tensor ids = at::stack({at::tensor(padded_a, at::kLong), at::tensor(b, at::kLong)});
  KVCache cache = m.new_cache(2, 40);
  ForwardOptions opt;
  opt.logits_rows = at::tensor(std::vector<int64_t>{La - 1, Lb - 1}, at::kLong).view({2, 1});
  opt.aux_layers = {2, 3};
  const auto pre = m.forward(ids, cache, opt);
  ASSERT_EQ(pre.logits.sizes(), (std::vector<int64_t>{2, 1, m.config().vocab_size}));
  EXPECT_LE(max_abs(pre.logits[0][0], solo_a[La - 1]), 1e-4);
  EXPECT_LE(max_abs(pre.logits[1][0], solo_b[Lb - 1]), 1e-4);
  EXPECT_EQ(cache.lengths(), (std::vector<int64_t>{Lb, Lb}));
  cache.set_lengths({La, Lb});

  // Append 3 tokens to both in one forward, each at its own offset.
  const at::Tensor step = at::stack({at::tensor(extra_a, at::kLong), at::tensor(extra_b, at::kLong)});
  const auto out = m.forward(step, cache);
  EXPECT_LE(max_abs(out.logits[0], solo_a.narrow(0, La, 3)), 1e-4);
  EXPECT_LE(max_abs(out.logits[1], solo_b.narrow(0, Lb, 3)), 1e-4);
  EXPECT_EQ(cache.lengths(), (std::vector<int64_t>{La + 3, Lb + 3}));

  // Drop sequence 0 from the batch and keep decoding sequence 1 alone.
  cache.select({1});
  EXPECT_EQ(cache.batch(), 1);
  const auto tail = concat(concat(b, extra_b), {42});
  const at::Tensor more = m.forward(row_tensor({42}), cache).logits;
  EXPECT_LE(max_abs(more[0][0], m.forward(row_tensor(tail)).logits[0][-1]), 1e-4);
}

TEST(Qwen3Tiny, TruncationRollback) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const CausalLM& m = model("qwen3-tiny", at::kFloat);
  const auto prompt = ids_of(expected("qwen3-tiny")["cases"][1]["prompt_ids"]);
  const int64_t L = static_cast<int64_t>(prompt.size());
  KVCache cache = m.new_cache(1, 32);
  m.forward(row_tensor(prompt), cache);
  m.forward(row_tensor({10, 20, 30, 40}), cache);  // speculative block of 4
  EXPECT_EQ(cache.length(0), L + 4);
  cache.truncate(0, L + 1);                         // keep only the first one
  const at::Tensor got = m.forward(row_tensor({99}), cache).logits;
  const at::Tensor want = m.forward(row_tensor(concat(prompt, {10, 99}))).logits;
  EXPECT_LE(max_abs(got[0][0], want[0][-1]), 1e-4);
  // And the stale key at position L+1 must be invisible: differs from a run that kept 20 there.
  EXPECT_GT(max_abs(got[0][0], m.forward(row_tensor(concat(prompt, {10, 20}))).logits[0][-1]), 1e-3);
}

TEST(Qwen3Tiny, CacheOverflowAndMisuseAreClearErrors) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const CausalLM& m = model("qwen3-tiny", at::kFloat);
  KVCache cache = m.new_cache(1, 8);
  m.forward(row_tensor({3, 4, 5, 6, 7, 8, 9}), cache);
  try {
    m.forward(row_tensor({1, 2}), cache);
    FAIL() << "expected an overflow error";
  } catch (const ears::Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the cache size 8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.length(0), 7);  // a failed forward leaves the cache untouched
  EXPECT_THROW(cache.truncate(0, 8), ears::Error);
  ForwardOptions bad;
  bad.aux_layers = {7};
  EXPECT_THROW(m.forward(row_tensor({1}), bad), ears::Error);
}

// ---------------------------------------------------------------------------------------------
// qwen3-tiny-bf16 (tied embeddings, BF16 checkpoint)

TEST(Qwen3TinyBf16, TiedEmbeddings) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny-bf16");
  const CausalLM& m = model("qwen3-tiny-bf16", at::kBFloat16);
  EXPECT_TRUE(m.config().tie_word_embeddings);
  EXPECT_EQ(m.config().torch_dtype, at::kBFloat16);
  EXPECT_TRUE(m.lm_head_weight().is_same(m.embedding_weight()));
  EXPECT_EQ(m.dtype(), at::kBFloat16);
}

TEST(Qwen3TinyBf16, Bf16ComputeWithinBounds) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny-bf16");
  const json& ex = expected("qwen3-tiny-bf16");
  const CausalLM& m = model("qwen3-tiny-bf16", at::kBFloat16);
  ForwardOptions opt;
  opt.aux_layers = ex["aux_hidden_layer_ids"].get<std::vector<int>>();
  for (const auto& c : ex["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto prompt = ids_of(c["prompt_ids"]);
    const auto out = m.forward(row_tensor(prompt), opt);
    EXPECT_EQ(out.logits.scalar_type(), at::kBFloat16);
    const at::Tensor got = rows_at(out.logits, ids_of(c["logits_positions"]));
    const at::Tensor want = to_tensor(c["logits"]);
    EXPECT_LE(max_abs(got, want), 0.75);
    EXPECT_LE(mean_abs(got, want), 0.15);
    const at::Tensor aux_ex = to_tensor(c["aux_hidden_states_last_position"]);
    for (size_t a = 0; a < out.aux_hidden.size(); ++a) EXPECT_LE(max_abs(out.aux_hidden[a][0][-1], aux_ex[a]), 0.25);

    // Teacher-forced greedy: feed the reference tokens; compare every step's row.
    const auto& g = c["greedy"];
    const auto ref = ids_of(g["tokens"]);
    const auto [tokens, rows] = greedy(m, prompt, static_cast<int>(ref.size()), &ref);
    const at::Tensor step_want = to_tensor(g["step_logits"]);
    EXPECT_LE(max_abs(rows, step_want), 0.75);
    EXPECT_LE(mean_abs(rows, step_want), 0.15);
    const auto margins = g["step_top1_top2_margin"].get<std::vector<double>>();
    for (size_t k = 0; k < ref.size(); ++k)
      if (margins[k] > 0.75) {
        EXPECT_EQ(tokens[k], ref[k]) << "step " << k;
      }
  }
}

TEST(Qwen3TinyBf16, UpcastToFp32MatchesFp32Compute) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny-bf16");
  const json& ex = expected("qwen3-tiny-bf16");
  const CausalLM& m = model("qwen3-tiny-bf16", at::kFloat);
  ASSERT_EQ(m.dtype(), at::kFloat);
  ForwardOptions opt;
  opt.aux_layers = ex["aux_hidden_layer_ids"].get<std::vector<int>>();
  for (const auto& c : ex["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto& f = c["fp32_compute"];
    const auto prompt = ids_of(c["prompt_ids"]);
    const auto out = m.forward(row_tensor(prompt), opt);
    EXPECT_LE(max_abs(rows_at(out.logits, ids_of(c["logits_positions"])), to_tensor(f["logits"])), 1e-4);
    const at::Tensor aux_ex = to_tensor(f["aux_hidden_states_last_position"]);
    for (size_t a = 0; a < out.aux_hidden.size(); ++a) EXPECT_LE(max_abs(out.aux_hidden[a][0][-1], aux_ex[a]), 1e-4);
    const auto ref = ids_of(f["greedy_tokens"]);
    const auto [tokens, rows] = greedy(m, prompt, static_cast<int>(ref.size()));
    EXPECT_EQ(tokens, ref);
    EXPECT_LE(max_abs(rows, to_tensor(f["step_logits"])), 1e-4);
  }
}

// ---------------------------------------------------------------------------------------------
// Config / checkpoint errors

TEST(ModelConfigErrors, MissingKeyWrongTypeShapeMismatch) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = temp_copy("qwen3-tiny", "cfg");
  const std::string cfg_path = (dir / "config.json").string();

  edit_config(dir, [](json& c) { c.erase("hidden_size"); });
  std::string msg = load_error(dir);
  EXPECT_NE(msg.find(cfg_path + ": missing key 'hidden_size'"), std::string::npos) << msg;

  edit_config(dir, [](json& c) { c["hidden_size"] = "64"; });
  msg = load_error(dir);
  EXPECT_NE(msg.find("'hidden_size' must be an integer"), std::string::npos) << msg;

  edit_config(dir, [](json& c) { c["hidden_size"] = 64; c["intermediate_size"] = 128; });
  msg = load_error(dir);
  EXPECT_NE(msg.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;

  edit_config(dir, [](json& c) { c["intermediate_size"] = 160; c["architectures"] = {"MistralForCausalLM"}; });
  msg = load_error(dir);
  EXPECT_NE(msg.find("architecture 'MistralForCausalLM' is not supported"), std::string::npos) << msg;

  edit_config(dir, [](json& c) {
    c["architectures"] = {"Qwen3ForCausalLM"};
    c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  });
  msg = load_error(dir);
  EXPECT_NE(msg.find("rope_scaling type 'yarn' is not supported"), std::string::npos) << msg;

  edit_config(dir, [](json& c) { c["rope_scaling"] = nullptr; c["rope_theta"] = 1000000.0; c["torch_dtype"] = "bfloat16"; });
  const CausalLM ok = CausalLM::load(dir);  // float rope_theta and a dtype change are fine
  EXPECT_EQ(ok.config().torch_dtype, at::kBFloat16);
  // auto: bf16 where a kernel path or native bf16 computes it, float32 on the ATen path otherwise.
  EXPECT_EQ(ok.dtype(), ears::auto_dtype(at::kBFloat16, at::kCPU));
  EXPECT_EQ(ok.config().rope.theta, 1e6);
  fs::remove_all(dir);
}

TEST(ModelConfigErrors, MissingLmHeadWithoutTie) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny-bf16");
  const fs::path dir = temp_copy("qwen3-tiny-bf16", "tie");
  edit_config(dir, [](json& c) { c["tie_word_embeddings"] = false; });
  const std::string msg = load_error(dir);
  EXPECT_NE(msg.find("lm_head.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tie_word_embeddings"), std::string::npos) << msg;
  fs::remove_all(dir);
}

TEST(ModelConfigParse, VariantsAndDefaults) {
  const json base = {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 10},   {"hidden_size", 32},
                     {"intermediate_size", 48},                {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                     {"rms_norm_eps", 1e-5}};
  auto c = ears::ModelConfig::parse(base.dump(), "x/config.json");
  EXPECT_EQ(c.arch, ears::Arch::Llama);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.rope.theta, 10000.0);
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.qk_norm || c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, at::kFloat);
  EXPECT_TRUE(c.eos_token_ids.empty());

  json j = base;
  j["attention_bias"] = true;
  j["vocab_size"] = 128256;
  j["eos_token_id"] = {128001, 128009};
  j["bos_token_id"] = nullptr;
  j["dtype"] = "bfloat16";
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000}};
  c = ears::ModelConfig::parse(j.dump(), "x/config.json");
  EXPECT_TRUE(c.qkv_bias && c.o_bias);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128009}));
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_EQ(c.torch_dtype, at::kBFloat16);
  EXPECT_EQ(c.rope.theta, 500000.0);

  j = base;
  j["architectures"] = {"Qwen2ForCausalLM"};
  c = ears::ModelConfig::parse(j.dump(), "x/config.json");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias || c.qk_norm);

  j = base;
  j["num_key_value_heads"] = 3;
  EXPECT_THROW(ears::ModelConfig::parse(j.dump(), "x/config.json"), ears::Error);
  // Values that would fail midway through a run are refused at load, naming the key.
  auto error_of = [](const json& cfg) {
    try {
      ears::ModelConfig::parse(cfg.dump(), "x/config.json");
    } catch (const ears::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  j = base;
  j["max_position_embeddings"] = 0;
  EXPECT_NE(error_of(j).find("max_position_embeddings is 0"), std::string::npos) << error_of(j);
  j = base;
  j["eos_token_id"] = 10;  // vocab_size 10
  EXPECT_NE(error_of(j).find("special token id 10 (eos_token_id / bos_token_id) is outside the vocabulary [0, 10)"),
            std::string::npos)
      << error_of(j);
  j = base;
  j["bos_token_id"] = -1;
  EXPECT_NE(error_of(j).find("special token id -1"), std::string::npos) << error_of(j);
  EXPECT_THROW(ears::ModelConfig::parse("{not json", "x/config.json"), ears::Error);
}
