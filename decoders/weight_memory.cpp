#include "decoders/weight_memory.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <mutex>

#include "harness/base/error.h"

namespace ears {
namespace weight_memory {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// Regions are at least this large: one per big linear, several small ones share one.
constexpr size_t kRegionBytes = size_t{64} << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// One anonymous mapping, 2 MiB-aligned (mapped 2 MiB larger, both ends trimmed); `purpose` names
// what it holds and the fix in the out-of-memory error.
struct Region {
  char* base = nullptr;
  size_t bytes = 0;
  Region(size_t want, const std::string& purpose) : bytes(round_up(want, kHugePage)) {
    void* p = ::mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail("cannot map {} MiB for {}", bytes >> 20, purpose);
    char* raw = static_cast<char*>(p);
    base = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(raw), kHugePage));
    if (base > raw) ::munmap(raw, static_cast<size_t>(base - raw));
    if (raw + kHugePage > base) ::munmap(base + bytes, static_cast<size_t>(raw + kHugePage - base));
#ifdef MADV_HUGEPAGE
    ::madvise(base, bytes, MADV_HUGEPAGE);  // advice: refused (THP never) means 4 KiB pages
#endif
  }
  ~Region() { ::munmap(base, bytes); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
};

struct Arena {
  std::mutex mu;
  std::shared_ptr<Region> current;
  size_t used = 0;
  std::atomic<int64_t> live{0};  // bytes held by tensors alive now
};
Arena& arena() {
  static Arena* a = new Arena;  // never destroyed: tensors may outlive static destruction
  return *a;
}

// The bracketed mode of /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never").
std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const auto a = line.find('['), b = line.find(']');
  return a == std::string::npos || b == std::string::npos || b < a ? "unknown" : line.substr(a + 1, b - a - 1);
}

// AnonHugePages of /proc/self/smaps_rollup, in bytes (0 when unreadable).
int64_t anon_huge_bytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string key;
  int64_t kb = 0;
  while (in >> key) {
    if (key == "AnonHugePages:") {
      in >> kb;
      return kb << 10;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

}  // namespace

at::Tensor empty(int64_t numel, c10::ScalarType dtype) {
  const size_t bytes = round_up(static_cast<size_t>(numel) * c10::elementSize(dtype), 64);
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mu);
  if (!a.current || a.used + bytes > a.current->bytes) {
    a.current = std::make_shared<Region>(
        std::max(bytes, kRegionBytes),
        "the packed weights (out of memory: free some, or load a smaller model or --dtype)");
    a.used = 0;
  }
  void* p = a.current->base + a.used;
  a.used += bytes;
  a.live += static_cast<int64_t>(bytes);
  std::shared_ptr<Region> keep = a.current;
  auto release = [keep, bytes](void*) { arena().live -= static_cast<int64_t>(bytes); };
  return at::from_blob(p, {numel}, release, at::TensorOptions().dtype(dtype));
}

at::Tensor empty_like_weights(int64_t numel, c10::ScalarType dtype, const std::string& purpose) {
  auto region = std::make_shared<Region>(static_cast<size_t>(numel) * c10::elementSize(dtype), purpose);
  void* p = region->base;
  return at::from_blob(p, {numel}, [region](void*) {}, at::TensorOptions().dtype(dtype));
}

std::string pages_summary() {
  const std::string mode = thp_mode();
  const int64_t carved = arena().live;
  if (carved == 0) return "";
  const int64_t huge = std::min(anon_huge_bytes(), carved);
  if (huge == 0) return fmt::format("4 KiB pages: {} MiB (THP {})", carved >> 20, mode);
  return fmt::format("2 MiB pages: {} of {} MiB (THP {})", huge >> 20, carved >> 20, mode);
}

}  // namespace weight_memory
}  // namespace ears
