#include "decoders/cpu_avx2.h"
#include "decoders/bf16_bits.h"
#include "decoders/kernel_path.h"

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

int64_t panel_bf16_elems(int64_t N, int64_t K) {
  return (N + kPanelGroupRows - 1) / kPanelGroupRows * kPanelGroupRows * ((K + 31) / 32 * 32);
}

// The header's layout: group n / 64 (64 Kp elements), k block k / 256 (256 x 64 elements, the
// last one kbl = Kp - 256 kb long), panel (n % 64) / 16 of the block (kbl x 16), k pair, then the
// 32 elements of the pair: vector j / 8, lane (j % 8) / 4, [4 outputs at k even | 4 at k odd].
static int64_t panel_bf16_index(int64_t n, int64_t k, int64_t Kp) {
  const int64_t j = n % 16, kb = k / kBlockK, kbl = std::min(kBlockK, Kp - kb * kBlockK);
  return n / kPanelGroupRows * kPanelGroupRows * Kp + kb * kBlockK * kPanelGroupRows + n % kPanelGroupRows / 16 * kbl * 16 +
         k % kBlockK / 2 * 32 + j / 4 * 8 + k % 2 * 4 + j % 4;
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
  const __m256i h = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i to_high = _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7,  //
                                           -1, -1, 8, 9, -1, -1, 10, 11, -1, -1, 12, 13, -1, -1, 14, 15);
  return _mm256_castsi256_ps(_mm256_shuffle_epi8(h, to_high));
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
// v rounded to bf16 and widened back: to_bf16x8's bits in the upper half of each lane, computed
// there (no pack, permute and widen: shuffle-port work that RMSNorm, RoPE, softmax and SwiGLU
// paid per 8 elements).
EARS_AVX2 inline __m256 round_bf16(__m256 v) {
  const __m256i b = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_and_si256(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))),
                                     _mm256_set1_epi32(static_cast<int>(0xffff0000u)));
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), nan);
}

EARS_AVX2 inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// hsum of 4 and of 8 vectors at once, each sum bit for bit hsum's: its three levels of adds, in
// its order (v_j + v_j+4, then (s0 + s2, s1 + s3), then t0 + t1), on vectors that hold the same
// level of several sums — 7 / 10 shuffles instead of 12 / 24, 4 / 7 adds instead of 12 / 24.
// Level 1 of two vectors: [lo a + hi a | lo b + hi b].
EARS_AVX2 inline __m256 hsum_level1(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x21), _mm256_blend_ps(a, b, 0xF0));
}
// Levels 1 and 2 of a, b, c, d: [t(a) t(c) | t(b) t(d)], t(x) the two sums of level 2.
EARS_AVX2 inline __m256 hsum_level2(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256d ab = _mm256_castps_pd(hsum_level1(a, b)), cd = _mm256_castps_pd(hsum_level1(c, d));
  return _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(ab, cd)), _mm256_castpd_ps(_mm256_unpackhi_pd(ab, cd)));
}
EARS_AVX2 inline __m128 hsum4(const __m256* v) {
  const __m256 t = hsum_level2(v[0], v[2], v[1], v[3]);  // [t0 t1 | t2 t3]
  const __m128 lo = _mm256_castps256_ps128(t), hi = _mm256_extractf128_ps(t, 1);
  return _mm_add_ps(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)), _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
}
EARS_AVX2 inline __m256 hsum8(const __m256* v) {
  const __m256 t0 = hsum_level2(v[0], v[4], v[1], v[5]);  // [t0 t1 | t4 t5]
  const __m256 t1 = hsum_level2(v[2], v[6], v[3], v[7]);  // [t2 t3 | t6 t7]
  return _mm256_add_ps(_mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 1, 3, 1)));
}
// out[i] = hsum(v[i]) for i < N.
template <int N>
EARS_AVX2 inline void hsum_many(const __m256* v, float* out) {
  int i = 0;
  for (; i + 8 <= N; i += 8) _mm256_storeu_ps(out + i, hsum8(v + i));
  for (; i + 4 <= N; i += 4) _mm_storeu_ps(out + i, hsum4(v + i));
  for (; i < N; ++i) out[i] = hsum(v[i]);
}

// ---- bf16 linear over 16-output panels ------------------------------------------------------
// Row tiles of x (already fp32, k-major within the tile: element (k, m) of an MB-row tile at
// xt[k * MB + m], zero-padded to Kp columns) against a panel's k block: acc[m * 16 + j] += sum_k
// x[m, k] w[j, k] over the block, FMA in k order (see the header) — the same sequence for every
// row count, whatever the blocks and panels around it. A step is the k pair (2p, 2p + 1) of a
// panel's 16 outputs, one 64-byte line: two 32-byte vectors of 8 outputs whose 128-bit lanes hold
// [4 outputs at k even | the same 4 at k odd], so vpunpcklwd / vpunpckhwd with zero widen the 8
// outputs at k even / odd to fp32 exactly (bf16 << 16). The unpacks may issue on the shuffle
// port (5 on Intel), which the FMAs do not use; a shift and a mask (the previous layout's
// widening) could not.
//
// A call reads its weight as one sequential stream: group after group, k block after k block, the
// group's 4 panels of each block one after another — so the block's x (6 KiB at 6 rows) serves 4
// panels from L1 before the stream moves on (one panel at a time over all of K re-read x from L2
// once per panel: 6 rows streamed 15 % slower in a standalone loop of the kernel's step).
// Prefetch (Intel Xeon masked to avx2, 2 threads, 1 GB): 1-2 rows keep pace with one line 8 KiB
// ahead into L2 over a streamed weight; over one that stays in cache (kernels::kResidentWeightBytes,
// several panels at once) they prefetch nothing: the bundled target's decode 5-12 % faster without (an
// Intel Xeon without AMX masked to avx2, alternated in one process; docs/performance-log.md, fortieth
// session). 3-6 rows, whose arithmetic takes longer per line, with the line kNearBytes ahead
// into L1 and, where prefetcht1 stops at L2, the line kFarBytes ahead into L2 (tile_asm below).
constexpr int64_t kPrefetchBytes = 8192;
constexpr int64_t kNearBytes = 2048;
constexpr int64_t kFarBytes = 10240;

// 1-2 rows: one step over NP panels (ps elements apart): 2 NP weight vectors + 1 broadcast + MB *
// 2 NP accumulators; with Prefetch one prefetch per line kPrefetchBytes on into L2. Row m's k pair
// at xp + m * ldx.
template <int MB, int NP, bool Prefetch>
EARS_AVX2 __attribute__((always_inline)) inline void step_bf16(__m256 (&acc)[MB][2 * NP], const uint16_t* line,
                                                               int64_t ps, const float* xp, int64_t ldx) {
  const __m256i zero = _mm256_setzero_si256();
  __m256i v[2 * NP];
  for (int h = 0; h < NP; ++h) {
    if (Prefetch) _mm_prefetch(reinterpret_cast<const char*>(line + h * ps) + kPrefetchBytes, _MM_HINT_T1);
    v[2 * h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line + h * ps));
    v[2 * h + 1] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line + h * ps + 16));
  }
  // Even k of the pair for every row, then odd k.
  for (int odd = 0; odd < 2; ++odd) {
    __m256 w[2 * NP];
    for (int j = 0; j < 2 * NP; ++j)
      w[j] = _mm256_castsi256_ps(odd ? _mm256_unpackhi_epi16(zero, v[j]) : _mm256_unpacklo_epi16(zero, v[j]));
    for (int m = 0; m < MB; ++m) {
      const __m256 xb = _mm256_broadcast_ss(xp + m * ldx + odd);
      for (int j = 0; j < 2 * NP; ++j) acc[m][j] = _mm256_fmadd_ps(xb, w[j], acc[m][j]);
    }
  }
}

// 1-2 rows (x from xc, row stride ldx), `chunks` chunks of NP panels (w, w + ps) onto acc (panel h's
// at acc + h * as; the first k block starts from zero instead).
template <int MB, int NP, bool Prefetch>
EARS_AVX2 void panel_bf16(const float* xc, int64_t ldx, const uint16_t* w, int64_t ps, int64_t chunks, bool first,
                          float* acc, int64_t as) {
  __m256 a[MB][2 * NP];
  for (int m = 0; m < MB; ++m)
    for (int j = 0; j < 2 * NP; ++j)
      a[m][j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + j / 2 * as + m * 16 + j % 2 * 8);
  for (int64_t c = 0; c < chunks; ++c)
    for (int p = 0; p < 16; ++p) step_bf16<MB, NP, Prefetch>(a, w + c * 512 + p * 32, ps, xc + c * 32 + 2 * p, ldx);
  for (int m = 0; m < MB; ++m)
    for (int j = 0; j < 2 * NP; ++j) _mm256_storeu_ps(acc + j / 2 * as + m * 16 + j % 2 * 8, a[m][j]);
}

// 1 row over a weight that stays in cache: the group's 4 panels (ps elements apart) at once, 8
// accumulators (panel h's at acc + h * as), so 8 FMA chains keep both FMA ports busy through the
// 4-cycle latency (two panels' 4 chains left half the issue slots idle). Each 32-byte vector is
// widened where it is used, its k even and then its k odd into one accumulator: the same sequence
// per output as step_bf16's, so only the 8 accumulators, the zero and 2 broadcasts stay in
// registers. Replayed with the layers' thread split (Zen 4 masked to avx2, 2 threads, alternated),
// the bundled target's 25 decode linears take 0.84-0.88 x the two-panel kernel's time and the draft
// head's chain step 0.89 x; no prefetch (one per line, 0.5-4 KiB ahead, into L1 or L2: 1.09-1.15 x
// slower, 1 thread; docs/performance-log.md, forty-third session).
EARS_AVX2 void row_group_bf16(const float* xc, const uint16_t* w, int64_t ps, int64_t chunks, bool first, float* acc,
                              int64_t as) {
  const __m256i zero = _mm256_setzero_si256();
  __m256 a[8];
  for (int j = 0; j < 8; ++j) a[j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + j / 2 * as + j % 2 * 8);
  for (int64_t c = 0; c < chunks; ++c)
    for (int p = 0; p < 16; ++p) {
      const uint16_t* line = w + c * 512 + p * 32;
      const __m256 xe = _mm256_broadcast_ss(xc + c * 32 + 2 * p), xo = _mm256_broadcast_ss(xc + c * 32 + 2 * p + 1);
      for (int j = 0; j < 8; ++j) {
        const __m256i* v = reinterpret_cast<const __m256i*>(line + j / 2 * ps + j % 2 * 16);
        a[j] = _mm256_fmadd_ps(xe, _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, _mm256_loadu_si256(v))), a[j]);
        a[j] = _mm256_fmadd_ps(xo, _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, _mm256_loadu_si256(v))), a[j]);
      }
    }
  for (int j = 0; j < 8; ++j) _mm256_storeu_ps(acc + j / 2 * as + j % 2 * 8, a[j]);
}

// 3 to 6 rows: each 32-k chunk (16 steps) is one asm block, so the registers are as planned — 2 MB
// accumulators, the zero (ymm12), 2 widened weight vectors (ymm13-14) and 1 broadcast (ymm15): 16
// at 6 rows — and every load is a constant offset from the weight pointer or from one of two x
// row pointers (rows 0, 2, 4 from x, rows 1, 3, 5 from x + ld: base + 0, 2 or 4 x the row
// stride ld). Written with intrinsics, GCC kept the mask and some accumulators in memory and copied
// registers around: 16-18 cycles per step at 6 rows hot in L2, where this takes 12-14 (12 is the
// FMA ports' floor for 24 FMAs; Intel Xeon masked to avx2).
#define EARS_X0 "(%[x])"
#define EARS_X1 "(%[x1])"
#define EARS_X2 "(%[x],%[ld],2)"
#define EARS_X3 "(%[x1],%[ld],2)"
#define EARS_X4 "(%[x],%[ld],4)"
#define EARS_X5 "(%[x1],%[ld],4)"
#define EARS_ROW(m, a0, a1, X)                     \
  "vbroadcastss " X EARS_X##m ", %%ymm15\n\t"      \
  "vfmadd231ps %%ymm13, %%ymm15, %[" #a0 "]\n\t"   \
  "vfmadd231ps %%ymm14, %%ymm15, %[" #a1 "]\n\t"
#define EARS_ROWS3(X) EARS_ROW(0, a0, a1, X) EARS_ROW(1, a2, a3, X) EARS_ROW(2, a4, a5, X)
#define EARS_ROWS4(X) EARS_ROWS3(X) EARS_ROW(3, a6, a7, X)
#define EARS_ROWS5(X) EARS_ROWS4(X) EARS_ROW(4, a8, a9, X)
#define EARS_ROWS6(X) EARS_ROWS5(X) EARS_ROW(5, a10, a11, X)
// Step p: one or two prefetches, k even (x at byte 8 p of each row's chunk), k odd (4 bytes on).
// The line kNearBytes on (pf) into L1; FAR(p): nothing, or the line kFarBytes on (8192 bytes past
// pf) into L2.
#define EARS_FAR_OFF(p) ""
#define EARS_FAR_ON(p) "prefetcht1 " #p "*64+8192(%[pf])\n\t"
#define EARS_STEP(ROWS, FAR, p)                          \
  "prefetcht0 " #p "*64(%[pf])\n\t"                      \
  FAR(p)                                                 \
  "vpunpcklwd " #p "*64(%[w]), %%ymm12, %%ymm13\n\t"     \
  "vpunpcklwd " #p "*64+32(%[w]), %%ymm12, %%ymm14\n\t"  \
  ROWS("8*" #p)                                          \
  "vpunpckhwd " #p "*64(%[w]), %%ymm12, %%ymm13\n\t"     \
  "vpunpckhwd " #p "*64+32(%[w]), %%ymm12, %%ymm14\n\t"  \
  ROWS("8*" #p "+4")
#define EARS_CHUNK(ROWS, F)                                                                        \
  "vpxor %%ymm12, %%ymm12, %%ymm12\n\t"                                                             \
  EARS_STEP(ROWS, F, 0) EARS_STEP(ROWS, F, 1) EARS_STEP(ROWS, F, 2) EARS_STEP(ROWS, F, 3)             \
  EARS_STEP(ROWS, F, 4) EARS_STEP(ROWS, F, 5) EARS_STEP(ROWS, F, 6) EARS_STEP(ROWS, F, 7)             \
  EARS_STEP(ROWS, F, 8) EARS_STEP(ROWS, F, 9) EARS_STEP(ROWS, F, 10) EARS_STEP(ROWS, F, 11)           \
  EARS_STEP(ROWS, F, 12) EARS_STEP(ROWS, F, 13) EARS_STEP(ROWS, F, 14) EARS_STEP(ROWS, F, 15)
#define EARS_ACC6 [a0] "+x"(a[0]), [a1] "+x"(a[1]), [a2] "+x"(a[2]), [a3] "+x"(a[3]), [a4] "+x"(a[4]), [a5] "+x"(a[5])
#define EARS_ACC8 EARS_ACC6, [a6] "+x"(a[6]), [a7] "+x"(a[7])
#define EARS_ACC10 EARS_ACC8, [a8] "+x"(a[8]), [a9] "+x"(a[9])
#define EARS_ACC12 EARS_ACC10, [a10] "+x"(a[10]), [a11] "+x"(a[11])
// (At 6 rows, 24 in-out operands + 6 = GCC's limit of 30: hence the fixed scratch registers.)
#define EARS_CHUNK_IO                                                                             \
  : [w] "r"(w), [x] "r"(x), [x1] "r"(x + ld), [ld] "r"(ld * 4), [pf] "r"(pf) \
  : "xmm12", "xmm13", "xmm14", "xmm15", "memory"

// One chunk of MB rows: accumulator a[2 m + j] is row m, outputs 8 j to 8 j + 7; w the chunk's 16
// lines, x its 32 k of row 0 (row m at x + m * ld), pf = w + kNearBytes, the first of the 16 lines
// to prefetcht0; FAR: each line kFarBytes on prefetcht1 too.
template <int MB, bool FAR>
EARS_AVX2 __attribute__((always_inline)) inline void chunk_asm(__m256 (&a)[12], const uint16_t* w, const float* x,
                                                               int64_t ld, const char* pf) {
  static_assert(kFarBytes - kNearBytes == 8192, "EARS_FAR_ON's offset");
  static_assert(MB >= 3 && MB <= 6, "3 to 6 rows");
#define EARS_CHUNK_MB(F)                                          \
  if constexpr (MB == 3) {                                        \
    asm(EARS_CHUNK(EARS_ROWS3, F) : EARS_ACC6 EARS_CHUNK_IO);     \
  } else if constexpr (MB == 4) {                                 \
    asm(EARS_CHUNK(EARS_ROWS4, F) : EARS_ACC8 EARS_CHUNK_IO);     \
  } else if constexpr (MB == 5) {                                 \
    asm(EARS_CHUNK(EARS_ROWS5, F) : EARS_ACC10 EARS_CHUNK_IO);    \
  } else {                                                        \
    asm(EARS_CHUNK(EARS_ROWS6, F) : EARS_ACC12 EARS_CHUNK_IO);    \
  }
  if constexpr (FAR) {
    EARS_CHUNK_MB(EARS_FAR_ON)
  } else {
    EARS_CHUNK_MB(EARS_FAR_OFF)
  }
#undef EARS_CHUNK_MB
}
#undef EARS_X0
#undef EARS_X1
#undef EARS_X2
#undef EARS_X3
#undef EARS_X4
#undef EARS_X5
#undef EARS_ROW
#undef EARS_ROWS3
#undef EARS_ROWS4
#undef EARS_ROWS5
#undef EARS_ROWS6
#undef EARS_STEP
#undef EARS_FAR_ON
#undef EARS_FAR_OFF
#undef EARS_CHUNK
#undef EARS_ACC6
#undef EARS_ACC8
#undef EARS_ACC10
#undef EARS_ACC12
#undef EARS_CHUNK_IO

// A tile's prefetches: the line kNearBytes on into L1 — with several tiles the first one's bring
// the panel's block in, the others' find it there — and, on a CPU where prefetcht1 stops at L2,
// the line kFarBytes on into L2 too (the hardware streamer alone kept too few lines in flight).
// A lone tile (3-6 rows), the 305 linears of a step of `bench forward`'s 502.9M model, replayed: 6
// rows 40.2-40.8 -> 37.8-38.6 ms (Intel Xeon masked to avx2; docs/performance-log.md). A far line
// a multiple of 4 KiB on (8, 12 or 16 KiB) lost instead, and so did the far prefetch issued before
// the near one. AMD before Zen 4 fills L1 on every prefetch hint (kernels::CpuInfo's
// prefetch_t1_to_l2), so a far line there evicts the lines the tiles are about to reuse: on an
// AVX2-only EPYC (Zen 3), `bench forward` 100M bf16, five rounds alternated, 16 x 1 step 35.6-45.7
// -> 27.8-36.7 ms (batch 16 / batch 1 median 4.81 -> 5.97); without the lone tile's far line,
// verify 6 / decode 1 median 1.36 -> 1.22 over seven rounds. With several tiles (16 rows = 6 + 5 +
// 5) the first tile walks a panel's block from memory and the others re-read it from L1, so the
// block's lines arrive in a third of the time the walks take — and every tile issuing the far
// line would only repeat the first one's. There the tiles share the far lines instead: tile t of
// n takes the chunks c with c % n == t, so each line of the blocks ahead is asked for once, spread
// over all n walks (FarLines). The 100M model's 49 linears at 16 rows, replayed from DRAM on the
// Intel Xeon masked to avx2 (2 threads, weights 2 MiB-aligned): 17.3-17.4 -> 16.5-16.8 ms, its
// 12 gate_up projections alone 6.3 -> 5.5 ms (docs/performance-log.md, thirty-first session).
// (The far line 16, 24, 32 or 64 KiB on instead of 10: no better. An earlier share of lines a
// block group on, issued instead of the near line, was worth nothing there.)

// Which chunks of a tile issue the far line: c % every == phase (every 0: none; a lone tile: 1, 0;
// tile t of n sharing them: n, t).
// (The next such chunk is counted, not found by c % every: a 64-bit division per chunk sat on the
// chunk loop's path, ~5 % of the 77-row prefill's kernel samples on the Intel Xeon masked to avx2.)
struct FarLines {
  int64_t every = 0, phase = 0;
};

// `chunks` chunks of an MB-row tile (x from xc, row stride ldx) against one panel's k block w, onto
// acc (2 MB x 8 fp32: row m, outputs 8 j on, at acc[(2 m + j) * 8]; the first k block starts from
// zero); far: which chunks add the far prefetch.
template <int MB>
EARS_AVX2 void tile_asm(const float* xc, int64_t ldx, const uint16_t* w, int64_t chunks, FarLines far, bool first,
                        float* acc) {
  __m256 a[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) a[i] = i < 2 * MB && !first ? _mm256_loadu_ps(acc + i * 8) : _mm256_setzero_ps();
  int64_t next_far = far.every > 0 ? far.phase : chunks;
  for (int64_t c = 0; c < chunks; ++c) {
    const uint16_t* wc = w + c * 512;
    const char* near = reinterpret_cast<const char*>(wc) + kNearBytes;
    if (c == next_far) {
      next_far += far.every;
      chunk_asm<MB, true>(a, wc, xc + c * 32, ldx, near);
    } else {
      chunk_asm<MB, false>(a, wc, xc + c * 32, ldx, near);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < 2 * MB; ++i) _mm256_storeu_ps(acc + i * 8, a[i]);
}

// One tile of 1 to 6 rows (x from xc, row stride ldx; 1-2 rows: one panel at a time) over one
// panel's k block.
EARS_AVX2 void tile_bf16(int rows, const float* xc, int64_t ldx, const uint16_t* w, int64_t chunks, FarLines far,
                         bool first, float* acc) {
  switch (rows) {
    case 1: panel_bf16<1, 1, true>(xc, ldx, w, 0, chunks, first, acc, 0); break;
    case 2: panel_bf16<2, 1, true>(xc, ldx, w, 0, chunks, first, acc, 0); break;
    case 3: tile_asm<3>(xc, ldx, w, chunks, far, first, acc); break;
    case 4: tile_asm<4>(xc, ldx, w, chunks, far, first, acc); break;
    case 5: tile_asm<5>(xc, ldx, w, chunks, far, first, acc); break;
    default: tile_asm<6>(xc, ldx, w, chunks, far, first, acc); break;
  }
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
    // Each k is one line of the panel: every line kPrefetchBytes ahead into L2, as the bf16 1-2-row
    // stream does. One line in four 4 KiB ahead (tuned on Zen 4) left the stream at 14-20 GB/s on
    // Zen 3 where this reads 25-27.5 (the 100M model's 49 linears, 1 row, 2 threads; 6 rows 26.6-29.5
    // -> 16.8-18.4 ms; docs/performance-log.md, twenty-eighth session); every other line lost nearly as much.
    _mm_prefetch(reinterpret_cast<const char*>(wp + k * 16) + kPrefetchBytes, _MM_HINT_T1);
    // Both weight vectors, then one broadcast per row: 2 MB accumulators + 3 registers. (Row by
    // row per weight vector, GCC kept the MB broadcasts live across both: 6 rows spilled three
    // accumulators to the stack, a store-to-load chain per FMA.)
    const __m256 w0 = _mm256_loadu_ps(wp + k * 16), w1 = _mm256_loadu_ps(wp + k * 16 + 8);
    for (int m = 0; m < MB; ++m) {
      const __m256 xb = _mm256_broadcast_ss(x + m * ldx + k);
      acc[m][0] = _mm256_fmadd_ps(xb, w0, acc[m][0]);
      acc[m][1] = _mm256_fmadd_ps(xb, w1, acc[m][1]);
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

}  // namespace

// One function on purpose: with the group loop split out (widen_x + group_bf16), GCC's code for
// the 1-row stream got slower — this model's linears per decode 28 -> 34 ms (a replay of its 305
// calls outside the repository, Intel Xeon masked to avx2).
EARS_AVX2 void gemm_bf16(const uint16_t* x, int64_t ldx, int64_t M, const uint16_t* packed, int64_t N, int64_t K,
                         const uint16_t* bias, uint16_t* y, int64_t ldy, int64_t g0, int64_t g1) {
  const int64_t kchunks = (K + 31) / 32, Kp = kchunks * 32;
  const RowTiles tiles(M);  // up to 6 rows are one tile; 16 go as 6 + 5 + 5
  const bool far = kernels::cpu_info().prefetch_t1_to_l2;  // tile_asm's far lines, shared by the tiles
  // x widened to fp32 once per call, row m at xf + m * Kp, zero-padded to Kp (the packed weight's
  // padding is zero too). (Tiles used to read x k-major, interleaved by row: a scalar transpose that
  // cost 16 rows ~11 us per call at K = 2048.)
  thread_local std::vector<float> xf;
  xf.resize(static_cast<size_t>(M * Kp));
  for (int64_t m = 0; m < M; ++m) {
    float* row = xf.data() + m * Kp;
    const uint16_t* xr = x + m * ldx;
    int64_t k = 0;  // the last partial 8 by load8_tail (zeros past K; Kp is a multiple of 32 >= K)
    for (; k < K; k += 8) _mm256_storeu_ps(row + k, K - k >= 8 ? load8(xr + k) : load8_tail(xr + k, K - k));
    for (; k < Kp; ++k) row[k] = 0.0f;
  }
  // 1 or 2 rows over a weight that stays in cache across calls (kernels::kResidentWeightBytes):
  // several panels at once, for 8 FMA chains (one panel's 2 chains of FMA latency set the pace
  // there: 1 row, a 2 MiB weight in L2, 2 x slower) — 1 row the group's 4 panels, 2 rows two — and
  // no prefetch. Streamed, one panel at a time.
  const bool resident = M <= 2 && panel_bf16_elems(N, K) * 2 <= kernels::kResidentWeightBytes;
  const int np_step = resident ? (M == 1 ? 4 : 2) : 1;
  constexpr int64_t kPanels = kPanelGroupRows / 16;
  // Partial sums of panel q of the group, tile t, at acc[(q * tiles.n + t) * 96] (6 rows x 16).
  thread_local std::vector<float> acc;
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t np = std::min(kPanels, (N - g * kPanelGroupRows + 15) / 16);  // panels holding outputs
    acc.resize(static_cast<size_t>(kPanels * tiles.n * 96));
    for (int64_t k0 = 0; k0 < Kp; k0 += kBlockK) {
      const bool first = k0 == 0;
      const int64_t chunks = std::min(kBlockK, Kp - k0) / 32;
      const uint16_t* block = packed + g * kPanelGroupRows * Kp + k0 * kPanelGroupRows;
      const int64_t ps = chunks * 512;  // elements per panel of the block
      for (int64_t q = 0; q < np; q += np_step)
        if (np_step == 4) {
          row_group_bf16(xf.data() + k0, block, ps, chunks, first, acc.data(), 96);
        } else if (np_step == 2) {
          panel_bf16<2, 2, false>(xf.data() + k0, Kp, block + q * ps, ps, chunks, first, acc.data() + q * 96, 96);
        } else {
          for (int64_t t = 0, m0 = 0; t < tiles.n; m0 += tiles.rows(t), ++t)
            tile_bf16(tiles.rows(t), xf.data() + m0 * Kp + k0, Kp, block + q * ps, chunks,
                      far ? FarLines{tiles.n, t} : FarLines{}, first,
                      acc.data() + (q * tiles.n + t) * 96);
        }
    }
    for (int64_t q = 0; q < np; ++q) {
      const int64_t n0 = g * kPanelGroupRows + q * 16;
      for (int64_t t = 0, m0 = 0; t < tiles.n; m0 += tiles.rows(t), ++t)
        store_panel(acc.data() + (q * tiles.n + t) * 96, 16, tiles.rows(t), n0, std::min<int64_t>(16, N - n0), bias,
                    y + m0 * ldy, ldy);
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

// KV's elements over a head_dim that is a multiple of 8: every load a whole chunk, so the kernels'
// loops hold no tail copy (a call, around which GCC kept every accumulator on the stack: a
// store-to-load chain per FMA).
template <class KV>
struct Whole : KV {
  EARS_AVX2 static __m256 load(const typename KV::T* p, int64_t) { return KV::load(p, 8); }
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

template <class E>
EARS_AVX2 void add_impl(const typename E::T* x, int64_t n, typename E::T* y) {
  for (int64_t i = 0; i < n; i += 8)
    E::store(y + i, _mm256_add_ps(E::load(y + i, n - i), E::load(x + i, n - i)), n - i);
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
  const __m256 a[4] = {a0, a1, a2, a3};
  _mm_storeu_ps(out, hsum4(a));
}

// sum_j p_j v_j over lanes [c0 * 8, c0 * 8 + 8 * NC) of the head: NC accumulators in registers
// (a runtime-sized array of them lived in memory: a store-to-load chain per FMA).
template <class E, class KV, int NC>
EARS_AVX2 void weighted_values(const float* p, const typename KV::T* v, int64_t ldv, int64_t n_keys, int64_t hd,
                               int64_t c0, typename E::T* out, LineFeed& feed) {
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t j0 = 0; j0 < n_keys; j0 += kFeedKeys) {
    const int64_t j1 = std::min(n_keys, j0 + kFeedKeys);
    feed.step(j1 - j0);
    for (int64_t j = j0; j < j1; ++j) {
      const __m256 pj = _mm256_set1_ps(p[j]);
      const typename KV::T* vj = v + j * ldv + c0 * 8;
      for (int c = 0; c < NC; ++c) acc[c] = _mm256_fmadd_ps(pj, KV::load(vj + c * 8, hd - (c0 + c) * 8), acc[c]);
    }
  }
  for (int c = 0; c < NC; ++c) E::store(out + (c0 + c) * 8, acc[c], hd - (c0 + c) * 8);
}

// scratch[j, j + 8): whole before `full`, else the lanes `mask` keeps (the others -inf / not stored).
struct ScoreChunks {
  float* s;
  int64_t full;
  __m256i mask;
  EARS_AVX2 __m256 load(int64_t j) const {
    return j < full ? _mm256_loadu_ps(s + j)
                    : _mm256_blendv_ps(_mm256_set1_ps(-std::numeric_limits<float>::infinity()),
                                       _mm256_maskload_ps(s + j, mask), _mm256_castsi256_ps(mask));
  }
  EARS_AVX2 void store(int64_t j, __m256 v) const {
    if (j < full) {
      _mm256_storeu_ps(s + j, v);
    } else {
      _mm256_maskstore_ps(s + j, mask, v);
    }
  }
};

// One row's raw scores q . k_j (scratch[0, n_keys)) -> its probabilities, rounded as HF rounds:
// round(q . k_j), times the scale and rounded again (HF: matmul, then * scaling), softmax in fp32,
// rounded. 8 keys at a time, the last partial 8 through a lane mask (the lanes past n_keys read as
// -inf: exp gives 0); the same roundings per key as the scalar formula. (The tail used to go
// through a stack buffer and a memcpy in each of the three passes, and the last pass's tail was
// scalar.)
template <class E>
EARS_AVX2 void softmax_scores(float* scratch, int64_t n_keys, float scale) {
  const int64_t full = n_keys / 8 * 8;
  const ScoreChunks c{scratch, full,
                      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n_keys - full)),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))};
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256 vscale = _mm256_set1_ps(scale);
  __m256 vmax = ninf;
  for (int64_t j = 0; j < n_keys; j += 8) {
    const __m256 sc = E::round(_mm256_mul_ps(E::round(c.load(j)), vscale));
    c.store(j, sc);
    vmax = _mm256_max_ps(vmax, sc);
  }
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  const __m256 mx = _mm256_set1_ps(_mm_cvtss_f32(_mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1))));
  __m256 vsum = _mm256_setzero_ps();
  for (int64_t j = 0; j < n_keys; j += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(c.load(j), mx));
    c.store(j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  const __m256 sum = _mm256_set1_ps(hsum(vsum));
  for (int64_t j = 0; j < n_keys; j += 8) c.store(j, E::round(_mm256_div_ps(c.load(j), sum)));
}

// One query row; K and V hold KV's elements (E's own, or fp32 widened from them exactly: the same
// result bit for bit).
template <class E, class KV = E>
EARS_AVX2 void attend_impl(const typename E::T* q, const typename KV::T* k, int64_t ldk, const typename KV::T* v,
                           int64_t ldv, int64_t n_keys, int64_t hd, float scale, float* scratch, typename E::T* out,
                           LineFeed& feed) {
  int64_t j = 0;
  for (; j + 4 <= n_keys; j += 4) {
    dot4<E, KV>(q, k + j * ldk, ldk, hd, scratch + j);
    feed.step(4);
  }
  for (; j < n_keys; ++j) scratch[j] = dot_rows<E, KV>(q, k + j * ldk, hd);
  softmax_scores<E>(scratch, n_keys, scale);
  // sum_j p_j v_j in fp32, 8 lanes at a time (value_passes(1, chunks) passes over the keys).
  const int64_t chunks = (hd + 7) / 8;
  int64_t c0 = 0;
  for (; c0 + 8 <= chunks; c0 += 8) weighted_values<E, KV, 8>(scratch, v, ldv, n_keys, hd, c0, out, feed);
  for (; c0 + 4 <= chunks; c0 += 4) weighted_values<E, KV, 4>(scratch, v, ldv, n_keys, hd, c0, out, feed);
  for (; c0 < chunks; ++c0) weighted_values<E, KV, 1>(scratch, v, ldv, n_keys, hd, c0, out, feed);
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
  float sums[NG * NK];
  hsum_many<NG * NK>(&acc[0][0], sums);
  for (int r = 0; r < NG; ++r)
    for (int j = 0; j < NK; ++j) s[r * lds + j] = sums[r * NK + j];
}

// sum_j p[r, j] v_j for NG rows over lanes [c0 * 8, c0 * 8 + 8 * NC) of the head.
template <class E, class KV, int NG, int NC>
EARS_AVX2 void weighted_values_group(const float* p, int64_t ldp, const typename KV::T* v, int64_t ldv,
                                     int64_t n_keys, int64_t hd, int64_t c0, typename E::T* out, int64_t ldo,
                                     LineFeed& feed) {
  __m256 acc[NG][NC];
  for (int r = 0; r < NG; ++r)
    for (int c = 0; c < NC; ++c) acc[r][c] = _mm256_setzero_ps();
  for (int64_t j0 = 0; j0 < n_keys; j0 += kFeedKeys) {
    const int64_t j1 = std::min(n_keys, j0 + kFeedKeys);
    feed.step(j1 - j0);
    for (int64_t j = j0; j < j1; ++j) {
      __m256 vj[NC];
      for (int c = 0; c < NC; ++c) vj[c] = KV::load(v + j * ldv + (c0 + c) * 8, hd - (c0 + c) * 8);
      for (int r = 0; r < NG; ++r) {
        const __m256 pj = _mm256_set1_ps(p[r * ldp + j]);
        for (int c = 0; c < NC; ++c) acc[r][c] = _mm256_fmadd_ps(pj, vj[c], acc[r][c]);
      }
    }
  }
  for (int r = 0; r < NG; ++r)
    for (int c = 0; c < NC; ++c) E::store(out + r * ldo + (c0 + c) * 8, acc[r][c], hd - (c0 + c) * 8);
}

// Output chunks (8 lanes) of V per pass over the keys for NG query rows (2 to 4): NG x NC
// accumulators and NC chunks of V live. (3 rows x 3 chunks, 9 FMA chains where 3 x 2 leave the
// 6 bound by the FMA latency, made the 3-row group 6 % faster in L1 but the linears after it in a
// 16-sequence 6-token step 3-4 % slower, three A/B sets on the Intel Xeon masked to avx2: not
// kept; docs/performance-log.md, thirty-second session.)
constexpr int value_chunks(int64_t ng) { return ng == 2 ? 4 : 2; }
// The passes over the keys that the value sums of ng rows take (attend_impl's for one row,
// attend_group's for 2 to 4): LineFeed's steps.
constexpr int64_t value_passes(int64_t ng, int64_t chunks) {
  if (ng == 1) return chunks / 8 + chunks % 8 / 4 + chunks % 4;
  return chunks / value_chunks(ng) + chunks % value_chunks(ng);
}

// NG (2 to 4) query rows q + r * hd of one token over the same n_keys keys, outputs out + r * hd.
// scratch: NG * (hd rounded up to 8 + n_keys) floats.
template <class E, class KV, int NG>
EARS_AVX2 void attend_group(const typename E::T* q, const typename KV::T* k, int64_t ldk, const typename KV::T* v,
                            int64_t ldv, int64_t n_keys, int64_t hd, float scale, float* scratch, typename E::T* out,
                            LineFeed& feed) {
  static_assert(NG >= 2 && NG <= 4, "register budget: NG x NK and NG x NC accumulators");
  const int64_t hdp = (hd + 7) / 8 * 8;
  float* qf = scratch;             // [NG, hdp]: q in fp32, zero-padded like E::load's tails
  float* s = scratch + NG * hdp;   // [NG, n_keys]: scores, then probabilities
  for (int r = 0; r < NG; ++r)
    for (int64_t d = 0; d < hdp; d += 8) _mm256_storeu_ps(qf + r * hdp + d, E::load(q + r * hd + d, hd - d));
  constexpr int NK = 12 / NG;  // 6, 4 or 3 keys: 12 accumulators
  int64_t j = 0;
  for (; j + NK <= n_keys; j += NK) {
    dot_group<KV, NG, NK>(qf, hdp, k + j * ldk, ldk, hd, s + j, n_keys);
    feed.step(NK);
  }
  for (; j < n_keys; ++j) dot_group<KV, NG, 1>(qf, hdp, k + j * ldk, ldk, hd, s + j, n_keys);
  for (int r = 0; r < NG; ++r) softmax_scores<E>(s + r * n_keys, n_keys, scale);
  // value_passes(NG, chunks) passes over the keys: value_chunks(NG) chunks at a time, then 1.
  constexpr int NC = value_chunks(NG);
  const int64_t chunks = (hd + 7) / 8;
  int64_t c0 = 0;
  for (; c0 + NC <= chunks; c0 += NC)
    weighted_values_group<E, KV, NG, NC>(s, n_keys, v, ldv, n_keys, hd, c0, out, hd, feed);
  for (; c0 < chunks; ++c0) weighted_values_group<E, KV, NG, 1>(s, n_keys, v, ldv, n_keys, hd, c0, out, hd, feed);
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
                           typename E::T* out, LineFeed& feed) {
  switch (ng) {
    case 1: attend_impl<E, KV>(q, k, ldk, v, ldv, n_keys, hd, scale, scratch, out, feed); break;
    case 2: attend_group<E, KV, 2>(q, k, ldk, v, ldv, n_keys, hd, scale, scratch, out, feed); break;
    case 3: attend_group<E, KV, 3>(q, k, ldk, v, ldv, n_keys, hd, scale, scratch, out, feed); break;
    default: attend_group<E, KV, 4>(q, k, ldk, v, ldv, n_keys, hd, scale, scratch, out, feed); break;
  }
}
// attend_some over K / V loaded whole (head_dim a multiple of 8) or with tails.
template <class E, class KV>
EARS_AVX2 void attend_whole_or_not(int64_t ng, const typename E::T* q, const typename KV::T* k, int64_t ldk,
                                   const typename KV::T* v, int64_t ldv, int64_t n_keys, int64_t hd, float scale,
                                   float* scratch, typename E::T* out, LineFeed& feed) {
  if (hd % 8 == 0) {
    attend_some<E, Whole<KV>>(ng, q, k, ldk, v, ldv, n_keys, hd, scale, scratch, out, feed);
  } else {
    attend_some<E, KV>(ng, q, k, ldk, v, ldv, n_keys, hd, scale, scratch, out, feed);
  }
}
// The next group of a token's query heads, `left` of them still to do: up to 4 (5 as 3 + 2: a lone
// row shares nothing).
constexpr int64_t head_group(int64_t left) { return left == 5 ? 3 : std::min<int64_t>(left, 4); }

template <class E>
EARS_AVX2 void attend_rows_impl(const typename E::T* q, int64_t ldq, int64_t T, int64_t G, const int64_t* n_keys,
                                const typename E::T* k, int64_t ldk, const typename E::T* v, int64_t ldv, int64_t hd,
                                float scale, typename E::T* out, int64_t ldo, const NextKV* next) {
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
  // The next run's lines, paced by the key visits of the first token's groups (scores: one per
  // key; value sums: one per key and pass; decoders/line_feed.h says why the first token's).
  int64_t steps = 0;
  for (int64_t g = 0, ng = 0; g < G; g += ng) {
    ng = head_group(G - g);
    steps += n_keys[0] * (1 + value_passes(ng, (hd + 7) / 8));
  }
  LineFeed feed(next, steps);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0, ng = 0; g < G; g += ng) {
      ng = head_group(G - g);
      const typename E::T* qr = q + t * ldq + g * hd;
      typename E::T* o = out + t * ldo + g * hd;
      if (widen) {
        attend_whole_or_not<E, F32>(ng, qr, kf, hd, vf, hd, n_keys[t], hd, scale, scratch.data(), o, feed);
      } else {
        attend_whole_or_not<E, E>(ng, qr, k, ldk, v, ldv, n_keys[t], hd, scale, scratch.data(), o, feed);
      }
    }
  feed.finish();
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
void attend_rows(const uint16_t* q, int64_t ldq, int64_t T, int64_t G, const int64_t* n_keys, const uint16_t* k,
                 int64_t ldk, const uint16_t* v, int64_t ldv, int64_t hd, float scale, uint16_t* out, int64_t ldo,
                 const NextKV* next) {
  attend_rows_impl<Bf16>(q, ldq, T, G, n_keys, k, ldk, v, ldv, hd, scale, out, ldo, next);
}
void attend_rows(const float* q, int64_t ldq, int64_t T, int64_t G, const int64_t* n_keys, const float* k,
                 int64_t ldk, const float* v, int64_t ldv, int64_t hd, float scale, float* out, int64_t ldo,
                 const NextKV* next) {
  attend_rows_impl<F32>(q, ldq, T, G, n_keys, k, ldk, v, ldv, hd, scale, out, ldo, next);
}
void swiglu_rows(const uint16_t* gate_up, int64_t rows, int64_t I, uint16_t* act) {
  swiglu_impl<Bf16>(gate_up, rows, I, act);
}
void swiglu_rows(const float* gate_up, int64_t rows, int64_t I, float* act) { swiglu_impl<F32>(gate_up, rows, I, act); }
void add_into(const uint16_t* x, int64_t n, uint16_t* y) { add_impl<Bf16>(x, n, y); }
void add_into(const float* x, int64_t n, float* y) { add_impl<F32>(x, n, y); }

#else  // not x86-64 with GCC/Clang: kernels::path() is always aten, these are never called

void gemm_bf16(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*, uint16_t*,
               int64_t, int64_t, int64_t) {}
void gemm_f32(const float*, int64_t, int64_t, const float*, int64_t, int64_t, const float*, float*, int64_t, int64_t,
              int64_t) {}
void rms_norm_rows(const uint16_t*, int64_t, int64_t, int64_t, int64_t, const uint16_t*, bool, float, uint16_t*) {}
void rms_norm_rows(const float*, int64_t, int64_t, int64_t, int64_t, const float*, bool, float, float*) {}
void rope_rows(const uint16_t*, int64_t, int64_t, int64_t, int64_t, const uint16_t*, const uint16_t*, uint16_t*) {}
void rope_rows(const float*, int64_t, int64_t, int64_t, int64_t, const float*, const float*, float*) {}
void attend_rows(const uint16_t*, int64_t, int64_t, int64_t, const int64_t*, const uint16_t*, int64_t, const uint16_t*,
                 int64_t, int64_t, float, uint16_t*, int64_t, const NextKV*) {}
void attend_rows(const float*, int64_t, int64_t, int64_t, const int64_t*, const float*, int64_t, const float*, int64_t,
                 int64_t, float, float*, int64_t, const NextKV*) {}
void swiglu_rows(const uint16_t*, int64_t, int64_t, uint16_t*) {}
void swiglu_rows(const float*, int64_t, int64_t, float*) {}
void add_into(const uint16_t*, int64_t, uint16_t*) {}
void add_into(const float*, int64_t, float*) {}

#endif

}  // namespace cpu_avx2
}  // namespace ears
