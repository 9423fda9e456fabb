// Training of the embedded default pair (issue "Embedded default: a tiny trained Qwen3 target +
// EAGLE-3 draft shipped in the repo"): a byte-level BPE tokenizer, a tiny Qwen3 target trained
// from scratch, and an EAGLE-3 head trained on the frozen target with training-time test.
// LibTorch autograd through plain ATen ops (no torch::nn / torch::optim); the optimiser
// (AdamW), LR schedule and gradient clipping are written out here. Checkpoints are written in
// the Hugging Face layout that decoders/model.h CausalLM::load and decoders/eagle3.h
// Eagle3Head::load read (see ../shared/fixtures/README.md and ../shared/notes/eagle3-training.md).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "decoders/bpe_trainer.h"
#include "decoders/model.h"
#include "decoders/safetensors_writer.h"

namespace ears {

class Tokenizer;
using ParamMap = std::map<std::string, at::Tensor>;  // Hugging Face tensor names

// ---- tensors -> safetensors ----------------------------------------------------------------

// A tensor's bytes (copied to the CPU, contiguous) with its safetensors dtype string.
SafetensorsBlob safetensors_blob(const at::Tensor& t);
// Writes every tensor; floating tensors are converted to `float_dtype` when given (bf16 save).
void save_safetensors(const std::filesystem::path& file, const ParamMap& tensors,
                      std::optional<c10::ScalarType> float_dtype = std::nullopt);

// ---- corpus and training documents -----------------------------------------------------------

struct CorpusOptions {
  uint64_t seed = 0;           // synth-gsm generation seed (train split)
  std::size_t synth_n = 40000; // synth-gsm train problems
  // GSM8K train.jsonl: a file or a directory holding it (or gsm8k/train.jsonl). "" = look in
  // $EARS_BENCH_DATA/gsm8k, data/gsm8k and ../shared/datasets/gsm8k; "none" = do not use it.
  std::string gsm8k_train;
};

// Resolved GSM8K train file, "" when not found (or disabled with "none").
std::string find_gsm8k_train(const std::string& hint);
// (question, answer) rows of a GSM8K-format JSONL file.
std::vector<std::pair<std::string, std::string>> read_gsm8k_jsonl(const std::string& path);

// Text for the BPE trainer: synth-gsm problems in their zero-shot prompt format + worked answer,
// GSM8K train questions and solutions (when found), and the open stems.
std::vector<std::string> tokenizer_corpus(const CorpusOptions& options);

// ids with a loss weight per token: weight[i] scales the loss of predicting ids[i] from ids[<i].
struct TrainDoc {
  std::vector<int32_t> ids;
  std::vector<float> weight;
};
// Chat document: qwen3_chat_prompt(gsm8k zero-shot prompt(question), thinking off) + answer +
// "<|im_end|>" (exactly what the benchmark's chat prompt + a stop at eos looks like). Prompt
// tokens get prompt_weight, the answer and <|im_end|> weight 1.
TrainDoc chat_doc(const Tokenizer& tok, const std::string& question, const std::string& answer, float prompt_weight);
// Plain text followed by <|endoftext|>, every token weight 1.
TrainDoc text_doc(const Tokenizer& tok, const std::string& text);

struct DocPools {
  std::vector<TrainDoc> chat;     // synth-gsm chat documents
  std::vector<TrainDoc> natural;  // GSM8K train "question\nanswer" (or synth-gsm raw text)
  std::string natural_source;     // the GSM8K file used, or "synth-gsm raw"
};
DocPools build_doc_pools(const Tokenizer& tok, const CorpusOptions& options, float prompt_weight);

// Draws documents: natural with probability natural_fraction, else chat; each pool is walked
// in a seeded shuffled order (reshuffled every epoch). Deterministic for a seed.
class DocSampler {
 public:
  DocSampler(const DocPools& pools, double natural_fraction, uint64_t seed);
  const TrainDoc& next();

 private:
  struct Pool {
    const std::vector<TrainDoc>* docs = nullptr;
    std::vector<uint32_t> order;
    std::size_t pos = 0;
  };
  const TrainDoc& draw(Pool& p);
  Pool chat_, natural_;
  double natural_fraction_;
  uint64_t state_;
};

// Rows of T tokens, each filled with whole documents from the sampler (the last one cut at the
// row end). Attention is causal within a document only, positions restart at 0 per document
// (like a fresh prompt at inference), and a document's last token predicts nothing.
struct PackedBatch {
  at::Tensor ids;        // [B, T] int64
  at::Tensor targets;    // [B, T] int64 (next token; 0 where weight is 0)
  at::Tensor weights;    // [B, T] float
  at::Tensor positions;  // [B, T] int64
  at::Tensor blocked;    // [B, T, T] bool: true where query t must not see key s
};
PackedBatch pack_batch(DocSampler& sampler, int64_t batch, int64_t seq_len, c10::Device device);

// One document per row, right-padded with id 0 to the longest (cut at seq_len). loss_mask[b, t]
// = 1 when token t of the row is a loss token (weight > 0), 0 on padding.
struct PaddedBatch {
  at::Tensor ids;        // [B, N] int64
  at::Tensor loss_mask;  // [B, N] float
};
PaddedBatch pad_batch(DocSampler& sampler, int64_t batch, int64_t seq_len, c10::Device device);

// ---- the Qwen3 target ------------------------------------------------------------------------

struct TargetArch {
  int64_t hidden = 256, layers = 6, heads = 4, kv_heads = 2, head_dim = 64, intermediate = 768;
  int64_t max_position_embeddings = 1024;
  double rope_theta = 1000000.0, rms_norm_eps = 1e-6;
  bool tie_word_embeddings = true;
};
ModelConfig qwen3_config(const TargetArch& arch, int64_t vocab_size, int64_t eos_token_id);
// config.json text (Qwen3ForCausalLM, torch_dtype as given).
std::string qwen3_config_json(const ModelConfig& c, c10::ScalarType torch_dtype);

// fp32 parameters with requires_grad, named as in the HF checkpoint (no lm_head.weight when
// tied). Linear/embedding weights ~ N(0, 0.02), o_proj/down_proj scaled by 1/sqrt(2 layers),
// norms 1. Deterministic for a seed (at::manual_seed).
ParamMap init_qwen3_params(const ModelConfig& c, uint64_t seed, c10::Device device = c10::Device(c10::kCPU));

struct TrainForwardOutput {
  at::Tensor logits;                  // [B, T, V] fp32
  std::vector<at::Tensor> aux_hidden;  // HF hidden_states ids as in ForwardOptions::aux_layers
};
// Full-sequence forward without a KV cache (autograd-safe: no in-place op on a tensor that needs
// grad), using decoders/layers.h. positions [B, T], blocked [B, T, T] as in PackedBatch.
TrainForwardOutput qwen3_train_forward(const ParamMap& p, const ModelConfig& c, const at::Tensor& ids,
                                       const at::Tensor& positions, const at::Tensor& blocked,
                                       const std::vector<int>& aux_layers = {});
// Causal-LM loss: sum(weight * CE(logits, target)) / sum(weight).
at::Tensor weighted_lm_loss(const at::Tensor& logits, const at::Tensor& targets, const at::Tensor& weights);

// Writes config.json + model.safetensors (dtype save_dtype) into dir (created).
void save_qwen3(const std::filesystem::path& dir, const ParamMap& p, const ModelConfig& c,
                c10::ScalarType save_dtype = c10::kBFloat16);

// ---- optimisation ------------------------------------------------------------------------------

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};
// AdamW (Loshchilov & Hutter): decoupled weight decay p -= lr * wd * p (only where decay[i]),
// bias-corrected moments. State lives on the parameters' device.
class AdamW {
 public:
  AdamW(std::vector<at::Tensor> params, std::vector<bool> decay, AdamWOptions options);
  void step(double lr);
  void zero_grad();
  int64_t steps() const { return t_; }

 private:
  std::vector<at::Tensor> params_, m_, v_;
  std::vector<bool> decay_;
  AdamWOptions o_;
  int64_t t_ = 0;
};
// Scales every gradient by min(1, max_norm / global_norm) on the device (no host sync);
// returns the global norm before clipping as a 0-dim tensor.
at::Tensor clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);
// Linear warmup to `peak` over `warmup` steps, then cosine decay to peak * min_ratio at `total`.
double cosine_lr(int64_t step, int64_t total, int64_t warmup, double peak, double min_ratio);

// ---- the EAGLE-3 head ------------------------------------------------------------------------

struct Eagle3Arch {
  int64_t heads = 4, kv_heads = 2, head_dim = 64, intermediate = 768;
  std::vector<int> aux_layers;  // HF hidden_states ids; empty = {1, L/2, L-1}
};
// The head's ModelConfig (hidden = target hidden, 1 layer, full draft vocab).
ModelConfig eagle3_config(const Eagle3Arch& arch, const ModelConfig& target);
std::string eagle3_config_json(const ModelConfig& head, const ModelConfig& target, const std::vector<int>& aux_layers,
                               c10::ScalarType torch_dtype);
// fc.weight, midlayer.*, norm.weight, lm_head.weight (fp32, requires_grad). lm_head/norm start
// as copies of the target's lm_head / final norm when given (a warm start), else random / ones.
ParamMap init_eagle3_params(const ModelConfig& head, int64_t n_aux, uint64_t seed, const at::Tensor& target_lm_head = {},
                            const at::Tensor& target_final_norm = {});

struct TttOutput {
  at::Tensor total;                 // sum_k 0.8^k * loss_k (0-dim, differentiable)
  std::vector<at::Tensor> loss;     // per step: masked soft cross-entropy per loss slot
  std::vector<at::Tensor> correct;  // per step: masked count of argmax(draft) == argmax(target)
  std::vector<at::Tensor> count;    // per step: loss slots
  at::Tensor step0_logits;          // [B, N, Vd] (tests compare with Eagle3Head::forward)
  std::vector<at::Tensor> logits;   // every step's logits (kept only when keep_logits)
};
// Training-time test unroll (../shared/notes/eagle3-training.md section 3) over K steps.
// Slot t at step k: hidden = fc(f_t) (k = 0) or the step k-1 pre-norm output at t; token
// x_{t+k+1}; RoPE position t+k; attention: causal over the step-0 keys plus the slot's own keys
// of steps 1..k; teacher softmax(target_logits[t+k+1]); loss only where token t+k+2 exists and
// is a loss token (loss_mask). embed: the target's (frozen) embedding [V, d].
TttOutput eagle3_ttt_forward(const ParamMap& p, const ModelConfig& head, const at::Tensor& embed,
                             const at::Tensor& features, const at::Tensor& target_logits, const at::Tensor& ids,
                             const at::Tensor& loss_mask, int ttt_steps, bool keep_logits = false);

// config.json + model.safetensors (no embed_tokens.weight; d2t zeros [V] I64, t2d ones [V] BOOL).
void save_eagle3(const std::filesystem::path& dir, const ParamMap& p, const ModelConfig& head, const ModelConfig& target,
                 const std::vector<int>& aux_layers, c10::ScalarType save_dtype = c10::kBFloat16);

// ---- end-to-end commands (ears-bench train ...) ------------------------------------------------

using LogFn = std::function<void(const std::string&)>;

struct TokenizerTrainOptions {
  std::filesystem::path out;
  int32_t vocab_size = 2048;
  CorpusOptions corpus;
};
BpeTrainerResult train_tokenizer(const TokenizerTrainOptions& options, const LogFn& log = {});

struct TrainSchedule {
  int64_t steps = 1000, batch = 16, seq_len = 256, warmup = 50;
  double lr = 3e-3, min_lr_ratio = 0.1, weight_decay = 0.1, clip = 1.0;
  double minutes = 0;  // > 0: wall-time budget; the step count is cut to fit after 5 timed steps
  uint64_t seed = 0;
  int64_t log_every = 10;
  int threads = 0;
  std::string device = "cpu";
  // Compute dtype: the fp32 master weights are cast to it for every forward/backward (mixed
  // precision); bfloat16 uses the CPU's bf16 matmul units (AMX/AVX512-BF16 via oneDNN), about
  // 10x faster than fp32 here. Optimizer state and updates stay fp32.
  std::string dtype = "bfloat16";
};

struct TrainReport {
  int64_t steps_done = 0, steps_planned = 0;
  double seconds = 0, step_seconds = 0;       // wall time of the loop, mean time per step
  std::vector<std::pair<int64_t, double>> loss_curve;  // (step, mean loss over the log window)
  std::map<std::string, double> metrics;      // eval results (accuracy, tau, ...)
};

struct TargetTrainOptions {
  std::filesystem::path out;
  std::filesystem::path tokenizer;  // dir with tokenizer.json; "" = <out> (trained there when absent)
  int32_t vocab_size = 2048;        // when a tokenizer is trained
  TargetArch arch;
  TrainSchedule schedule;
  CorpusOptions corpus;
  double natural_fraction = 0.2;
  float prompt_weight = 0.1f;
  int64_t eval_n = 0;               // > 0: greedy accuracy on that many synth-gsm test problems (seed 0)
  int64_t eval_max_new_tokens = 200;
  std::filesystem::path init;       // non-empty: start from this checkpoint's weights (continued
                                    // training; same architecture), not from a random init
};
TrainReport train_target(const TargetTrainOptions& options, const LogFn& log = {});

struct Eagle3TrainOptions {
  std::filesystem::path target, out;
  Eagle3Arch arch;
  TrainSchedule schedule;
  CorpusOptions corpus;
  double natural_fraction = 0.2;
  int ttt_steps = 3;
  bool warm_start_lm_head = true;
  int64_t eval_n = 0;               // > 0: tau at gamma 5 (greedy) on that many synth-gsm test problems
  int eval_gamma = 5;
  int64_t eval_max_new_tokens = 200;
};
TrainReport train_eagle3(const Eagle3TrainOptions& options, const LogFn& log = {});

// Greedy synth-gsm test accuracy (seed 0, zero-shot chat prompts, thinking off) of a saved
// target; with a draft dir also the mean accept length tau at `gamma` (greedy verification).
struct EvalResult {
  double accuracy = 0, tau = 0, tokens_per_s = 0;
  int64_t n = 0;
};
EvalResult evaluate_pair(const std::filesystem::path& target, const std::filesystem::path& draft, int64_t n, int gamma,
                         int64_t max_new_tokens, const std::string& dtype = "auto");

}  // namespace ears
