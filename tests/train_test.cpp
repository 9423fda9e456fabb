// Training pieces of the embedded default pair: BPE trainer -> tokenizer.json, safetensors
// writer -> Checkpoint, the training forward vs CausalLM, AdamW on a micro model, and the
// EAGLE-3 training-time-test forward vs Eagle3Head (save + load + same logits).
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/randn_like.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <unistd.h>
#include <filesystem>

#include "datasets/synth_gsm.h"
#include "decoders/aten_operators.h"
#include "decoders/eagle3.h"
#include "decoders/model.h"
#include "decoders/safetensors.h"
#include "decoders/tokenizer.h"
#include "harness/base/error.h"
#include "harness/base/files.h"
#include "harness/train/batch.h"
#include "harness/train/bpe_trainer.h"
#include "harness/train/checkpoint_writer.h"
#include "harness/train/corpus.h"
#include "harness/train/draft_vocab.h"
#include "harness/train/eagle3.h"
#include "harness/train/eval.h"
#include "harness/train/loop.h"
#include "harness/train/optimizer.h"
#include "harness/train/safetensors_writer.h"
#include "harness/train/target.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ears_train_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<std::string> small_corpus() {
  std::vector<std::string> c;
  for (const auto& [q, a] : ears::synth_gsm_pairs(300, 7, "train")) c.push_back(q + "\n" + a);
  c.push_back("The quick brown fox jumps over the lazy dog. It's 12345 o'clock!");
  return c;
}

// Trains a small tokenizer once for the whole binary.
const fs::path& micro_tokenizer_dir() {
  static const fs::path dir = [] {
    fs::path d = temp_dir("tok");
    ears::BpeTrainerOptions o;
    o.vocab_size = 400;
    ears::train_bpe_tokenizer(small_corpus(), o, d);
    return d;
  }();
  return dir;
}

// Removes the shared tokenizer directory when the binary finishes.
struct CleanUp : ::testing::Environment {
  void TearDown() override { fs::remove_all(fs::temp_directory_path() / ("ears_train_test_" + std::to_string(::getpid()) + "_tok")); }
};
const auto* const kCleanUp = ::testing::AddGlobalTestEnvironment(new CleanUp);

}  // namespace

// The trainer's GSM8K rows come through the benchmark's reader: the same file resolution (a
// directory holding gsm8k/train.jsonl), BOM and blank lines accepted, a bad line named by number.
TEST(TrainCorpus, Gsm8kTrainIsReadAsTheBenchmarkReadsIt) {
  const fs::path d = temp_dir("gsm8k_train");
  fs::create_directories(d / "gsm8k");
  ears::write_file_atomic(d / "gsm8k" / "train.jsonl",
                   "\xEF\xBB\xBF{\"question\": \"Q1?\", \"answer\": \"2+2=<<2+2=4>>4\\n#### 4\"}\n\n"
                   "{\"question\": \"Q2?\", \"answer\": \"#### 7\"}\r\n");
  const std::string found = ears::find_gsm8k_train(d.string());
  EXPECT_EQ(found, (d / "gsm8k" / "train.jsonl").string());
  const auto rows = ears::read_gsm8k_train(found);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], std::make_pair(std::string("Q1?"), std::string("2+2=<<2+2=4>>4\n#### 4")));
  EXPECT_EQ(rows[1].second, "#### 7");
  ears::write_file_atomic(d / "bad.jsonl", "{\"question\": \"Q1?\", \"answer\": \"#### 4\"}\n{\"question\": \"Q2?\"}\n");
  try {
    ears::read_gsm8k_train((d / "bad.jsonl").string());
    ADD_FAILURE() << "a line without an answer must fail";
  } catch (const ears::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2:"), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}

// ---- BPE trainer ---------------------------------------------------------------------------

TEST(BpeTrainer, WritesATokenizerThatLoadsAndRoundTrips) {
  const fs::path dir = micro_tokenizer_dir();
  ASSERT_TRUE(fs::exists(dir / "tokenizer.json"));
  ASSERT_TRUE(fs::exists(dir / "tokenizer_config.json"));
  const ears::Tokenizer tok = ears::Tokenizer::load(dir);
  EXPECT_EQ(tok.vocab_size(), 400);
  // Special and added tokens at the end, eos from tokenizer_config.json.
  EXPECT_EQ(tok.token_to_id("<|endoftext|>"), 395);
  EXPECT_EQ(tok.token_to_id("<|im_start|>"), 396);
  EXPECT_EQ(tok.token_to_id("<|im_end|>"), 397);
  EXPECT_EQ(tok.token_to_id("<think>"), 398);
  EXPECT_EQ(tok.token_to_id("</think>"), 399);
  EXPECT_TRUE(tok.is_special(397));
  EXPECT_FALSE(tok.is_special(398));
  ASSERT_TRUE(tok.eos_token_id().has_value());
  EXPECT_EQ(*tok.eos_token_id(), 397);
  // Bytes in GPT-2 order as in Qwen3: "!" = 0, space = 220, "\n" = 198.
  EXPECT_EQ(tok.token_to_id("!"), 0);
  EXPECT_EQ(tok.token_to_id("\xC4\xA0"), 220);  // "Ġ"
  EXPECT_EQ(tok.token_to_id("\xC4\x8A"), 198);  // "Ċ"

  for (const std::string text : {std::string("Maria has 20 strawberries. She keeps 5 for herself."),
                                 std::string("A farm has 116 goats and 14 ducks. How many legs are there in total?"),
                                 std::string("caf\xC3\xA9 na\xC3\xAFve \xE2\x82\xAC 3.50 \xF0\x9F\x98\x80 \t\n\n  x"),
                                 ears::qwen3_chat_prompt("What is 2+2?", false) + "4<|im_end|>"}) {
    const std::vector<int32_t> ids = tok.encode(text);
    EXPECT_EQ(tok.decode(ids), text);
  }
  // The merges compress the training text (bytes alone would give 1 byte per token).
  std::size_t bytes = 0, tokens = 0;
  for (const auto& text : small_corpus()) {
    bytes += text.size();
    tokens += tok.encode(text).size();
  }
  EXPECT_GT(static_cast<double>(bytes) / static_cast<double>(tokens), 1.5);
  // Digits are always single tokens.
  const std::vector<int32_t> num = tok.encode("1234567890");
  ASSERT_EQ(num.size(), 10u);
  for (std::size_t i = 0; i < num.size(); ++i) EXPECT_EQ(tok.decode(std::vector<int32_t>{num[i]}), std::string(1, "1234567890"[i]));
  // Pre-tokens as the trainer sees them: added tokens dropped, digits split, Qwen3 regex.
  EXPECT_EQ(tok.pretokenize("Hi 123<|im_end|>x  y"),
            (std::vector<std::string>{"Hi", " ", "1", "2", "3", "x", " ", " y"}));
  // The chat template with thinking off encodes its markers as single added tokens.
  const std::vector<int32_t> chat = tok.encode(ears::qwen3_chat_prompt("hi", false));
  EXPECT_EQ(chat.front(), 396);
  EXPECT_NE(std::find(chat.begin(), chat.end(), 398), chat.end());
  EXPECT_NE(std::find(chat.begin(), chat.end(), 399), chat.end());
}

TEST(BpeTrainer, IsDeterministicAndRejectsATinyVocab) {
  const fs::path d = temp_dir("tok2");
  ears::BpeTrainerOptions o;
  o.vocab_size = 400;
  ears::train_bpe_tokenizer(small_corpus(), o, d);
  EXPECT_EQ(ears::test::read_file(d / "tokenizer.json"), ears::test::read_file(micro_tokenizer_dir() / "tokenizer.json"));
  o.vocab_size = 200;
  EXPECT_THROW(ears::train_bpe_tokenizer(small_corpus(), o, d), ears::Error);
  fs::remove_all(d);
}

// ---- safetensors writer --------------------------------------------------------------------

// The config.json the writers emit reads back (ModelConfig::parse, the inference side's reader) as
// the config they were given: every field, each RoPE type, one and several eos ids, a bos id.
TEST(CheckpointWriter, ConfigJsonReadsBackAsTheSameConfig) {
  // Equal as ModelConfig (every member); on a difference, both as config.json text.
  auto expect_same = [](const ears::ModelConfig& read, const ears::ModelConfig& given, const std::string& what) {
    EXPECT_TRUE(read == given) << what << ": read back\n"
                               << ears::qwen3_config_json(read, read.torch_dtype) << "given\n"
                               << ears::qwen3_config_json(given, given.torch_dtype);
  };
  ears::TargetArch arch;
  arch.rope_theta = 1e6;
  std::vector<ears::ModelConfig> targets(3, ears::qwen3_config(arch, 320, 7));
  targets[1].rope.type = "linear";
  targets[1].rope.factor = 2.0;
  targets[1].bos_token_id = 3;
  targets[2].rope = {"llama3", 5e5, 8.0, 1.0, 4.0, 8192};
  targets[2].eos_token_ids = {7, 8};
  for (size_t i = 0; i < targets.size(); ++i) {
    const ears::ModelConfig& t = targets[i];
    const std::string what = "target " + std::to_string(i);
    expect_same(ears::ModelConfig::parse(ears::qwen3_config_json(t, at::kBFloat16), what), t, what);
    // The head: the target's vocabulary in vocab_size, its own rows in draft_vocab_size.
    ears::ModelConfig head = ears::eagle3_config(ears::Eagle3Arch{}, t);
    const ears::ModelConfig read =
        ears::ModelConfig::parse(ears::eagle3_config_json(head, t, {0, 1, 1}, at::kBFloat16), what, false);
    EXPECT_EQ(read.vocab_size, t.vocab_size);
    head.vocab_size = t.vocab_size;
    expect_same(read, head, "head of " + what);
  }
}

TEST(SafetensorsWriter, RoundTripsThroughCheckpointBitExactly) {
  const fs::path d = temp_dir("st");
  at::manual_seed(3);
  ears::ParamMap t;
  t["b.f32"] = at::randn({3, 5});
  t["a.bf16"] = at::randn({7}).to(at::kBFloat16);
  t["c.i64"] = at::arange(-4, 5, at::TensorOptions().dtype(at::kLong)).view({3, 3});
  t["d.bool"] = at::rand({11}) > 0.5;
  t["e.scalar"] = at::full({}, 2.5f);
  ears::save_safetensors(d / "model.safetensors", t);

  // Header: 8 + N is a multiple of 8; data in sorted-name order.
  const std::string bytes = ears::test::read_file(d / "model.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes[8], '{');

  const ears::Checkpoint ck = ears::Checkpoint::open(d);
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"a.bf16", "b.f32", "c.i64", "d.bool", "e.scalar"}));
  for (const auto& [name, x] : t) {
    EXPECT_EQ(ck.dtype(name), x.scalar_type()) << name;
    EXPECT_EQ(ck.shape(name), x.sizes().vec()) << name;
    const at::Tensor y = ck.load(name, c10::Device(c10::kCPU), x.scalar_type());
    ASSERT_EQ(y.numel(), x.numel());
    EXPECT_EQ(std::memcmp(y.contiguous().data_ptr(), x.contiguous().data_ptr(), x.numel() * x.element_size()), 0) << name;
  }
  // bf16 conversion on save.
  ears::save_safetensors(d / "model.safetensors", {{"w", t["b.f32"]}}, at::kBFloat16);
  const ears::Checkpoint ck2 = ears::Checkpoint::open(d);
  EXPECT_EQ(ck2.dtype("w"), at::kBFloat16);
  EXPECT_TRUE(at::equal(ck2.load("w", c10::Device(c10::kCPU), at::kBFloat16), t["b.f32"].to(at::kBFloat16)));
  // Byte counts are checked.
  ears::SafetensorsBlobs bad;
  bad["x"] = {"F32", {2, 2}, std::string(12, '\0')};
  EXPECT_THROW(ears::safetensors_serialize(bad), ears::Error);
  bad["x"] = {"F33", {1}, std::string(4, '\0')};
  EXPECT_THROW(ears::safetensors_serialize(bad), ears::Error);
  fs::remove_all(d);
}

// ---- target: training forward, AdamW, save -> CausalLM::load ---------------------------------

namespace {

ears::TargetArch micro_arch() {
  ears::TargetArch a;
  a.hidden = 48;
  a.layers = 2;
  a.heads = 4;
  a.kv_heads = 2;
  a.head_dim = 16;
  a.intermediate = 96;
  a.max_position_embeddings = 256;
  return a;
}

struct MicroData {
  ears::DocPools pools;
  std::unique_ptr<ears::DocSampler> sampler;
};

}  // namespace

TEST(TrainTarget, LossDecreasesAndTheSavedModelMatchesTheTrainingForward) {
  const ears::Tokenizer tok = ears::Tokenizer::load(micro_tokenizer_dir());
  const ears::ModelConfig cfg = ears::qwen3_config(micro_arch(), tok.vocab_size(), *tok.token_to_id("<|im_end|>"));
  ears::CorpusOptions co;
  co.seed = 7;
  co.synth_n = 200;
  co.gsm8k_train = "none";
  const ears::DocPools pools = ears::build_doc_pools(tok, co, 0.1f);
  ears::DocSampler sampler(pools, 0.2, 1);
  const ears::PackedBatch batch = ears::pack_batch(sampler, 4, 96, c10::Device(c10::kCPU));
  // Packing: positions restart at 0 per document and attention never crosses documents.
  EXPECT_EQ(batch.positions[0][0].item<int64_t>(), 0);
  EXPECT_FALSE(batch.blocked[0][5][5].item<bool>());
  EXPECT_TRUE(batch.blocked[0][5][6].item<bool>());

  ears::ParamMap p = ears::init_qwen3_params(cfg, 11);
  EXPECT_EQ(p.count("lm_head.weight"), 0u);  // tied
  std::vector<at::Tensor> params;
  std::vector<bool> decay;
  for (auto& [n, t] : p) {
    params.push_back(t);
    decay.push_back(t.dim() >= 2);
  }
  ears::AdamW opt(params, decay, {});
  double first = 0, last = 0;
  const int steps = 30;
  for (int s = 0; s < steps; ++s) {  // overfit one fixed batch
    const auto f = ears::qwen3_train_forward(p, cfg, batch.ids, batch.positions, batch.blocked);
    at::Tensor loss = ears::weighted_lm_loss(f.logits, batch.targets, batch.weights);
    if (s == 0) first = loss.item<double>();
    last = loss.item<double>();
    loss.backward();
    ears::clip_grad_norm(params, 1.0);
    opt.step(ears::cosine_lr(s, steps, 3, 1e-2, 0.1));
    opt.zero_grad();
  }
  EXPECT_NEAR(first, std::log(static_cast<double>(cfg.vocab_size)), 0.5);  // starts near uniform
  EXPECT_LT(last, first - 1.5) << "first " << first << " last " << last;

  // Save in bf16, load with the inference code, compare on one document (positions 0..n-1).
  const fs::path d = temp_dir("target");
  ears::save_qwen3(d, p, cfg);
  const ears::ModelConfig loaded_cfg = ears::ModelConfig::load(d);
  EXPECT_EQ(loaded_cfg.torch_dtype, at::kBFloat16);
  EXPECT_TRUE(loaded_cfg.tie_word_embeddings);
  const ears::CausalLM model = ears::CausalLM::load(d, c10::Device(c10::kCPU), at::kFloat);
  const ears::TrainDoc& doc = pools.chat[0];
  const int64_t n = static_cast<int64_t>(doc.ids.size());
  const at::Tensor ids = at::tensor(std::vector<int64_t>(doc.ids.begin(), doc.ids.end()), at::kLong).view({1, n});
  const at::Tensor pos = at::arange(n, at::kLong).view({1, n});
  const at::Tensor blocked = (pos.view({1, 1, n}) > pos.view({1, n, 1}));
  ears::ForwardOptions fo;
  fo.aux_layers = {1, 2};
  const ears::ForwardOutput inf = model.forward(ids, fo);
  ears::ParamMap rounded;
  for (auto& [name, t] : p) rounded[name] = t.detach().to(at::kBFloat16).to(at::kFloat);
  at::NoGradGuard no_grad;
  const auto exact = ears::qwen3_train_forward(rounded, cfg, ids, pos, blocked, {1, 2});
  EXPECT_LT((inf.logits - exact.logits).abs().max().item<double>(), 1e-4);
  EXPECT_LT((inf.aux_hidden[1] - exact.aux_hidden[1]).abs().max().item<double>(), 1e-4);
  const auto fp32 = ears::qwen3_train_forward(p, cfg, ids, pos, blocked);
  EXPECT_LT((inf.logits - fp32.logits).abs().max().item<double>(), 0.1);  // bf16 rounding of the weights only
  fs::remove_all(d);
}

TEST(TrainTarget, CosineScheduleAndClipping) {
  EXPECT_DOUBLE_EQ(ears::cosine_lr(0, 100, 10, 1.0, 0.1), 0.1);
  EXPECT_DOUBLE_EQ(ears::cosine_lr(9, 100, 10, 1.0, 0.1), 1.0);
  EXPECT_NEAR(ears::cosine_lr(10, 100, 10, 1.0, 0.1), 1.0, 1e-12);
  EXPECT_NEAR(ears::cosine_lr(55, 100, 10, 1.0, 0.1), 0.55, 1e-12);
  EXPECT_NEAR(ears::cosine_lr(100, 100, 10, 1.0, 0.1), 0.1, 1e-12);
  at::Tensor a = at::zeros({2}).requires_grad_(true), b = at::zeros({1}).requires_grad_(true);
  (a * at::tensor({3.0f, 0.0f})).sum().add((b * 4.0f).sum()).backward();
  const at::Tensor norm = ears::clip_grad_norm({a, b}, 1.0);
  EXPECT_NEAR(norm.item<double>(), 5.0, 1e-5);
  EXPECT_NEAR(a.grad()[0].item<double>(), 0.6, 1e-5);
  EXPECT_NEAR(b.grad()[0].item<double>(), 0.8, 1e-5);
}

// ---- EAGLE-3 -------------------------------------------------------------------------------

namespace {

// A micro Qwen3 target (random weights, float32) saved in `dir` and loaded back, and its forward over
// one chat document with the aux layers {0, 1, 1} the head tests read.
struct MicroTargetDoc {
  fs::path dir;
  ears::ModelConfig tc;
  ears::CausalLM target;
  std::vector<int> aux;
  at::Tensor ids, feats, logits;  // [1, N], [1, N, 3 d], [1, N, V]
  int64_t N = 0;
};

// The micro head over a target: 4 heads, 2 KV heads of 16, intermediate 64, 1 layer.
ears::ModelConfig micro_head_config(const ears::ModelConfig& target) {
  ears::Eagle3Arch arch;
  arch.head_dim = 16;
  arch.intermediate = 64;
  return ears::eagle3_config(arch, target);
}

MicroTargetDoc micro_target_doc(const ears::Tokenizer& tok, const std::string& name) {
  const ears::ModelConfig tc = ears::qwen3_config(micro_arch(), tok.vocab_size(), *tok.token_to_id("<|im_end|>"));
  const fs::path td = temp_dir(name);
  ears::save_qwen3(td, ears::init_qwen3_params(tc, 5), tc);
  MicroTargetDoc m{td, tc, ears::CausalLM::load(td, c10::Device(c10::kCPU), at::kFloat), {0, 1, 1}};
  const std::vector<int32_t> doc = tok.encode(ears::qwen3_chat_prompt("Tom has 3 apples and buys 4 more.", false) + "He has 7.");
  m.N = static_cast<int64_t>(doc.size());
  m.ids = at::tensor(std::vector<int64_t>(doc.begin(), doc.end()), at::kLong).view({1, m.N});
  ears::ForwardOptions fo;
  fo.aux_layers = m.aux;
  const ears::ForwardOutput tf = m.target.forward(m.ids, fo);
  m.feats = at::cat(tf.aux_hidden, -1);
  m.logits = tf.logits;
  return m;
}

}  // namespace

TEST(TrainEagle3, TttForwardMatchesEagle3HeadAfterSaveAndLoad) {
  const ears::Tokenizer tok = ears::Tokenizer::load(micro_tokenizer_dir());
  const MicroTargetDoc m = micro_target_doc(tok, "e3_target");
  const ears::ModelConfig& tc = m.tc;
  const ears::CausalLM& target = m.target;
  const fs::path hd = temp_dir("e3_head");

  const std::vector<int>& aux = m.aux;
  const ears::ModelConfig hc = micro_head_config(tc);
  ears::ParamMap p = ears::init_eagle3_params(hc, 3, 9, target.lm_head_weight(), {});
  {  // make every weight matter (random norms too) and exactly representable in bf16
    at::NoGradGuard g;
    for (auto& [n, t] : p) {
      if (t.dim() == 1) t.add_(at::randn_like(t) * 0.3);
      else t.mul_(5.0);
      t.copy_(t.to(at::kBFloat16).to(at::kFloat));
    }
  }
  ears::save_eagle3(hd, p, hc, tc, aux);
  const ears::Eagle3Head head = ears::Eagle3Head::load(hd, target);
  EXPECT_EQ(head.aux_layers(), aux);
  EXPECT_EQ(head.draft_vocab(), tc.vocab_size);
  EXPECT_FALSE(head.own_embeddings());

  const int64_t N = m.N;
  const at::Tensor &ids = m.ids, &feats = m.feats;
  at::NoGradGuard no_grad;
  const ears::TttOutput t = ears::eagle3_ttt_forward(p, hc, target.embedding_weight(), feats, m.logits, ids,
                                                     at::ones({1, N}), 3, /*keep_logits=*/true);
  ASSERT_EQ(t.loss.size(), 3u);
  // Step 0 vs the inference prefill: position t pairs feature t with token t+1.
  const int64_t L = N - 4;  // a prompt x_0..x_{L-1}; the target "emits" x_L
  {
    ears::KVCache cache = head.new_cache(1, N + 8);
    const at::Tensor tokens = ids.narrow(1, 1, L);  // x_1 .. x_L
    const auto o = head.forward(tokens, feats.narrow(1, 0, L), true, cache);
    EXPECT_LT((o.logits[0] - t.logits[0][0].narrow(0, 0, L)).abs().max().item<double>(), 1e-3);
    // Chain steps 1 and 2 from the last prefill slot: tokens x_{L+1}, x_{L+2}, positions L, L+1.
    at::Tensor hidden = o.prenorm.narrow(1, L - 1, 1);
    for (int k = 1; k <= 2; ++k) {
      const auto c = head.forward(ids.narrow(1, L + k, 1), hidden, false, cache);
      EXPECT_LT((c.logits[0][0] - t.logits[k][0][L - 1]).abs().max().item<double>(), 1e-3) << "step " << k;
      hidden = c.prenorm;
    }
  }
  // Loss slots: step k needs token t+k+2, so 3 steps over N tokens give N-2, N-3, N-4 slots.
  EXPECT_EQ(t.count[0].item<double>(), N - 2);
  EXPECT_EQ(t.count[2].item<double>(), N - 4);
  fs::remove_all(m.dir);
  fs::remove_all(hd);
}

TEST(TrainEagle3, AFewStepsReduceTheTttLoss) {
  const ears::Tokenizer tok = ears::Tokenizer::load(micro_tokenizer_dir());
  const ears::ModelConfig tc = ears::qwen3_config(micro_arch(), tok.vocab_size(), *tok.token_to_id("<|im_end|>"));
  const ears::ParamMap tp = ears::init_qwen3_params(tc, 5);
  ears::CorpusOptions co;
  co.seed = 3;
  co.synth_n = 50;
  co.gsm8k_train = "none";
  const ears::DocPools pools = ears::build_doc_pools(tok, co, 0.0f);
  ears::DocSampler sampler(pools, 0.0, 2);
  const ears::PaddedBatch b = ears::pad_batch(sampler, 3, 400, c10::Device(c10::kCPU));
  ASSERT_GT(b.loss_mask.sum().item<double>(), 100.0);
  const int64_t N = b.ids.size(1);
  const at::Tensor pos = at::arange(N, at::kLong).view({1, N}).expand({b.ids.size(0), N});
  const at::Tensor blocked = (pos.unsqueeze(1) > pos.unsqueeze(2));
  ears::TrainForwardOutput tf;
  {
    at::NoGradGuard g;
    tf = ears::qwen3_train_forward(tp, tc, b.ids, pos, blocked, {0, 1, 2});
  }
  const ears::ModelConfig hc = micro_head_config(tc);
  ears::ParamMap p = ears::init_eagle3_params(hc, 3, 1);
  std::vector<at::Tensor> params;
  std::vector<bool> decay;
  for (auto& [n, t] : p) {
    params.push_back(t);
    decay.push_back(t.dim() >= 2);
  }
  ears::AdamW opt(params, decay, {});
  const at::Tensor feats = at::cat(tf.aux_hidden, -1);
  // A random target is nearly uniform (loss floor = its entropy); sharpen it so there is
  // something to learn: the teacher becomes a near-deterministic function of the features.
  const at::Tensor teacher_logits = tf.logits * 40.0;
  double first = 0, last = 0;
  for (int s = 0; s < 20; ++s) {
    ears::TttOutput t = ears::eagle3_ttt_forward(p, hc, tp.at("model.embed_tokens.weight").detach(), feats, teacher_logits, b.ids,
                                                 b.loss_mask, 2);
    if (s == 0) first = t.total.item<double>();
    last = t.total.item<double>();
    t.total.backward();
    ears::clip_grad_norm(params, 1.0);
    opt.step(5e-3);
    opt.zero_grad();
  }
  EXPECT_LT(last, 0.7 * first) << "first " << first << " last " << last;
}

// `train eagle3|target --init DIR` (continued training): every parameter starts from the
// checkpoint's tensor, and the new train_log.json keeps the checkpoint's own log as
// "init_train_log", so the committed head's log names every stage that made it.
TEST(TrainInit, ContinuedTrainingStartsFromTheCheckpointAndKeepsItsLog) {
  const ears::Tokenizer tok = ears::Tokenizer::load(micro_tokenizer_dir());
  const ears::ModelConfig tc = ears::qwen3_config(micro_arch(), tok.vocab_size(), *tok.token_to_id("<|im_end|>"));
  const ears::ModelConfig hc = micro_head_config(tc);
  const fs::path hd = temp_dir("init_head"), out = temp_dir("init_out");
  ears::ParamMap saved = ears::init_eagle3_params(hc, 3, 11);
  {  // exactly representable in bf16, the dtype the checkpoint is saved in
    at::NoGradGuard g;
    for (auto& [n, t] : saved) t.copy_(t.to(at::kBFloat16).to(at::kFloat));
  }
  ears::save_eagle3(hd, saved, hc, tc, {0, 1, 2});
  ears::TrainReport first;
  first.steps_done = 7;
  ears::write_train_log(hd / "train_log.json", "eagle3", {{"stage", "first"}}, first);

  ears::ParamMap p = ears::init_eagle3_params(hc, 3, 12);  // another seed: every tensor differs
  ears::load_init_weights(p, hd, c10::Device(c10::kCPU), {});
  ASSERT_EQ(p.size(), saved.size());
  for (const auto& [name, t] : saved) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(at::equal(p.at(name), t));
    EXPECT_TRUE(p.at(name).requires_grad()) << "still a trainable master weight";
  }
  ears::write_train_log(out / "train_log.json", "eagle3", {{"stage", "second"}}, first, hd);
  const auto log = nlohmann::json::parse(ears::test::read_file(out / "train_log.json"));
  EXPECT_EQ(log["options"]["stage"], "second");
  EXPECT_EQ(log["init_train_log"]["options"]["stage"], "first");
  EXPECT_EQ(log["init_train_log"]["steps_done"], 7);
  // A checkpoint whose tensor is shaped otherwise is one error naming the tensor and blaming the
  // options, not the (healthy) checkpoint.
  ears::ModelConfig wider = hc;
  wider.intermediate_size = 96;
  ears::ParamMap w = ears::init_eagle3_params(wider, 3, 12);
  try {
    ears::load_init_weights(w, hd, c10::Device(c10::kCPU), {});
    ADD_FAILURE() << "a shape mismatch must fail";
  } catch (const ears::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--init " + hd.string() + ": tensor '"), std::string::npos) << m;
    EXPECT_NE(m.find("mlp"), std::string::npos) << m;
    EXPECT_NE(m.find("but these options build ["), std::string::npos) << m;
    EXPECT_EQ(m.find("does not match its config"), std::string::npos) << m;
  }
  fs::remove_all(hd);
  fs::remove_all(out);
}

// `train eagle3 --regenerate N`: a chat document keeps its prompt and gets the target's own greedy
// answer. Reference: the bundled target's greedy continuation recorded when it was trained
// (tests/data/bundled-greedy.json, `ears-bench generate`), not this function's engine call.
TEST(TrainRegenerate, ChatDocumentsGetTheTargetsOwnGreedyAnswer) {
  const fs::path models = ears::test::source_dir() / "models";
  const auto rec = nlohmann::json::parse(ears::test::read_file(ears::test::source_dir() / "tests/data/bundled-greedy.json"));
  const ears::Tokenizer tok = ears::Tokenizer::load(models / "tiny-qwen3");
  ears::TrainDoc d;
  d.ids = tok.encode(ears::qwen3_chat_prompt(rec["question"].get<std::string>(), false));
  ASSERT_EQ(static_cast<int64_t>(d.ids.size()), rec["prompt_tokens"].get<int64_t>());
  d.weight.assign(d.ids.size(), 0.0f);
  const std::vector<int32_t> prompt = d.ids;
  for (int32_t t : {318, 852, 431}) {  // a dataset answer to be replaced
    d.ids.push_back(t);
    d.weight.push_back(1.0f);
  }
  std::vector<ears::TrainDoc> docs = {d, d, d};
  std::vector<std::string> log;
  ears::regenerate_answers(models / "tiny-qwen3", docs, 2, rec["max_new_tokens"].get<int64_t>(),
                           [&](const std::string& l) { log.push_back(l); });
  const auto want = rec["output_ids"].get<std::vector<int32_t>>();
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(docs[i].ids.size(), prompt.size() + want.size());
    EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), docs[i].ids.begin())) << "the prompt is kept";
    EXPECT_TRUE(std::equal(want.begin(), want.end(), docs[i].ids.begin() + static_cast<std::ptrdiff_t>(prompt.size())));
    EXPECT_EQ(std::count(docs[i].weight.begin(), docs[i].weight.end(), 1.0f), static_cast<std::ptrdiff_t>(want.size()));
    EXPECT_EQ(std::count(docs[i].weight.begin(), docs[i].weight.end(), 0.0f), static_cast<std::ptrdiff_t>(prompt.size()));
  }
  EXPECT_EQ(docs[2].ids, d.ids) << "only the first n documents";
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("replace 2 of the first 2"), std::string::npos) << log[0];
  // An answer cut at max_new_tokens (no stop) keeps the dataset's answer.
  std::vector<ears::TrainDoc> cut = {d};
  ears::regenerate_answers(models / "tiny-qwen3", cut, 1, 10, {});
  EXPECT_EQ(cut[0].ids, d.ids);
  // A document with no prompt before its answer is one error, not an empty prompt.
  ears::TrainDoc all_answer = d;
  all_answer.weight.assign(all_answer.ids.size(), 1.0f);
  std::vector<ears::TrainDoc> bad = {all_answer};
  EXPECT_THROW(ears::regenerate_answers(models / "tiny-qwen3", bad, 1, 10, {}), ears::Error);
}

// ---- the reduced draft vocabulary (train eagle3 --draft-vocab) -------------------------------

// The n most frequent loss-bearing ids, by hand: weights 0 (prompt tokens) do not count, ties go to
// the smaller id, ids that never occur fill up from the smallest; d2t / t2d are the HF layout.
TEST(DraftVocab, TheMostFrequentLossBearingIds) {
  ears::DocPools pools;
  pools.chat.push_back({{9, 9, 9, 9, 5, 5, 5, 7, 7}, {0, 0, 0, 0, 1, 1, 1, 1, 1}});  // 9 only in the prompt
  pools.natural.push_back({{7, 2, 2, 4}, {1, 1, 1, 1}});  // counts: 5:3, 7:3, 2:2, 4:1
  const ears::DraftVocab v = ears::frequent_draft_vocab(pools, 3, 12);
  EXPECT_EQ(v.ids, (std::vector<int64_t>{2, 5, 7}));
  EXPECT_EQ(v.source, "frequency");
  EXPECT_DOUBLE_EQ(v.coverage, 8.0 / 9.0);
  EXPECT_DOUBLE_EQ(ears::loss_token_coverage(pools, v), 8.0 / 9.0);  // as for a head's own vocabulary (--init)
  const at::Tensor d2t = v.d2t(), t2d = v.t2d();
  EXPECT_EQ(std::vector<int64_t>(d2t.data_ptr<int64_t>(), d2t.data_ptr<int64_t>() + 3), (std::vector<int64_t>{2, 4, 5}));
  ASSERT_EQ(t2d.numel(), 12);
  for (int64_t t = 0; t < 12; ++t) EXPECT_EQ(t2d[t].item<bool>(), t == 2 || t == 5 || t == 7) << t;
  // Tie at the cut (4 and no other) and the fill: 6 of 12 takes 2, 4, 5, 7 and then ids 0, 1.
  EXPECT_EQ(ears::frequent_draft_vocab(pools, 6, 12).ids, (std::vector<int64_t>{0, 1, 2, 4, 5, 7}));
  EXPECT_THROW(ears::frequent_draft_vocab(pools, 13, 12), ears::Error);
  EXPECT_THROW(ears::frequent_draft_vocab(pools, 0, 12), ears::Error);
}

// A head over a reduced vocabulary: the TTT loss is the soft cross-entropy against the target's
// softmax over the draft ids only, on the slots whose target argmax is a draft id (computed here
// from the whole-vocabulary head's logits); saved, it loads with that d2t and scores the same rows.
TEST(DraftVocab, TttLossOverTheDraftIdsAndTheSavedHeadScoresThem) {
  const ears::Tokenizer tok = ears::Tokenizer::load(micro_tokenizer_dir());
  const MicroTargetDoc m = micro_target_doc(tok, "dv_target");
  const ears::ModelConfig& tc = m.tc;
  const ears::CausalLM& target = m.target;
  const fs::path hd = temp_dir("dv_head");
  const ears::ModelConfig full_hc = micro_head_config(tc);
  const ears::ParamMap full = ears::init_eagle3_params(full_hc, 3, 4, target.lm_head_weight(), {});
  const int64_t N = m.N;
  const at::Tensor &ids = m.ids, &feats = m.feats, &target_logits = m.logits;
  // The draft ids: every other id of the vocabulary, plus the target's argmax at half the slots.
  const at::Tensor arg = target_logits.argmax(-1)[0];
  std::vector<bool> take(static_cast<size_t>(tc.vocab_size), false);
  for (int64_t t = 0; t < tc.vocab_size; t += 2) take[t] = true;
  for (int64_t i = 0; i < N; i += 2) take[arg[i].item<int64_t>()] = true;
  ears::DraftVocab v;
  v.target_vocab = tc.vocab_size;
  for (int64_t t = 0; t < tc.vocab_size; ++t)
    if (take[t]) v.ids.push_back(t);
  ears::ModelConfig hc = full_hc;
  hc.vocab_size = v.size();
  ears::ParamMap p = full;
  p["lm_head.weight"] = full.at("lm_head.weight").index_select(0, v.index());

  at::NoGradGuard no_grad;
  const ears::TttOutput whole = ears::eagle3_ttt_forward(full, full_hc, target.embedding_weight(), feats, target_logits, ids,
                                                         at::ones({1, N}), 1, true);
  const ears::TttOutput cut = ears::eagle3_ttt_forward(p, hc, target.embedding_weight(), feats, target_logits, ids,
                                                       at::ones({1, N}), 1, true, v.index());
  // The reference, slot by slot: slot t predicts token t+1 with teacher target_logits[t+1].
  double sum = 0, slots = 0, correct = 0;
  for (int64_t t = 0; t + 2 <= N - 1; ++t) {
    const at::Tensor tl = target_logits[0][t + 1], dl = whole.logits[0][0][t];
    const int64_t a = tl.argmax().item<int64_t>();
    if (!take[a]) continue;
    const at::Tensor teacher = at::softmax(tl.index_select(0, v.index()), 0);
    sum += -(teacher * at::log_softmax(dl.index_select(0, v.index()), 0)).sum().item<double>();
    slots += 1;
    correct += v.ids[dl.index_select(0, v.index()).argmax().item<int64_t>()] == a;
  }
  ASSERT_GT(slots, 2.0);
  ASSERT_LT(slots, N - 2.0) << "some slots must lie outside the draft ids for the test to mean anything";
  EXPECT_EQ(cut.count[0].item<double>(), slots);
  EXPECT_NEAR(cut.loss[0].item<double>(), sum / slots, 1e-4 * std::max(1.0, sum / slots));
  EXPECT_EQ(cut.correct[0].item<double>(), correct);
  EXPECT_NE(cut.loss[0].item<double>(), whole.loss[0].item<double>());

  // Saved with its d2t / t2d: the loaded head maps draft id i to v.ids[i] and scores those rows.
  {
    at::NoGradGuard g;
    for (auto& [n, t] : p) t.copy_(t.to(at::kBFloat16).to(at::kFloat));
  }
  ears::save_eagle3(hd, p, hc, tc, m.aux, v);
  const ears::Eagle3Head head = ears::Eagle3Head::load(hd, target);
  ASSERT_EQ(head.draft_vocab(), v.size());
  EXPECT_TRUE(at::equal(head.draft_to_target(), v.index()));
  const ears::DraftVocab back = ears::checkpoint_draft_vocab(hd, tc.vocab_size);
  EXPECT_EQ(back.ids, v.ids);
  EXPECT_EQ(back.source, "init");
  ears::KVCache cache = head.new_cache(1, N + 8);
  const auto o = head.forward(ids.narrow(1, 1, N - 4), feats.narrow(1, 0, N - 4), true, cache);
  const ears::TttOutput again = ears::eagle3_ttt_forward(p, hc, target.embedding_weight(), feats, target_logits, ids,
                                                         at::ones({1, N}), 1, true, v.index());
  EXPECT_LT((o.logits[0] - again.logits[0][0].narrow(0, 0, N - 4)).abs().max().item<double>(), 1e-3);
  fs::remove_all(m.dir);
  fs::remove_all(hd);
}

// ---- train eagle3 end to end: aux layers, loss positions, the saved embedding ----------------

// The default aux ids: EAGLE's {2, L/2, L-3} wherever those are 3 distinct ids (SafeAILab/EAGLE
// captures them whatever eagle_config says, so a head trained on others gets the wrong features
// there), {1, L/2, L-1} on targets too small for them (the bundled 6-layer pair's [1, 3, 5]); the
// choice and its reason logged. --aux-layers: exactly 3 distinct ids in 0..L-1 (EAGLE-3's fc is
// 3 x hidden -> hidden).
TEST(TrainEagle3, AuxLayersDefaultToEaglesWhereDistinct) {
  std::vector<std::string> log;
  const ears::LogFn keep = [&](const std::string& l) { log.push_back(l); };
  EXPECT_EQ(ears::resolve_aux_layers({}, 32, keep), (std::vector<int>{2, 16, 29}));
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("aux layers [2, 16, 29]: EAGLE's {2, L/2, L-3} for L = 32"), std::string::npos) << log[0];
  EXPECT_EQ(ears::resolve_aux_layers({}, 8), (std::vector<int>{2, 4, 5}));
  EXPECT_EQ(ears::resolve_aux_layers({}, 7), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(ears::resolve_aux_layers({}, 6, keep), (std::vector<int>{1, 3, 5}));
  EXPECT_NE(log.back().find("aux layers [1, 3, 5]: {1, L/2, L-1} for L = 6 (EAGLE's {2, L/2, L-3} = [2, 3, 3] repeats"),
            std::string::npos)
      << log.back();
  EXPECT_EQ(ears::resolve_aux_layers({}, 5), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(ears::resolve_aux_layers({}, 4), (std::vector<int>{1, 2, 3}));
  EXPECT_THROW(ears::resolve_aux_layers({}, 3), ears::Error);
  EXPECT_EQ(ears::resolve_aux_layers({0, 1, 2}, 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(ears::resolve_aux_layers({5, 1, 3}, 6, keep), (std::vector<int>{5, 1, 3}));  // list order kept
  EXPECT_NE(log.back().find("--aux-layers"), std::string::npos) << log.back();
  for (const std::vector<int>& bad : {std::vector<int>{1, 3}, {1, 3, 3}, {1, 2, 3, 4}, {1, 3, 6}, {-1, 2, 3}}) {
    SCOPED_TRACE(::testing::PrintToString(bad));
    EXPECT_THROW(ears::resolve_aux_layers(bad, 6), ears::Error);
  }
}

// Before training, the documents must reach a loss position within --seq-len (slot t is supervised
// through token t + 2, a chat prompt has weight 0): none does -> one error naming --seq-len and the
// lengths needed; some do not -> a warning. Documents built by hand: prompts of 10 and 20 tokens.
TEST(TrainEagle3, SeqLenShorterThanThePromptsIsRefused) {
  auto chat = [](int prompt, int answer) {
    ears::TrainDoc d;
    for (int i = 0; i < prompt + answer; ++i) {
      d.ids.push_back(5 + i);
      d.weight.push_back(i < prompt ? 0.0f : 1.0f);
    }
    return d;
  };
  ears::DocPools pools;
  pools.chat = {chat(10, 5), chat(20, 5)};
  pools.natural = {chat(0, 8)};
  try {
    ears::check_loss_positions(pools, 0.0, 10, {});
    ADD_FAILURE() << "no document reaches a loss position in 10 tokens";
  } catch (const ears::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--seq-len 10: no training document reaches a loss position within 10 tokens (their prompts are longer), "
              "so every step would train nothing; give --seq-len 21 or more (11 reaches one document)");
  }
  std::vector<std::string> log;
  ears::check_loss_positions(pools, 0.0, 11, [&](const std::string& l) { log.push_back(l); });
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("warning: --seq-len 11: 1 of 2 training documents reach no loss position"), std::string::npos)
      << log[0];
  log.clear();
  ears::check_loss_positions(pools, 0.0, 21, [&](const std::string& l) { log.push_back(l); });
  EXPECT_TRUE(log.empty());
  // Natural documents (every token a loss token) drawn too: they reach one at 3 tokens.
  ears::check_loss_positions(pools, 0.5, 10, {});
  EXPECT_THROW(ears::check_loss_positions(pools, 0.0, 2, {}), ears::Error);
}

// `train eagle3` saves embed_tokens.weight, the frozen copy of the target's embedding it trained
// with (EAGLE's loader reads the head's own whenever config.json declares target_hidden_size, and a
// missing one stayed random there). It equals the target's, so the head computes exactly what it
// computes with the target's shared embedding (the same head without the tensor).
TEST(TrainEagle3, TheSavedHeadCarriesTheTargetsEmbedding) {
  const fs::path models = ears::test::source_dir() / "models";
  const fs::path out = temp_dir("embed_head"), shared = temp_dir("embed_head_shared");
  ears::Eagle3TrainOptions o;
  o.target = models / "tiny-qwen3";
  o.out = out;
  o.schedule.steps = 1;
  o.schedule.batch = 2;
  o.schedule.seq_len = 96;
  o.schedule.threads = 2;
  o.corpus.synth_n = 20;
  o.corpus.gsm8k_train = "none";
  o.natural_fraction = 0;
  o.ttt_steps = 1;
  o.draft_vocab = 256;
  ears::train_eagle3(o);

  const ears::Checkpoint head = ears::Checkpoint::open(out);
  ASSERT_TRUE(head.contains("embed_tokens.weight"));
  const c10::Device cpu(c10::kCPU);
  const at::Tensor embed = head.load("embed_tokens.weight", cpu, at::kFloat);
  const at::Tensor target_embed = ears::Checkpoint::open(o.target).load("model.embed_tokens.weight", cpu, at::kFloat);
  EXPECT_TRUE(at::equal(embed, target_embed));
  EXPECT_EQ(head.dtype("embed_tokens.weight"), head.dtype("fc.weight"));

  // The same head without the tensor (the target's embedding shared): identical logits and states.
  ears::ParamMap tensors;
  for (const std::string& name : head.names())
    if (name != "embed_tokens.weight") tensors[name] = head.load(name, cpu, head.dtype(name));
  ears::save_safetensors(shared / "model.safetensors", tensors);
  fs::copy_file(out / "config.json", shared / "config.json");
  const ears::CausalLM target = ears::CausalLM::load(o.target, cpu, at::kFloat);
  const ears::Eagle3Head own = ears::Eagle3Head::load(out, target), borrowed = ears::Eagle3Head::load(shared, target);
  EXPECT_TRUE(own.own_embeddings());
  EXPECT_FALSE(borrowed.own_embeddings());
  const at::Tensor ids = at::tensor(std::vector<int64_t>{11, 257, 1024, 5, 77, 300}, at::kLong).view({1, 6});
  ears::ForwardOptions fo;
  fo.aux_layers = own.aux_layers();
  const ears::ForwardOutput tf = target.forward(ids, fo);
  const at::Tensor feats = at::cat(tf.aux_hidden, -1);
  ears::KVCache c1 = own.new_cache(1, 8), c2 = borrowed.new_cache(1, 8);
  const auto a = own.forward(ids, feats, /*from_target=*/true, c1), b = borrowed.forward(ids, feats, true, c2);
  EXPECT_TRUE(at::equal(a.logits, b.logits));
  EXPECT_TRUE(at::equal(a.prenorm, b.prenorm));
}
