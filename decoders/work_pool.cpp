// The CPU kernels' parallel loop (work_pool.h).
//
// One loop at a time. The caller publishes it under a new generation g in `state` = g << 32 | the next
// unclaimed index (relative to begin); a claim is a compare-and-swap that moves the index. Before it
// writes a loop's fields the caller closes the state under the loop's new generation (g << 32 |
// kClosed), so a thread that read a previous loop's fields cannot claim with them: its
// compare-and-swap expects the old state and fails.
// `done` counts finished indices; the caller returns when it reaches n, so only chunks actually
// claimed are waited for. Workers sleep on their own futex word (their slot's `wake`, set to the
// generation that needs them), woken only when they said they were sleeping. All atomics are
// sequentially consistent: the caller's "store wake, load sleeping" and a worker's "store sleeping,
// load wake" cannot both miss each other.
#include "decoders/work_pool.h"

#include <linux/futex.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace ears::work_pool {
namespace {

constexpr uint32_t kClosed = 0xffffffffu;
constexpr int kMaxWorkers = 255;

inline void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// Checks done() up to `pauses` times, a `pause` apart (libgomp's spin); true when it held.
template <class Done>
bool spin_until(const Done& done, int64_t pauses) {
  for (int64_t i = 0; i < pauses; ++i) {
    if (done()) return true;
    cpu_pause();
  }
  return done();
}

struct alignas(64) Slot {
  std::atomic<uint32_t> wake{0};  // the generation this worker was last asked to help with
  std::atomic<bool> sleeping{false};
};

struct Pool {
  std::mutex busy;  // held by the caller of the running loop
  uint32_t generation = 0;  // under busy
  int started = 0;          // under busy
  alignas(64) std::atomic<uint64_t> state{uint64_t{kClosed}};
  alignas(64) std::atomic<int64_t> done{0};
  // The loop of the current generation, written while the state is closed (a line of its own: the
  // workers' adds to `done` do not evict it from the claimers' caches).
  alignas(64) std::atomic<ChunkFn> fn{nullptr};
  std::atomic<const void*> ctx{nullptr};
  std::atomic<int64_t> begin{0}, n{0}, chunk{1};
  std::atomic<int> threads{1};
  alignas(64) std::atomic<int> warm{0};  // live Warm scopes
  std::atomic<int64_t> contended{0};      // warm waits a slow yield ended
  std::array<Slot, kMaxWorkers> slots;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: workers may still wait on it while the process exits
  return *p;
}

thread_local bool in_loop = false;  // a chunk's thread (a worker, or a caller inside its loop)

// Claims and runs chunks of the loop in `state` until none is left; `w` is the worker's slot (-1: the
// caller). A worker beyond the loop's thread count (woken for an earlier, wider loop) leaves it.
void help(Pool& p, int w) {
  uint64_t s = p.state.load();
  for (;;) {
    const uint32_t next = static_cast<uint32_t>(s);
    if (next == kClosed) return;
    const int64_t n = p.n.load(), chunk = p.chunk.load(), begin = p.begin.load();
    const int threads = p.threads.load();
    const ChunkFn fn = p.fn.load();
    const void* ctx = p.ctx.load();
    if (next >= n || w >= threads - 1) return;
    const int64_t size = std::min<int64_t>(chunk, n - next);
    if (!p.state.compare_exchange_weak(s, s + static_cast<uint64_t>(size))) continue;  // s reloaded
    fn(ctx, begin + next, begin + next + size);
    p.done.fetch_add(size);
    s = p.state.load();
  }
}

// After its spin, a worker keeps checking while a Warm is alive (not under a spin of 0), yielding its
// CPU between checks: LibTorch's OpenMP worker (ATen's parallel ops: a prefill's attention) or another
// process gets it at once (pausing instead, a prefill ran 30-50 % slower). A yield that took longer
// than kContendedYield — a busy process's time slice, not a brief wake of one of this process's
// threads — means the CPU is shared; the worker then sleeps as without a Warm, since there it would
// claim chunks and be preempted holding them (`yes` on one of 2 vCPUs, --threads 2: the bundled
// pair's T = 0 EAGLE-3 run 2012-2145 -> 1565-1907 tok/s without this check). True when woken meanwhile.
constexpr auto kContendedYield = std::chrono::microseconds(500);
template <class Done>
bool spin_while_warm(Pool& p, const Done& done, int64_t spin) {
  if (spin == 0) return false;
  while (p.warm.load() > 0) {
    if (done()) return true;
    const auto before = std::chrono::steady_clock::now();
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() - before > kContendedYield) {
      p.contended.fetch_add(1);
      break;
    }
  }
  return done();
}

void worker(Pool& p, int w) {
  in_loop = true;
  Slot& slot = p.slots[w];
  const int64_t spin = spin_pauses();
  // 0, not slot.wake's value now: the caller that started this worker may have published its loop
  // (generations count from 1) before the thread ran, and that loop needs it.
  uint32_t seen = 0;
  for (;;) {
    const auto woken = [&] { return slot.wake.load() != seen; };
    if (!spin_until(woken, spin) && !spin_while_warm(p, woken, spin)) {
      slot.sleeping.store(true);
      while (slot.wake.load() == seen) futex_wait(&slot.wake, seen);
      slot.sleeping.store(false);
    }
    seen = slot.wake.load();
    help(p, w);
  }
}

void start_workers(Pool& p, int count) {
  for (; p.started < count; ++p.started) {
    const int w = p.started;
    std::thread([&p, w] { worker(p, w); }).detach();
  }
}

}  // namespace

int64_t spin_pauses(const char* policy, const char* count) {
  if (count != nullptr && *count != '\0') {  // libgomp: a valid GOMP_SPINCOUNT wins over the policy
    if (strcasecmp(count, "infinite") == 0 || strcasecmp(count, "infinity") == 0) return kSpinForever;
    char* end = nullptr;
    const long long n = std::strtoll(count, &end, 10);
    if (*end == '\0' && n >= 0) return n;
  }
  if (policy != nullptr && strcasecmp(policy, "passive") == 0) return 0;
  if (policy != nullptr && strcasecmp(policy, "active") == 0) return kSpinForever;
  return kGompDefaultSpins;
}

int64_t spin_pauses() {
  static const int64_t pauses = spin_pauses(std::getenv("OMP_WAIT_POLICY"), std::getenv("GOMP_SPINCOUNT"));
  return pauses;
}

int workers_started() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.busy);
  return p.started;
}

int workers_sleeping() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.busy);
  int n = 0;
  for (int w = 0; w < p.started; ++w) n += p.slots[w].sleeping.load() ? 1 : 0;
  return n;
}

int64_t warm_waits_contended() { return pool().contended.load(); }

Warm::Warm() { pool().warm.fetch_add(1); }
Warm::~Warm() { pool().warm.fetch_sub(1); }

void run(int threads, int64_t begin, int64_t end, int64_t grain, ChunkFn fn, const void* ctx) {
  Pool& p = pool();
  const int64_t n = end - begin;
  if (in_loop || n >= int64_t{kClosed} || !p.busy.try_lock()) return fn(ctx, begin, end);
  std::lock_guard<std::mutex> lock(p.busy, std::adopt_lock);
  if (threads > kMaxWorkers + 1) threads = kMaxWorkers + 1;
  start_workers(p, threads - 1);
  in_loop = true;
  const uint64_t g = ++p.generation;
  p.state.store(g << 32 | kClosed);
  p.fn.store(fn);
  p.ctx.store(ctx);
  p.begin.store(begin);
  p.n.store(n);
  p.chunk.store(even_chunk(n, threads, grain));
  p.threads.store(threads);
  p.done.store(0);
  p.state.store(g << 32);
  for (int w = 0; w < threads - 1; ++w) {
    p.slots[w].wake.store(static_cast<uint32_t>(g));
    if (p.slots[w].sleeping.load()) futex_wake(&p.slots[w].wake);
  }
  help(p, -1);
  // Only chunks a worker has claimed are left: wait for them, spinning, then yielding the CPU (the
  // worker may be waiting for this one).
  const auto finished = [&] { return p.done.load() >= n; };
  if (!spin_until(finished, spin_pauses()))
    while (!finished()) std::this_thread::yield();
  in_loop = false;
}

}  // namespace ears::work_pool
