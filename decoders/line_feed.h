// Rows that a CPU kernel brings into L2 while it computes, a few cache lines at a time, paced by
// its own loops. Attention (decoders/layers.cpp) hands each attend_rows call the K and V rows of
// the run its thread takes next: a 16-sequence decode step reads 25 MiB of K and V in runs of 33
// KiB, one per (sequence, KV head), about as long to fetch as to compute. Issued in one burst
// before the run, the 516 prefetches waited behind each other for the core's fill buffers and the
// run's arithmetic waited behind them (fetch and compute added up: 4.1 us a run where each alone
// takes ~2); spread over the run's loops they overlap with its arithmetic. Over the loops of the
// run's first token only: spread over all six tokens of a verification run, the linears after
// attention ran slower and 6-token steps lost 2-4 % (docs/performance-log.md, thirty-second
// session). Plain C++ (no ISA): both kernel paths, cpu_avx2 and cpu_bf16, use it.
#pragma once

#include <cstdint>

namespace ears {

// `rows` rows of row_bytes bytes, ld_bytes apart: one KV head's keys (or values) of one sequence.
struct RowSpan {
  const void* base = nullptr;
  int64_t rows = 0, ld_bytes = 0, row_bytes = 0;
};

// The next attention run's keys and values (attend_rows' `next`; null: nothing to fetch).
struct NextKV {
  RowSpan k, v;
};

// The cache lines of a NextKV in order — keys, then values, row by row, 64 bytes apart within a
// row — one at a time: next() is the next line's address, null once every line was given.
class LineCursor {
 public:
  LineCursor() = default;
  explicit LineCursor(const NextKV& kv) : spans_{kv.k, kv.v} { start(0); }
  static int64_t lines(const RowSpan& s) { return s.base ? s.rows * ((s.row_bytes + 63) / 64) : 0; }
  const char* next() {
    if (!row_) return nullptr;
    const char* line = row_ + offset_;
    offset_ += 64;
    if (offset_ >= spans_[span_].row_bytes) {
      offset_ = 0;
      row_ += spans_[span_].ld_bytes;
      if (--rows_left_ == 0) start(span_ + 1);
    }
    return line;
  }

 private:
  // At span i's first line, or past the last span (row_ null).
  void start(int i) {
    for (span_ = i; span_ < 2; ++span_)
      if (lines(spans_[span_]) > 0) {
        row_ = static_cast<const char*>(spans_[span_].base);
        rows_left_ = spans_[span_].rows;
        offset_ = 0;
        return;
      }
    row_ = nullptr;
  }
  RowSpan spans_[2];
  int span_ = 2;
  const char* row_ = nullptr;
  int64_t rows_left_ = 0, offset_ = 0;
};

// Prefetches every line of `kv` into L2 at once (a chunk's first run: nothing to overlap with).
inline void prefetch_all(const NextKV& kv) {
  LineCursor lines(kv);
  for (const char* line = lines.next(); line; line = lines.next()) __builtin_prefetch(line, 0, 2);
}

// The lines of a NextKV, issued into L2 (prefetcht1) in step with a kernel's loops: built with the
// number of steps the kernel will take, step(n) after n of them issues the lines they pay for
// (lines x steps done / all steps, in 1/65536ths of a line); finish() issues whatever is left.
// Loops of a few cycles per key step it once per kFeedKeys keys: stepped every key, GCC kept the
// credit in memory, a store-to-load chain through the loop.
constexpr int64_t kFeedKeys = 8;

class LineFeed {
 public:
  LineFeed() = default;  // issues nothing
  LineFeed(const NextKV* next, int64_t steps) {
    if (!next || steps <= 0) return;
    cursor_ = LineCursor(*next);
    const int64_t lines = LineCursor::lines(next->k) + LineCursor::lines(next->v);
    rate_ = (lines * kOne + steps - 1) / steps;
  }
  void step(int64_t n = 1) {
    credit_ += n * rate_;
    while (credit_ >= kOne && issue()) credit_ -= kOne;
  }
  void finish() {
    while (issue()) {
    }
  }
  int64_t issued() const { return issued_; }

 private:
  static constexpr int64_t kOne = int64_t{1} << 16;
  bool issue() {
    const char* line = cursor_.next();
    if (!line) return false;
    __builtin_prefetch(line, 0, 2);
    ++issued_;
    return true;
  }
  LineCursor cursor_;
  int64_t rate_ = 0, credit_ = 0, issued_ = 0;
};

}  // namespace ears
