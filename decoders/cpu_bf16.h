// bf16 kernels for the CPU decoding loop on x86 CPUs with AVX-512 BF16 (Intel Cooper Lake /
// Sapphire Rapids and later, AMD Zen 4 and later) and AMX (Sapphire Rapids and later). The
// functional layers (decoders/layers.h) call them for bf16 CPU tensors without autograd; every
// other device and dtype takes plain ATen:
//   - linear with a prepared weight (layers::prepare_linear, the target and the EAGLE-3 head):
//     a weight repacked once at load, any number of rows: AMX tiles, or vdpbf16ps over the same
//     packed bytes on CPUs with AVX-512 BF16 but no AMX;
//   - linear with a plain weight and <= 8 rows: vdpbf16ps row dots;
//   - attention for <= 8 new tokens per sequence (decode, verification), at any batch;
//   - RMSNorm and RoPE, one pass each instead of 5-8 ATen ops.
//
// Why (measured on the 2-vCPU dev VM, `ears-bench bench forward --compare-kernels`): LibTorch
// 1.13's bf16 GEMM costs >= 25 us per call however small the product and streams weights at well
// under the bandwidth a plain tile loop reaches; the small elementwise ops of a layer cost 3-10 us
// each. A 100M-parameter decode step ran 2.1-2.5x faster with these kernels.
//
// Numerics: every dot product accumulates in fp32 in an order that depends only on its length,
// never on how many rows are computed together, and rounds once to bf16 (nearest even); RMSNorm,
// RoPE and attention round where Hugging Face eager bf16 rounds. So a token's logits are
// bit-identical whether it is decoded alone or verified among gamma+1 tokens (T = 0 speculative ==
// target-only greedy), at every batch size.
//
// Plain C++ on raw bf16 bit patterns (uint16_t); no ATen here, so the AVX-512 / AMX code
// generated for this file (function target attributes) never leaks into inline functions shared
// with other translation units.
#pragma once

#include "decoders/line_feed.h"

#include <cstdint>

namespace ears {
namespace cpu_bf16 {

// True when the kernel path in effect (decoders/kernel_path.h) is avx512bf16 or amx.
bool available();

// y[m * ldy + n] = bf16(sum_k x[m * ldx + k] * w[n * ldw + k] + bias[n]) for m < M, n0 <= n < n1.
// bias may be null. Call from one thread per disjoint [n0, n1) range.
void gemm_nt(const uint16_t* x, int64_t ldx, int64_t M, const uint16_t* w, int64_t ldw, int64_t K,
             const uint16_t* bias, uint16_t* y, int64_t ldy, int64_t n0, int64_t n1);

// ---- AMX (Intel Sapphire Rapids and later): bf16 tile multiply-accumulate --------------------
// The weight is repacked once (at model load) into 16x32 tiles in the VNNI pair order the tile
// instructions read, padded with zeros to a multiple of 32 rows (N) and 32 columns (K):
//   packed[((n / 32) * (Kp / 32) + k / 32) * 1024 + (n % 32 / 16) * 512 + (k % 32 / 2) * 32 + (n % 16) * 2 + k % 2]
// so a 32-column block of outputs streams one contiguous run of the packed weight.

int64_t amx_packed_elems(int64_t N, int64_t K);
void amx_pack(const uint16_t* w, int64_t N, int64_t K, uint16_t* packed);
void amx_unpack(const uint16_t* packed, int64_t N, int64_t K, uint16_t* w);
// y[m * ldy + n] = bf16(sum_k x[m * ldx + k] * w[n, k] + bias[n]) for m < M and the 32-row
// weight blocks [nb0, nb1) (n < N). Each (m, n) accumulates in fp32, 32 products per tile step in
// k order, independently of M and of the other rows: row-invariant for every M.
// (Tiles read 16 rows x 32 columns; other shapes of x go through a zero-padded per-thread copy.)
void amx_gemm(const uint16_t* x, int64_t ldx, int64_t M, const uint16_t* packed, int64_t N, int64_t K,
              const uint16_t* bias, uint16_t* y, int64_t ldy, int64_t nb0, int64_t nb1);

// The same product with vdpbf16ps over the AMX-packed weight (the kernel path avx512bf16: AVX-512
// BF16 without AMX): 16 outputs x one k pair per instruction, k pairs in order, so each (m, n) is
// independent of M (row-invariant for every M), like amx_gemm.
void vnni_gemm(const uint16_t* x, int64_t ldx, int64_t M, const uint16_t* packed, int64_t N, int64_t K,
               const uint16_t* bias, uint16_t* y, int64_t ldy, int64_t nb0, int64_t nb1);
// How vnni_gemm streams a weight from memory (one larger than kernels::kResidentWeightBytes) for a
// lone row of x, a decode: two consecutive 32-row blocks at once (4 vdpbf16ps chains) or one block
// at a time. The same bits either way. Default: kernels::cpu_info().lone_row_one_block; tests switch it.
bool lone_row_one_block();
void set_lone_row_one_block(bool one_block);

// RMSNorm of rows of D elements, Hugging Face numerics: y = bf16(w * bf16(x * rsqrt(mean(x^2) + eps)))
// with the statistics in fp32. Row (o, i) reads x + o * outer_stride + i * D and writes
// y + (o * inner + i) * D; it uses weight row i when w_per_inner (a [inner, D] weight) else w.
void rms_norm_rows(const uint16_t* x, int64_t outer, int64_t outer_stride, int64_t inner, int64_t D,
                   const uint16_t* w, bool w_per_inner, float eps, uint16_t* y);

// NeoX RoPE with Hugging Face bf16 roundings: y = bf16(bf16(x * cos) + bf16(rotate_half(x) * sin)).
// Token o has n_heads rows of hd elements at x + o * outer_stride + h * hd and one cos/sin row
// (cos + o * hd); y is contiguous [outer, n_heads, hd]. hd even.
void rope_rows(const uint16_t* x, int64_t outer, int64_t outer_stride, int64_t n_heads, int64_t hd,
               const uint16_t* cos, const uint16_t* sin, uint16_t* y);

// act[r * I + i] = bf16(bf16(silu(g)) * u) over rows of a fused [gate (I) | up (I)] projection:
// cpu_avx2::swiglu_rows' operations 16 lanes at a time, so the same bits (half its instructions:
// a 77-token prefill's SwiGLU of the bundled target was ~1.2 ns an element there).
void swiglu_rows(const uint16_t* gate_up, int64_t rows, int64_t I, uint16_t* act);

// The query rows of one sequence that share one KV head (decoders/cpu_avx2.h's attend_rows
// contract). Each row over its keys [0, n_keys[t]), Hugging Face eager numerics in bf16:
//   s_j = bf16(bf16(q . k_j) * scale); p = bf16(softmax_fp32(s)); out = bf16(sum_j p_j v_j),
// k_j = k + j * ldk, v_j = v + j * ldv (hd elements each); each row's output the same, bit for
// bit, as when it is the only row: the G heads of a token in groups of up to 4 that load each K
// and V chunk once and reduce their scores together; `next` as there.
void attend_rows(const uint16_t* q, int64_t ldq, int64_t T, int64_t G, const int64_t* n_keys, const uint16_t* k,
                 int64_t ldk, const uint16_t* v, int64_t ldv, int64_t hd, float scale, uint16_t* out, int64_t ldo,
                 const NextKV* next);

}  // namespace cpu_bf16
}  // namespace ears
