#include "decoders/cpu_avx2.h"
#include "decoders/bf16_bits.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define EARS_CPU_AVX2_X86 1
#include <immintrin.h>
#endif

namespace ears {
namespace cpu_avx2 {

int64_t panel_bf16_elems(int64_t N, int64_t K) { return (N + 31) / 32 * 32 * ((K + 31) / 32 * 32); }

static int64_t panel_bf16_index(int64_t n, int64_t k, int64_t Kp) {
  return (n / 16) * Kp * 16 + k / 2 * 32 + n % 16 * 2 + k % 2;
}

void panel_bf16_pack(const uint16_t* w, int64_t N, int64_t K, uint16_t* packed) {
  const int64_t Kp = (K + 31) / 32 * 32;
  std::fill(packed, packed + panel_bf16_elems(N, K), uint16_t{0});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) packed[panel_bf16_index(n, k, Kp)] = w[n * K + k];
}

void panel_bf16_unpack(const uint16_t* packed, int64_t N, int64_t K, uint16_t* w) {
  const int64_t Kp = (K + 31) / 32 * 32;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) w[n * K + k] = packed[panel_bf16_index(n, k, Kp)];
}

int64_t panel_f32_elems(int64_t N, int64_t K) { return (N + 15) / 16 * 16 * K; }

void panel_f32_pack(const float* w, int64_t N, int64_t K, float* packed) {
  std::fill(packed, packed + panel_f32_elems(N, K), 0.0f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) packed[(n / 16) * K * 16 + k * 16 + n % 16] = w[n * K + k];
}

void panel_f32_unpack(const float* packed, int64_t N, int64_t K, float* w) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) w[n * K + k] = packed[(n / 16) * K * 16 + k * 16 + n % 16];
}

#if defined(EARS_CPU_AVX2_X86)

#define EARS_AVX2 __attribute__((target("avx2,fma")))

namespace {

using bf16_bits::from_bf16;
using bf16_bits::to_bf16;

// 8 bf16 -> 8 fp32 (exact).
EARS_AVX2 inline __m256 load8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
// n < 8 bf16 -> fp32, the other lanes 0.
EARS_AVX2 inline __m256 load8_tail(const uint16_t* p, int64_t n) {
  alignas(16) uint16_t buf[8] = {};
  std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(uint16_t));
  return load8(buf);
}

// 8 fp32 -> 8 bf16, nearest even, NaN -> 0x7fc0 (the scalar to_bf16 above, 8 lanes at once).
EARS_AVX2 inline __m128i to_bf16x8(__m256 v) {
  const __m256i b = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc0), _mm256_castps_si256(nan));
  // packus works within 128-bit lanes: [r0..r3 r0..r3 | r4..r7 r4..r7] -> qwords 0 and 2.
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8));
}
EARS_AVX2 inline void store8(uint16_t* p, __m256 v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), to_bf16x8(v)); }
EARS_AVX2 inline void store8_tail(uint16_t* p, __m256 v, int64_t n) {
  alignas(16) uint16_t buf[8];
  _mm_store_si128(reinterpret_cast<__m128i*>(buf), to_bf16x8(v));
  std::memcpy(p, buf, static_cast<size_t>(n) * sizeof(uint16_t));
}
// v rounded to bf16 and widened back.
EARS_AVX2 inline __m256 round_bf16(__m256 v) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(to_bf16x8(v)), 16));
}

EARS_AVX2 inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// ---- bf16 linear over 16-output panels ------------------------------------------------------
// NP (1 or 2) consecutive panels (16 outputs each, the layout in the header; ps elements apart)
// against the MB rows of one row tile of x (already fp32, k-major: element (k, m) at
// xt[k * MB + m], zero-padded to Kp columns): out[m * 16 NP + j] = sum_k x[m, k] w[j, k], FMA in
// k order (see the header) — the same sequence for every MB and NP. A step is the k pair
// (2p, 2p + 1) of a panel's 16 outputs, one 64-byte line: two loads of 8 outputs x 2 k. Register
// budget (16 ymm): 2 NP weight vectors + 1 broadcast + MB * 2 NP accumulators (6 rows, 1 panel:
// 12 independent FMA chains, enough to keep both FMA pipes busy).
//
// A panel is one contiguous run and a call's panels follow one another, so a call reads its weight
// as one sequential stream, which the hardware prefetcher follows with the arithmetic in between.
// The AMX layout (two 16-output tiles interleaved per 32 k), which this path used to read, made a
// 6-row tile read every other KiB in two half-block passes; that defeated the hardware
// prefetcher, and no software prefetch placement recovered it. Intel Xeon masked to
// avx2, 2 threads, `bench linear` (1 GB): 6 rows 48-50 -> 37-38 ms, 1 row 29.7-30.2 either way.
// One software prefetch per line this far ahead, into L2, for a single stream (`bench forward`,
// the 502.9M model, verify 6: into L2 8 KiB ahead 51-53 ms; 16 KiB 52-54, 32 KiB 53-56, into L1
// 55-56; `bench linear` agreed within its noise).
constexpr int64_t kPrefetchBytes = 8192;
// 1 or 2 rows over a weight of at most this many bytes take both panels of a block at once.
constexpr int64_t kTwoPanelBytes = int64_t{1} << 20;

// Where a pass prefetches into L2: the line `ahead` bytes past each line it reads, in the chunks
// kc with kc % every == phase.
struct PanelPrefetch {
  int64_t ahead;
  int64_t every, phase;
};

template <int MB, int NP>
EARS_AVX2 __attribute__((always_inline)) inline void step_bf16(__m256 (&acc)[MB][2 * NP], const uint16_t* line,
                                                               int64_t ps, const float* xp, int64_t ahead) {
  __m256i v[2 * NP];
  for (int h = 0; h < NP; ++h) {
    if (ahead) _mm_prefetch(reinterpret_cast<const char*>(line + h * ps) + ahead, _MM_HINT_T1);
    v[2 * h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line + h * ps));
    v[2 * h + 1] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line + h * ps + 16));
  }
  const __m256i odd_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  // Even k of the pair for every row, then odd k.
  for (int odd = 0; odd < 2; ++odd) {
    __m256 w[2 * NP];
    for (int j = 0; j < 2 * NP; ++j)
      w[j] = _mm256_castsi256_ps(odd ? _mm256_and_si256(v[j], odd_mask) : _mm256_slli_epi32(v[j], 16));
    for (int m = 0; m < MB; ++m) {
      const __m256 xb = _mm256_broadcast_ss(xp + odd * MB + m);
      for (int j = 0; j < 2 * NP; ++j) acc[m][j] = _mm256_fmadd_ps(xb, w[j], acc[m][j]);
    }
  }
}

// The 16 steps of a 32-k chunk are unrolled for 3 or more rows, so every load of a step is a
// constant offset from one weight and one x pointer (a rolled loop spent ~20 scalar uops per step
// beside 24 FMAs, and on Intel the scalar ALUs share ports 0 and 1 with the FMAs); 1 and 2 rows,
// paced by the stream, stay rolled (unrolled they streamed 15-30 % slower in the old layout).
template <int MB, int NP>
EARS_AVX2 void panel_bf16(const float* xt, const uint16_t* wp, int64_t ps, int64_t kchunks, PanelPrefetch pf,
                          float* out) {
  __m256 acc[MB][2 * NP];
  for (int m = 0; m < MB; ++m)
    for (int j = 0; j < 2 * NP; ++j) acc[m][j] = _mm256_setzero_ps();
  for (int64_t kc = 0, cycle = 0; kc < kchunks; ++kc, cycle = cycle + 1 == pf.every ? 0 : cycle + 1) {
    const uint16_t* wk = wp + kc * 512;
    const float* xc = xt + kc * 32 * MB;
    const int64_t ahead = cycle == pf.phase ? pf.ahead : 0;  // kc % every, without a division per chunk
    if (MB <= 2) {
      for (int p = 0; p < 16; ++p) step_bf16<MB, NP>(acc, wk + p * 32, ps, xc + 2 * p * MB, ahead);
    } else {
#pragma GCC unroll 16
      for (int p = 0; p < 16; ++p) step_bf16<MB, NP>(acc, wk + p * 32, ps, xc + 2 * p * MB, ahead);
    }
  }
  for (int m = 0; m < MB; ++m)
    for (int j = 0; j < 2 * NP; ++j) _mm256_storeu_ps(out + m * 16 * NP + j * 8, acc[m][j]);
}

// out rows (rows x ldo fp32) + bias -> y (bf16), cols <= ldo valid outputs starting at n0.
EARS_AVX2 void store_panel(const float* out, int64_t ldo, int rows, int64_t n0, int64_t cols, const uint16_t* bias,
                           uint16_t* y, int64_t ldy) {
  for (int r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; j += 8) {
      __m256 v = _mm256_loadu_ps(out + r * ldo + j);
      const int64_t left = std::min<int64_t>(8, cols - j);
      if (bias) v = _mm256_add_ps(v, left == 8 ? load8(bias + n0 + j) : load8_tail(bias + n0 + j, left));
      if (left == 8) {
        store8(y + r * ldy + n0 + j, v);
      } else {
        store8_tail(y + r * ldy + n0 + j, v, left);
      }
    }
}

// ---- float32 linear over 16-output panels ----------------------------------------------------
// One 16-output panel against MB rows: out[m * 16 + j] = sum_k x[m, k] w[p * 16 + j, k].
template <int MB>
EARS_AVX2 void panel_f32(const float* x, int64_t ldx, const float* wp, int64_t K, float* out) {
  __m256 acc[MB][2];
  for (int m = 0; m < MB; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    // One line in four, 4 KiB ahead, into L2: the hardware prefetcher follows (Zen 4, 1 thread:
    // 18 GB/s with every fourth line 1 KiB ahead into L1, 24-29 GB/s so).
    if ((k & 3) == 0) _mm_prefetch(reinterpret_cast<const char*>(wp + (k + 64) * 16), _MM_HINT_T1);
    for (int q = 0; q < 2; ++q) {
      const __m256 w = _mm256_loadu_ps(wp + k * 16 + q * 8);
      for (int m = 0; m < MB; ++m) acc[m][q] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + m * ldx + k), w, acc[m][q]);
    }
  }
  for (int m = 0; m < MB; ++m)
    for (int q = 0; q < 2; ++q) _mm256_storeu_ps(out + m * 16 + q * 8, acc[m][q]);
}

// e^x for x <= 88 (softmax after subtracting the max; SwiGLU caps -g at 88): x = n ln2 + r, e^r by
// its degree-7 Taylor polynomial (relative error < 2e-7), times 2^n built in the exponent bits
// (n <= 127 up to 88); x < -87 gives 0.
EARS_AVX2 inline __m256 exp_ps(__m256 x) {
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(_mm256_max_ps(n, _mm256_set1_ps(-126.f))),
                                                       _mm256_set1_epi32(127)),
                                      23);
  return _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

// Rows in the fewest tiles of at most 6, their sizes at most one apart (16 = 6 + 5 + 5: at 16
// rows 2-3 % faster than 6 + 6 + 4, whose 4-row tile keeps only 8 FMA chains in flight).
struct RowTiles {
  int64_t M, n;
  explicit RowTiles(int64_t rows) : M(rows), n((rows + 5) / 6) {}
  int rows(int64_t t) const { return static_cast<int>(M / n + (t < M % n ? 1 : 0)); }
};

// One row tile (1 to 6 rows) against one panel.
EARS_AVX2 void tile_bf16(int rows, const float* xt, const uint16_t* wp, int64_t kchunks, PanelPrefetch pf, float* out) {
  switch (rows) {
    case 1: panel_bf16<1, 1>(xt, wp, 0, kchunks, pf, out); break;
    case 2: panel_bf16<2, 1>(xt, wp, 0, kchunks, pf, out); break;
    case 3: panel_bf16<3, 1>(xt, wp, 0, kchunks, pf, out); break;
    case 4: panel_bf16<4, 1>(xt, wp, 0, kchunks, pf, out); break;
    case 5: panel_bf16<5, 1>(xt, wp, 0, kchunks, pf, out); break;
    default: panel_bf16<6, 1>(xt, wp, 0, kchunks, pf, out); break;
  }
}

}  // namespace

EARS_AVX2 void gemm_bf16(const uint16_t* x, int64_t ldx, int64_t M, const uint16_t* packed, int64_t N, int64_t K,
                         const uint16_t* bias, uint16_t* y, int64_t ldy, int64_t nb0, int64_t nb1) {
  const int64_t kchunks = (K + 31) / 32, Kp = kchunks * 32;
  const RowTiles tiles(M);  // up to 6 rows are one tile; 16 go as 6 + 5 + 5
  // x widened to fp32 once per call, k-major within each row tile (tile t of rows [m0, m0 + r)
  // at xf[m0 * Kp + k * r + (m - m0)]), zero-padded to Kp (the packed weight's padding is zero too).
  thread_local std::vector<float> xf;
  xf.assign(static_cast<size_t>(M * Kp), 0.0f);
  for (int64_t t = 0, m0 = 0; t < tiles.n; m0 += tiles.rows(t), ++t) {
    const int r = tiles.rows(t);
    for (int m = 0; m < r; ++m)
      for (int64_t k = 0; k < K; ++k) xf[static_cast<size_t>(m0 * Kp + k * r + m)] = from_bf16(x[(m0 + m) * ldx + k]);
  }
  const int64_t ps = Kp * 16;  // elements per panel
  alignas(32) float out[6 * 32];
  // 1 or 2 rows over a weight that stays in L2 across calls (the bundled models, the draft head):
  // both panels of a block at once, for 4 or 8 FMA chains (one panel's 2 chains of FMA latency set
  // the pace there: 1 row, a 2 MiB weight in L2, 2 x slower). Streamed from memory, one panel at a time
  // reads one stream (two panels, two streams: 1.02-1.07 x slower).
  if (M <= 2 && panel_bf16_elems(N, K) * 2 <= kTwoPanelBytes) {
    for (int64_t nb = nb0; nb < nb1; ++nb) {
      const uint16_t* wp = packed + nb * 2 * ps;
      const PanelPrefetch pf{kPrefetchBytes, 1, 0};
      if (M == 1) {
        panel_bf16<1, 2>(xf.data(), wp, ps, kchunks, pf, out);
      } else {
        panel_bf16<2, 2>(xf.data(), wp, ps, kchunks, pf, out);
      }
      store_panel(out, 32, static_cast<int>(M), nb * 32, std::min<int64_t>(32, N - nb * 32), bias, y, ldy);
    }
    return;
  }
  // Panel outer, row tiles inner: each panel (32 KiB at K = 1024) is streamed from memory once per
  // call; more row tiles read it again from L1 / L2 while each prefetches its share of the next
  // panel into L2 (a third of its chunks each at 16 rows), so the stream flows through all of
  // their arithmetic rather than the first tile's alone.
  for (int64_t p = 2 * nb0; p < 2 * nb1 && p * 16 < N; ++p) {
    const uint16_t* wp = packed + p * ps;
    const int64_t cols = std::min<int64_t>(16, N - p * 16);
    for (int64_t t = 0, m0 = 0; t < tiles.n; m0 += tiles.rows(t), ++t) {
      const int rows = tiles.rows(t);
      const float* xt = xf.data() + m0 * Kp;
      const PanelPrefetch pf = tiles.n == 1 ? PanelPrefetch{kPrefetchBytes, 1, 0} : PanelPrefetch{ps * 2, tiles.n, t};
      tile_bf16(rows, xt, wp, kchunks, pf, out);
      store_panel(out, 16, rows, p * 16, cols, bias, y + m0 * ldy, ldy);
    }
  }
}

EARS_AVX2 void gemm_f32(const float* x, int64_t ldx, int64_t M, const float* packed, int64_t N, int64_t K,
                        const float* bias, float* y, int64_t ldy, int64_t p0, int64_t p1) {
  alignas(32) float out[6 * 16];
  auto emit = [&](int rows, int64_t p, int64_t m0) {
    for (int r = 0; r < rows; ++r)
      for (int64_t j = 0; j < 16 && p * 16 + j < N; ++j) {
        const int64_t n = p * 16 + j;
        y[(m0 + r) * ldy + n] = out[r * 16 + j] + (bias ? bias[n] : 0.0f);
      }
  };
  const RowTiles tiles(M);
  for (int64_t p = p0; p < p1; ++p) {
    const float* wp = packed + p * K * 16;
    for (int64_t t = 0, m0 = 0; t < tiles.n; m0 += tiles.rows(t), ++t) {
      const float* xm = x + m0 * ldx;
      const int rows = tiles.rows(t);
      switch (rows) {
        case 1: panel_f32<1>(xm, ldx, wp, K, out); break;
        case 2: panel_f32<2>(xm, ldx, wp, K, out); break;
        case 3: panel_f32<3>(xm, ldx, wp, K, out); break;
        case 4: panel_f32<4>(xm, ldx, wp, K, out); break;
        case 5: panel_f32<5>(xm, ldx, wp, K, out); break;
        default: panel_f32<6>(xm, ldx, wp, K, out); break;
      }
      emit(rows, p, m0);
    }
  }
}

namespace {

// Element access for the row kernels: bf16 rounds where Hugging Face's bf16 eager code rounds
// (every op's output), float32 never rounds (fp32 eager).
struct Bf16 {
  using T = uint16_t;
  EARS_AVX2 static __m256 load(const T* p, int64_t n) { return n >= 8 ? load8(p) : load8_tail(p, n); }
  EARS_AVX2 static void store(T* p, __m256 v, int64_t n) {
    if (n >= 8) {
      store8(p, v);
    } else {
      store8_tail(p, v, n);
    }
  }
  EARS_AVX2 static __m256 round(__m256 v) { return round_bf16(v); }
  static float round(float f) { return from_bf16(to_bf16(f)); }
  static float widen(T h) { return from_bf16(h); }
};
struct F32 {
  using T = float;
  EARS_AVX2 static __m256 load(const T* p, int64_t n) {
    if (n >= 8) return _mm256_loadu_ps(p);
    alignas(32) float buf[8] = {};
    std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(float));
    return _mm256_load_ps(buf);
  }
  EARS_AVX2 static void store(T* p, __m256 v, int64_t n) {
    if (n >= 8) {
      _mm256_storeu_ps(p, v);
    } else {
      alignas(32) float buf[8];
      _mm256_store_ps(buf, v);
      std::memcpy(p, buf, static_cast<size_t>(n) * sizeof(float));
    }
  }
  EARS_AVX2 static __m256 round(__m256 v) { return v; }
  static float round(float f) { return f; }
  static float widen(T f) { return f; }
};

template <class E, class EB = E>
EARS_AVX2 float dot_rows(const typename E::T* a, const typename EB::T* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t k = 0; k < n; k += 8) acc = _mm256_fmadd_ps(E::load(a + k, n - k), EB::load(b + k, n - k), acc);
  return hsum(acc);
}

template <class E>
EARS_AVX2 void rms_norm_impl(const typename E::T* x, int64_t outer, int64_t outer_stride, int64_t inner, int64_t D,
                             const typename E::T* w, bool w_per_inner, float eps, typename E::T* y) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const typename E::T* xr = x + o * outer_stride + i * D;
      const typename E::T* wr = w_per_inner ? w + i * D : w;
      typename E::T* yr = y + (o * inner + i) * D;
      __m256 acc = _mm256_setzero_ps();
      for (int64_t j = 0; j < D; j += 8) {
        const __m256 v = E::load(xr + j, D - j);
        acc = _mm256_fmadd_ps(v, v, acc);
      }
      const __m256 inv = _mm256_set1_ps(1.0f / std::sqrt(hsum(acc) / static_cast<float>(D) + eps));
      for (int64_t j = 0; j < D; j += 8)
        E::store(yr + j, _mm256_mul_ps(E::round(_mm256_mul_ps(E::load(xr + j, D - j), inv)), E::load(wr + j, D - j)),
                 D - j);
    }
}

template <class E>
EARS_AVX2 void rope_impl(const typename E::T* x, int64_t outer, int64_t outer_stride, int64_t n_heads, int64_t hd,
                         const typename E::T* cos, const typename E::T* sin, typename E::T* y) {
  const int64_t half = hd / 2;
  for (int64_t o = 0; o < outer; ++o) {
    const typename E::T* c = cos + o * hd;
    const typename E::T* s = sin + o * hd;
    for (int64_t h = 0; h < n_heads; ++h) {
      const typename E::T* xr = x + o * outer_stride + h * hd;
      typename E::T* yr = y + (o * n_heads + h) * hd;
      for (int64_t j = 0; j < half; j += 8) {
        const int64_t left = half - j;
        const __m256 lo = E::load(xr + j, left), hi = E::load(xr + half + j, left);
        // rotate_half(x) = cat(-x[half:], x[:half]); x * cos + rotate_half(x) * sin, op by op.
        const __m256 out_lo = _mm256_add_ps(E::round(_mm256_mul_ps(lo, E::load(c + j, left))),
                                            E::round(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), hi), E::load(s + j, left))));
        const __m256 out_hi = _mm256_add_ps(E::round(_mm256_mul_ps(hi, E::load(c + half + j, left))),
                                            E::round(_mm256_mul_ps(lo, E::load(s + half + j, left))));
        E::store(yr + j, out_lo, left);
        E::store(yr + half + j, out_hi, left);
      }
    }
  }
}

template <class E>
EARS_AVX2 void swiglu_impl(const typename E::T* gate_up, int64_t rows, int64_t I, typename E::T* act) {
  const __m256 one = _mm256_set1_ps(1.0f), cap = _mm256_set1_ps(88.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const typename E::T* g = gate_up + r * 2 * I;
    const typename E::T* u = g + I;
    typename E::T* a = act + r * I;
    for (int64_t i = 0; i < I; i += 8) {
      const __m256 x = E::load(g + i, I - i);
      const __m256 e = exp_ps(_mm256_min_ps(_mm256_sub_ps(_mm256_setzero_ps(), x), cap));
      const __m256 silu = E::round(_mm256_div_ps(x, _mm256_add_ps(one, e)));
      E::store(a + i, _mm256_mul_ps(silu, E::load(u + i, I - i)), I - i);
    }
  }
}

// q . k_j for 4 keys at once (4 independent FMA chains; each key's sum is the same sequence as
// dot_rows': chunks in order, then hsum). K's elements are KV's: E's, or fp32 widened from them.
template <class E, class KV>
EARS_AVX2 void dot4(const typename E::T* q, const typename KV::T* k, int64_t ldk, int64_t hd, float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t d = 0; d < hd; d += 8) {
    const int64_t left = hd - d;
    const __m256 qv = E::load(q + d, left);
    a0 = _mm256_fmadd_ps(qv, KV::load(k + d, left), a0);
    a1 = _mm256_fmadd_ps(qv, KV::load(k + ldk + d, left), a1);
    a2 = _mm256_fmadd_ps(qv, KV::load(k + 2 * ldk + d, left), a2);
    a3 = _mm256_fmadd_ps(qv, KV::load(k + 3 * ldk + d, left), a3);
  }
  out[0] = hsum(a0);
  out[1] = hsum(a1);
  out[2] = hsum(a2);
  out[3] = hsum(a3);
}

// sum_j p_j v_j over lanes [c0 * 8, c0 * 8 + 8 * NC) of the head: NC accumulators in registers
// (a runtime-sized array of them lived in memory: a store-to-load chain per FMA).
template <class E, class KV, int NC>
EARS_AVX2 void weighted_values(const float* p, const typename KV::T* v, int64_t ldv, int64_t n_keys, int64_t hd,
                               int64_t c0, typename E::T* out) {
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t j = 0; j < n_keys; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const typename KV::T* vj = v + j * ldv + c0 * 8;
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_fmadd_ps(pj, KV::load(vj + c * 8, hd - (c0 + c) * 8), acc[c]);
  }
  for (int c = 0; c < NC; ++c) E::store(out + (c0 + c) * 8, acc[c], hd - (c0 + c) * 8);
}

// One row's raw scores q . k_j (scratch[0, n_keys)) -> its probabilities, rounded as HF rounds:
// round(q . k_j), times the scale and rounded again (HF: matmul, then * scaling), softmax in fp32,
// rounded. 8 keys at a time (the scalar tail padded with -inf: exp gives 0); the same roundings
// per key as the scalar formula.
template <class E>
EARS_AVX2 void softmax_scores(float* scratch, int64_t n_keys, float scale) {
  int64_t j = 0;
  const int64_t full = n_keys / 8 * 8;
  auto tail = [&](float* buf) {
    for (int l = 0; l < 8; ++l) buf[l] = full + l < n_keys ? scratch[full + l] : -std::numeric_limits<float>::infinity();
  };
  const __m256 vscale = _mm256_set1_ps(scale);
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (j = 0; j < n_keys; j += 8) {
    float* sj = scratch + j;
    alignas(32) float buf[8];
    if (j == full) {
      tail(buf);
      sj = buf;
    }
    const __m256 sc = E::round(_mm256_mul_ps(E::round(_mm256_loadu_ps(sj)), vscale));
    _mm256_storeu_ps(sj, sc);
    if (j == full) std::memcpy(scratch + j, buf, static_cast<size_t>(n_keys - j) * sizeof(float));
    vmax = _mm256_max_ps(vmax, sc);
  }
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  const __m256 mx = _mm256_set1_ps(_mm_cvtss_f32(_mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1))));
  __m256 vsum = _mm256_setzero_ps();
  for (j = 0; j < n_keys; j += 8) {
    alignas(32) float buf[8];
    float* sj = scratch + j;
    if (j == full) {
      tail(buf);
      sj = buf;
    }
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(sj), mx));
    _mm256_storeu_ps(sj, e);
    if (j == full) std::memcpy(scratch + j, buf, static_cast<size_t>(n_keys - j) * sizeof(float));
    vsum = _mm256_add_ps(vsum, e);
  }
  const __m256 sum = _mm256_set1_ps(hsum(vsum));
  for (j = 0; j < full; j += 8) _mm256_storeu_ps(scratch + j, E::round(_mm256_div_ps(_mm256_loadu_ps(scratch + j), sum)));
  for (j = full; j < n_keys; ++j) scratch[j] = E::round(scratch[j] / _mm256_cvtss_f32(sum));
}

// One query row; K and V hold KV's elements (E's own, or fp32 widened from them exactly: the same
// result bit for bit).
template <class E, class KV = E>
EARS_AVX2 void attend_impl(const typename E::T* q, const typename KV::T* k, int64_t ldk, const typename KV::T* v,
                           int64_t ldv, int64_t n_keys, int64_t hd, float scale, float* scratch, typename E::T* out) {
  int64_t j = 0;
  for (; j + 4 <= n_keys; j += 4) dot4<E, KV>(q, k + j * ldk, ldk, hd, scratch + j);
  for (; j < n_keys; ++j) scratch[j] = dot_rows<E, KV>(q, k + j * ldk, hd);
  softmax_scores<E>(scratch, n_keys, scale);
  // sum_j p_j v_j in fp32, 8 lanes at a time.
  const int64_t chunks = (hd + 7) / 8;
  int64_t c0 = 0;
  for (; c0 + 8 <= chunks; c0 += 8) weighted_values<E, KV, 8>(scratch, v, ldv, n_keys, hd, c0, out);
  for (; c0 + 4 <= chunks; c0 += 4) weighted_values<E, KV, 4>(scratch, v, ldv, n_keys, hd, c0, out);
  for (; c0 < chunks; ++c0) weighted_values<E, KV, 1>(scratch, v, ldv, n_keys, hd, c0, out);
}

// ---- NG query rows that share a KV head, at once -------------------------------------------
// Each K and V chunk is loaded (bf16: widened) once for all NG rows instead of once per row; every
// row's sums are attend_impl's sequences (per key: chunks in order, then hsum; per output chunk:
// keys in order), so each row comes out bit for bit as attend_impl's.

// Scores of NG rows (fp32, row stride ldq, zero-padded to a multiple of 8) against NK keys: NG x
// NK accumulators, q read as the FMA's memory operand.
template <class KV, int NG, int NK>
EARS_AVX2 void dot_group(const float* qf, int64_t ldq, const typename KV::T* k, int64_t ldk, int64_t hd, float* s,
                         int64_t lds) {
  __m256 acc[NG][NK];
  for (int r = 0; r < NG; ++r)
    for (int j = 0; j < NK; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t d = 0; d < hd; d += 8)
    for (int j = 0; j < NK; ++j) {
      const __m256 kj = KV::load(k + j * ldk + d, hd - d);
      for (int r = 0; r < NG; ++r) acc[r][j] = _mm256_fmadd_ps(_mm256_loadu_ps(qf + r * ldq + d), kj, acc[r][j]);
    }
  for (int r = 0; r < NG; ++r)
    for (int j = 0; j < NK; ++j) s[r * lds + j] = hsum(acc[r][j]);
}

// sum_j p[r, j] v_j for NG rows over lanes [c0 * 8, c0 * 8 + 8 * NC) of the head.
template <class E, class KV, int NG, int NC>
EARS_AVX2 void weighted_values_group(const float* p, int64_t ldp, const typename KV::T* v, int64_t ldv,
                                     int64_t n_keys, int64_t hd, int64_t c0, typename E::T* out, int64_t ldo) {
  __m256 acc[NG][NC];
  for (int r = 0; r < NG; ++r)
    for (int c = 0; c < NC; ++c) acc[r][c] = _mm256_setzero_ps();
  for (int64_t j = 0; j < n_keys; ++j) {
    __m256 vj[NC];
    for (int c = 0; c < NC; ++c) vj[c] = KV::load(v + j * ldv + (c0 + c) * 8, hd - (c0 + c) * 8);
    for (int r = 0; r < NG; ++r) {
      const __m256 pj = _mm256_set1_ps(p[r * ldp + j]);
      for (int c = 0; c < NC; ++c) acc[r][c] = _mm256_fmadd_ps(pj, vj[c], acc[r][c]);
    }
  }
  for (int r = 0; r < NG; ++r)
    for (int c = 0; c < NC; ++c) E::store(out + r * ldo + (c0 + c) * 8, acc[r][c], hd - (c0 + c) * 8);
}

// NG (2 to 4) query rows q + r * hd of one token over the same n_keys keys, outputs out + r * hd.
// scratch: NG * (hd rounded up to 8 + n_keys) floats.
template <class E, class KV, int NG>
EARS_AVX2 void attend_group(const typename E::T* q, const typename KV::T* k, int64_t ldk, const typename KV::T* v,
                            int64_t ldv, int64_t n_keys, int64_t hd, float scale, float* scratch, typename E::T* out) {
  static_assert(NG >= 2 && NG <= 4, "register budget: NG x NK and NG x NC accumulators");
  const int64_t hdp = (hd + 7) / 8 * 8;
  float* qf = scratch;             // [NG, hdp]: q in fp32, zero-padded like E::load's tails
  float* s = scratch + NG * hdp;   // [NG, n_keys]: scores, then probabilities
  for (int r = 0; r < NG; ++r)
    for (int64_t d = 0; d < hdp; d += 8) _mm256_storeu_ps(qf + r * hdp + d, E::load(q + r * hd + d, hd - d));
  constexpr int NK = 12 / NG;  // 6, 4 or 3 keys: 12 accumulators
  int64_t j = 0;
  for (; j + NK <= n_keys; j += NK) dot_group<KV, NG, NK>(qf, hdp, k + j * ldk, ldk, hd, s + j, n_keys);
  for (; j < n_keys; ++j) dot_group<KV, NG, 1>(qf, hdp, k + j * ldk, ldk, hd, s + j, n_keys);
  for (int r = 0; r < NG; ++r) softmax_scores<E>(s + r * n_keys, n_keys, scale);
  constexpr int NC = NG == 2 ? 4 : 2;  // 8 accumulators, NC chunks of V live
  const int64_t chunks = (hd + 7) / 8;
  int64_t c0 = 0;
  for (; c0 + NC <= chunks; c0 += NC) weighted_values_group<E, KV, NG, NC>(s, n_keys, v, ldv, n_keys, hd, c0, out, hd);
  for (; c0 < chunks; ++c0) weighted_values_group<E, KV, NG, 1>(s, n_keys, v, ldv, n_keys, hd, c0, out, hd);
}

// n rows of hd bf16 (row stride ld) -> fp32, packed (row stride hd).
EARS_AVX2 void widen_rows(const uint16_t* x, int64_t ld, int64_t n, int64_t hd, float* y) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t d = 0; d < hd; d += 8) F32::store(y + r * hd + d, Bf16::load(x + r * ld + d, hd - d), hd - d);
}

// The query rows of one sequence and KV head (module comment in the header). From
// kWidenMinRows rows on (prefill), they share one widening of K and V to fp32 (n_keys x hd
// each): the row kernel's bf16 loads cost two shuffle-port ops per 8 elements for every row.
// Below that the fp32 copies (twice the bytes, out of L1) cost more than they save: at 3 rows
// (12 query heads over 4 KV heads, 1 token) the widened rows were 1.3-1.5x slower, at 18 rows
// (6 tokens) even, at 384 rows (a 128-token prefill) 1.3-1.7x faster (Zen 4, 12 layers of a
// 100M Qwen3's attention, `avx2` path).
constexpr int64_t kWidenMinRows = 32;

// ng (1 to 4) consecutive query rows of one token: attend_group, or attend_impl for a lone row.
template <class E, class KV>
EARS_AVX2 void attend_some(int64_t ng, const typename E::T* q, const typename KV::T* k, int64_t ldk,
                           const typename KV::T* v, int64_t ldv, int64_t n_keys, int64_t hd, float scale, float* scratch,
                           typename E::T* out) {
  switch (ng) {
    case 1: attend_impl<E, KV>(q, k, ldk, v, ldv, n_keys, hd, scale, scratch, out); break;
    case 2: attend_group<E, KV, 2>(q, k, ldk, v, ldv, n_keys, hd, scale, scratch, out); break;
    case 3: attend_group<E, KV, 3>(q, k, ldk, v, ldv, n_keys, hd, scale, scratch, out); break;
    default: attend_group<E, KV, 4>(q, k, ldk, v, ldv, n_keys, hd, scale, scratch, out); break;
  }
}
template <class E>
EARS_AVX2 void attend_rows_impl(const typename E::T* q, int64_t ldq, int64_t T, int64_t G, const int64_t* n_keys,
                                const typename E::T* k, int64_t ldk, const typename E::T* v, int64_t ldv, int64_t hd,
                                float scale, typename E::T* out, int64_t ldo) {
  const int64_t most = *std::max_element(n_keys, n_keys + T);
  const bool widen = std::is_same_v<E, Bf16> && T * G >= kWidenMinRows;
  const int64_t group_scratch = 4 * ((hd + 7) / 8 * 8 + most);
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(group_scratch + (widen ? 2 * most * hd : 0)));
  float* kf = scratch.data() + group_scratch;
  float* vf = kf + most * hd;
  if constexpr (std::is_same_v<E, Bf16>)
    if (widen) {
      widen_rows(k, ldk, most, hd, kf);
      widen_rows(v, ldv, most, hd, vf);
    }
  // The G heads of a token in groups of up to 4 (5 as 3 + 2: a lone row shares nothing).
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < G;) {
      const int64_t ng = G - g == 5 ? 3 : std::min<int64_t>(G - g, 4);
      const typename E::T* qr = q + t * ldq + g * hd;
      typename E::T* o = out + t * ldo + g * hd;
      if (widen) {
        attend_some<E, F32>(ng, qr, kf, hd, vf, hd, n_keys[t], hd, scale, scratch.data(), o);
      } else {
        attend_some<E, E>(ng, qr, k, ldk, v, ldv, n_keys[t], hd, scale, scratch.data(), o);
      }
      g += ng;
    }
}

}  // namespace

void rms_norm_rows(const uint16_t* x, int64_t outer, int64_t outer_stride, int64_t inner, int64_t D, const uint16_t* w,
                   bool w_per_inner, float eps, uint16_t* y) {
  rms_norm_impl<Bf16>(x, outer, outer_stride, inner, D, w, w_per_inner, eps, y);
}
void rms_norm_rows(const float* x, int64_t outer, int64_t outer_stride, int64_t inner, int64_t D, const float* w,
                   bool w_per_inner, float eps, float* y) {
  rms_norm_impl<F32>(x, outer, outer_stride, inner, D, w, w_per_inner, eps, y);
}
void rope_rows(const uint16_t* x, int64_t outer, int64_t outer_stride, int64_t n_heads, int64_t hd, const uint16_t* cos,
               const uint16_t* sin, uint16_t* y) {
  rope_impl<Bf16>(x, outer, outer_stride, n_heads, hd, cos, sin, y);
}
void rope_rows(const float* x, int64_t outer, int64_t outer_stride, int64_t n_heads, int64_t hd, const float* cos,
               const float* sin, float* y) {
  rope_impl<F32>(x, outer, outer_stride, n_heads, hd, cos, sin, y);
}
void attend_row(const uint16_t* q, const uint16_t* k, int64_t ldk, const uint16_t* v, int64_t ldv, int64_t n_keys,
                int64_t hd, float scale, float* scratch, uint16_t* out) {
  attend_impl<Bf16>(q, k, ldk, v, ldv, n_keys, hd, scale, scratch, out);
}
void attend_row(const float* q, const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t n_keys, int64_t hd,
                float scale, float* scratch, float* out) {
  attend_impl<F32>(q, k, ldk, v, ldv, n_keys, hd, scale, scratch, out);
}
void attend_rows(const uint16_t* q, int64_t ldq, int64_t T, int64_t G, const int64_t* n_keys, const uint16_t* k,
                 int64_t ldk, const uint16_t* v, int64_t ldv, int64_t hd, float scale, uint16_t* out, int64_t ldo) {
  attend_rows_impl<Bf16>(q, ldq, T, G, n_keys, k, ldk, v, ldv, hd, scale, out, ldo);
}
void attend_rows(const float* q, int64_t ldq, int64_t T, int64_t G, const int64_t* n_keys, const float* k,
                 int64_t ldk, const float* v, int64_t ldv, int64_t hd, float scale, float* out, int64_t ldo) {
  attend_rows_impl<F32>(q, ldq, T, G, n_keys, k, ldk, v, ldv, hd, scale, out, ldo);
}
void swiglu_rows(const uint16_t* gate_up, int64_t rows, int64_t I, uint16_t* act) {
  swiglu_impl<Bf16>(gate_up, rows, I, act);
}
void swiglu_rows(const float* gate_up, int64_t rows, int64_t I, float* act) { swiglu_impl<F32>(gate_up, rows, I, act); }

#else  // not x86-64 with GCC/Clang: kernels::path() is always aten, these are never called

void gemm_bf16(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*, uint16_t*,
               int64_t, int64_t, int64_t) {}
void gemm_f32(const float*, int64_t, int64_t, const float*, int64_t, int64_t, const float*, float*, int64_t, int64_t,
              int64_t) {}
void rms_norm_rows(const uint16_t*, int64_t, int64_t, int64_t, int64_t, const uint16_t*, bool, float, uint16_t*) {}
void rms_norm_rows(const float*, int64_t, int64_t, int64_t, int64_t, const float*, bool, float, float*) {}
void rope_rows(const uint16_t*, int64_t, int64_t, int64_t, int64_t, const uint16_t*, const uint16_t*, uint16_t*) {}
void rope_rows(const float*, int64_t, int64_t, int64_t, int64_t, const float*, const float*, float*) {}
void attend_row(const uint16_t*, const uint16_t*, int64_t, const uint16_t*, int64_t, int64_t, int64_t, float, float*,
                uint16_t*) {}
void attend_row(const float*, const float*, int64_t, const float*, int64_t, int64_t, int64_t, float, float*, float*) {}
void attend_rows(const uint16_t*, int64_t, int64_t, int64_t, const int64_t*, const uint16_t*, int64_t, const uint16_t*,
                 int64_t, int64_t, float, uint16_t*, int64_t) {}
void attend_rows(const float*, int64_t, int64_t, int64_t, const int64_t*, const float*, int64_t, const float*, int64_t,
                 int64_t, float, float*, int64_t) {}
void swiglu_rows(const uint16_t*, int64_t, int64_t, uint16_t*) {}
void swiglu_rows(const float*, int64_t, int64_t, float*) {}

#endif

}  // namespace cpu_avx2
}  // namespace ears
