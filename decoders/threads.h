// The one rule for LibTorch thread counts (--threads, run.threads), torch-free so the config
// validator can share it:
//   0                        auto: every logical CPU (std::thread::hardware_concurrency)
//   1 .. 4 × logical CPUs    that many intra-op threads
//   anything else            ears::Error naming the flag or key and the allowed range (exit 2)
// (More threads than CPUs only makes OpenMP workers wait on each other; 10000 made LibTorch
// spawn 10000 workers and hang.) decoders/runtime.h's set_threads applies the result.
#pragma once
#include <algorithm>
#include <string>
#include <thread>

#include "harness/error.h"

namespace ears {

inline int logical_cpus() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }
inline int max_threads() { return 4 * logical_cpus(); }

// The thread count `requested` stands for (0 -> logical_cpus()); ears::Error naming `what`
// (e.g. "--threads", "run.threads") when it is outside [0, max_threads()].
inline int resolve_threads(long long requested, const std::string& what) {
  if (requested < 0 || requested > max_threads())
    fail("{}: {} is out of range; use 0 (auto: all {} logical CPUs) to {} (4 x the logical CPUs)", what, requested,
         logical_cpus(), max_threads());
  return requested == 0 ? logical_cpus() : static_cast<int>(requested);
}

}  // namespace ears
