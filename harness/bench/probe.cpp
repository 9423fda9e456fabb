#include "harness/bench/probe.h"

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <string>

#include "decoders/kernel_path.h"
#include "decoders/runtime.h"
#include "decoders/weight_memory.h"
#include "harness/base/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <cstring>

namespace ears {
namespace {

// Reads [p, p + n) once and folds it into a value the compiler cannot drop: a pure load stream
// (4 independent vector loads per iteration), so the reading is bounded by memory, not by
// arithmetic — at::sum over float32 is compute-bound on some CPUs and under-reads bandwidth.
// ahead > 0: every line is also prefetched into L2 that many bytes ahead, as the CPU kernels
// prefetch their weight stream (decoders/cpu_avx2.cpp). On an Intel Xeon (2 threads, 512 MiB,
// 2 MiB pages) the plain stream read 29.2-30.1 GB/s where the avx2 decode kernel streamed its
// weights at up to 36.8 — a floor the kernels beat is no floor; prefetched, 35.4-40.0. (The distance
// stays a run-time value: compiled in as a constant, the same loop read 32-33.)
constexpr size_t kProbeAheads[] = {0, size_t{16} << 10, size_t{64} << 10};
#if defined(__x86_64__)
__attribute__((target("avx2"), noinline)) uint64_t read_stream_avx2(const uint8_t* p, size_t n, size_t ahead) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    if (ahead) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + ahead), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(p + i + ahead + 64), _MM_HINT_T1);
    }
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  uint64_t out = static_cast<uint64_t>(_mm256_extract_epi64(a, 0) ^ _mm256_extract_epi64(a, 1) ^
                                       _mm256_extract_epi64(a, 2) ^ _mm256_extract_epi64(a, 3));
  for (; i < n; ++i) out ^= p[i];
  return out;
}

// The same with 64-byte loads, on AVX-512 CPUs: the probe reads with the widest vectors the CPU
// has, as the kernels do (a 32-byte stream under-reads some AVX-512 machines).
__attribute__((target("avx512f"), noinline)) uint64_t read_stream_avx512(const uint8_t* p, size_t n, size_t ahead) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    if (ahead)
      for (size_t line = 0; line < 256; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(p + i + ahead + line), _MM_HINT_T1);
    a0 = _mm512_xor_si512(a0, _mm512_loadu_si512(p + i));
    a1 = _mm512_xor_si512(a1, _mm512_loadu_si512(p + i + 64));
    a2 = _mm512_xor_si512(a2, _mm512_loadu_si512(p + i + 128));
    a3 = _mm512_xor_si512(a3, _mm512_loadu_si512(p + i + 192));
  }
  const __m512i a = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, a);
  uint64_t out = 0;
  for (uint64_t l : lanes) out ^= l;
  for (; i < n; ++i) out ^= p[i];
  return out;
}
#endif

// "avx512", "avx2" or "scalar": the read stream this CPU takes (decoders/kernel_path's detection).
const char* read_stream_kind() {
#if defined(__x86_64__)
  const kernels::CpuInfo& cpu = kernels::cpu_info();
  return cpu.avx512f ? "avx512" : cpu.avx2 ? "avx2" : "scalar";
#else
  return "scalar";
#endif
}

uint64_t read_stream_scalar(const uint8_t* p, size_t n, size_t ahead) {
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, w[4];
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if (ahead && i % 64 == 0) __builtin_prefetch(p + i + ahead, 0, 2);  // read, into L2 (as T1)
    std::memcpy(w, p + i, 32);
    a0 ^= w[0], a1 ^= w[1], a2 ^= w[2], a3 ^= w[3];
  }
  for (; i < n; ++i) a0 ^= p[i];
  return a0 ^ a1 ^ a2 ^ a3;
}

uint64_t read_stream(const uint8_t* p, size_t n, size_t ahead) {
#if defined(__x86_64__)
  const kernels::CpuInfo& cpu = kernels::cpu_info();
  if (cpu.avx512f) return read_stream_avx512(p, n, ahead);
  if (cpu.avx2) return read_stream_avx2(p, n, ahead);
#endif
  return read_stream_scalar(p, n, ahead);
}

// Splits [0, bytes) into one contiguous slice per LibTorch intra-op thread.
template <class F>
void per_thread_slices(int64_t bytes, F&& f) {
  const int64_t threads = std::max(1, at::get_num_threads());
  const int64_t slice = (bytes / threads + 4095) / 4096 * 4096;
  at::parallel_for(0, threads, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t lo = std::min(bytes, t * slice), hi = std::min(bytes, lo + slice);
      if (hi > lo) f(lo, hi - lo);
    }
  });
}

// Best time of `runs` calls of `kernel` after one warm-up call, each waited for on `device`.
template <class F>
double best_of(int runs, c10::Device device, F&& kernel) {
  kernel();
  synchronize(device);
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < runs; ++r) {
    const double t0 = now_s();
    kernel();
    synchronize(device);
    best = std::min(best, now_s() - t0);
  }
  return best;
}

// Register-only MAC loops: 12 accumulators, `iters` x 12 instructions; the folded result keeps
// them observable. a = a * x + y converges (x < 1): no overflow, no subnormals.
#if defined(__x86_64__)
constexpr int kChains = 12;
__attribute__((target("avx2,fma"))) float fma8_loop(int64_t iters) {
  __m256 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-3f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) a[i] = _mm256_fmadd_ps(a[i], x, y);
  for (int i = 1; i < kChains; ++i) a[0] = _mm256_add_ps(a[0], a[i]);
  return _mm256_cvtss_f32(a[0]);
}
// a += x . y per pair: grows by 2e-3 a pass (bf16 1.0 x ~1e-3), far from overflow.
__attribute__((target("avx512f,avx512bf16"))) float dpbf16_loop(int64_t iters) {
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_setzero_ps();
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3a83);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_dpbf16_ps(a[i], x, y);
  for (int i = 1; i < kChains; ++i) a[0] = _mm512_add_ps(a[0], a[i]);
  return _mm512_reduce_add_ps(a[0]);
}
#endif

}  // namespace

ComputeResult measure_compute(const std::string& kernel_path, int runs) {
  ComputeResult res;
  res.threads = std::max(1, at::get_num_threads());
  float (*loop)(int64_t) = nullptr;
  int64_t iters = 0, macs_per_iter = 0;
#if defined(__x86_64__)
  const kernels::CpuInfo& cpu = kernels::cpu_info();
  if (kernel_path == "avx2" && cpu.avx2 && cpu.fma) {
    loop = fma8_loop, iters = int64_t{1} << 22, macs_per_iter = kChains * 8;
    res.method = "8-lane fp32 FMA (vfmadd ymm), 12 independent chains per thread";
  } else if (kernel_path == "avx512bf16" && cpu.avx512bf16) {
    loop = dpbf16_loop, iters = int64_t{1} << 20, macs_per_iter = kChains * 32;
    res.method = "vdpbf16ps zmm (16 lanes x 2 bf16 pairs), 12 independent chains per thread";
  }
#endif
  if (!loop) {
    res.method = fmt::format("not measured on the {} path", kernel_path);
    return res;
  }
  std::atomic<uint32_t> fold{0};
  auto pass = [&] {
    at::parallel_for(0, res.threads, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) fold += static_cast<uint32_t>(loop(iters));
    });
  };
  const double best = best_of(std::max(1, runs), c10::Device(c10::kCPU), pass);  // the warm-up clocks up too
  res.gmacs = static_cast<double>(res.threads) * static_cast<double>(iters * macs_per_iter) / best / 1e9;
  const double one =
      best_of(std::max(1, runs), c10::Device(c10::kCPU), [&] { fold += static_cast<uint32_t>(loop(iters)); });
  res.gmacs_one_thread = static_cast<double>(iters * macs_per_iter) / one / 1e9;
  if (fold.load() == 42) res.method += " ";  // keeps the loops observable
  return res;
}

BandwidthResult measure_bandwidth(const BandwidthOptions& opt) {
  if (opt.bytes < (int64_t{1} << 20)) fail("bandwidth probe: buffer of {} bytes is too small (need >= 1 MiB)", opt.bytes);
  if (opt.runs < 1) fail("bandwidth probe: runs must be >= 1 (got {})", opt.runs);
  const int64_t n = opt.bytes / 4;
  const auto options = at::TensorOptions().dtype(at::kFloat).device(opt.device);
  // On the CPU the buffers sit on the pages the packed weights get (2 MiB where THP allows): a
  // 4 KiB-page stream read 10 % below a native read of huge pages on an Intel Xeon (27.5 against
  // 30.5 GB/s) and below the weights' own stream. fill_ touches every page so first-touch faults
  // stay out of the timed passes.
  auto buffer = [&] {
    if (!opt.device.is_cpu()) return at::empty({n}, options);
    return weight_memory::empty_like_weights(n, at::kFloat, "the bandwidth probe's buffer (out of memory: free some)");
  };
  at::Tensor src = buffer().fill_(1.0);
  at::Tensor dst = buffer().fill_(0.0);

  auto best = [&](auto&& kernel) { return best_of(opt.runs, opt.device, kernel); };
  at::Tensor sink;
  BandwidthResult res;
  res.bytes = n * 4;
  res.runs = opt.runs;
  res.threads = at::get_num_threads();
  if (src.is_cpu()) {
    // Host memory: a multi-threaded load stream and memcpy (glibc's large copies use
    // non-temporal stores, so no read-for-ownership traffic is hidden in the copy reading).
    const auto* s8 = static_cast<const uint8_t*>(src.data_ptr());
    auto* d8 = static_cast<uint8_t*>(dst.data_ptr());
    std::atomic<uint64_t> fold{0};
    // The fastest of the plain and the prefetched streams (which one wins depends on the CPU).
    for (size_t ahead : kProbeAheads) {
      const double s = best([&] {
        per_thread_slices(res.bytes, [&](int64_t lo, int64_t n) { fold ^= read_stream(s8 + lo, n, ahead); });
      });
      res.read_s = ahead == 0 ? s : std::min(res.read_s, s);
    }
    res.copy_s = best([&] { per_thread_slices(res.bytes, [&](int64_t lo, int64_t n) { std::memcpy(d8 + lo, s8 + lo, n); }); });
    std::string aheads;
    for (size_t ahead : kProbeAheads)
      if (ahead) aheads += fmt::format("{}{}", aheads.empty() ? "" : " or ", ahead >> 10);
    res.method = fmt::format(
        "{} load stream (the widest vectors this CPU has; the fastest of plain and prefetched {} KiB ahead) and memcpy, "
        "one slice per LibTorch thread",
        read_stream_kind(), aheads);
    if (fold.load() == 42) res.method += " ";  // keeps the reads observable
  } else {
    res.read_s = best([&] { sink = src.sum(); });
    res.copy_s = best([&] { dst.copy_(src); });
    res.method = "at::sum (read) and Tensor::copy_ on the device";
  }
  res.read_gbps = static_cast<double>(res.bytes) / res.read_s / 1e9;
  res.copy_gbps = 2.0 * static_cast<double>(res.bytes) / res.copy_s / 1e9;
  return res;
}

}  // namespace ears
