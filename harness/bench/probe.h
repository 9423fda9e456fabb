// Memory-bandwidth probe: the denominator of the decode-step floor.
//
// A decode step of a dense LM streams every weight once (plus the KV span it attends over), so
// its lower bound is  floor = bytes read ÷ read bandwidth.  Two readings are taken, each the best
// of `runs` timed passes over a buffer much larger than the last-level cache, using LibTorch's
// own intra-op thread pool (at::get_num_threads()):
//   read  — bytes READ per second: on the CPU a pure load stream (AVX2 loads folded with xor,
//           one contiguous slice per thread; at::sum is compute-bound on some CPUs and reads
//           low), on a GPU at::sum. A matmul against a weight matrix is a read stream too, so
//           THIS is the reading the floor uses.
//   copy  — (bytes read + bytes written) per second of a `bytes` copy, i.e. 2·bytes/time (the
//           STREAM "copy" convention): per-thread memcpy on the CPU, Tensor::copy_ on a GPU.
// GB/s here is 1e9 bytes per second.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace ears {

struct BandwidthOptions {
  int64_t bytes = int64_t{512} << 20;  // per buffer (copy uses two)
  int runs = 5;                         // timed passes per kernel (best kept), after one warm-up
  c10::Device device = c10::Device(c10::kCPU);
};

struct BandwidthResult {
  int64_t bytes = 0;      // buffer size
  int runs = 0;
  int threads = 0;        // LibTorch intra-op threads in effect
  double read_gbps = 0;   // bytes / best time of at::sum
  double copy_gbps = 0;   // 2·bytes / best time of copy_
  double read_s = 0, copy_s = 0;  // best times
  std::string method;             // how the two readings were taken
};

BandwidthResult measure_bandwidth(const BandwidthOptions& opt = {});

// Compute probe: the denominator of the step's compute floor (floor = multiply-accumulates ÷
// this rate). The MACs per second of the instruction a kernel path's linear layers and attention
// are built on, register-only (12 independent accumulators per thread, on every LibTorch
// intra-op thread), best of `runs` timed passes after one warm-up:
//   "avx2" (the avx2 path, and float32 on every CPU kernel path): 8-lane fp32 FMA, 8 MACs;
//   "avx512bf16" (bf16): vdpbf16ps on 16 lanes x 2 bf16 pairs, 32 MACs.
// Not measured (gmacs 0, `method` says why) on "amx", "aten" and GPU paths.
// gmacs_one_thread: the same loop on the calling thread alone, right after — with it a reader
// sees whether each thread got a whole core at full clock (on a shared VM they sometimes share one;
// some CPUs clock lower with every core busy).
struct ComputeResult {
  double gmacs = 0;  // 1e9 multiply-accumulates per second, all threads
  double gmacs_one_thread = 0;
  int threads = 0;
  std::string method;
};

ComputeResult measure_compute(const std::string& kernel_path, int runs = 5);

}  // namespace ears
