// CPU kernels for x86 CPUs with AVX2 + FMA and no AVX-512 BF16 (AMD Zen 1-3, Intel Haswell to
// Alder Lake, most CI runners): the kernel path "avx2" of decoders/kernel_path.h. Same contracts
// as decoders/cpu_bf16.h, so decoders/layers.cpp dispatches between them:
//   - bf16 linear over the weight packed once at load into 16-output panels of k pairs (below):
//     each 32-byte load holds 8 outputs x 2 k, widened to fp32 by interleaving with zeros (bf16
//     << 16, as llama.cpp's ggml-cpu widens), then FMA in fp32;
//   - float32 linear over 16-column panels (packed[(n / 16) * K * 16 + k * 16 + n % 16]);
//   - attention per query row, RMSNorm and RoPE, in bf16 (Hugging Face's bf16 roundings) and
//     float32; SwiGLU (every CPU kernel path takes this one).
//
// Numerics (the T = 0 identity contract): output (m, n) of a linear is
//   acc = 0; for k in 0..K-1 (K padded to 32 with zeros): acc = fma(x[m, k], w[n, k], acc)
// then + bias and one rounding (bf16 nearest even, or none in float32) — a fixed sequence that
// does not depend on how many rows are computed together, or on the thread split. Attention,
// RMSNorm and RoPE are per row. So decoding a token alone and verifying it among γ+1 gives the
// same bits, at any batch size.
//
// Plain C++ on raw bits with GCC target attributes: the binary runs on any x86-64; callers
// check kernels::path() before calling.
#pragma once

#include "decoders/line_feed.h"

#include <cstdint>

namespace ears {
namespace cpu_avx2 {

// bf16 panels: 16 outputs x Kp (K rounded up to 32) each, in k pairs, N rounded up to a group of
// kPanelGroupRows (4 panels) with zero padding. A group is stored k block by k block (kBlockK k,
// the last one Kp - kBlockK kb long), the group's 4 panels of a block one after another, and within a
// panel's block the k pairs in order, 32 elements each: output j = n % 16 of pair p at
//   (j / 4) * 8 + (k % 2) * 4 + j % 4
// (two 8-output vectors whose 128-bit lanes hold 4 outputs at k even, then the same 4 at k odd:
// vpunpcklwd / vpunpckhwd with zero widen them). So a call reads its weight as one sequential
// stream, and the x of a k block serves the group's 4 panels while it is in L1. (cpu_bf16's AMX
// layout interleaves two 16-output tiles per 32 k, which its tile loads want and an AVX2 core's
// stream does not.)
constexpr int64_t kPanelGroupRows = 64;
constexpr int64_t kBlockK = 256;  // 8 chunks of 32 k
int64_t panel_bf16_elems(int64_t N, int64_t K);
void panel_bf16_pack(const uint16_t* w, int64_t N, int64_t K, uint16_t* packed);
void panel_bf16_unpack(const uint16_t* packed, int64_t N, int64_t K, uint16_t* w);
// bf16 linear: y[m * ldy + n] = bf16(sum_k x[m * ldx + k] * w[n, k] + bias[n]) for m < M and the
// kPanelGroupRows-row groups [g0, g1) of `packed` (panel_bf16_pack; n < N). bias may be null.
void gemm_bf16(const uint16_t* x, int64_t ldx, int64_t M, const uint16_t* packed, int64_t N, int64_t K,
               const uint16_t* bias, uint16_t* y, int64_t ldy, int64_t g0, int64_t g1);

// float32 panels: [ceil(N / 16), K, 16], zero-padded rows.
int64_t panel_f32_elems(int64_t N, int64_t K);
void panel_f32_pack(const float* w, int64_t N, int64_t K, float* packed);
void panel_f32_unpack(const float* packed, int64_t N, int64_t K, float* w);
// float32 linear over the 16-output panels [p0, p1).
void gemm_f32(const float* x, int64_t ldx, int64_t M, const float* packed, int64_t N, int64_t K, const float* bias,
              float* y, int64_t ldy, int64_t p0, int64_t p1);

// RMSNorm, RoPE and one attention row: the same signatures, layouts and bf16 roundings as
// cpu_bf16's; the float32 overloads follow Hugging Face's fp32 eager code (no rounding beyond
// fp32's own).
void rms_norm_rows(const uint16_t* x, int64_t outer, int64_t outer_stride, int64_t inner, int64_t D,
                   const uint16_t* w, bool w_per_inner, float eps, uint16_t* y);
void rms_norm_rows(const float* x, int64_t outer, int64_t outer_stride, int64_t inner, int64_t D, const float* w,
                   bool w_per_inner, float eps, float* y);
void rope_rows(const uint16_t* x, int64_t outer, int64_t outer_stride, int64_t n_heads, int64_t hd,
               const uint16_t* cos, const uint16_t* sin, uint16_t* y);
void rope_rows(const float* x, int64_t outer, int64_t outer_stride, int64_t n_heads, int64_t hd, const float* cos,
               const float* sin, float* y);
// The query rows of one sequence that share one KV head: T tokens x G heads, row (t, g) at
// q + t * ldq + g * hd, its output at out + t * ldo + g * hd, over the first n_keys[t] keys.
// Each row's output is the same, bit for bit, as when it is the only row: the G heads of a token go in groups of up to 4
// that load (bf16: widen) each K and V chunk once for the group, the same sums in the same order
// per row; bf16, many rows: K and V are widened to fp32 once for all of them first. `next` (may be
// null): the rows of the caller's next run, brought into L2 as the loops go (decoders/line_feed.h).
void attend_rows(const uint16_t* q, int64_t ldq, int64_t T, int64_t G, const int64_t* n_keys, const uint16_t* k,
                 int64_t ldk, const uint16_t* v, int64_t ldv, int64_t hd, float scale, uint16_t* out, int64_t ldo,
                 const NextKV* next);
void attend_rows(const float* q, int64_t ldq, int64_t T, int64_t G, const int64_t* n_keys, const float* k, int64_t ldk,
                 const float* v, int64_t ldv, int64_t hd, float scale, float* out, int64_t ldo, const NextKV* next);

// SwiGLU over rows of a fused [gate (I) | up (I)] projection: act[r * I + i] = E(E(silu(g)) * u),
// g = gate_up[r * 2I + i], u = gate_up[r * 2I + I + i], silu(g) = g / (1 + e^-g) in fp32, E the
// dtype's rounding (bf16 nearest even; none in float32): Hugging Face's act_fn(gate) * up, op by
// op. e^-g is a polynomial within 2e-7 relative of exp (-g capped at 88: below g = -88 the result
// is g / e^88, a few fp32 subnormal steps from the -0 of an uncapped exp). Any CPU kernel path.
void swiglu_rows(const uint16_t* gate_up, int64_t rows, int64_t I, uint16_t* act);
void swiglu_rows(const float* gate_up, int64_t rows, int64_t I, float* act);

// y[i] = E(y[i] + x[i]) for i < n: ATen's in-place add (the fp32 sum rounded once to E: bf16
// nearest even, NaN 0x7fc0; none in float32), the residual stream's update. Any CPU kernel path.
void add_into(const uint16_t* x, int64_t n, uint16_t* y);
void add_into(const float* x, int64_t n, float* y);

}  // namespace cpu_avx2
}  // namespace ears
