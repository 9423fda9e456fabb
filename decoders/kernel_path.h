// Which CPU kernels run: the CPU's instruction set, detected once at start-up, and the kernel
// path chosen from it. One path per process; every CPU tensor op of the decoding loop that has a
// kernel (linear, attention, RMSNorm, RoPE) takes it, everything else is ATen.
//
//   path        needs                         linear weights (packed once at load)
//   amx         AMX-BF16 + OS tile grant      bf16 VNNI pair tiles, AMX tile multiply
//   avx512bf16  AVX-512F/BW/VL + AVX512_BF16  same packing, vdpbf16ps
//   avx2        AVX2 + FMA                    bf16: 16-output panels of k pairs, 4 per group by
//                                             256-k blocks (one sequential stream), widened to
//                                             f32 in registers (unpack with zero), FMA;
//                                             f32: 16-column panels, FMA
//   aten        nothing                       plain LibTorch ops (GPUs always take it)
//
// The default is the best path the CPU has. EARS_KERNELS=aten|avx2|avx512bf16|amx caps it (to
// test or measure a smaller CPU on a bigger one; asking for more than the CPU has is an error);
// EARS_NO_CPU_KERNELS=1 is EARS_KERNELS=aten. Torch-free: callable before LibTorch starts.
#pragma once

#include <cstdint>
#include <string>

namespace ears {
namespace kernels {

enum class Path { aten = 0, avx2 = 1, avx512bf16 = 2, amx = 3 };

// "aten" | "avx2" | "avx512bf16" | "amx".
const char* path_name(Path p);
// The inverse; ears::Error naming `origin` and the accepted names otherwise.
Path parse_path(const std::string& name, const std::string& origin);

struct CpuInfo {
  std::string model;  // /proc/cpuinfo "model name" (or "Hardware" / "cpu model"), "unknown" elsewhere
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512bf16 = false;
  bool amx_tile = false, amx_bf16 = false;  // CPUID bits; amx_granted says whether the OS lets us use them
  bool amx_granted = false;
  // prefetcht1 fills L2 and not L1: Intel, and AMD from Zen 4 (the first with AVX-512). AMD
  // before Zen 4 fills L1 on every prefetch hint (its optimization guides), so a line meant for L2
  // evicts what L1 holds (cpu_avx2's tiles take their far prefetch only where this is true).
  bool prefetch_t1_to_l2 = false;
  // A lone row streams a weight from memory one 32-row block at a time, not two side by side
  // (cpu_bf16::vnni_gemm): AMD from Zen 5 (CPUID family 0x1A). There the 100M model's bf16 decode
  // took 2.87-3.00 ms with one block and 3.53-3.61 ms with two (2 threads, reads 82-85 GB/s,
  // alternated); on Zen 4 two were faster (10.2 vs 12.4 ms; docs/performance-log.md, fifty-fifth
  // session).
  bool lone_row_one_block = false;
  // ONEDNN_MAX_CPU_ISA (or its older name DNNL_MAX_CPU_ISA) as set in the environment, "" when
  // unset; onednn_below_avx512() says whether it keeps oneDNN below AVX-512 (SSE41, AVX, AVX2,
  // AVX2_VNNI, ...): the recipe that measures an AVX2-only CPU on an AVX-512 one
  // (docs/performance.md).
  std::string onednn_cap;
  bool onednn_below_avx512() const;
  // The instruction-set features above that are present, space-separated ("avx2 fma f16c ...").
  std::string isa() const;
};
const CpuInfo& cpu_info();

// The best path this CPU supports.
Path best_path();
// The path in effect: best_path() capped by EARS_KERNELS / EARS_NO_CPU_KERNELS / set_path().
Path path();
// The variable that caps the path at start-up: EARS_NO_CPU_KERNELS (any value but "0"; = aten),
// else EARS_KERNELS; an empty name when neither is set.
struct PathCap {
  std::string name, value;
};
PathCap path_cap();
// Switches the path for the rest of the process (bench --compare-kernels, tests). Fails with an
// ears::Error when the CPU does not support `p`. Switch only between whole model loads: a model
// keeps the weight layout it was loaded with.
void set_path(Path p);

// A linear weight of at most this many bytes is taken to stay in the caches between calls: it
// belongs to a model small enough to sit in L3 (every weight of the bundled pair, 1 MiB at most) or
// to a draft head whose chain steps re-read it back to back. The 1-row kernels read such a weight
// without software prefetch (cpu_bf16::vnni_gemm; cpu_avx2::gemm_bf16 at 1-2 rows, several panels
// at once); a larger one is streamed from memory, prefetched ahead.
inline constexpr int64_t kResidentWeightBytes = int64_t{1} << 20;

// True when the CPU executes bf16 matrix products natively (AVX512_BF16 or AMX), so LibTorch's
// own bf16 ops are not emulated; false under a oneDNN cap below AVX-512 (LibTorch then computes
// bf16 matmul with its own emulating GEMM, as on an AVX2-only CPU: decoders/runtime.h).
bool native_bf16();

}  // namespace kernels
}  // namespace ears
