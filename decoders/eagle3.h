// EAGLE-3 draft head (Hugging Face layout `LlamaForCausalLMEagle3`, as trained by SafeAILab/EAGLE
// and served by sglang/vLLM): one Llama decoder layer whose q/k/v read the concatenation
// [input_layernorm(token embedding), hidden_norm(hidden)] (2d wide, embedding first), an `fc`
// that folds the target's aux hidden states (3 layers concatenated) to d, its own norm and a
// reduced-vocabulary lm_head with the d2t map (draft id i -> target id i + d2t[i]). The config is
// read in the EAGLE layout or vLLM speculators' (decoders/eagle3_config.h); with its
// norm_before_residual the layer's first residual is hidden_norm(hidden) instead of hidden, with
// norm_before_fc one RMSNorm over the concatenated aux features comes before fc.
//
// Aux-layer convention: ids are HF `hidden_states` indices, i.e. the residual stream ENTERING
// decoder layer i (EAGLE's default, vLLM, and ../shared/fixtures). sglang instead adds 1 to ids
// read from `eagle_config.eagle_aux_hidden_state_layer_ids`; pick it with
// AuxLayerConvention::Sglang. List semantics: duplicates are kept (fc sees every entry).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "decoders/draft.h"
#include "decoders/eagle3_config.h"
#include "decoders/model.h"

namespace ears {

enum class AuxLayerConvention { Hf, Sglang };

struct Eagle3Options {
  std::optional<std::vector<int>> aux_layers;  // overrides the checkpoint's ids (given in `convention`)
  AuxLayerConvention convention = AuxLayerConvention::Hf;
};

class Eagle3Head {
 public:
  // Loads config.json + weights from `dir`, checking them against the target (hidden sizes,
  // vocab, layer ids). Embeddings: the head's own `embed_tokens.weight` if shipped, else the
  // target's. Errors name the file and key.
  static Eagle3Head load(const std::filesystem::path& dir, const CausalLM& target, const Eagle3Options& options = {});

  struct Output {
    at::Tensor logits;   // [B, R, draft_vocab] (rows as requested)
    at::Tensor prenorm;  // [B, R, d] hidden fed back at the next chain step
  };
  // One layer step over T positions appended to `cache` (1-layer KV cache of this head).
  // hidden: [B, T, n_aux * target_hidden] target features (goes through fc) or [B, T, d]
  // fed-back pre-norm states (when from_target is false). rows: optional [B, R] positions whose
  // logits/prenorm are returned (default all T); on the rows path only those rows are computed past
  // the K/V write (the cache gets every row's). On a CPU kernel path, steps of <= 512 positions
  // (the prompt at begin(), the chain steps, the refresh after verification) run on raw rows
  // (decoders/eagle3_rows.cpp).
  Output forward(const at::Tensor& token_ids, const at::Tensor& hidden, bool from_target, KVCache& cache,
                 const std::optional<at::Tensor>& rows = std::nullopt) const;

  // The same step on host rows, for a drafter on a CPU kernel path (no ATen op: the ~5 a step costs
  // 3-5 us each on a 1-layer head): `ids` [B * T] (B = cache.batch(); negative ids read as 0), each
  // row's features the target's `aux` list concatenated (aux[i]: [B, >= T, target_hidden], rows
  // t < T taken) or, with `aux` empty, the fed-back states `fed` [B, T, d]; returns the logits and
  // pre-norm state of row pick[b] of each sequence ([B, 1, ...]). host_step_ready: forward_host takes
  // these inputs (the device, dtypes, layouts and lengths forward()'s rows path needs).
  bool host_step_ready(const std::vector<at::Tensor>& aux, const at::Tensor& fed, int64_t T,
                       const KVCache& cache) const;
  Output forward_host(const std::vector<int64_t>& ids, int64_t T, const std::vector<at::Tensor>& aux,
                      const at::Tensor& fed, const std::vector<int64_t>& pick, KVCache& cache) const;

  KVCache new_cache(int64_t batch, int64_t max_len) const;
  const std::vector<int>& aux_layers() const { return aux_layers_; }  // HF indices into the target
  const at::Tensor& draft_to_target() const { return draft_to_target_; }  // [Vd] int64 target ids
  int64_t draft_vocab() const { return draft_vocab_; }
  int64_t target_vocab() const { return target_vocab_; }
  bool own_embeddings() const { return own_embed_; }
  Eagle3Config::Layout layout() const { return layout_; }  // the config.json layout it was read from
  bool norm_before_residual() const { return norm_before_residual_; }
  bool norm_before_fc() const { return fc_norm_.defined(); }
  // The head computes in the target's dtype on the target's device (weights held in that dtype).
  c10::Device device() const { return device_; }
  c10::ScalarType dtype() const { return dtype_; }
  // The weights the head holds: its layer, fc, norms, lm_head and its own embeddings if it ships
  // them (the target's shared embeddings are the target's).
  int64_t parameter_count() const;

 private:
  Eagle3Head() = default;
  // Every tensor but the vocabulary map, shapes checked against cfg_ and the target's; with
  // norm_before_fc also input_norm.weight (fc_norm_).
  void load_weights(const Checkpoint& ckpt, const std::filesystem::path& dir, const CausalLM& target,
                    bool norm_before_fc);
  // draft_to_target_ from the checkpoint's d2t offsets (identity without one), range-checked.
  void load_vocab_map(const Checkpoint& ckpt, const std::filesystem::path& dir);
  // True when forward() takes forward_rows: its inputs are on the CPU and rows_step_fits.
  bool rows_path(const at::Tensor& token_ids, const at::Tensor& hidden, const KVCache& cache) const;
  // What rows_path and host_step_ready both need: a CPU kernel path computing dtype_, T <= 512 and the
  // cache's positions inside the RoPE table.
  bool rows_step_fits(int64_t T, const KVCache& cache) const;
  template <class E>  // uint16_t (bf16 bits) or float
  Output forward_rows(const at::Tensor& token_ids, const at::Tensor& hidden, bool from_target, KVCache& cache,
                      const std::optional<at::Tensor>& rows) const;
  // Both rows entries' step: ids [B * T]; target_feats [B * T, n_aux * target_hidden] (through fc) or
  // fed [B * T, d]; pick [B * R] rows per sequence whose outputs are returned (null: all T, R = T).
  template <class E>
  Output rows_step(const int64_t* ids, int64_t B, int64_t T, const E* target_feats, const E* fed,
                   const int64_t* pick, int64_t R, KVCache& cache) const;
  // rows_step's stages. x [BT, 2d] = [norm(embed(id)) | norm(g)], g [BT, d] = fc(target_feats) or fed.
  template <class E>
  void rows_input(const int64_t* id, int64_t BT, const E* target_feats, const E* fed, E* g, E* x) const;
  // The layer's attention: k and v of all B * T rows into the cache; attn [B * R, H * hd] for the
  // picked rows (all T when pick is null).
  template <class E>
  void rows_attention(const E* x, int64_t B, int64_t T, const int64_t* pick, int64_t R, KVCache& cache,
                      E* attn) const;
  // The rest of the layer and the logits, picked rows only: h = r + o(attn); h += mlp(norm(h)), the
  // residual r of row t at res + t * res_stride (g, or hidden_norm(g) with norm_before_residual).
  template <class E>
  Output rows_output(const E* res, int64_t res_stride, const E* attn, int64_t B, int64_t T, const int64_t* pick,
                     int64_t R) const;
  // The target's hidden size: fc reads one such row per aux layer.
  int64_t target_hidden() const { return fc_.in_features / static_cast<int64_t>(aux_layers_.size()); }
  ModelConfig cfg_;
  Eagle3Config::Layout layout_ = Eagle3Config::Layout::eagle;
  bool norm_before_residual_ = false;  // the first residual is hidden_norm(g) (decoders/eagle3_config.h)
  at::Tensor fc_norm_;                 // norm_before_fc: RMSNorm weight over fc's input; else undefined
  c10::Device device_ = c10::Device(c10::kCPU);
  c10::ScalarType dtype_ = c10::kFloat;
  std::vector<int> aux_layers_;
  int64_t draft_vocab_ = 0, target_vocab_ = 0;
  bool own_embed_ = false;
  at::Tensor embed_, input_norm_, hidden_norm_, post_norm_, norm_, inv_freq_, draft_to_target_;
  layers::RopeCache rope_;  // cos/sin tables, computed at load
  layers::LinearWeight fc_, qkv_, o_, gate_up_, down_, lm_head_;
};

// The drafter driving an Eagle3Head inside the engine (first step from the target's features,
// chain steps from the head's own pre-norm states, refreshed with the target's features of the
// accepted tokens after each verification).
std::unique_ptr<Drafter> make_eagle3_drafter(const Eagle3Head& head);

}  // namespace ears
