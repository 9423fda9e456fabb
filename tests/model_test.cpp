// CausalLM / KVCache / layers against the golden fixtures (shared/fixtures/README.md).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
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

namespace fs = std::filesystem;
using json = nlohmann::json;
using ears::CausalLM;
using ears::ForwardOptions;
using ears::KVCache;
using ears::test::max_abs;
using ears::test::mean_abs;
using ears::test::row_tensor;
using ears::test::to_tensor;

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

std::string load_error(const fs::path& dir) {
  try {
    CausalLM::load(dir);
  } catch (const ears::Error& e) {
    return e.what();
  }
  return "<no error>";
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
  EXPECT_EQ(ok.dtype(), at::kBFloat16);
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

// ---------------------------------------------------------------------------------------------
// layers: RoPE scaling variants and attention against a naive repeat_kv reference

TEST(Layers, RopeInvFreqVariants) {
  ears::RopeConfig rope;
  rope.theta = 500000.0;
  const at::Tensor base = ears::layers::rope_inv_freq(64, rope, at::kCPU);
  ASSERT_EQ(base.size(0), 32);
  EXPECT_NEAR(base[0].item<double>(), 1.0, 1e-7);
  EXPECT_NEAR(base[1].item<double>(), std::pow(500000.0, -2.0 / 64), 1e-7);
  rope.type = "linear";
  rope.factor = 4.0;
  EXPECT_TRUE(at::allclose(ears::layers::rope_inv_freq(64, rope, at::kCPU), base / 4.0));
  rope.type = "llama3";
  rope.factor = 8.0;
  rope.low_freq_factor = 1.0;
  rope.high_freq_factor = 4.0;
  rope.original_max_position_embeddings = 8192;
  const at::Tensor l3 = ears::layers::rope_inv_freq(64, rope, at::kCPU);
  EXPECT_EQ(l3[0].item<float>(), base[0].item<float>());            // high frequency: unchanged
  EXPECT_FLOAT_EQ(l3[31].item<float>(), base[31].item<float>() / 8);  // low frequency: / factor
}

TEST(Layers, AttentionMatchesNaiveGqa) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const int64_t B = 2, T = 3, H = 6, K = 2, S = 9, hd = 8;
  const at::Tensor q = at::randn({B, T, H, hd}, gen, at::kFloat);
  const at::Tensor k = at::randn({B, K, S, hd}, gen, at::kFloat);
  const at::Tensor v = at::randn({B, K, S, hd}, gen, at::kFloat);
  // Sequence 0 at positions 2..4, sequence 1 at 6..8.
  const at::Tensor pos = at::tensor(std::vector<int64_t>{2, 3, 4, 6, 7, 8}, at::kLong).view({B, T});
  const at::Tensor blocked = at::arange(S, at::kLong).view({1, 1, S}) > pos.unsqueeze(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const at::Tensor got = ears::layers::attention(q, k, v, blocked, scale);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{B, T, H * hd}));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kv = h / (H / K);
        const int64_t n = pos[b][t].item<int64_t>() + 1;
        const at::Tensor s = at::mv(k[b][kv].narrow(0, 0, n), q[b][t][h]) * scale;
        const at::Tensor o = at::mv(v[b][kv].narrow(0, 0, n).t(), at::softmax(s, 0));
        EXPECT_LE(max_abs(got[b][t].narrow(0, h * hd, hd), o), 1e-5) << b << " " << t << " " << h;
      }
}

// ---------------------------------------------------------------------------------------------
// CPU kernels (decoders/cpu_bf16, decoders/cpu_avx2) behind layers::linear / attention / rms_norm /
// apply_rope, once per kernel path the CPU supports (tests/kernel_paths.h). On the aten path the
// same assertions hold for LibTorch's own ops where they are stated for every path.

namespace {
class CpuKernels : public ::testing::TestWithParam<ears::kernels::Path> {
 protected:
  void SetUp() override {
    EARS_SKIP_UNSUPPORTED_PATH(GetParam());
    guard_ = std::make_unique<ears::test::KernelPathGuard>(GetParam());
  }
  void TearDown() override { guard_.reset(); }
  bool kernels_on() const { return GetParam() != ears::kernels::Path::aten; }

 private:
  std::unique_ptr<ears::test::KernelPathGuard> guard_;
};
}  // namespace

INSTANTIATE_TEST_SUITE_P(Paths, CpuKernels, EARS_KERNEL_PATHS, ears::test::path_param_name);

// A prepared (packed) linear: fp32 accumulation with one bf16 rounding, and every row rounds the
// same whatever the number of rows computed with it (T = 0 identity at every batch size).
TEST_P(CpuKernels, Bf16LinearIsRowInvariantForAnyRowCount) {
  if (!kernels_on()) GTEST_SKIP() << "LibTorch's GEMM is not row-invariant (layers::linear works around it for 1 row only)";
  auto gen = at::make_generator<at::CPUGeneratorImpl>(14);
  // K = 200: six full 32-wide chunks plus a zero-padded tail; N = 301: full 32-row blocks plus a
  // padded one (164k outputs: a changed summation order shows up in some bf16 rounding);
  // 40 rows: full and partial row tiles of every kernel.
  const int64_t K = 200, N = 4099, M = 40;
  const at::Tensor x = at::randn({M, K}, gen, at::kFloat).to(at::kBFloat16);
  const at::Tensor w = (at::randn({N, K}, gen, at::kFloat) * 0.1).to(at::kBFloat16);
  const at::Tensor bias = at::randn({N}, gen, at::kFloat).to(at::kBFloat16);
  const ears::layers::LinearWeight lw = ears::layers::prepare_linear(w, bias);
  ASSERT_TRUE(lw.packed.defined());
  EXPECT_FALSE(lw.w.defined());  // the plain copy is dropped
  EXPECT_TRUE(at::equal(lw.dense(), w));
  const at::Tensor all = ears::layers::linear(x, lw);
  ASSERT_EQ(all.scalar_type(), at::kBFloat16);
  const at::Tensor ref = at::linear(x.to(at::kFloat), w.to(at::kFloat), bias.to(at::kFloat));
  // Half a bf16 ulp (2^-8 relative) plus the fp32 summation error of 200 products.
  const at::Tensor err = (all.to(at::kFloat) - ref).abs();
  EXPECT_TRUE(err.le(ref.abs() * (1.0 / 256) + 1e-4).all().item<bool>()) << "max error " << err.max().item<float>();
  for (int64_t m : {1, 2, 3, 4, 6, 7, 8, 9, 15, 16, 17, 33}) {
    const at::Tensor part = ears::layers::linear(x.narrow(0, M - m, m).view({1, m, K}), lw);
    EXPECT_TRUE(at::equal(part.view({m, N}), all.narrow(0, M - m, m))) << m << " rows round differently";
  }
  for (int64_t r = 0; r < M; ++r)  // every row decoded alone (the decode step's kernel)
    EXPECT_TRUE(at::equal(ears::layers::linear(x.narrow(0, r, 1), lw), all.narrow(0, r, 1))) << "row " << r << " alone";
}

TEST_P(CpuKernels, Float32LinearIsRowInvariantAndMatchesAten) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(16);
  const int64_t K = 200, N = 37, M = 40;
  const at::Tensor x = at::randn({M, K}, gen, at::kFloat);
  const at::Tensor w = at::randn({N, K}, gen, at::kFloat) * 0.1;
  const at::Tensor bias = at::randn({N}, gen, at::kFloat);
  const ears::layers::LinearWeight lw = ears::layers::prepare_linear(w, bias);
  EXPECT_EQ(lw.packed.defined(), kernels_on());
  EXPECT_TRUE(at::equal(lw.dense(), w));
  const at::Tensor all = ears::layers::linear(x, lw);
  EXPECT_LE(max_abs(all, at::linear(x.to(at::kDouble), w.to(at::kDouble), bias.to(at::kDouble)).to(at::kFloat)), 1e-4);
  if (!kernels_on()) return;
  for (int64_t m : {1, 2, 3, 4, 5, 8, 17, 33}) {
    const at::Tensor part = ears::layers::linear(x.narrow(0, M - m, m).view({1, m, K}), lw);
    EXPECT_TRUE(at::equal(part.view({m, N}), all.narrow(0, M - m, m))) << m << " rows round differently";
  }
}

// Plain (unprepared) bf16 weights: vdpbf16ps row dots for <= 8 rows on AVX-512 BF16 CPUs.
TEST_P(CpuKernels, Bf16PlainWeightLinearMatchesFloat32) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  const int64_t K = 200, N = 37;
  const at::Tensor x = at::randn({8, K}, gen, at::kFloat).to(at::kBFloat16);
  const at::Tensor w = (at::randn({N, K}, gen, at::kFloat) * 0.1).to(at::kBFloat16);
  const at::Tensor bias = at::randn({N}, gen, at::kFloat).to(at::kBFloat16);
  const at::Tensor ref = at::linear(x.to(at::kFloat), w.to(at::kFloat), bias.to(at::kFloat));
  const at::Tensor all = ears::layers::linear(x, w, bias);
  ASSERT_EQ(all.scalar_type(), at::kBFloat16);
  const at::Tensor err = (all.to(at::kFloat) - ref).abs();
  EXPECT_TRUE(err.le(ref.abs() * (1.0 / 128) + 1e-3).all().item<bool>()) << "max error " << err.max().item<float>();
  if (!ears::cpu_bf16::available()) return;  // row dots: row-invariant up to 8 rows
  for (int64_t m = 1; m <= 8; ++m) {
    const at::Tensor part = ears::layers::linear(x.narrow(0, 0, m).view({1, m, K}), w, bias);
    EXPECT_TRUE(at::equal(part.view({m, N}), all.narrow(0, 0, m))) << m << " rows round differently";
  }
}

TEST_P(CpuKernels, RmsNormMatchesTheFormulaOnRowsAndHeadViews) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(13);
  const double eps = 1e-6;
  auto formula = [&](const at::Tensor& x, const at::Tensor& w) {
    const at::Tensor xf = x.to(at::kFloat);
    return (xf * xf.pow(2).mean(-1, true).add(eps).rsqrt()).to(at::kBFloat16).mul(w);
  };
  // D = 44: full 16- and 8-lane chunks plus a tail.
  const at::Tensor x = (at::randn({2, 3, 44}, gen, at::kFloat) * 3).to(at::kBFloat16);
  const at::Tensor w = (at::rand({44}, gen, at::kFloat) + 0.5).to(at::kBFloat16);
  const at::Tensor y = ears::layers::rms_norm(x, w, eps);
  ASSERT_EQ(y.sizes(), x.sizes());
  // Only the fp32 sum order differs from the formula: at most one bf16 rounding step apart.
  EXPECT_LE(max_abs(y, formula(x, w)), 0.02 * 3);
  EXPECT_LE(mean_abs(y, formula(x, w)), 1e-3);
  // The q and k heads of a fused projection: a strided [B, T, n, hd] view, one weight row per head.
  const at::Tensor qkv = at::randn({2, 3, 7 * 20}, gen, at::kFloat).to(at::kBFloat16);
  const at::Tensor heads = qkv.narrow(-1, 0, 5 * 20).view({2, 3, 5, 20});
  ASSERT_FALSE(heads.is_contiguous());
  const at::Tensor hw = (at::rand({5, 20}, gen, at::kFloat) + 0.5).to(at::kBFloat16);
  const at::Tensor hy = ears::layers::rms_norm(heads, hw, eps);
  EXPECT_LE(max_abs(hy, formula(heads, hw)), 0.02 * 3);
  EXPECT_LE(mean_abs(hy, formula(heads, hw)), 1e-3);
}

TEST_P(CpuKernels, RopeRoundsLikeTheBf16Formula) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(15);
  // hd = 44: half = 22, full 16- and 8-lane chunks plus a tail per half; q and k heads as a view.
  const int64_t B = 2, T = 3, n = 5, hd = 44;
  const at::Tensor qkv = (at::randn({B, T, (n + 2) * hd}, gen, at::kFloat) * 2).to(at::kBFloat16);
  const at::Tensor x = qkv.narrow(-1, 0, n * hd).view({B, T, n, hd});
  const at::Tensor pos = at::tensor(std::vector<int64_t>{3, 4, 5, 17, 18, 19}, at::kLong).view({B, T});
  ears::RopeConfig rc;
  rc.theta = 10000.0;
  const ears::layers::RopeTables rope =
      ears::layers::rope_tables(ears::layers::rope_inv_freq(hd, rc, at::kCPU), pos, at::kBFloat16);
  const at::Tensor y = ears::layers::apply_rope(x, rope);
  // The formula in bf16 tensor ops (each op rounds once, as Hugging Face eager does).
  const at::Tensor cos = rope.cos.unsqueeze(2), sin = rope.sin.unsqueeze(2);
  const at::Tensor rot = at::cat({x.narrow(-1, hd / 2, hd / 2).neg(), x.narrow(-1, 0, hd / 2)}, -1);
  const at::Tensor ref = x * cos + rot * sin;
  EXPECT_TRUE(at::equal(y, ref)) << "max |diff| " << max_abs(y, ref);
}

TEST_P(CpuKernels, AttentionMatchesAtenPathAndIgnoresKeysPastThePosition) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(12);
  // hd = 84: full 32/16/8-wide steps plus tails; S = 21: a partial 8/16-key exp chunk.
  const int64_t B = 2, T = 3, H = 4, K = 2, S = 21, hd = 84;
  const at::Tensor q = at::randn({B, T, H, hd}, gen, at::kFloat).to(at::kBFloat16);
  at::Tensor k = at::randn({B, K, S, hd}, gen, at::kFloat).to(at::kBFloat16);
  at::Tensor v = at::randn({B, K, S, hd}, gen, at::kFloat).to(at::kBFloat16);
  const at::Tensor pos = at::tensor(std::vector<int64_t>{2, 3, 4, 15, 16, 17}, at::kLong).view({B, T});
  const at::Tensor blocked = at::arange(S, at::kLong).view({1, 1, S}) > pos.unsqueeze(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const at::Tensor aten = ears::layers::attention(q, k, v, blocked, scale);
  // The kernels never read keys past every position: NaN there must not reach the output (the
  // ATen path multiplies them by probability 0).
  if (kernels_on()) {
    k.narrow(2, 18, S - 18).fill_(std::numeric_limits<float>::quiet_NaN());
    v.narrow(2, 18, S - 18).fill_(std::numeric_limits<float>::quiet_NaN());
  }
  const at::Tensor kernel = ears::layers::attention(q, k, v, blocked, scale, pos);
  ASSERT_EQ(kernel.sizes(), aten.sizes());
  ASSERT_TRUE(at::isfinite(kernel).all().item<bool>());
  // Same roundings as the ATen path (bf16 scores, bf16 probabilities); only the order of the fp32
  // sums differs, which can move a bf16 rounding by one ulp.
  EXPECT_LE(max_abs(kernel, aten), 0.02);
  EXPECT_LE(mean_abs(kernel, aten), 1e-3);
}

// float32 activations (the float32 compute dtype): RMSNorm, RoPE and attention kernels against
// the formulas in fp64.
TEST_P(CpuKernels, Float32RowKernelsMatchTheFormulas) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(17);
  const double eps = 1e-6;
  const at::Tensor qkv = at::randn({2, 3, 7 * 20}, gen, at::kFloat);
  const at::Tensor heads = qkv.narrow(-1, 0, 5 * 20).view({2, 3, 5, 20});
  const at::Tensor hw = at::rand({5, 20}, gen, at::kFloat) + 0.5;
  const at::Tensor hd64 = heads.to(at::kDouble);
  const at::Tensor norm_ref = hd64 * hd64.pow(2).mean(-1, true).add(eps).rsqrt() * hw.to(at::kDouble);
  EXPECT_LE(max_abs(ears::layers::rms_norm(heads, hw, eps), norm_ref.to(at::kFloat)), 1e-5);

  const int64_t hd = 44;
  const at::Tensor x = at::randn({2, 3, 7 * hd}, gen, at::kFloat).narrow(-1, 0, 5 * hd).view({2, 3, 5, hd});
  const at::Tensor pos = at::tensor(std::vector<int64_t>{3, 4, 5, 17, 18, 19}, at::kLong).view({2, 3});
  ears::RopeConfig rc;
  const ears::layers::RopeTables rope =
      ears::layers::rope_tables(ears::layers::rope_inv_freq(hd, rc, at::kCPU), pos, at::kFloat);
  const at::Tensor rot = at::cat({x.narrow(-1, hd / 2, hd / 2).neg(), x.narrow(-1, 0, hd / 2)}, -1);
  const at::Tensor rope_ref = x * rope.cos.unsqueeze(2) + rot * rope.sin.unsqueeze(2);
  EXPECT_LE(max_abs(ears::layers::apply_rope(x, rope), rope_ref), 1e-6);

  const int64_t B = 2, T = 3, H = 4, K = 2, S = 21, d = 84;
  const at::Tensor q = at::randn({B, T, H, d}, gen, at::kFloat);
  const at::Tensor k = at::randn({B, K, S, d}, gen, at::kFloat);
  const at::Tensor v = at::randn({B, K, S, d}, gen, at::kFloat);
  const at::Tensor p = at::tensor(std::vector<int64_t>{2, 3, 4, 15, 16, 17}, at::kLong).view({B, T});
  const at::Tensor blocked = at::arange(S, at::kLong).view({1, 1, S}) > p.unsqueeze(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor got = ears::layers::attention(q, k, v, blocked, scale, p);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kv = h / (H / K), n = p[b][t].item<int64_t>() + 1;
        const at::Tensor sc = at::mv(k[b][kv].narrow(0, 0, n).to(at::kDouble), q[b][t][h].to(at::kDouble)) * scale;
        const at::Tensor o = at::mv(v[b][kv].narrow(0, 0, n).to(at::kDouble).t(), at::softmax(sc, 0));
        EXPECT_LE(max_abs(got[b][t].narrow(0, h * d, d), o.to(at::kFloat)), 1e-5) << b << " " << t << " " << h;
      }
}

TEST(KernelPath, EnvironmentCapsThePathAndRejectsUnknownNames) {
  EXPECT_EQ(ears::kernels::parse_path("avx2", "x"), ears::kernels::Path::avx2);
  try {
    ears::kernels::parse_path("avx3", "EARS_KERNELS");
    ADD_FAILURE() << "no error";
  } catch (const ears::Error& e) {
    EXPECT_NE(std::string(e.what()).find("EARS_KERNELS: unknown kernel path 'avx3'"), std::string::npos) << e.what();
  }
  if (ears::kernels::best_path() != ears::kernels::Path::amx) {
    EXPECT_THROW(ears::kernels::set_path(ears::kernels::Path::amx), ears::Error);
  }
  EXPECT_NE(ears::kernels::cpu_info().isa(), "");
}

// ---------------------------------------------------------------------------------------------
// Qwen2 / Llama bias paths on a tiny random checkpoint written here

namespace {

void write_safetensors(const fs::path& path, const std::map<std::string, at::Tensor>& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t0] : tensors) {  // std::map: sorted names
    const at::Tensor t = t0.to(at::kFloat).contiguous();
    const size_t begin = data.size();
    data.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()) * 4);
    header[name] = {{"dtype", "F32"}, {"shape", t.sizes().vec()}, {"data_offsets", {begin, data.size()}}};
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string h = header.dump();
  while ((8 + h.size()) % 8 != 0) h.push_back(' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

struct TinyDims {
  int64_t V = 50, D = 32, I = 48, N = 2, H = 4, K = 2, hd = 8;
};

std::map<std::string, at::Tensor> random_weights(const TinyDims& d, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto r = [&](std::vector<int64_t> s, double sd = 0.2) { return at::randn(s, gen, at::kFloat) * sd; };
  std::map<std::string, at::Tensor> w;
  w["model.embed_tokens.weight"] = r({d.V, d.D}, 1.0);
  w["model.norm.weight"] = 1 + r({d.D}, 0.1);
  w["lm_head.weight"] = r({d.V, d.D});
  for (int64_t i = 0; i < d.N; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    w[p + "input_layernorm.weight"] = 1 + r({d.D}, 0.1);
    w[p + "post_attention_layernorm.weight"] = 1 + r({d.D}, 0.1);
    w[p + "self_attn.q_proj.weight"] = r({d.H * d.hd, d.D});
    w[p + "self_attn.k_proj.weight"] = r({d.K * d.hd, d.D});
    w[p + "self_attn.v_proj.weight"] = r({d.K * d.hd, d.D});
    w[p + "self_attn.o_proj.weight"] = r({d.D, d.H * d.hd});
    w[p + "mlp.gate_proj.weight"] = r({d.I, d.D});
    w[p + "mlp.up_proj.weight"] = r({d.I, d.D});
    w[p + "mlp.down_proj.weight"] = r({d.D, d.I});
  }
  return w;
}

fs::path write_model(const std::string& tag, const std::string& arch, const TinyDims& d, bool attention_bias,
                     const std::map<std::string, at::Tensor>& w) {
  const fs::path dir = fs::temp_directory_path() / ("ears_model_test_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const json cfg = {{"architectures", {arch}},       {"vocab_size", d.V},          {"hidden_size", d.D},
                    {"intermediate_size", d.I},      {"num_hidden_layers", d.N},   {"num_attention_heads", d.H},
                    {"num_key_value_heads", d.K},    {"head_dim", d.hd},           {"rms_norm_eps", 1e-6},
                    {"rope_theta", 10000.0},         {"attention_bias", attention_bias},
                    {"tie_word_embeddings", false},  {"torch_dtype", "float32"},   {"hidden_act", "silu"}};
  std::ofstream(dir / "config.json") << cfg.dump(2);
  write_safetensors(dir / "model.safetensors", w);
  return dir;
}

}  // namespace

TEST(BiasPaths, Qwen2AndLlamaBiasesAreLoadedAndUsed) {
  const TinyDims d;
  const auto w = random_weights(d, 11);
  const at::Tensor ids = at::tensor(std::vector<int64_t>{3, 17, 42, 8, 0, 49, 21}, at::kLong).view({1, -1});

  const fs::path llama_dir = write_model("llama", "LlamaForCausalLM", d, false, w);
  const at::Tensor plain = CausalLM::load(llama_dir).forward(ids).logits;

  // Qwen2 always has q/k/v biases; zero biases == no biases.
  auto wq = w;
  for (int64_t i = 0; i < d.N; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".self_attn.";
    wq[p + "q_proj.bias"] = at::zeros({d.H * d.hd});
    wq[p + "k_proj.bias"] = at::zeros({d.K * d.hd});
    wq[p + "v_proj.bias"] = at::zeros({d.K * d.hd});
  }
  const fs::path qwen2_dir = write_model("qwen2", "Qwen2ForCausalLM", d, false, wq);
  EXPECT_LE(max_abs(CausalLM::load(qwen2_dir).forward(ids).logits, plain), 1e-6);

  // A v bias adds the same vector to every attention output (softmax rows sum to 1), i.e. it is
  // equivalent to an o_proj bias of W_o @ repeat_kv(b_v): Qwen2(v bias) == Llama(o bias).
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  auto wl = w;
  for (int64_t i = 0; i < d.N; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".self_attn.";
    const at::Tensor bv = at::randn({d.K * d.hd}, gen, at::kFloat);
    wq[p + "v_proj.bias"] = bv;
    const at::Tensor per_head = bv.view({d.K, d.hd}).repeat_interleave(d.H / d.K, 0).reshape({-1});
    wl[p + "o_proj.bias"] = at::mv(w.at(p + "o_proj.weight"), per_head);
    wl[p + "q_proj.bias"] = at::zeros({d.H * d.hd});
    wl[p + "k_proj.bias"] = at::zeros({d.K * d.hd});
    wl[p + "v_proj.bias"] = at::zeros({d.K * d.hd});
  }
  write_model("qwen2", "Qwen2ForCausalLM", d, false, wq);
  const at::Tensor qwen2_v = CausalLM::load(qwen2_dir).forward(ids).logits;
  EXPECT_GT(max_abs(qwen2_v, plain), 1e-2);  // the bias matters
  const fs::path llama_b_dir = write_model("llama_b", "LlamaForCausalLM", d, true, wl);
  EXPECT_LE(max_abs(CausalLM::load(llama_b_dir).forward(ids).logits, qwen2_v), 1e-4);

  // A Qwen2 checkpoint without its biases is an error naming the tensor.
  write_model("qwen2", "Qwen2ForCausalLM", d, false, w);
  const std::string msg = load_error(qwen2_dir);
  EXPECT_NE(msg.find("model.layers.0.self_attn.q_proj.bias"), std::string::npos) << msg;
  for (const auto& p : {llama_dir, qwen2_dir, llama_b_dir}) fs::remove_all(p);
}

namespace ears {
namespace {

uint64_t checkpoint_numel(const std::filesystem::path& dir) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    const std::string bytes = test::read_file(e.path());
    const auto header = parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                                 e.path().string());
    for (const auto& t : header.tensors) total += t.numel();
  }
  return total;
}

// report.md's toy-model banner and size line rest on this count: it must equal the tensors a
// real checkpoint holds (tied and single/sharded files), and count biases, untied heads and
// q/k norms by hand for the other architectures.
TEST(ModelConfigFacts, ParameterCountEqualsTheCheckpointsTensors) {
  const auto bundled = test::source_dir() / "models" / "tiny-qwen3";
  EXPECT_EQ(static_cast<uint64_t>(ModelConfig::load(bundled).parameter_count()), checkpoint_numel(bundled));
  if (!test::shared_dir().empty())
    for (const char* f : {"qwen3-tiny", "qwen3-tiny-sharded"}) {
      const auto dir = test::shared_dir() / "fixtures" / f;
      if (!std::filesystem::exists(dir)) continue;
      EXPECT_EQ(static_cast<uint64_t>(ModelConfig::load(dir).parameter_count()), checkpoint_numel(dir)) << f;
    }
  // Qwen2-style: q/k/v biases, untied head, no q/k norm. h 8, 2 heads of 4, 1 KV head, I 16, V 10, 2 layers.
  const ModelConfig qwen2 = ModelConfig::parse(
      R"({"architectures": ["Qwen2ForCausalLM"], "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
          "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "tie_word_embeddings": false,
          "rms_norm_eps": 1e-6, "rope_theta": 10000, "max_position_embeddings": 64})",
      "qwen2");
  const int64_t per_layer = 8 * 8 + 2 * (8 * 4) + (8 + 4 + 4) + 8 * 8 + 3 * 16 * 8 + 2 * 8;  // q, k+v, biases, o, mlp, norms
  EXPECT_EQ(qwen2.parameter_count(), 2 * 10 * 8 + 2 * per_layer + 8);
}

}  // namespace
}  // namespace ears

namespace ears {
namespace {

// LibTorch >= 2.1's fused attention (the accelerator path) against the eager path, on the CPU:
// same GQA layout, same mask; fp32 within 1e-5, bf16 within bf16 rounding.
TEST(AttentionPaths, FusedSdpaMatchesEager) {
#ifdef EARS_HAVE_SDPA
  at::manual_seed(3);
  const int64_t B = 2, T = 5, H = 4, K = 2, S = 9, hd = 8;
  const at::Tensor q = at::randn({B, T, H, hd}), k = at::randn({B, K, S, hd}), v = at::randn({B, K, S, hd});
  // Row b sees keys s <= positions[b, t]: a ragged KV cache (b = 0 at length 4, b = 1 at 7).
  const at::Tensor pos = at::arange(T).view({1, T}) + at::tensor({4L, 7L}).view({B, 1}) - (T - 1);
  const at::Tensor blocked = at::arange(S).view({1, 1, S}) > pos.view({B, T, 1});
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const at::Tensor eager = layers::attention_eager(q, k, v, blocked, scale);
  const at::Tensor fused = layers::attention_sdpa(q, k, v, blocked, scale);
  EXPECT_LE((eager - fused).abs().max().item<double>(), 1e-5);
  const auto bf = [](const at::Tensor& x) { return x.to(at::kBFloat16); };
  const at::Tensor fused16 = layers::attention_sdpa(bf(q), bf(k), bf(v), blocked, scale).to(at::kFloat);
  EXPECT_LE((eager - fused16).abs().max().item<double>(), 0.05);
#else
  GTEST_SKIP() << "LibTorch " << TORCH_VERSION << " < 2.1: no at::scaled_dot_product_attention (the eager path runs)";
#endif
}

}  // namespace
}  // namespace ears
