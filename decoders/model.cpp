#include "decoders/model.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/embedding.h>

#include <chrono>
#include <cmath>

#include "decoders/aten_operators.h"
#include "decoders/kernel_path.h"
#include "decoders/param_ranges.h"
#include "decoders/safetensors.h"
#include "harness/base/error.h"

namespace ears {

c10::ScalarType auto_dtype(c10::ScalarType checkpoint, c10::Device device) {
  if (!device.is_cpu() || checkpoint == at::kFloat) return checkpoint;
  if (checkpoint == at::kBFloat16 && (kernels::path() != kernels::Path::aten || kernels::native_bf16()))
    return at::kBFloat16;
  return at::kFloat;
}

// ---------------------------------------------------------------------------------------------

namespace {

// A checkpoint with more layers than config.json declares would otherwise run as a shallower model
// without a word (transformers loads it with an "unused weights" warning).
void check_no_extra_layers(const Checkpoint& ck, int64_t n_layers, const std::filesystem::path& dir) {
  const std::string prefix = "model.layers.";
  for (const std::string& name : ck.names()) {
    if (!name.starts_with(prefix)) continue;
    const size_t dot = name.find('.', prefix.size());
    const std::string index = name.substr(prefix.size(), dot - prefix.size());
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos || index.size() > 9) continue;
    if (std::stoll(index) >= n_layers)
      fail("{}: num_hidden_layers is {}, but the checkpoint holds layer {} ('{}'); set num_hidden_layers to the "
           "checkpoint's layer count",
           (dir / "config.json").string(), n_layers, index, name);
  }
}

}  // namespace

CausalLM CausalLM::load(const std::filesystem::path& dir, c10::Device device,
                        std::optional<c10::ScalarType> dtype) {
  CausalLM m;
  m.cfg_ = ModelConfig::load(dir);
  m.dir_ = dir;
  m.device_ = device;
  m.dtype_ = dtype.value_or(auto_dtype(m.cfg_.torch_dtype, device));
  if (m.dtype_ != at::kFloat && m.dtype_ != at::kBFloat16 && m.dtype_ != at::kHalf)
    fail("{}: compute dtype {} is not supported (use float32, bfloat16 or float16)", dir.string(),
         dtype_name(m.dtype_));
  if (device.is_cpu() && m.dtype_ == at::kHalf)
    fail("{}: {}; {}", dir.string(), ranges::kFloat16OnCpu, ranges::kFloat16OnCpuFix);
  const ModelConfig& c = m.cfg_;
  const Checkpoint ck = Checkpoint::open(dir);
  auto get = [&](const std::string& name, std::vector<int64_t> shape) {
    return ck.load(name, device, m.dtype_, std::move(shape));
  };
  const int64_t D = c.hidden_size, hd = c.head_dim, V = c.vocab_size;
  m.embed_ = get("model.embed_tokens.weight", {V, D});
  m.final_norm_ = get("model.norm.weight", {D});
  if (c.tie_word_embeddings) {
    m.lm_head_ = m.embed_;
  } else if (ck.contains("lm_head.weight")) {
    m.lm_head_ = get("lm_head.weight", {V, D});
  } else {
    fail("{}: tensor 'lm_head.weight' not found and config.json has tie_word_embeddings false; set "
         "\"tie_word_embeddings\": true if the model shares its input embeddings",
         dir.string());
  }

  check_no_extra_layers(ck, c.num_hidden_layers, dir);
  m.layers_.reserve(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) m.layers_.push_back(load_layer(ck, c, i, device, m.dtype_));
  m.lm_head_linear_ = layers::prepare_linear(m.lm_head_);
  m.inv_freq_ = layers::rope_inv_freq(hd, c.rope, device);
  m.rope_ = layers::RopeCache::build(m.inv_freq_, c.max_position_embeddings, m.dtype_);
  return m;
}

CausalLM::Layer CausalLM::load_layer(const Checkpoint& ck, const ModelConfig& c, int64_t i, c10::Device device,
                                     c10::ScalarType dtype) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  auto get = [&](const std::string& name, std::vector<int64_t> shape) {
    return ck.load(p + name, device, dtype, std::move(shape));
  };
  const int64_t D = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  const int64_t H = c.num_attention_heads, K = c.num_key_value_heads;
  Layer L;
  L.input_norm = get("input_layernorm.weight", {D});
  L.post_norm = get("post_attention_layernorm.weight", {D});
  L.qkv = layers::prepare_linear(
      at::cat({get("self_attn.q_proj.weight", {H * hd, D}), get("self_attn.k_proj.weight", {K * hd, D}),
               get("self_attn.v_proj.weight", {K * hd, D})},
              0),
      c.qkv_bias ? at::cat({get("self_attn.q_proj.bias", {H * hd}), get("self_attn.k_proj.bias", {K * hd}),
                            get("self_attn.v_proj.bias", {K * hd})},
                           0)
                 : at::Tensor());
  if (c.qk_norm)  // one RMSNorm over the adjacent q and k heads of the fused projection
    L.qk_norm = at::cat(
        {get("self_attn.q_norm.weight", {hd}).expand({H, hd}), get("self_attn.k_norm.weight", {hd}).expand({K, hd})},
        0);
  L.o = layers::prepare_linear(get("self_attn.o_proj.weight", {D, H * hd}),
                               c.o_bias ? get("self_attn.o_proj.bias", {D}) : at::Tensor());
  L.gate_up = layers::prepare_linear(
      at::cat({get("mlp.gate_proj.weight", {I, D}), get("mlp.up_proj.weight", {I, D})}, 0),
      c.mlp_bias ? at::cat({get("mlp.gate_proj.bias", {I}), get("mlp.up_proj.bias", {I})}, 0) : at::Tensor());
  L.down = layers::prepare_linear(get("mlp.down_proj.weight", {D, I}),
                                  c.mlp_bias ? get("mlp.down_proj.bias", {D}) : at::Tensor());
  return L;
}

KVCache CausalLM::new_cache(int64_t batch, int64_t max_len) const {
  return KVCache(cfg_.num_hidden_layers, batch, cfg_.num_key_value_heads, max_len, cfg_.head_dim, dtype_,
                 device_);
}

at::Tensor CausalLM::embed(const at::Tensor& ids) const { return at::embedding(embed_, ids); }

at::Tensor CausalLM::logits_from_hidden(const at::Tensor& hidden) const {
  return layers::linear(layers::rms_norm(hidden, final_norm_, cfg_.rms_norm_eps), lm_head_linear_);
}

// Adds the time since the previous lap to one phase of a ForwardPhases (no clock read without one).
class PhaseClock {
 public:
  explicit PhaseClock(ForwardPhases* p) : p_(p) {
    if (!p_) return;
    ++p_->forwards;
    last_ = std::chrono::steady_clock::now();
  }
  void lap(ForwardPhases::Phase phase) {
    if (!p_) return;
    const auto now = std::chrono::steady_clock::now();
    p_->seconds[phase] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  ForwardPhases* p_;
  std::chrono::steady_clock::time_point last_;
};

namespace {
// wanted[l] for l in 0..N: whether hidden state l is an aux output (ids range-checked).
std::vector<char> aux_wanted(const std::vector<int>& aux_layers, int64_t N) {
  std::vector<char> wanted(static_cast<size_t>(N + 1), 0);
  for (int a : aux_layers) {
    if (a < 0 || a > N)
      fail("aux hidden layer id {} out of range: the model has {} layers (valid ids 0..{})", a, N, N);
    wanted[static_cast<size_t>(a)] = 1;
  }
  return wanted;
}

// The rows whose logits are wanted ([B, R] on `device`), or undefined when all of them are.
at::Tensor logit_rows(const ForwardOptions& opt, int64_t B, c10::Device device) {
  if (!opt.logits_rows || opt.skip_logits) return {};
  const at::Tensor& rows = *opt.logits_rows;
  if (!rows.defined() || rows.dim() != 2 || rows.size(0) != B || rows.scalar_type() != at::kLong)
    fail("CausalLM::forward: logits_rows must be a [B, K] int64 tensor (B = {})", B);
  return rows.to(device);
}

}  // namespace

std::vector<int> CausalLM::default_eagle_aux_layers() const {
  const int n = static_cast<int>(cfg_.num_hidden_layers);
  return {2, n / 2, n - 3};
}

ForwardOutput CausalLM::forward(const at::Tensor& ids, const ForwardOptions& opt) const {
  if (!ids.defined() || ids.dim() != 2) fail("CausalLM::forward: ids must be [B, T]");
  KVCache cache = new_cache(ids.size(0), std::max<int64_t>(ids.size(1), 1));
  return forward(ids, cache, opt);
}

void CausalLM::check_forward_args(const at::Tensor& ids, const KVCache& cache) const {
  const ModelConfig& c = cfg_;
  if (!ids.defined() || ids.dim() != 2 || ids.scalar_type() != at::kLong)
    fail("CausalLM::forward: ids must be a [B, T] int64 tensor");
  if (ids.device() != device_)
    fail("CausalLM::forward: ids are on {} but the model is on {}", ids.device().str(), device_.str());
  const int64_t B = ids.size(0), N = c.num_hidden_layers, K = c.num_key_value_heads, hd = c.head_dim;
  if (cache.batch() != B || cache.n_layers() != N || cache.kv_heads() != K || cache.head_dim() != hd)
    fail("CausalLM::forward: KV cache shape (batch {}, layers {}, kv heads {}, head_dim {}) does not match "
         "ids batch {} / model (layers {}, kv heads {}, head_dim {})",
         cache.batch(), cache.n_layers(), cache.kv_heads(), cache.head_dim(), B, N, K, hd);
  if (cache.dtype() != dtype_ || cache.device() != device_)
    fail("CausalLM::forward: KV cache is {} on {} but the model computes in {} on {} (use new_cache())",
         dtype_name(cache.dtype()), cache.device().str(), dtype_name(dtype_), device_.str());
}

void CausalLM::layer_forward(int64_t i, at::Tensor& h, KVCache& cache, const KVCache::Append& plan,
                             const layers::RopeTables& rope, const at::Tensor* keep, PhaseClock& clock) const {
  using P = ForwardPhases;
  const ModelConfig& c = cfg_;
  const int64_t B = h.size(0), T = h.size(1), H = c.num_attention_heads, K = c.num_key_value_heads;
  const int64_t hd = c.head_dim;
  const double eps = c.rms_norm_eps;
  const Layer& L = layers_[static_cast<size_t>(i)];
  clock.lap(P::rest);
  const at::Tensor x = layers::rms_norm(h, L.input_norm, eps);
  clock.lap(P::norms);
  const at::Tensor qkv = layers::linear(x, L.qkv);  // [B, T, (H + 2K) * hd]
  clock.lap(P::qkv);
  // q and k heads are adjacent in qkv: QK-norm and RoPE run once over all H + K of them
  // (per-row operations, so each head rounds exactly as it would alone).
  at::Tensor qk = qkv.narrow(-1, 0, (H + K) * hd).view({B, T, H + K, hd});
  const at::Tensor v = qkv.narrow(-1, (H + K) * hd, K * hd).view({B, T, K, hd});
  if (c.qk_norm) qk = layers::rms_norm(qk, L.qk_norm, eps);
  qk = layers::apply_rope(qk, rope);
  at::Tensor q = qk.narrow(2, 0, H);
  const at::Tensor k = qk.narrow(2, H, K);
  cache.write(i, plan, k, v);
  at::Tensor blocked = plan.blocked, positions = plan.positions;
  if (keep) {
    if (!keep->defined()) return;
    q = layers::take_rows(q, *keep);
    blocked = layers::take_rows(blocked, *keep);
    positions = layers::take_rows(positions, *keep);
    h = layers::take_rows(h, *keep);
  }
  clock.lap(P::qk_rope_kv);
  const double scale = std::pow(static_cast<double>(hd), -0.5);
  const at::Tensor attn = layers::attention(q, cache.keys(i, plan), cache.values(i, plan), blocked, scale, positions);
  clock.lap(P::attention);
  const at::Tensor o = layers::linear(attn, L.o);
  clock.lap(P::o_proj);
  layers::residual_add_(h, o);
  clock.lap(P::rest);
  const at::Tensor x2 = layers::rms_norm(h, L.post_norm, eps);
  clock.lap(P::norms);
  const at::Tensor mlp = layers::silu_mlp(x2, L.gate_up, L.down);
  clock.lap(P::mlp);
  layers::residual_add_(h, mlp);
}

ForwardOutput CausalLM::forward(const at::Tensor& ids, KVCache& cache, const ForwardOptions& opt) const {
  check_forward_args(ids, cache);
  const int64_t N = cfg_.num_hidden_layers;
  const std::vector<char> wanted = aux_wanted(opt.aux_layers, N);
  const at::Tensor rows = logit_rows(opt, ids.size(0), device_);
  // The last layer past its K/V only for the rows read out (llama.cpp's inp_out_ids): none with
  // skip_logits, the logits rows, all rows otherwise or when its output is an aux state. On a CPU
  // kernel path only, whose kernels round a row alike at any row count (LibTorch's GEMMs do not).
  const bool trim_last = device_.is_cpu() && layers::rows_available(dtype_) && !wanted[static_cast<size_t>(N)] &&
                         (opt.skip_logits || rows.defined());
  PhaseClock clock(opt.phases);
  const KVCache::Append plan = cache.prepare_append(ids.size(1));
  const layers::RopeTables rope = rope_.lookup(plan.positions, plan.span, plan.uniform_start);

  std::vector<at::Tensor> hs(static_cast<size_t>(N + 1));
  at::Tensor h = embed(ids);  // fresh tensor: updated in place below
  if (wanted[0]) hs[0] = h.clone();
  for (int64_t i = 0; i < N; ++i) {
    const bool last = i + 1 == N;
    layer_forward(i, h, cache, plan, rope, last && trim_last ? &rows : nullptr, clock);
    if (!last && wanted[static_cast<size_t>(i + 1)]) hs[static_cast<size_t>(i + 1)] = h.clone();
  }
  clock.lap(ForwardPhases::rest);
  if (wanted[static_cast<size_t>(N)]) hs[static_cast<size_t>(N)] = layers::rms_norm(h, final_norm_, cfg_.rms_norm_eps);

  ForwardOutput out;
  if (!opt.skip_logits) {
    if (rows.defined()) {
      out.logits = logits_from_hidden(trim_last ? h : layers::take_rows(h, rows));
    } else if (wanted[static_cast<size_t>(N)]) {
      out.logits = layers::linear(hs[static_cast<size_t>(N)], lm_head_linear_);
    } else {
      out.logits = logits_from_hidden(h);
    }
  }
  clock.lap(ForwardPhases::logits);
  out.aux_hidden.reserve(opt.aux_layers.size());
  for (int a : opt.aux_layers) out.aux_hidden.push_back(hs[static_cast<size_t>(a)]);
  cache.commit(plan);
  clock.lap(ForwardPhases::rest);
  return out;
}

}  // namespace ears
