// Hugging Face-exact decoder-only causal LM (Qwen3 / Qwen2 / Llama) in plain ATen, with a
// ragged-batch KV cache (decoders/layers.h) and HF hidden_states-style aux outputs for EAGLE-3.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "decoders/layers.h"

namespace ears {

class Checkpoint;
class PhaseClock;

// The compute dtype `dtype: auto` picks for a checkpoint stored in `checkpoint`: the checkpoint's
// own on an accelerator; on the CPU never one the hardware emulates: bf16 when a CPU kernel path
// computes it (decoders/kernel_path.h: bf16 weights widened to f32 in registers on AVX2) or the
// CPU has native bf16, float32 otherwise (and for float16, which has no CPU kernels).
c10::ScalarType auto_dtype(c10::ScalarType checkpoint, c10::Device device);

// Where a forward's time goes, as the calling thread's wall clock sees it (CPU: every kernel
// returns when done; `ears-bench bench forward --phases`). Seconds added up over the forwards
// it is given to; together the phases cover the forward from the cache append to its commit.
struct ForwardPhases {
  enum Phase { norms, qkv, qk_rope_kv, attention, o_proj, mlp, logits, rest, count };
  static constexpr std::array<const char*, count> kNames = {
      "norms", "qkv", "qk_rope_kv", "attention", "o_proj", "mlp", "logits", "rest"};
  static constexpr std::array<const char*, count> kMeanings = {
      "input and post-attention RMSNorm",
      "fused q/k/v projection",
      "QK-norm, RoPE, K/V cache write",
      "attention over the cache",
      "output projection",
      "gate_up projection, SwiGLU, down projection",
      "final RMSNorm and lm_head",
      "embedding, residual adds, views, allocation"};
  std::array<double, count> seconds{};
  int64_t forwards = 0;
};

struct ForwardOptions {
  // HF hidden_states ids to return: hs[0] = embeddings, hs[i] = output of layer i-1 (entering
  // layer i), hs[N] = final normed output. One output per entry, in list order, duplicates kept.
  std::vector<int> aux_layers;
  // [B, K] int64 on the model device: indices into the T new positions whose logits are
  // wanted. Only these rows go through the final norm + lm_head, and on a CPU kernel path through the
  // last layer past its K/V write (unless its output is an aux state; with skip_logits no row does).
  // Default: all T rows.
  std::optional<at::Tensor> logits_rows;
  bool skip_logits = false;  // no norm/lm_head at all (logits undefined)
  ForwardPhases* phases = nullptr;  // when set, each phase's wall time is added to it
};

struct ForwardOutput {
  at::Tensor logits;                    // [B, K or T, V] in the compute dtype (caller upcasts)
  std::vector<at::Tensor> aux_hidden;   // one [B, T, hidden] per ForwardOptions::aux_layers entry
};

class CausalLM {
 public:
  // Loads config.json + safetensors from `dir`. dtype: compute dtype (default: auto_dtype of the
  // config's torch_dtype);
  // weights are converted at load. Validates every tensor's shape against the config. Tied
  // embeddings when tie_word_embeddings is true; a missing lm_head.weight with
  // tie_word_embeddings false is an error.
  static CausalLM load(const std::filesystem::path& dir, c10::Device device = c10::Device(c10::kCPU),
                       std::optional<c10::ScalarType> dtype = std::nullopt);

  // Runs ids [B, T] (int64, on device()) appended to each sequence at its own cache length;
  // advances every cache length by T.
  ForwardOutput forward(const at::Tensor& ids, KVCache& cache, const ForwardOptions& opt = {}) const;
  // No-cache convenience: a fresh cache of exactly T positions.
  ForwardOutput forward(const at::Tensor& ids, const ForwardOptions& opt = {}) const;

  KVCache new_cache(int64_t batch, int64_t max_len) const;

  at::Tensor embed(const at::Tensor& ids) const;               // [B, T, hidden] compute dtype
  const at::Tensor& embedding_weight() const { return embed_; }  // [V, hidden]
  const at::Tensor& lm_head_weight() const { return lm_head_; }  // [V, hidden] (== embed when tied)
  // Applies the final norm + lm_head to hidden states [..., hidden].
  at::Tensor logits_from_hidden(const at::Tensor& hidden) const;

  const ModelConfig& config() const { return cfg_; }
  c10::Device device() const { return device_; }
  c10::ScalarType dtype() const { return dtype_; }
  const std::filesystem::path& dir() const { return dir_; }
  // EAGLE-3's default aux ids [2, N/2, N-3] (HF hidden_states indices).
  std::vector<int> default_eagle_aux_layers() const;

 private:
  struct Layer {
    at::Tensor input_norm, post_norm;
    layers::LinearWeight qkv;         // fused [(H + 2K) * hd, hidden]
    at::Tensor qk_norm;               // [H + K, hd]: q_norm per query head, then k_norm per KV head (Qwen3)
    layers::LinearWeight o;
    layers::LinearWeight gate_up;     // fused [2 * I, hidden], gate first
    layers::LinearWeight down;
  };
  CausalLM() = default;
  // Layer i's weights (model.layers.i.*), q/k/v and gate/up fused as Layer's fields say.
  static Layer load_layer(const Checkpoint& ck, const ModelConfig& c, int64_t i, c10::Device device,
                          c10::ScalarType dtype);
  // ids [B, T] int64 on device_, and a cache of this model's shape, dtype and device.
  void check_forward_args(const at::Tensor& ids, const KVCache& cache) const;
  // Layer i over h [B, T, hidden] in place. With `keep` (the last layer, trimmed): past its K/V
  // write only for the rows *keep [B, R] (h becomes [B, R, hidden]), or none if *keep is undefined.
  void layer_forward(int64_t i, at::Tensor& h, KVCache& cache, const KVCache::Append& plan,
                     const layers::RopeTables& rope, const at::Tensor* keep, PhaseClock& clock) const;

  ModelConfig cfg_;
  std::filesystem::path dir_;
  c10::Device device_ = c10::Device(c10::kCPU);
  c10::ScalarType dtype_ = c10::ScalarType::Float;
  at::Tensor embed_, final_norm_, lm_head_, inv_freq_;
  layers::RopeCache rope_;  // cos/sin tables, computed at load
  layers::LinearWeight lm_head_linear_;  // lm_head_ prepared for linear() (packed on AMX CPUs)
  std::vector<Layer> layers_;
};

}  // namespace ears
