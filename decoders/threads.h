// The one rule for LibTorch thread counts (--threads, run.threads), torch-free so the config
// validator can share it:
//   0                        auto: the logical CPUs idle at start-up (idle_cpus(), at least 1)
//   1 .. 4 × logical CPUs    that many intra-op threads
//   anything else            ears::Error naming the flag or key and the allowed range (exit 2)
// (More threads than CPUs only makes OpenMP workers wait on each other; 10000 made LibTorch
// spawn 10000 workers and hang.) decoders/runtime.h's set_threads applies the result.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <string>
#include <thread>

#include "harness/base/error.h"

namespace ears {

inline int logical_cpus() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }
inline int max_threads() { return 4 * logical_cpus(); }

// CPU time counters of /proc/stat's "cpu" line: {idle + iowait, total}; {0, 0} when unreadable.
inline std::pair<long long, long long> cpu_times() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  long long v[8] = {};
  if (!(in >> cpu) || cpu != "cpu") return {0, 0};
  for (long long& x : v) in >> x;  // user nice system idle iowait irq softirq steal
  long long total = 0;
  for (long long x : v) total += x;
  return {v[3] + v[4], total};
}

// Logical CPUs not used by other processes: the idle share of all CPUs over 50 ms, measured once
// per process (the first auto thread count), rounded, at least 1. OpenMP threads beyond the idle
// CPUs wait on descheduled peers at every parallel region: with `yes` holding one of 2 vCPUs, a
// 100M decode took 14.5 ms on 2 threads against 11.3 on 1 (and ~80 ms with spinning workers).
inline int idle_cpus() {
  static const int idle = [] {
    const int n = logical_cpus();
    if (n == 1) return 1;
    const auto a = cpu_times();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto b = cpu_times();
    const long long total = b.second - a.second;
    if (a.second == 0 || total <= 0) return n;
    const double idle_share = static_cast<double>(b.first - a.first) / static_cast<double>(total);
    return std::clamp(static_cast<int>(std::lround(idle_share * n)), 1, n);
  }();
  return idle;
}

// ears::Error naming `what` (e.g. "--threads", "run.threads") when `requested` is outside
// [0, max_threads()]. Validation only: no sampling of the machine.
inline void check_threads(long long requested, const std::string& what) {
  if (requested < 0 || requested > max_threads())
    fail("{}: {} is out of range; use 0 (auto: the idle ones of the {} logical CPUs) to {} (4 x the logical CPUs)",
         what, requested, logical_cpus(), max_threads());
}

// The thread count `requested` stands for (0 -> idle_cpus()), after check_threads.
inline int resolve_threads(long long requested, const std::string& what) {
  check_threads(requested, what);
  return requested == 0 ? idle_cpus() : static_cast<int>(requested);
}

}  // namespace ears
