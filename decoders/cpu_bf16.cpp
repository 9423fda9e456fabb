#include "decoders/cpu_bf16.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define EARS_CPU_BF16_X86 1
#include <immintrin.h>
#endif

namespace ears {
namespace cpu_bf16 {

#if defined(EARS_CPU_BF16_X86)

#define EARS_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace {

float from_bf16(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, NaN stays NaN (same as c10::BFloat16's conversion).
uint16_t to_bf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}


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

bool available() {
  static const bool ok = [] {
    if (const char* off = std::getenv("EARS_NO_CPU_KERNELS"); off && *off && std::strcmp(off, "0") != 0)
      return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return ok;
}

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

EARS_AVX512_BF16 void attend_row(const uint16_t* q, const uint16_t* k, int64_t ldk, const uint16_t* v,
                                 int64_t ldv, int64_t n_keys, int64_t hd, float scale, float* scratch,
                                 uint16_t* out) {
  // Scores: bf16(q . k_j), then times the scale in fp32 and rounded again (HF: matmul in bf16,
  // then `* scaling` on the bf16 tensor).
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n_keys; ++j) {
    const float s = from_bf16(to_bf16(from_bf16(to_bf16(dot(q, k + j * ldk, hd))) * scale));
    scratch[j] = s;
    mx = s > mx ? s : mx;
  }
  float sum = 0.f;
  for (int64_t j = 0; j < n_keys; ++j) {
    const float e = std::exp(scratch[j] - mx);
    scratch[j] = e;
    sum += e;
  }
  // Probabilities in fp32, rounded to bf16, then sum_j p_j v_j in fp32 (16 lanes at a time).
  constexpr int64_t kMaxChunks = 32;  // head_dim <= 512
  __m512 acc[kMaxChunks];
  const int64_t chunks = (hd + 15) / 16;
  for (int64_t c = 0; c < chunks; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t j = 0; j < n_keys; ++j) {
    const __m512 p = _mm512_set1_ps(from_bf16(to_bf16(scratch[j] / sum)));
    const uint16_t* vj = v + j * ldv;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t left = hd - c * 16;
      const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
      acc[c] = _mm512_fmadd_ps(p, load16_f32(vj + c * 16, m), acc[c]);
    }
  }
  alignas(64) float tmp[16];
  for (int64_t c = 0; c < chunks; ++c) {
    _mm512_store_ps(tmp, acc[c]);
    const int64_t left = hd - c * 16 < 16 ? hd - c * 16 : 16;
    for (int64_t l = 0; l < left; ++l) out[c * 16 + l] = to_bf16(tmp[l]);
  }
}

#else  // not x86-64 with GCC/Clang: the ATen path is always taken

bool available() { return false; }
void gemm_nt(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*, uint16_t*,
             int64_t, int64_t, int64_t) {}
void attend_row(const uint16_t*, const uint16_t*, int64_t, const uint16_t*, int64_t, int64_t, int64_t, float,
                float*, uint16_t*) {}

#endif

}  // namespace cpu_bf16
}  // namespace ears
