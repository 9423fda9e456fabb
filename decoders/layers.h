// Functional transformer building blocks shared by the target model (decoders/model) and the
// EAGLE-3 draft head: RMSNorm, RoPE, linear, GQA attention over a KV cache (decoders/kv_cache.h).
// Plain ATen ops on weight tensors (no torch::nn). The numerics follow Hugging Face eager
// attention exactly (see shared/fixtures/README.md "Model conventions"): RMSNorm statistics in
// fp32, cast back, THEN times the weight; RoPE inv_freq and cos/sin in fp32, cast to the
// activation dtype; q@k^T in the activation dtype, times head_dim^-0.5, softmax in fp32,
// probabilities cast back to the activation dtype.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/api/include/torch/version.h>

#include <cstdint>
#include <string>
#include <vector>

#include "decoders/kv_cache.h"
#include "decoders/model_config.h"

namespace ears {

namespace layers {

// The kernel path a model computing in `dtype` on `device` takes (decoders/kernel_path.h):
// "cuda" (or the device type) on an accelerator; on the CPU "amx" / "avx512bf16" / "avx2" for
// bf16, "avx2" for float32 on any CPU with AVX2+FMA, otherwise "aten".
std::string kernel_path_name(c10::Device device, c10::ScalarType dtype);

// y = weight * (x_f32 * rsqrt(mean(x_f32^2, -1) + eps)).to(x.dtype). weight: [x.size(-1)] in x's
// dtype, or [x.size(-2), x.size(-1)] (a weight row per head: Qwen3's q_norm/k_norm in one call).
// On a CPU kernel path (decoders/kernel_path.h), bf16 and float32: one pass per row, same roundings.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// x @ w^T (+ bias). w: [out, in] (nn.Linear layout); bias may be undefined. In bf16/fp16 every
// row rounds the same whatever the number of rows: on a CPU with AVX-512 BF16, products of up to
// 8 rows run decoders/cpu_bf16's row dots; elsewhere a single row is computed as two (LibTorch's
// GEMM rounds a lone row differently). Model weights go through prepare_linear below instead.
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias = at::Tensor());

// A linear layer's weight [out, in] (nn.Linear layout) and optional bias, prepared once for the
// device it runs on. On a CPU kernel path (decoders/kernel_path.h) a bf16 weight is repacked into
// cpu_bf16's VNNI-pair tile layout (read by the amx, avx512bf16 and avx2 kernels alike) and a
// float32 one into cpu_avx2's 16-column panels; the plain copy is dropped (same memory) and every
// product runs the path's kernel, row-invariant for any number of rows. On the aten path and on
// accelerators `w` is kept and linear() is at::linear.
// How a packed weight's bytes are laid out, i.e. which kernels read it: cpu_bf16's AMX tiles (the
// amx and avx512bf16 paths), cpu_avx2's bf16 panels (avx2), cpu_avx2's float32 panels (every path).
enum class PackedLayout { none, bf16_amx_tiles, bf16_panels, f32_panels };

struct LinearWeight {
  at::Tensor w;       // [out, in], undefined when packed
  at::Tensor packed;  // 1-D in `layout` (packed for the kernel path in effect at load), or undefined
  PackedLayout layout = PackedLayout::none;
  at::Tensor bias;    // [out] or undefined
  int64_t out_features = 0, in_features = 0;
  at::Tensor dense() const;  // [out, in] (unpacks a packed weight)
};
LinearWeight prepare_linear(const at::Tensor& w, const at::Tensor& bias = at::Tensor());
at::Tensor linear(const at::Tensor& x, const LinearWeight& lw);

// ---- Raw rows on a CPU kernel path -----------------------------------------------------------
// For host-driven steps that run a whole layer without ATen ops (the EAGLE-3 head's step,
// decoders/eagle3_rows.cpp): the very kernels the tensor functions above call, on rows of
// E = uint16_t (bf16 bits) or float, so they round identically. rows_available(dtype): a CPU
// kernel path computes `dtype` (then every function below takes it; otherwise none may be called).
bool rows_available(c10::ScalarType dtype);
// y [rows, lw.out_features] = x [rows, lw.in_features] @ w^T (+ bias), rows contiguous; lw packed
// for this path (prepare_linear on it) in E's dtype. Splits the weight over the kernels' threads
// (decoders/work_pool.h).
void linear_rows(const uint16_t* x, int64_t rows, const LinearWeight& lw, uint16_t* y);
void linear_rows(const float* x, int64_t rows, const LinearWeight& lw, float* y);
// RMSNorm of `rows` rows of D elements: row r reads x + r * x_stride, writes y + r * D.
void rms_norm_rows(const uint16_t* x, int64_t rows, int64_t x_stride, int64_t D, const uint16_t* w, float eps,
                   uint16_t* y);
void rms_norm_rows(const float* x, int64_t rows, int64_t x_stride, int64_t D, const float* w, float eps, float* y);
// NeoX RoPE of `tokens` tokens of n_heads rows of hd: token o's heads at x + o * x_stride, its
// cos/sin row at cos + o * hd (RopeCache's table row of its position); y contiguous [tokens, n_heads, hd].
void rope_rows(const uint16_t* x, int64_t tokens, int64_t x_stride, int64_t n_heads, int64_t hd, const uint16_t* cos,
               const uint16_t* sin, uint16_t* y);
void rope_rows(const float* x, int64_t tokens, int64_t x_stride, int64_t n_heads, int64_t hd, const float* cos,
               const float* sin, float* y);
// act [rows, I] = silu(gate) * up of gate_up rows [gate (I) | up (I)], rounded per op (cpu_bf16's or
// cpu_avx2's swiglu_rows, the same bits: the kernel swiglu() takes on a CPU kernel path), the rows
// split over the kernels' threads as there.
void swiglu_rows(const uint16_t* gate_up, int64_t rows, int64_t I, uint16_t* act);
void swiglu_rows(const float* gate_up, int64_t rows, int64_t I, float* act);
// y[i] = E(y[i] + x[i]) for i < n (cpu_avx2::add_into: the kernel residual_add_ below takes).
void add_rows(const uint16_t* x, int64_t n, uint16_t* y);
void add_rows(const float* x, int64_t n, float* y);
// One sequence's attention over its K KV heads: query head kh * G + g of token t at q + t * ldq +
// (kh * G + g) * hd, its output at out + t * ldo + (kh * G + g) * hd, over keys [0, n_keys[t]) of
// KV head kh (k_j = k + kh * kv_stride + j * hd, v likewise). Per KV head the kernel attention()
// runs, so every row rounds as it does there; the heads split over the threads as there.
void attend_rows(const uint16_t* q, int64_t ldq, int64_t T, int64_t K, int64_t G, const int64_t* n_keys,
                 const uint16_t* k, const uint16_t* v, int64_t kv_stride, int64_t hd, float scale, uint16_t* out,
                 int64_t ldo);
void attend_rows(const float* q, int64_t ldq, int64_t T, int64_t K, int64_t G, const int64_t* n_keys, const float* k,
                 const float* v, int64_t kv_stride, int64_t hd, float scale, float* out, int64_t ldo);

// h += x in place (the residual stream's update), rounded once to h's dtype as ATen's add_. On a
// CPU kernel path, bf16 or float32 with both contiguous: cpu_avx2::add_into over rows split on the
// kernels' threads (at 16 x 6 tokens ATen's own add woke its OpenMP worker from sleep twice a layer).
void residual_add_(at::Tensor& h, const at::Tensor& x);

// Rows of each sequence: t [B, T, ...] -> [B, R, ...], row (b, r) = t[b, rows[b, r]]; rows [B, R] int64
// on t's device. For a forward's last layer past its K/V write, which only the rows read out need.
at::Tensor take_rows(const at::Tensor& t, const at::Tensor& rows);

// down(silu(gate) * up) where gate_up = x @ [gate; up]^T, i.e. gate_up_w is [2*I, hidden] with the
// gate rows first (fused at load). Biases may be undefined.
at::Tensor silu_mlp(const at::Tensor& x, const at::Tensor& gate_up_w, const at::Tensor& down_w,
                    const at::Tensor& gate_up_b = at::Tensor(), const at::Tensor& down_b = at::Tensor());
at::Tensor silu_mlp(const at::Tensor& x, const LinearWeight& gate_up, const LinearWeight& down);

// inv_freq[i] = 1 / theta^(2i/head_dim), i < head_dim/2, fp32 on `device` (then scaled per rope.type).
at::Tensor rope_inv_freq(int64_t head_dim, const RopeConfig& rope, c10::Device device);

struct RopeTables {
  at::Tensor cos;  // [B, T, head_dim] in the activation dtype
  at::Tensor sin;
};
// positions: [B, T] int64 (absolute token index). angle = pos * inv_freq in fp32, emb = cat(angle,
// angle), cos/sin in fp32, then cast to `dtype`.
RopeTables rope_tables(const at::Tensor& inv_freq, const at::Tensor& positions, c10::ScalarType dtype);

// rope_tables for positions [0, n), computed once at load (n = min(max_position_embeddings or
// 4096, 8192)). lookup() gives a forward's tables without recomputing them: a view when one
// sequence appends at a uniform position (a decode or verify step at batch 1), one index_select
// otherwise, rope_tables() itself past n.
struct RopeCache {
  at::Tensor inv_freq;
  RopeTables table;  // cos, sin: [n, head_dim]
  c10::ScalarType dtype = c10::ScalarType::Float;
  static RopeCache build(const at::Tensor& inv_freq, int64_t max_position_embeddings, c10::ScalarType dtype);
  // positions: [B, T] int64, all < span; uniform_start: >= 0 when every row is uniform_start + t
  // (KVCache::Append's positions, span and uniform_start; no device sync).
  RopeTables lookup(const at::Tensor& positions, int64_t span, int64_t uniform_start) const;
};

// NeoX rotation: x*cos + rotate_half(x)*sin, rotate_half(x) = cat(-x[hd/2:], x[:hd/2]).
// x: [B, T, n_heads, head_dim] (any strides); returns a new contiguous tensor of the same shape.
at::Tensor apply_rope(const at::Tensor& x, const RopeTables& rope);

// Attention of T new queries over a key span S (usually a KV-cache view).
//   q:       [B, T, H, hd] (any strides; RoPE already applied)
//   k, v:    [B, K, S, hd] (may be a strided narrow of a cache; H % K == 0)
//   blocked: bool [B, T, S], true where query t must NOT see key s (see KVCache::Append)
// Query head h uses KV head h / (H/K) (HF repeat_kv), without materialising repeated K/V:
// q is regrouped to [B, K, T*(H/K), hd] so each KV head is one batched matmul.
// scores = (q @ k^T) * scale in q's dtype; masked; softmax in fp32; cast back; @ v.
// Returns [B, T, H*hd] (heads concatenated in head order), contiguous.
// positions: optional [B, T] int64 with blocked[b, t, s] == (s > positions[b, t]) (the KV-cache
// case, KVCache::Append::positions). Given it, a CPU kernel path runs each query row (attend_rows)
// over its visible keys only (T <= attention_kernel_tokens(q's dtype)), with the same roundings (no
// matmul call overhead, no [B, K, T*G, S] temporaries). On an accelerator with
// LibTorch >= 2.1: at::scaled_dot_product_attention (EARS_EAGER_ATTENTION=1: this eager path).
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const at::Tensor& blocked, double scale, const at::Tensor& positions = at::Tensor());
// The most query tokens attention() gives the kernels on the path in effect: 16 in float32 and on
// amx (longer prefills take ATen: oneDNN's AMX tiles), any in bf16 on avx512bf16 and avx2; 0 on aten.
int64_t attention_kernel_tokens(c10::ScalarType dtype);

// The two ATen paths attention() dispatches to (also called directly by the tests): eager
// (matmul, fp32 softmax; HF eager's roundings) and, LibTorch >= 2.1, the fused
// at::scaled_dot_product_attention (EARS_HAVE_SDPA).
at::Tensor attention_eager(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                           double scale);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define EARS_HAVE_SDPA 1
at::Tensor attention_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                          double scale);
#endif

}  // namespace layers

}  // namespace ears
