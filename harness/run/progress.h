// Progress display of `ears-bench run`, on stderr.
//   Tty   (stderr is a terminal): one status line rewritten in place
//         "  42/180 requests (23%) | 812.4 out tok/s | τ 2.31 | elapsed 12s | ETA 41s"
//   Log   (a file, a pipe, CI): a plain line whenever another ~10 % is done, or 30 s passed
//   Quiet (--quiet): nothing
// message() prints a line without garbling the status line.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace ears {

struct ProgressState {
  int64_t done = 0;         // requests finished, including those of earlier sessions (resume)
  int64_t total = 0;        // requests of the whole run
  int64_t done_now = 0;     // requests finished in this session (the ETA's rate)
  int64_t output_tokens = 0;  // this session
  int64_t emitted = 0;        // this session, speculative arms only (τ = emitted / steps)
  int64_t steps = 0;
  double elapsed_s = 0;       // this session, since start()
};

// "1h02m", "3m05s", "12s" (negative or NaN -> "?").
std::string format_duration(double seconds);
// The status text (no newline).
std::string progress_text(const ProgressState& s);

class Progress {
 public:
  enum class Mode { Tty, Log, Quiet };
  static Mode detect(bool quiet);  // Quiet if quiet, else Tty when isatty(stderr), else Log

  Progress(Mode mode, int64_t total, int64_t already_done, std::FILE* out = stderr);
  void start();  // starts the clock (after model loading / warmup)
  // One finished batch: `requests` results with these totals (emitted/steps of drafting arms).
  void add(int64_t requests, int64_t output_tokens, int64_t emitted, int64_t steps);
  void message(const std::string& line);
  void finish();  // final status; ends the Tty line
  const ProgressState& state() const { return s_; }

 private:
  void draw(bool force);
  Mode mode_;
  std::FILE* out_;
  ProgressState s_;
  double t0_ = 0;
  double last_log_t_ = 0;
  int64_t last_log_decile_ = -1;
  bool line_open_ = false;
};

}  // namespace ears
