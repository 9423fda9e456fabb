#include "decoders/cpu_bf16.h"
#include "decoders/bf16_bits.h"

#include "decoders/kernel_path.h"
#include "decoders/line_feed.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define EARS_CPU_BF16_X86 1
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ears {
namespace cpu_bf16 {

bool available() {
  const kernels::Path p = kernels::path();
  return p == kernels::Path::avx512bf16 || p == kernels::Path::amx;
}

#if defined(EARS_CPU_BF16_X86)

#define EARS_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define EARS_AMX __attribute__((target("amx-tile,amx-bf16,avx512f")))

namespace {

using bf16_bits::from_bf16;
using bf16_bits::to_bf16;


EARS_AVX512_BF16 inline __m512bh load32(const uint16_t* p) {
  return (__m512bh)_mm512_loadu_si512(static_cast<const void*>(p));
}
EARS_AVX512_BF16 inline __m512bh load32_tail(const uint16_t* p, __mmask32 m) {
  return (__m512bh)_mm512_maskz_loadu_epi16(m, static_cast<const void*>(p));
}
// 16 bf16 -> 16 fp32 (exact).
EARS_AVX512_BF16 inline __m512 load16_f32(const uint16_t* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const void*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// An MB x NB tile of y: rows m..m+MB-1 of x against rows n..n+NB-1 of w. Each accumulator sees
// the same sequence of vdpbf16ps steps whatever MB and NB are: the result of one (m, n) never
// depends on the tile it was computed in. While it streams its NB weight rows it prefetches the
// next NB (the hardware prefetcher alone left half the bandwidth unused).
template <int MB, int NB>
EARS_AVX512_BF16 void tile(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, int64_t K,
                           const uint16_t* bias, uint16_t* y, int64_t ldy, int64_t n) {
  __m512 acc[MB][NB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    __m512bh wv[NB];
    for (int j = 0; j < NB; ++j) {
      wv[j] = load32(w + (n + j) * ldw + k);
      _mm_prefetch(reinterpret_cast<const char*>(w + (n + NB + j) * ldw + k), _MM_HINT_T0);
    }
    for (int i = 0; i < MB; ++i) {
      const __m512bh xv = load32(x + i * ldx + k);
      for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
  if (k < K) {
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (K - k)) - 1);
    __m512bh wv[NB];
    for (int j = 0; j < NB; ++j) wv[j] = load32_tail(w + (n + j) * ldw + k, m);
    for (int i = 0; i < MB; ++i) {
      const __m512bh xv = load32_tail(x + i * ldx + k, m);
      for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) {
      float s = _mm512_reduce_add_ps(acc[i][j]);
      if (bias) s += from_bf16(bias[n + j]);
      y[i * ldy + n + j] = to_bf16(s);
    }
}

// Rows [0, M) of x against weight rows n..n+NB-1, in row blocks of up to 6.
template <int NB>
EARS_AVX512_BF16 void tile_rows(const uint16_t* x, int64_t ldx, int64_t M, const uint16_t* w, int64_t ldw,
                                int64_t K, const uint16_t* bias, uint16_t* y, int64_t ldy, int64_t n) {
  for (int64_t m = 0; m < M; m += 6) {
    const uint16_t* xm = x + m * ldx;
    uint16_t* ym = y + m * ldy;
    switch (M - m) {
      case 1: tile<1, NB>(xm, ldx, w, ldw, K, bias, ym, ldy, n); break;
      case 2: tile<2, NB>(xm, ldx, w, ldw, K, bias, ym, ldy, n); break;
      case 3: tile<3, NB>(xm, ldx, w, ldw, K, bias, ym, ldy, n); break;
      case 4: tile<4, NB>(xm, ldx, w, ldw, K, bias, ym, ldy, n); break;
      case 5: tile<5, NB>(xm, ldx, w, ldw, K, bias, ym, ldy, n); break;
      default: tile<6, NB>(xm, ldx, w, ldw, K, bias, ym, ldy, n); break;
    }
  }
}

// e^x = 2^n e^r: n = round(x log2 e), r = x - n ln2 (ln2 split hi + lo, |r| <= ln2/2), e^r by its
// degree-7 Taylor polynomial (relative error < 2e-7); returns e^r and sets n. What both exps below
// share (cpu_avx2's exp_ps computes it so too).
EARS_AVX512_BF16 inline __m512 exp_reduced(__m512 x, __m512& n) {
  n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);  // ln2 split: hi + lo
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  return _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
}
// e^x for x <= 0 (softmax after subtracting the max): x = n ln2 + r, |r| <= ln2/2, e^r by its
// degree-7 Taylor polynomial (relative error < 2e-7), times 2^n with vscalefps (underflows to 0).
EARS_AVX512_BF16 inline __m512 exp_ps(__m512 x) {
  __m512 n;
  const __m512 p = exp_reduced(x, n);
  return _mm512_scalef_ps(p, n);
}

EARS_AVX512_BF16 float dot(const uint16_t* a, const uint16_t* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) acc = _mm512_dpbf16_ps(acc, load32(a + k), load32(b + k));
  if (k < n) {
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (n - k)) - 1);
    acc = _mm512_dpbf16_ps(acc, load32_tail(a + k, m), load32_tail(b + k, m));
  }
  return _mm512_reduce_add_ps(acc);
}

}  // namespace

EARS_AVX512_BF16 void gemm_nt(const uint16_t* x, int64_t ldx, int64_t M, const uint16_t* w, int64_t ldw,
                              int64_t K, const uint16_t* bias, uint16_t* y, int64_t ldy, int64_t n0, int64_t n1) {
  int64_t n = n0;
  if (M == 1) {  // one row: 8 weight rows in flight (measured best for a lone row)
    for (; n + 8 <= n1; n += 8) tile<1, 8>(x, ldx, w, ldw, K, bias, y, ldy, n);
  } else {
    for (; n + 4 <= n1; n += 4) tile_rows<4>(x, ldx, M, w, ldw, K, bias, y, ldy, n);
  }
  for (; n < n1; ++n) tile_rows<1>(x, ldx, M, w, ldw, K, bias, y, ldy, n);
}

namespace {
// v rounded to bf16 (nearest even, denormals kept: to_bf16's integer rounding, not
// vcvtneps2bf16, which flushes them) and widened back to fp32; NaN stays NaN.
EARS_AVX512_BF16 inline __m512 round_bf16_rne(__m512 v) {
  const __m512i b = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_and_si512(_mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))),
                                     _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(nan, _mm512_castsi512_ps(r), _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
}

// bf16(q . k_j) for 4 keys at once: 4 independent vdpbf16ps chains, each key's the same sequence
// as dot()'s.
EARS_AVX512_BF16 void dot4(const uint16_t* q, const uint16_t* k, int64_t ldk, int64_t hd, float* out) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t d = 0;
  for (; d + 32 <= hd; d += 32) {
    const __m512bh qv = load32(q + d);
    a0 = _mm512_dpbf16_ps(a0, qv, load32(k + d));
    a1 = _mm512_dpbf16_ps(a1, qv, load32(k + ldk + d));
    a2 = _mm512_dpbf16_ps(a2, qv, load32(k + 2 * ldk + d));
    a3 = _mm512_dpbf16_ps(a3, qv, load32(k + 3 * ldk + d));
  }
  if (d < hd) {
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (hd - d)) - 1);
    const __m512bh qv = load32_tail(q + d, m);
    a0 = _mm512_dpbf16_ps(a0, qv, load32_tail(k + d, m));
    a1 = _mm512_dpbf16_ps(a1, qv, load32_tail(k + ldk + d, m));
    a2 = _mm512_dpbf16_ps(a2, qv, load32_tail(k + 2 * ldk + d, m));
    a3 = _mm512_dpbf16_ps(a3, qv, load32_tail(k + 3 * ldk + d, m));
  }
  out[0] = _mm512_reduce_add_ps(a0);
  out[1] = _mm512_reduce_add_ps(a1);
  out[2] = _mm512_reduce_add_ps(a2);
  out[3] = _mm512_reduce_add_ps(a3);
}

// sum_j p_j v_j over lanes [c0 * 16, c0 * 16 + 16 * NC), NC accumulators in registers (a
// runtime-sized array of them lived in memory: a store-to-load chain per FMA), rounded to bf16.
template <int NC>
EARS_AVX512_BF16 void weighted_values(const float* p, const uint16_t* v, int64_t ldv, int64_t n_keys, int64_t hd,
                                      int64_t c0, uint16_t* out, LineFeed& feed) {
  __m512 acc[NC];
  __mmask16 mask[NC];
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_ps();  // unrolled: a loop became a memset
  for (int c = 0; c < NC; ++c) {
    const int64_t left = hd - (c0 + c) * 16;
    mask[c] = left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
  }
  for (int64_t j0 = 0; j0 < n_keys; j0 += kFeedKeys) {
    const int64_t j1 = std::min(n_keys, j0 + kFeedKeys);
    feed.step(j1 - j0);
    for (int64_t j = j0; j < j1; ++j) {
      const __m512 pj = _mm512_set1_ps(p[j]);
      const uint16_t* vj = v + j * ldv + c0 * 16;
      for (int c = 0; c < NC; ++c) acc[c] = _mm512_fmadd_ps(pj, load16_f32(vj + c * 16, mask[c]), acc[c]);
    }
  }
  alignas(64) float tmp[16];
  for (int c = 0; c < NC; ++c) {
    _mm512_store_ps(tmp, acc[c]);
    const int64_t left = std::min<int64_t>(16, hd - (c0 + c) * 16);
    for (int64_t l = 0; l < left; ++l) out[(c0 + c) * 16 + l] = to_bf16(tmp[l]);
  }
}

// One row's raw scores q . k_j (scratch[0, n_keys)) -> its probabilities: bf16(q . k_j), times
// the scale in fp32 and rounded again (HF: matmul in bf16, then `* scaling` on the bf16 tensor),
// softmax in fp32, rounded to bf16.
EARS_AVX512_BF16 void softmax_scores(float* scratch, int64_t n_keys, float scale) {
  int64_t j = 0;
  // Rounded, scaled, rounded again; their max (16 keys at a time, the same roundings per key).
  const __m512 vscale = _mm512_set1_ps(scale);
  __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  auto mask_at = [&](int64_t j0) {
    return n_keys - j0 >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n_keys - j0)) - 1);
  };
  for (j = 0; j < n_keys; j += 16) {
    const __mmask16 m = mask_at(j);
    const __m512 s = round_bf16_rne(_mm512_mul_ps(round_bf16_rne(_mm512_maskz_loadu_ps(m, scratch + j)), vscale));
    _mm512_mask_storeu_ps(scratch + j, m, s);
    vmax = _mm512_mask_max_ps(vmax, m, vmax, s);
  }
  // exp(s - max) and its sum, 16 keys at a time.
  const __m512 vmx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 vsum = _mm512_setzero_ps();
  for (j = 0; j < n_keys; j += 16) {
    const __mmask16 m = mask_at(j);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scratch + j), vmx));
    _mm512_mask_storeu_ps(scratch + j, m, e);
    vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(m, e));
  }
  // Probabilities in fp32, rounded to bf16, then sum_j p_j v_j in fp32 (16 lanes at a time).
  const __m512 sum = _mm512_set1_ps(_mm512_reduce_add_ps(vsum));
  for (j = 0; j < n_keys; j += 16) {
    const __mmask16 m = mask_at(j);
    _mm512_mask_storeu_ps(scratch + j, m, round_bf16_rne(_mm512_div_ps(_mm512_maskz_loadu_ps(m, scratch + j), sum)));
  }
}

// _mm512_reduce_add_ps of each of 16 vectors, bit for bit (GCC's order: 256-bit halves, 128-bit
// halves, lanes 0 + 2 and 1 + 3, then the two), lane i holding a[i]'s: the 16 reductions share
// their shuffles (31 and 15 adds for all, where one takes 5 and 4).
EARS_AVX512_BF16 inline __m512 reduce16(const __m512 (&a)[16]) {
  __m512 s1[8], s2[4], s3[2];
  for (int i = 0; i < 8; ++i)  // [a[2i] hi256 + lo256 | a[2i + 1]'s]
    s1[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)),
                          _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)));
  for (int i = 0; i < 4; ++i)  // 128-bit lane l: a[4i + l]'s hi128 + lo128
    s2[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * i], s1[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                          _mm512_shuffle_f32x4(s1[2 * i], s1[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)));
  for (int i = 0; i < 2; ++i)  // lane l: (0 + 2, 1 + 3) of a[8i + l], then of a[8i + 4 + l]
    s3[i] = _mm512_add_ps(_mm512_shuffle_ps(s2[2 * i], s2[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_ps(s2[2 * i], s2[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // lane l: the sums of a[l], a[4 + l], a[8 + l], a[12 + l]; then into order.
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
}

// Raw scores of NG (2 to 4) rows q[r] against 4 keys, into s[r][0, 4): each (row, key) dot4's
// vdpbf16ps chain, a K chunk loaded once for every row, the sums reduced together (reduce16).
template <int NG>
EARS_AVX512_BF16 void dot_rows4(const uint16_t* const* q, const uint16_t* k, int64_t ldk, int64_t hd,
                                float* const* s) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();  // unrolled: a loop became a memset
  int64_t d = 0;
  for (; d + 32 <= hd; d += 32) {  // loops unrolled: the accumulators stay registers
    __m512bh kj[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) kj[j] = load32(k + j * ldk + d);
#pragma GCC unroll 4
    for (int r = 0; r < NG; ++r) {
      const __m512bh qv = load32(q[r] + d);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[r * 4 + j] = _mm512_dpbf16_ps(acc[r * 4 + j], qv, kj[j]);
    }
  }
  if (d < hd) {
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (hd - d)) - 1);
    __m512bh kj[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) kj[j] = load32_tail(k + j * ldk + d, m);
#pragma GCC unroll 4
    for (int r = 0; r < NG; ++r) {
      const __m512bh qv = load32_tail(q[r] + d, m);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[r * 4 + j] = _mm512_dpbf16_ps(acc[r * 4 + j], qv, kj[j]);
    }
  }
  const __m512 sums = reduce16(acc);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sums);
  for (int r = 0; r < NG; ++r) std::memcpy(s[r], lanes + 4 * r, 4 * sizeof(float));
}

// sum_j p[r][j] v_j for NG rows over lanes [c0 * 16, c0 * 16 + 16 * NC), rounded to bf16: each
// row weighted_values' sums, each V chunk widened once for every row.
template <int NG, int NC>
EARS_AVX512_BF16 void weighted_values_rows(const float* const* p, const uint16_t* v, int64_t ldv, int64_t n_keys,
                                           int64_t hd, int64_t c0, uint16_t* const* out, LineFeed& feed) {
  __m512 acc[NG][NC];
  __mmask16 mask[NC];
#pragma GCC unroll 16
  for (int i = 0; i < NG * NC; ++i) acc[i / NC][i % NC] = _mm512_setzero_ps();  // unrolled: not a memset
  for (int c = 0; c < NC; ++c) {
    const int64_t left = hd - (c0 + c) * 16;
    mask[c] = left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
  }
  // Every loop over rows and chunks unrolled, so the accumulators are registers: __m512 may alias
  // the float loads of p, and an array of them indexed in a loop was stored back every key.
  for (int64_t j0 = 0; j0 < n_keys; j0 += kFeedKeys) {
    const int64_t j1 = std::min(n_keys, j0 + kFeedKeys);
    feed.step(j1 - j0);
    for (int64_t j = j0; j < j1; ++j) {
      const uint16_t* vj = v + j * ldv + c0 * 16;
      __m512 vc[NC];
#pragma GCC unroll 4
      for (int c = 0; c < NC; ++c) vc[c] = load16_f32(vj + c * 16, mask[c]);
#pragma GCC unroll 4
      for (int r = 0; r < NG; ++r) {
        const __m512 pj = _mm512_set1_ps(p[r][j]);
#pragma GCC unroll 4
        for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_fmadd_ps(pj, vc[c], acc[r][c]);
      }
    }
  }
  alignas(64) float tmp[16];
#pragma GCC unroll 4
  for (int r = 0; r < NG; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) {
      _mm512_store_ps(tmp, acc[r][c]);
      const int64_t left = std::min<int64_t>(16, hd - (c0 + c) * 16);
      for (int64_t l = 0; l < left; ++l) out[r][(c0 + c) * 16 + l] = to_bf16(tmp[l]);
    }
}

// NG (2 to 4) rows q[r] of one token over the same n_keys keys, outputs out[r]; scratch: NG * n_keys floats.
template <int NG>
EARS_AVX512_BF16 void attend_group(const uint16_t* const* q, const uint16_t* k, int64_t ldk, const uint16_t* v,
                                   int64_t ldv, int64_t n_keys, int64_t hd, float scale, float* scratch,
                                   uint16_t* const* out, LineFeed& feed) {
  static_assert(NG >= 2 && NG <= 4, "a lone row is attend_one's; 4 x 4 score accumulators");
  float* s[NG];
  for (int r = 0; r < NG; ++r) s[r] = scratch + r * n_keys;
  int64_t j = 0;
  for (; j + 4 <= n_keys; j += 4) {
    float* sj[NG];
    for (int r = 0; r < NG; ++r) sj[r] = s[r] + j;
    dot_rows4<NG>(q, k + j * ldk, ldk, hd, sj);
    feed.step(4);
  }
  for (; j < n_keys; ++j)
    for (int r = 0; r < NG; ++r) s[r][j] = dot(q[r], k + j * ldk, hd);
  for (int r = 0; r < NG; ++r) softmax_scores(s[r], n_keys, scale);
  const int64_t chunks = (hd + 15) / 16;
  int64_t c0 = 0;
  for (; c0 + 4 <= chunks; c0 += 4) weighted_values_rows<NG, 4>(s, v, ldv, n_keys, hd, c0, out, feed);
  for (; c0 < chunks; ++c0) weighted_values_rows<NG, 1>(s, v, ldv, n_keys, hd, c0, out, feed);
}

// One query row (attend_rows' contract), its loops stepping `feed`.
EARS_AVX512_BF16 void attend_one(const uint16_t* q, const uint16_t* k, int64_t ldk, const uint16_t* v, int64_t ldv,
                                 int64_t n_keys, int64_t hd, float scale, float* scratch, uint16_t* out,
                                 LineFeed& feed) {
  int64_t j = 0;
  for (; j + 4 <= n_keys; j += 4) {
    dot4(q, k + j * ldk, ldk, hd, scratch + j);
    feed.step(4);
  }
  for (; j < n_keys; ++j) scratch[j] = dot(q, k + j * ldk, hd);
  softmax_scores(scratch, n_keys, scale);
  const int64_t chunks = (hd + 15) / 16;
  int64_t c0 = 0;
  for (; c0 + 8 <= chunks; c0 += 8) weighted_values<8>(scratch, v, ldv, n_keys, hd, c0, out, feed);
  for (; c0 + 4 <= chunks; c0 += 4) weighted_values<4>(scratch, v, ldv, n_keys, hd, c0, out, feed);
  for (; c0 < chunks; ++c0) weighted_values<1>(scratch, v, ldv, n_keys, hd, c0, out, feed);
}

// The passes over the keys that the value sums of ng rows take (16-lane chunks): attend_one's for
// one row, attend_group's for 2 to 4 — LineFeed's steps.
constexpr int64_t value_passes(int64_t ng, int64_t chunks) {
  return ng == 1 ? chunks / 8 + chunks % 8 / 4 + chunks % 4 : chunks / 4 + chunks % 4;
}
}  // namespace

void attend_rows(const uint16_t* q, int64_t ldq, int64_t T, int64_t G, const int64_t* n_keys, const uint16_t* k,
                 int64_t ldk, const uint16_t* v, int64_t ldv, int64_t hd, float scale, uint16_t* out, int64_t ldo,
                 const NextKV* next) {
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(4 * *std::max_element(n_keys, n_keys + T)));
  // The next run's lines, paced by the key visits of the first token's groups (scores: one per
  // key; value sums: one per key and pass; decoders/line_feed.h says why the first token's).
  int64_t steps = 0;
  for (int64_t g = 0, ng = 0; g < G; g += ng) {
    ng = std::min<int64_t>(G - g, 4);
    steps += n_keys[0] * (1 + value_passes(ng, (hd + 15) / 16));
  }
  LineFeed feed(next, steps);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < G;) {
      const int64_t ng = std::min<int64_t>(G - g, 4);
      const uint16_t* qs[4];
      uint16_t* os[4];
      for (int64_t r = 0; r < ng; ++r) {
        qs[r] = q + t * ldq + (g + r) * hd;
        os[r] = out + t * ldo + (g + r) * hd;
      }
      switch (ng) {  // a lone row shares nothing: attend_one
        case 1: attend_one(qs[0], k, ldk, v, ldv, n_keys[t], hd, scale, scratch.data(), os[0], feed); break;
        case 2: attend_group<2>(qs, k, ldk, v, ldv, n_keys[t], hd, scale, scratch.data(), os, feed); break;
        case 3: attend_group<3>(qs, k, ldk, v, ldv, n_keys[t], hd, scale, scratch.data(), os, feed); break;
        default: attend_group<4>(qs, k, ldk, v, ldv, n_keys[t], hd, scale, scratch.data(), os, feed); break;
      }
      g += ng;
    }
  feed.finish();
}

EARS_AVX512_BF16 void rms_norm_rows(const uint16_t* x, int64_t outer, int64_t outer_stride, int64_t inner,
                                    int64_t D, const uint16_t* w, bool w_per_inner, float eps, uint16_t* y) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const uint16_t* xr = x + o * outer_stride + i * D;
      const uint16_t* wr = w_per_inner ? w + i * D : w;
      uint16_t* yr = y + (o * inner + i) * D;
      __m512 acc = _mm512_setzero_ps();
      for (int64_t j = 0; j < D; j += 16) {
        const __mmask16 m = D - j >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (D - j)) - 1);
        const __m512 v = load16_f32(xr + j, m);
        acc = _mm512_fmadd_ps(v, v, acc);
      }
      const float inv = 1.0f / std::sqrt(_mm512_reduce_add_ps(acc) / static_cast<float>(D) + eps);
      const __m512 vinv = _mm512_set1_ps(inv);
      for (int64_t j = 0; j < D; j += 16) {
        const __mmask16 m = D - j >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (D - j)) - 1);
        const __m256i normed = (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(load16_f32(xr + j, m), vinv));
        const __m512 nf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(normed), 16));
        _mm256_mask_storeu_epi16(yr + j, m, (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(nf, load16_f32(wr + j, m))));
      }
    }
}

namespace {
// v rounded to bf16 (nearest even) and widened back to fp32.
EARS_AVX512_BF16 inline __m512 round_bf16(__m512 v) {
  const __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
}  // namespace

EARS_AVX512_BF16 void rope_rows(const uint16_t* x, int64_t outer, int64_t outer_stride, int64_t n_heads,
                                int64_t hd, const uint16_t* cos, const uint16_t* sin, uint16_t* y) {
  const int64_t half = hd / 2;
  for (int64_t o = 0; o < outer; ++o) {
    const uint16_t* c = cos + o * hd;
    const uint16_t* s = sin + o * hd;
    for (int64_t h = 0; h < n_heads; ++h) {
      const uint16_t* xr = x + o * outer_stride + h * hd;
      uint16_t* yr = y + (o * n_heads + h) * hd;
      for (int64_t j = 0; j < half; j += 16) {
        const __mmask16 m = half - j >= 16 ? static_cast<__mmask16>(0xffff)
                                           : static_cast<__mmask16>((1u << (half - j)) - 1);
        const __m512 lo = load16_f32(xr + j, m), hi = load16_f32(xr + half + j, m);
        // rotate_half(x) = cat(-x[half:], x[:half])
        const __m512 out_lo = _mm512_add_ps(round_bf16(_mm512_mul_ps(lo, load16_f32(c + j, m))),
                                            round_bf16(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), hi),
                                                                     load16_f32(s + j, m))));
        const __m512 out_hi = _mm512_add_ps(round_bf16(_mm512_mul_ps(hi, load16_f32(c + half + j, m))),
                                            round_bf16(_mm512_mul_ps(lo, load16_f32(s + half + j, m))));
        _mm256_mask_storeu_epi16(yr + j, m, (__m256i)_mm512_cvtneps_pbh(out_lo));
        _mm256_mask_storeu_epi16(yr + half + j, m, (__m256i)_mm512_cvtneps_pbh(out_hi));
      }
    }
  }
}

namespace {
// e^x for x <= 88: cpu_avx2's exp_ps (degree-7 Taylor, 2^n built in the exponent bits, x < -87 ->
// 0) on 16 lanes, its operations in its order, so the same bits (this file's exp_ps scales by
// vscalefps instead, which rounds apart from it below e^-87).
EARS_AVX512_BF16 inline __m512 exp_ps_avx2_bits(__m512 x) {
  __m512 n;
  const __m512 p = exp_reduced(x, n);
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
  const __m512i e = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_max_ps(n, _mm512_set1_ps(-126.f))), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(static_cast<__mmask16>(~tiny), p, _mm512_castsi512_ps(e));
}

// 16 lanes of swiglu_rows: a = bf16(bf16(silu(g)) * u) under mask m.
EARS_AVX512_BF16 inline void swiglu16(const uint16_t* g, const uint16_t* u, uint16_t* a, __mmask16 m) {
  const __m512 x = load16_f32(g, m);
  const __m512 e = exp_ps_avx2_bits(_mm512_min_ps(_mm512_sub_ps(_mm512_setzero_ps(), x), _mm512_set1_ps(88.0f)));
  const __m512 silu = round_bf16_rne(_mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
  // bf16 of silu * up, nearest even (NaN -> 0x7fc0, as cpu_avx2's store): the upper halves.
  const __m512 y = round_bf16_rne(_mm512_mul_ps(silu, load16_f32(u, m)));
  _mm256_mask_storeu_epi16(a, m, _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(y), 16)));
}
}  // namespace

EARS_AVX512_BF16 void swiglu_rows(const uint16_t* gate_up, int64_t rows, int64_t I, uint16_t* act) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* g = gate_up + r * 2 * I;
    const uint16_t* u = g + I;
    uint16_t* a = act + r * I;
    int64_t i = 0;
    for (; i + 16 <= I; i += 16) swiglu16(g + i, u + i, a + i, 0xffff);
    if (i < I) swiglu16(g + i, u + i, a + i, static_cast<__mmask16>((1u << (I - i)) - 1));
  }
}

// ---- AMX ----

int64_t amx_packed_elems(int64_t N, int64_t K) { return (N + 31) / 32 * 32 * ((K + 31) / 32 * 32); }

namespace {
inline int64_t packed_index(int64_t n, int64_t k, int64_t kchunks) {
  return ((n / 32) * kchunks + k / 32) * 1024 + (n % 32 / 16) * 512 + (k % 32 / 2) * 32 + (n % 16) * 2 + k % 2;
}

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles: 0, 1 = C (rows x 16 fp32) for the two 16-row halves of a 32-row weight block; 2 = A
// (rows x 32 bf16 of x); 3, 4 = B (16 k-pairs x 16 outputs x 2).
EARS_AMX void configure(int rows) {
  TileConfig cfg;
  for (int t = 0; t < 3; ++t) {
    cfg.rows[t] = static_cast<uint8_t>(rows);
    cfg.colsb[t] = 64;
  }
  for (int t = 3; t < 5; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
}
}  // namespace

// y[r * ldy + n0 + j] = bf16(c[r * 32 + j] + bias[n0 + j]) for r < rows, j < cols (<= 32):
// 16 lanes at a time, vcvtneps2bf16 (round to nearest even).
EARS_AVX512_BF16 void store_rows(const float* c, int rows, int64_t n0, int64_t cols, const uint16_t* bias,
                                 uint16_t* y, int64_t ldy) {
  for (int64_t j = 0; j < cols; j += 16) {
    const int64_t left = std::min<int64_t>(16, cols - j);
    const __mmask16 m = left == 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
    const __m512 b = bias ? load16_f32(bias + n0 + j, m) : _mm512_setzero_ps();
    for (int r = 0; r < rows; ++r) {
      const __m512 v = _mm512_add_ps(_mm512_loadu_ps(c + r * 32 + j), b);
      _mm256_mask_storeu_epi16(y + r * ldy + n0 + j, m, (__m256i)_mm512_cvtneps_pbh(v));
    }
  }
}

void amx_pack(const uint16_t* w, int64_t N, int64_t K, uint16_t* packed) {
  const int64_t kchunks = (K + 31) / 32;
  std::fill(packed, packed + amx_packed_elems(N, K), uint16_t{0});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) packed[packed_index(n, k, kchunks)] = w[n * K + k];
}

void amx_unpack(const uint16_t* packed, int64_t N, int64_t K, uint16_t* w) {
  const int64_t kchunks = (K + 31) / 32;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) w[n * K + k] = packed[packed_index(n, k, kchunks)];
}

// Lines [first, first + 8) of a 2 KiB chunk into L1.
static inline void prefetch_lines_l1(const char* chunk, int first) {
  for (int line = first; line < first + 8; ++line) _mm_prefetch(chunk + line * 64, _MM_HINT_T0);
}

EARS_AMX void amx_gemm(const uint16_t* x, int64_t ldx, int64_t M, const uint16_t* packed, int64_t N, int64_t K,
                       const uint16_t* bias, uint16_t* y, int64_t ldy, int64_t nb0, int64_t nb1) {
  const int64_t kchunks = (K + 31) / 32;
  alignas(64) float c[16 * 32];
  // The tiles read 16 rows x 32 columns: a zero-padded per-thread copy of x unless it already has
  // that shape (decode steps always need one: 1..15 rows).
  if (M % 16 != 0 || K % 32 != 0) {
    thread_local std::vector<uint16_t> xp;
    const int64_t Mp = (M + 15) / 16 * 16, Kp = kchunks * 32;
    xp.assign(static_cast<size_t>(Mp * Kp), 0);
    for (int64_t m = 0; m < M; ++m) std::copy(x + m * ldx, x + m * ldx + K, xp.data() + m * Kp);
    x = xp.data();
    ldx = Kp;
  }
  configure(16);
  // Weight block outer, 16-row blocks of x inner: each 32-row weight block is read from memory
  // once per call whatever M is (it stays in L2 across the row blocks).
  for (int64_t nb = nb0; nb < nb1; ++nb) {
    const uint16_t* wb = packed + nb * kchunks * 1024;
    for (int64_t m0 = 0; m0 < M; m0 += 16) {
      const uint16_t* xm = x + m0 * ldx;
      _tile_zero(0);
      _tile_zero(1);
      for (int64_t kc = 0; kc < kchunks; ++kc) {
        // The packed weight is one contiguous stream (the L2 streamer follows it on its own: with no
        // software prefetch the 1-row call ran as fast as with the old one). The next 2 KiB chunk
        // goes into L1, a quarter before each tile instruction: on an Intel Xeon (2 threads, 1 GB
        // of weights, `bench linear`) 1 row 34.7-37.4 -> 30.4-31.2 ms, 6 rows 35.1-37.6 -> 33.4-34.4;
        // the old burst of 32 lines two chunks ahead held the line-fill buffers, and spread
        // quarters two or four chunks ahead, or into L2 eight ahead, were no faster than it.
        const char* next = reinterpret_cast<const char*>(wb + (kc + 1) * 1024);
        const bool pf = m0 == 0;
        if (pf) prefetch_lines_l1(next, 0);
        _tile_loadd(2, xm + kc * 32, ldx * 2);
        if (pf) prefetch_lines_l1(next, 8);
        _tile_loadd(3, wb + kc * 1024, 64);
        if (pf) prefetch_lines_l1(next, 16);
        _tile_loadd(4, wb + kc * 1024 + 512, 64);
        if (pf) prefetch_lines_l1(next, 24);
        _tile_dpbf16ps(0, 2, 3);
        _tile_dpbf16ps(1, 2, 4);
      }
      _tile_stored(0, c, 128);
      _tile_stored(1, c + 16, 128);
      store_rows(c, static_cast<int>(std::min<int64_t>(16, M - m0)), nb * 32, std::min<int64_t>(32, N - nb * 32),
                 bias, y + m0 * ldy, ldy);
    }
  }
  _tile_release();
}

namespace {
// One 32-row weight block of the AMX-packed layout against MB rows of x (zero-padded to Kp
// columns): a k-pair row of a 16-output half is 64 bytes, one vdpbf16ps operand.
template <int MB>
EARS_AVX512_BF16 void vnni_block(const uint16_t* x, int64_t ldx, const uint16_t* wb, int64_t kchunks, bool prefetch,
                                 float* out) {
  __m512 acc[MB][2];
  for (int m = 0; m < MB; ++m) acc[m][0] = acc[m][1] = _mm512_setzero_ps();
  for (int64_t kc = 0; kc < kchunks; ++kc) {
    const uint16_t* wk = wb + kc * 1024;
    for (int p = 0; p < 16; ++p) {
      if (prefetch) {  // every line 16 KiB ahead into L2, two per step (see vnni_row_2blocks)
        _mm_prefetch(reinterpret_cast<const char*>(wk + 8 * 1024 + 2 * p * 32), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(wk + 8 * 1024 + (2 * p + 1) * 32), _MM_HINT_T1);
      }
      const __m512bh w0 = load32(wk + p * 32), w1 = load32(wk + 512 + p * 32);
      for (int m = 0; m < MB; ++m) {
        int32_t pair;
        std::memcpy(&pair, x + m * ldx + kc * 32 + 2 * p, sizeof pair);
        const __m512bh xb = (__m512bh)_mm512_set1_epi32(pair);
        acc[m][0] = _mm512_dpbf16_ps(acc[m][0], xb, w0);
        acc[m][1] = _mm512_dpbf16_ps(acc[m][1], xb, w1);
      }
    }
  }
  for (int m = 0; m < MB; ++m) {
    _mm512_storeu_ps(out + m * 32, acc[m][0]);
    _mm512_storeu_ps(out + m * 32 + 16, acc[m][1]);
  }
}
// Decode (one row): two consecutive 32-row blocks at once, 4 independent vdpbf16ps chains (one
// block's 2 chains are latency-bound). A streamed weight (Prefetch): each stream prefetched 16 KiB
// ahead into L2, four lines per step rather than a chunk's 64 at its start: with the burst the 100M
// model's linears streamed 1.12-1.15x slower than cpu_avx2's kernel over the same bytes, spread
// 1.00-1.08x (Zen 4, 2 threads, alternated in one process); without, its decode 8-11 % slower
// (Intel Xeon without AMX). Near a pair's end the lines ahead are the next pair's: prefetching past
// the block instead (block 0's stream into block 1, read already; block 3's first 16 KiB never asked
// for) left the 100M decode 6-21 % slower (Zen 4, four rounds alternated; docs/performance-log.md,
// forty-first session). A weight that stays in cache (kernels::kResidentWeightBytes): none —
// there the prefetches, one per line read, cost more than they fetch: the bundled target's decode
// 5-8 % and the draft head's chain step 14-16 % faster without (same Xeon, alternated in one
// process; docs/performance-log.md, fortieth session). Each output sees vnni_block's sequence.
template <bool Prefetch>
EARS_AVX512_BF16 void vnni_row_2blocks(const uint16_t* x, const uint16_t* wb, int64_t kchunks, float* out) {
  __m512 acc[2][2];
  for (int b = 0; b < 2; ++b) acc[b][0] = acc[b][1] = _mm512_setzero_ps();
  const int64_t block = kchunks * 1024;
  for (int64_t kc = 0; kc < kchunks; ++kc) {
    // Chunk kc + 8 of each stream, in the next pair of blocks once past this pair's end (the pairs
    // are consecutive in memory: block b's stream goes on at block b + 2).
    const int64_t a = kc + 8;
    const int64_t ahead = a / kchunks * 2 * block + a % kchunks * 1024;
    for (int p = 0; p < 16; ++p) {
      if (Prefetch)
        for (int l = 4 * p; l < 4 * p + 4; ++l)  // line l of the two blocks' 64, `ahead` on
          _mm_prefetch(reinterpret_cast<const char*>(wb + (l >> 5) * block + ahead + (l & 31) * 32), _MM_HINT_T1);
      int32_t pair;
      std::memcpy(&pair, x + kc * 32 + 2 * p, sizeof pair);
      const __m512bh xb = (__m512bh)_mm512_set1_epi32(pair);
      for (int b = 0; b < 2; ++b) {
        const uint16_t* wk = wb + b * block + kc * 1024;
        acc[b][0] = _mm512_dpbf16_ps(acc[b][0], xb, load32(wk + p * 32));
        acc[b][1] = _mm512_dpbf16_ps(acc[b][1], xb, load32(wk + 512 + p * 32));
      }
    }
  }
  for (int b = 0; b < 2; ++b) {
    _mm512_storeu_ps(out + b * 32, acc[b][0]);
    _mm512_storeu_ps(out + b * 32 + 16, acc[b][1]);
  }
}
}  // namespace

EARS_AVX512_BF16 void vnni_gemm(const uint16_t* x, int64_t ldx, int64_t M, const uint16_t* packed, int64_t N,
                                int64_t K, const uint16_t* bias, uint16_t* y, int64_t ldy, int64_t nb0, int64_t nb1) {
  const int64_t kchunks = (K + 31) / 32;
  if (K % 32 != 0) {  // pairs are read up to the padded width: a zero-padded per-thread copy
    thread_local std::vector<uint16_t> xp;
    const int64_t Kp = kchunks * 32;
    xp.assign(static_cast<size_t>(M * Kp), 0);
    for (int64_t m = 0; m < M; ++m) std::copy(x + m * ldx, x + m * ldx + K, xp.data() + m * Kp);
    x = xp.data();
    ldx = Kp;
  }
  alignas(64) float c[8 * 32];
  // Several rows prefetch whatever the weight (a resident one's 6-row verify and 5-row head refresh
  // were 6-18 % slower without); one row only a streamed weight (vnni_row_2blocks).
  const bool prefetch = M > 1 || amx_packed_elems(N, K) * 2 > kernels::kResidentWeightBytes;
  int64_t nb = nb0;
  // Two blocks at once: in a model's forward (2 threads, Zen 4, 100M decode) 10.2 vs 12.4 ms with
  // one block; a streamed weight on Zen 5 one block at a time (kernels::CpuInfo::lone_row_one_block).
  if (M == 1 && !(prefetch && lone_row_one_block()))
    for (; nb + 2 <= nb1; nb += 2) {
      const uint16_t* wb = packed + nb * kchunks * 1024;
      if (prefetch)
        vnni_row_2blocks<true>(x, wb, kchunks, c);
      else
        vnni_row_2blocks<false>(x, wb, kchunks, c);
      for (int b = 0; b < 2; ++b)
        store_rows(c + b * 32, 1, (nb + b) * 32, std::min<int64_t>(32, N - (nb + b) * 32), bias, y, ldy);
    }
  for (; nb < nb1; ++nb) {
    const uint16_t* wb = packed + nb * kchunks * 1024;
    for (int64_t m0 = 0; m0 < M; m0 += 8) {
      const uint16_t* xm = x + m0 * ldx;
      const int rows = static_cast<int>(std::min<int64_t>(8, M - m0));
      const bool pf = prefetch && m0 == 0;  // the first row block brings the weight block in
      switch (rows) {
        case 1: vnni_block<1>(xm, ldx, wb, kchunks, pf, c); break;
        case 2: vnni_block<2>(xm, ldx, wb, kchunks, pf, c); break;
        case 3: vnni_block<3>(xm, ldx, wb, kchunks, pf, c); break;
        case 4: vnni_block<4>(xm, ldx, wb, kchunks, pf, c); break;
        case 5: vnni_block<5>(xm, ldx, wb, kchunks, pf, c); break;
        case 6: vnni_block<6>(xm, ldx, wb, kchunks, pf, c); break;
        case 7: vnni_block<7>(xm, ldx, wb, kchunks, pf, c); break;
        default: vnni_block<8>(xm, ldx, wb, kchunks, pf, c); break;
      }
      store_rows(c, rows, nb * 32, std::min<int64_t>(32, N - nb * 32), bias, y + m0 * ldy, ldy);
    }
  }
}

#else  // not x86-64 with GCC/Clang: the ATen path is always taken

void rms_norm_rows(const uint16_t*, int64_t, int64_t, int64_t, int64_t, const uint16_t*, bool, float, uint16_t*) {}
void rope_rows(const uint16_t*, int64_t, int64_t, int64_t, int64_t, const uint16_t*, const uint16_t*, uint16_t*) {}
void swiglu_rows(const uint16_t*, int64_t, int64_t, uint16_t*) {}
int64_t amx_packed_elems(int64_t N, int64_t K) { return (N + 31) / 32 * 32 * ((K + 31) / 32 * 32); }
void amx_pack(const uint16_t*, int64_t, int64_t, uint16_t*) {}
void amx_unpack(const uint16_t*, int64_t, int64_t, uint16_t*) {}
void amx_gemm(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*, uint16_t*,
              int64_t, int64_t, int64_t) {}
void vnni_gemm(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*, uint16_t*,
               int64_t, int64_t, int64_t) {}
void gemm_nt(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*, uint16_t*,
             int64_t, int64_t, int64_t) {}
void attend_rows(const uint16_t*, int64_t, int64_t, int64_t, const int64_t*, const uint16_t*, int64_t, const uint16_t*,
                 int64_t, int64_t, float, uint16_t*, int64_t, const NextKV*) {}

#endif

namespace {
std::atomic<int> lone_row_blocks{0};  // 0: the CPU's default, else 1 or 2
}  // namespace

bool lone_row_one_block() {
  const int b = lone_row_blocks.load();
  return b == 0 ? kernels::cpu_info().lone_row_one_block : b == 1;
}
void set_lone_row_one_block(bool one_block) { lone_row_blocks.store(one_block ? 1 : 2); }

}  // namespace cpu_bf16
}  // namespace ears
