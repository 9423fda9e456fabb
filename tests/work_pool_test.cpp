// decoders/work_pool.h: every index exactly once, the guided claim sizes, workers that really help,
// serial fallbacks (a nested loop, a second caller), the wait policy's spin and Warm scopes.
#include "decoders/work_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

namespace ears::work_pool {
namespace {

// Counts how often each index of [begin, end) was visited; checks the chunks are inside the range.
struct Visits {
  int64_t begin, end;
  std::vector<std::atomic<int>> count;
  std::atomic<int> bad_chunks{0};
  Visits(int64_t b, int64_t e) : begin(b), end(e), count(static_cast<size_t>(e - b)) {}
  void operator()(int64_t i0, int64_t i1) {
    if (i0 < begin || i1 > end || i0 >= i1) ++bad_chunks;
    for (int64_t i = std::max(i0, begin); i < std::min(i1, end); ++i) ++count[static_cast<size_t>(i - begin)];
  }
  bool each_once() const {
    for (const auto& c : count)
      if (c.load() != 1) return false;
    return bad_chunks.load() == 0;
  }
};

TEST(WorkPool, EveryIndexExactlyOnceOverManyLoops) {
  for (int threads : {2, 3, 4}) {
    for (int64_t n : {1, 2, 3, 7, 64, 65, 1000, 4097}) {
      for (int64_t grain : {1, 3, 16}) {
        for (int rep = 0; rep < 20; ++rep) {
          Visits v(100, 100 + n);
          parallel_for(threads, v.begin, v.end, grain, [&](int64_t i0, int64_t i1) { v(i0, i1); });
          ASSERT_TRUE(v.each_once()) << "threads " << threads << " n " << n << " grain " << grain << " rep " << rep;
        }
      }
    }
  }
}

TEST(WorkPool, ChunksAreAtParallelForsEvenSplit) {
  // min(threads, ceil(n / grain)) tasks of ceil(n / tasks) indices.
  EXPECT_EQ(even_chunk(100, 2, 1), 50);
  EXPECT_EQ(even_chunk(101, 2, 1), 51);
  EXPECT_EQ(even_chunk(8, 2, 5), 4);    // 2 tasks of 4, below the grain (as at::parallel_for)
  EXPECT_EQ(even_chunk(48, 4, 16), 16);  // ceil(48 / 16) = 3 tasks
  EXPECT_EQ(even_chunk(3, 4, 1), 1);
  EXPECT_EQ(even_chunk(17, 2, 100), 17);  // one task
}

// The threads that ran a 2-thread loop (two chunks) whose chunks each wait for the other to be
// entered: one thread cannot run both, whichever claims first (a worker already spinning can claim
// before the caller does).
std::set<std::thread::id> two_thread_loop() {
  std::mutex m;
  std::set<std::thread::id> ids;
  std::atomic<int> entered{0};
  parallel_for(2, 0, 64, 1, [&](int64_t, int64_t) {
    ++entered;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (entered.load() < 2 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  return ids;
}

// A 2-thread loop runs on two threads: the pool's worker really takes a chunk. Each chunk waits (up
// to 20 s, however loaded the machine) for the other to be entered, so the test does not depend on how
// fast a worker starts; a pool whose workers never claim fails it after the wait.
TEST(WorkPool, TheWorkerTakesChunks) {
  EXPECT_EQ(two_thread_loop().size(), 2u);
  EXPECT_GE(workers_started(), 1);
}

// Polls cond every millisecond up to `limit`; true when it held.
template <class Cond>
bool within(std::chrono::milliseconds limit, const Cond& cond) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// After its spin an idle worker sleeps — unless a Warm is alive, when it keeps spinning until the
// last Warm ends. The worker is seen asleep first, and how long that took (its spin) sets how long
// it must then stay awake under a Warm: 20 x that, at least 200 ms.
TEST(WorkPool, WarmKeepsIdleWorkersSpinningUntilItEnds) {
  const int64_t spin = spin_pauses();
  if (spin == kSpinForever) GTEST_SKIP() << "the wait policy spins forever: workers never sleep";
  ASSERT_EQ(two_thread_loop().size(), 2u);
  const auto all_asleep = [] { return workers_sleeping() == workers_started(); };
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(within(std::chrono::seconds(20), all_asleep)) << "the idle worker never slept";
  const auto to_sleep = std::chrono::steady_clock::now() - t0;
  {
    const Warm warm;
    const int64_t contended = warm_waits_contended();
    ASSERT_EQ(two_thread_loop().size(), 2u);  // worker 0 ran a chunk; the others (if any) sleep on
    const auto hold = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::max<std::chrono::steady_clock::duration>(20 * to_sleep, std::chrono::milliseconds(200)));
    const bool slept = within(hold, all_asleep);
    if (spin == 0) {
      EXPECT_TRUE(slept) << "OMP_WAIT_POLICY=PASSIVE (spin 0): workers sleep at once, warm or not";
    } else {  // worker 0 may sleep only if its CPU proved shared (ctest -j2, a loaded machine)
      EXPECT_TRUE(!slept || warm_waits_contended() > contended) << "an idle worker slept while a Warm was alive";
    }
  }
  EXPECT_TRUE(within(std::chrono::seconds(20), all_asleep)) << "the worker kept spinning after the Warm ended";
}

TEST(WorkPool, OneThreadOrOneGrainRunsInlineOnTheCaller) {
  const auto caller = std::this_thread::get_id();
  for (auto [t, size, g] : {std::tuple{1, 100, 1}, std::tuple{4, 16, 16}, std::tuple{4, 16, 100}}) {
    const int threads = t, n = size, grain = g;  // named copies: lambdas cannot capture bindings (clang 14)
    int calls = 0;
    bool same_thread = true;
    parallel_for(threads, 0, n, grain, [&](int64_t i0, int64_t i1) {
      ++calls;
      same_thread = same_thread && std::this_thread::get_id() == caller && i0 == 0 && i1 == n;
    });
    EXPECT_EQ(calls, 1);
    EXPECT_TRUE(same_thread);
  }
  int calls = 0;
  parallel_for(4, 5, 5, 1, [&](int64_t, int64_t) { ++calls; });  // empty range
  EXPECT_EQ(calls, 0);
}

// A loop started inside a chunk runs serially on that chunk's thread (no deadlock, each index once).
TEST(WorkPool, NestedLoopsRunSeriallyInsideAChunk) {
  Visits outer(0, 32);
  std::vector<std::atomic<int>> inner(32 * 16);
  parallel_for(2, 0, 32, 1, [&](int64_t i0, int64_t i1) {
    outer(i0, i1);
    for (int64_t i = i0; i < i1; ++i)
      parallel_for(2, 0, 16, 1, [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) ++inner[static_cast<size_t>(i * 16 + j)];
      });
  });
  EXPECT_TRUE(outer.each_once());
  for (const auto& c : inner) ASSERT_EQ(c.load(), 1);
}

// Two callers at once: one gets the pool, the other runs its loop serially; both complete exactly.
TEST(WorkPool, ConcurrentCallersBothComplete) {
  std::vector<std::thread> callers;
  std::vector<std::unique_ptr<Visits>> visits;
  for (int c = 0; c < 3; ++c) visits.push_back(std::make_unique<Visits>(0, 5000));
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 50; ++rep) {
        Visits v(0, 777);
        parallel_for(2, 0, 777, 2, [&](int64_t i0, int64_t i1) { v(i0, i1); });
        if (!v.each_once()) ++visits[c]->bad_chunks;
      }
      parallel_for(2, 0, 5000, 8, [&](int64_t i0, int64_t i1) { (*visits[c])(i0, i1); });
    });
  for (auto& t : callers) t.join();
  for (const auto& v : visits) EXPECT_TRUE(v->each_once());
}

TEST(WorkPool, SpinFollowsTheWaitPolicyAsLibgomp) {
  EXPECT_EQ(spin_pauses(nullptr, nullptr), kGompDefaultSpins);
  EXPECT_EQ(spin_pauses(nullptr, "3000"), 3000);  // ears-bench's own GOMP_SPINCOUNT
  EXPECT_EQ(spin_pauses("PASSIVE", nullptr), 0);
  EXPECT_EQ(spin_pauses("passive", "3000"), 3000);  // libgomp: a count wins over the policy
  EXPECT_EQ(spin_pauses(nullptr, "0"), 0);
  EXPECT_EQ(spin_pauses("ACTIVE", nullptr), kSpinForever);
  EXPECT_EQ(spin_pauses("active", "3000"), 3000);
  EXPECT_EQ(spin_pauses(nullptr, "infinite"), kSpinForever);
  EXPECT_EQ(spin_pauses(nullptr, "12abc"), kGompDefaultSpins);  // not a count: as unset
  EXPECT_EQ(spin_pauses("PASSIVE", "-5"), 0);
  EXPECT_EQ(spin_pauses("bogus", ""), kGompDefaultSpins);
}

}  // namespace
}  // namespace ears::work_pool
