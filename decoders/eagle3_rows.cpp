// The EAGLE-3 head's step on raw rows (decoders/eagle3.h, Eagle3Head::forward on a CPU kernel
// path): the same layer as the ATen path in eagle3.cpp, computed by the kernel path's row
// kernels (decoders/layers.h "Raw rows") with no ATen op between them. A 1-layer head on a small
// model is all per-op overhead under ATen (~40 ops of 3-8 us for ~30 us of arithmetic on the
// bundled pair); here a chain step is the arithmetic plus a few forks of the linear kernels.
//
// forward_host is the same step (rows_step) on host inputs, for the drafter's T = 0 chain and its
// refresh after verification: the ~5 ATen ops a step took around it (cat of the aux features,
// narrow, clamp, the ids and rows tensors) were 20-25 us of a ~260 us draft step on the bundled
// pair (AMD Zen 4, alternated step by step in one process; docs/performance-log.md).
//
// Past the K/V write a step computes only the rows it returns (the prompt's begin() and the refresh
// return one per sequence): in a causal layer the other rows only feed the cache. On the bundled
// pair (AMD Zen 3, avx2, quickstart-greedy, alternated) the speculative arm's prefill 10.6 -> 8.7 ms
// a request and its draft 0.46 -> 0.42 ms a step (with the target's last layer trimmed alike,
// CausalLM::forward: +23-27 % -> +32-36 % over the target alone; docs/performance-log.md).
//
// Numerics: linear, RMSNorm, RoPE, attention and SwiGLU are the kernels the ATen path calls, so
// they round identically. The residual adds round once per op to the compute dtype, as Hugging
// Face's bf16 module does: h = bf16(g + o), out = bf16(h + down).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "decoders/eagle3.h"
#include "decoders/layers.h"
#include "harness/base/error.h"

namespace ears {

namespace {

template <class E>
E* ptr(const at::Tensor& t) {
  return reinterpret_cast<E*>(t.data_ptr());
}

// Longer steps (a long prompt's begin()) take the ATen path: its batched attention beats one
// kernel call per query row there.
constexpr int64_t kRowsMaxTokens = 512;

}  // namespace

bool Eagle3Head::rows_step_fits(int64_t T, const KVCache& cache) const {
  return device_.is_cpu() && layers::rows_available(dtype_) && T <= kRowsMaxTokens && cache.dtype() == dtype_ &&
         cache.max_length() + T <= rope_.table.cos.size(0);
}

bool Eagle3Head::rows_path(const at::Tensor& token_ids, const at::Tensor& hidden, const KVCache& cache) const {
  return token_ids.device().is_cpu() && hidden.device().is_cpu() && rows_step_fits(token_ids.size(1), cache);
}

template <class E>
Eagle3Head::Output Eagle3Head::forward_rows(const at::Tensor& token_ids, const at::Tensor& hidden, bool from_target,
                                            KVCache& cache, const std::optional<at::Tensor>& rows) const {
  const int64_t B = token_ids.size(0), T = token_ids.size(1);
  const at::Tensor ids = token_ids.to(at::kLong).contiguous();
  const at::Tensor feats = hidden.to(dtype_).contiguous();  // [B, T, F]
  const int64_t R = rows ? rows->size(1) : T;
  const at::Tensor picked = rows ? rows->to(at::kLong).contiguous() : at::Tensor();
  return rows_step<E>(ids.data_ptr<int64_t>(), B, T, from_target ? ptr<E>(feats) : nullptr,
                      from_target ? nullptr : ptr<E>(feats), rows ? picked.data_ptr<int64_t>() : nullptr, R, cache);
}

bool Eagle3Head::host_step_ready(const std::vector<at::Tensor>& aux, const at::Tensor& fed, int64_t T,
                                 const KVCache& cache) const {
  if (!rows_step_fits(T, cache)) return false;
  auto host_rows = [&](const at::Tensor& t) {
    return t.defined() && t.device().is_cpu() && t.scalar_type() == dtype_ && t.is_contiguous() && t.dim() == 3 &&
           t.size(0) == cache.batch() && t.size(1) >= T;
  };
  if (aux.empty()) return host_rows(fed) && fed.size(2) == cfg_.hidden_size;
  return aux.size() == aux_layers_.size() &&
         std::all_of(aux.begin(), aux.end(),
                     [&](const at::Tensor& a) { return host_rows(a) && a.size(2) == target_hidden(); });
}

Eagle3Head::Output Eagle3Head::forward_host(const std::vector<int64_t>& ids, int64_t T,
                                            const std::vector<at::Tensor>& aux, const at::Tensor& fed,
                                            const std::vector<int64_t>& pick, KVCache& cache) const {
  const int64_t B = cache.batch();
  const bool picks_in_step = std::all_of(pick.begin(), pick.end(), [T](int64_t r) { return r >= 0 && r < T; });
  if (static_cast<int64_t>(ids.size()) != B * T || static_cast<int64_t>(pick.size()) != B || !picks_in_step ||
      !host_step_ready(aux, fed, T, cache))
    fail("Eagle3Head::forward_host: {} ids and {} picked rows (each in [0, T)) for batch {} x T = {} tokens, or "
         "features the rows path cannot read (check host_step_ready first)",
         ids.size(), pick.size(), B, T);
  auto run = [&](auto elem) {
    using E = decltype(elem);
    if (aux.empty()) return rows_step<E>(ids.data(), B, T, nullptr, ptr<E>(fed), pick.data(), 1, cache);
    // Row (b, t): the concatenation of aux[i][b][t] (fc's input), gathered without an ATen cat.
    const int64_t Hd = target_hidden(), F = Hd * static_cast<int64_t>(aux.size());
    thread_local std::vector<E> feats;
    feats.resize(static_cast<size_t>(B * T * F));
    for (size_t i = 0; i < aux.size(); ++i) {
      const E* a = ptr<E>(aux[i]);
      const int64_t S = aux[i].size(1);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t)
          std::memcpy(feats.data() + (b * T + t) * F + static_cast<int64_t>(i) * Hd, a + (b * S + t) * Hd,
                      Hd * sizeof(E));
    }
    return rows_step<E>(ids.data(), B, T, feats.data(), nullptr, pick.data(), 1, cache);
  };
  return dtype_ == at::kFloat ? run(float{}) : run(uint16_t{});
}

template <class E>
void Eagle3Head::rows_input(const int64_t* id, int64_t BT, const E* target_feats, const E* fed, E* g, E* x) const {
  const int64_t d = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  if (target_feats && fc_norm_.defined()) {  // fc(RMSNorm over the concatenated features)
    const int64_t F = fc_.in_features;
    std::vector<E> normed(static_cast<size_t>(BT * F));
    layers::rms_norm_rows(target_feats, BT, F, F, ptr<E>(fc_norm_), eps, normed.data());
    layers::linear_rows(normed.data(), BT, fc_, g);
  } else if (target_feats) {
    layers::linear_rows(target_feats, BT, fc_, g);
  } else {
    std::memcpy(g, fed, static_cast<size_t>(BT * d) * sizeof(E));
  }
  const E* emb = ptr<E>(embed_);
  for (int64_t r = 0; r < BT; ++r) {  // ids past a sequence's accepted tokens (-1) read as 0
    const E* e = emb + std::max<int64_t>(id[r], 0) * d;
    layers::rms_norm_rows(e, 1, d, d, ptr<E>(input_norm_), eps, x + r * 2 * d);
    layers::rms_norm_rows(g + r * d, 1, d, d, ptr<E>(hidden_norm_), eps, x + r * 2 * d + d);
  }
}

template <class E>
void Eagle3Head::rows_attention(const E* x, int64_t B, int64_t T, const int64_t* pick, int64_t R, KVCache& cache,
                                E* attn) const {
  const ModelConfig& c = cfg_;
  const int64_t H = c.num_attention_heads, K = c.num_key_value_heads, hd = c.head_dim;
  const int64_t G = H / K, W = (H + 2 * K) * hd, QK = (H + K) * hd;
  std::vector<E> qkv(static_cast<size_t>(B * T * W)), qk(static_cast<size_t>(B * T * QK));
  layers::linear_rows(x, B * T, qkv_, qkv.data());
  const KVCache::Append plan = cache.prepare_append_host(T);
  E* kc = static_cast<E*>(cache.data(0, 0));
  E* vc = static_cast<E*>(cache.data(0, 1));
  const int64_t L = cache.max_len();
  std::vector<int64_t> n_keys(static_cast<size_t>(T));
  const float scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = cache.length(b);
    layers::rope_rows(qkv.data() + b * T * W, T, W, H + K, hd, ptr<E>(rope_.table.cos) + len * hd,
                      ptr<E>(rope_.table.sin) + len * hd, qk.data() + b * T * QK);
    for (int64_t t = 0; t < T; ++t) {
      const E* row_qk = qk.data() + (b * T + t) * QK;
      const E* row_v = qkv.data() + (b * T + t) * W + QK;
      for (int64_t kh = 0; kh < K; ++kh) {
        const int64_t slot = ((b * K + kh) * L + len + t) * hd;
        std::memcpy(kc + slot, row_qk + (H + kh) * hd, hd * sizeof(E));
        std::memcpy(vc + slot, row_v + kh * hd, hd * sizeof(E));
      }
    }
    // Per KV head its G query heads over the returned rows (token t sees len + t + 1 keys).
    for (int64_t t = 0; t < T; ++t) n_keys[t] = len + t + 1;
    const E* q = qk.data() + b * T * QK;
    const E* kb = kc + b * K * L * hd;
    const E* vb = vc + b * K * L * hd;
    if (!pick)
      layers::attend_rows(q, QK, T, K, G, n_keys.data(), kb, vb, L * hd, hd, scale, attn + b * T * H * hd, H * hd);
    for (int64_t r = 0; pick && r < R; ++r) {
      const int64_t t = pick[b * R + r];
      layers::attend_rows(q + t * QK, QK, 1, K, G, n_keys.data() + t, kb, vb, L * hd, hd, scale,
                          attn + (b * R + r) * H * hd, H * hd);
    }
  }
  cache.commit(plan);
}

template <class E>
Eagle3Head::Output Eagle3Head::rows_output(const E* res, int64_t res_stride, const E* attn, int64_t B, int64_t T,
                                           const int64_t* pick, int64_t R) const {
  const int64_t d = cfg_.hidden_size, I = cfg_.intermediate_size, BR = B * R;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  Output out;
  out.prenorm = at::empty({B, R, d}, embed_.options());
  out.logits = at::empty({B, R, draft_vocab_}, embed_.options());
  E* h = ptr<E>(out.prenorm);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < R; ++r) {
      const int64_t t = pick ? pick[b * R + r] : r;
      std::memcpy(h + (b * R + r) * d, res + (b * T + t) * res_stride, d * sizeof(E));
    }
  std::vector<E> tmp(static_cast<size_t>(BR * d)), gu(static_cast<size_t>(BR * 2 * I));
  std::vector<E> act(static_cast<size_t>(BR * I));
  layers::linear_rows(attn, BR, o_, tmp.data());
  layers::add_rows(tmp.data(), BR * d, h);
  layers::rms_norm_rows(h, BR, d, d, ptr<E>(post_norm_), eps, tmp.data());
  layers::linear_rows(tmp.data(), BR, gate_up_, gu.data());
  layers::swiglu_rows(gu.data(), BR, I, act.data());
  layers::linear_rows(act.data(), BR, down_, tmp.data());
  layers::add_rows(tmp.data(), BR * d, h);
  // Their logits.
  layers::rms_norm_rows(h, BR, d, d, ptr<E>(norm_), eps, tmp.data());
  layers::linear_rows(tmp.data(), BR, lm_head_, ptr<E>(out.logits));
  return out;
}

template <class E>
Eagle3Head::Output Eagle3Head::rows_step(const int64_t* id, int64_t B, int64_t T, const E* target_feats,
                                         const E* fed, const int64_t* pick, int64_t R, KVCache& cache) const {
  const int64_t BT = B * T, d = cfg_.hidden_size, H = cfg_.num_attention_heads, hd = cfg_.head_dim;
  // g: the target features folded by fc, or the fed-back pre-norm state; x = [norm(emb) | norm(g)].
  std::vector<E> g(static_cast<size_t>(BT * d)), x(static_cast<size_t>(BT * 2 * d));
  rows_input(id, BT, target_feats, fed, g.data(), x.data());
  // Attention: RoPE over the adjacent q and k heads, k and v into the cache, one row per head.
  std::vector<E> attn(static_cast<size_t>(B * R * H * hd));
  rows_attention(x.data(), B, T, pick, R, cache, attn.data());
  // The returned rows only from here (a causal layer: the cache needs every row's k and v, the
  // rest of the layer only the rows read out; llama.cpp's last layer keeps its output rows so):
  // h = g + o(attn); h += down(swiglu(gate_up(norm(h)))), in place in the prenorm output; with
  // norm_before_residual the residual is norm(g), x's second half.
  if (norm_before_residual_) return rows_output(x.data() + d, 2 * d, attn.data(), B, T, pick, R);
  return rows_output(g.data(), d, attn.data(), B, T, pick, R);
}

template Eagle3Head::Output Eagle3Head::forward_rows<uint16_t>(const at::Tensor&, const at::Tensor&, bool, KVCache&,
                                                               const std::optional<at::Tensor>&) const;
template Eagle3Head::Output Eagle3Head::forward_rows<float>(const at::Tensor&, const at::Tensor&, bool, KVCache&,
                                                            const std::optional<at::Tensor>&) const;
template Eagle3Head::Output Eagle3Head::rows_step<uint16_t>(const int64_t*, int64_t, int64_t, const uint16_t*,
                                                            const uint16_t*, const int64_t*, int64_t, KVCache&) const;
template Eagle3Head::Output Eagle3Head::rows_step<float>(const int64_t*, int64_t, int64_t, const float*, const float*,
                                                         const int64_t*, int64_t, KVCache&) const;

}  // namespace ears
