// The CPU kernels' parallel loop (decoders/layers.cpp: linears, attention, row ops), torch-free.
//
// parallel_for(threads, begin, end, grain, f) cuts [begin, end) into the chunks of at::parallel_for's
// even split (even_chunk), which the calling thread and up to threads - 1 pool workers claim from one
// shared counter. The call returns once every chunk is done. It never waits for a thread that has
// not started: a worker still waking from its sleep, or on a vCPU the host has taken away, finds
// nothing left and goes back to waiting, while the caller has computed its share. (at::parallel_for's
// OpenMP region gives each thread one fixed share and joins them all: the caller waits for the
// slowest thread to wake and finish its half.)
//
// Every index in [begin, end) is passed to f exactly once; f(i0, i1) must not throw, and its result
// must not depend on which thread runs it or on how the range was cut (the kernels' outputs are per
// column block / per attention run). A call made from inside a chunk, or from a second thread while a
// loop runs, runs serially on its own thread.
//
// Idle workers spin, then sleep on a futex, under the same wait policy as LibTorch's OpenMP workers
// and in the same unit: spin_pauses() checks of the flag, one `pause` apart, as libgomp counts
// GOMP_SPINCOUNT (ears-bench sets 3000, harness/run/environment.h; a user's OMP_WAIT_POLICY or
// GOMP_SPINCOUNT is followed). A caller waiting for a worker's last chunk spins as long, then yields.
// Through a request's decode (Warm, below) they stay awake after the spin instead.
#pragma once
#include <cstdint>

namespace ears::work_pool {

inline constexpr int64_t kGompDefaultSpins = 300000;  // libgomp's count with both unset
inline constexpr int64_t kSpinForever = INT64_MAX;

// The spin for the given OMP_WAIT_POLICY / GOMP_SPINCOUNT values (null: unset), as libgomp reads
// them: a GOMP_SPINCOUNT of digits is the count ("infinite" / "infinity": forever), whatever the
// policy; else PASSIVE 0, ACTIVE forever, unset kGompDefaultSpins. spin_pauses() applies it to the
// environment, read once.
int64_t spin_pauses(const char* omp_wait_policy, const char* gomp_spincount);
int64_t spin_pauses();

using ChunkFn = void (*)(const void* ctx, int64_t i0, int64_t i1);

// The untyped loop behind parallel_for: n = end - begin > grain >= 1, threads >= 2.
void run(int threads, int64_t begin, int64_t end, int64_t grain, ChunkFn fn, const void* ctx);

// The chunk of a loop of n indices: at::parallel_for's even split, ceil(n / tasks) indices for
// tasks = min(threads, ceil(n / grain)). With every thread on time each takes one chunk (a decode's
// weight streams stay whole, a kernel's per-call setup is paid once per thread); a chunk no thread
// has claimed when the caller finishes its own is the caller's.
inline int64_t even_chunk(int64_t n, int threads, int64_t grain) {
  const int64_t by_grain = (n + grain - 1) / grain;
  const int64_t tasks = by_grain < threads ? by_grain : threads;
  return (n + tasks - 1) / tasks;
}

template <class F>
void parallel_for(int threads, int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (grain < 1) grain = 1;
  if (end <= begin) return;
  if (threads <= 1 || end - begin <= grain) return f(begin, end);
  run(threads, begin, end, grain, [](const void* c, int64_t i0, int64_t i1) { (*static_cast<const F*>(c))(i0, i1); },
      &f);
}

// Workers started so far (they start on the first loop that needs them and live until exit).
int workers_started();
// Started workers asleep on their futex now, and how many warm waits (Warm below) ended on a
// contended CPU so far (for tests).
int workers_sleeping();
int64_t warm_waits_contended();

// While a Warm is alive (a request's decode: Engine::generate; bench's timed forwards), idle
// workers that have spun spin_pauses() stay awake, yielding their CPU between checks, instead of
// sleeping; once none is alive, or when their CPU turns out to be shared with a busy thread, they
// sleep as before. A decode's loops that fork are tens of microseconds apart on a small model (a
// layer's serial work between its MLP and the next layer's), so with the spin alone the worker
// slept between layers and the next fork's share fell to the caller: the bundled 5.3M target's
// target-only T = 0 decode 1516-1736 -> 1677-1971 tok/s on `amx` (Intel Xeon; docs/performance-log.md,
// thirty-fifth session). A spin of 0 (OMP_WAIT_POLICY=PASSIVE) is kept: workers then sleep at once,
// warm or not. Nestable, any thread.
class Warm {
 public:
  Warm();
  ~Warm();
  Warm(const Warm&) = delete;
  Warm& operator=(const Warm&) = delete;
};

}  // namespace ears::work_pool
