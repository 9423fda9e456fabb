#include "harness/run/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>

namespace ears {
namespace {

double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string progress_text(const ProgressState& s) {
  const double pct = s.total > 0 ? 100.0 * static_cast<double>(s.done) / static_cast<double>(s.total) : 100.0;
  std::string t = fmt::format("{}/{} requests ({:.0f}%)", s.done, s.total, std::floor(pct));
  if (s.elapsed_s > 0 && s.output_tokens > 0)
    t += fmt::format(" | {:.1f} out tok/s", static_cast<double>(s.output_tokens) / s.elapsed_s);
  if (s.steps > 0) t += fmt::format(" | τ {:.2f}", static_cast<double>(s.emitted) / static_cast<double>(s.steps));
  t += fmt::format(" | elapsed {}", format_duration(s.elapsed_s));
  const int64_t left = s.total - s.done;
  if (left > 0 && s.done_now > 0)
    t += fmt::format(" | ETA {}", format_duration(s.elapsed_s / static_cast<double>(s.done_now) * static_cast<double>(left)));
  return t;
}

Progress::Mode Progress::detect(bool quiet) {
  if (quiet) return Mode::Quiet;
  return ::isatty(STDERR_FILENO) ? Mode::Tty : Mode::Log;
}

Progress::Progress(Mode mode, int64_t total, int64_t already_done, std::FILE* out) : mode_(mode), out_(out) {
  s_.total = total;
  s_.done = already_done;
}

void Progress::start() {
  t0_ = wall_now();
  last_log_t_ = t0_;
  last_log_decile_ = s_.total > 0 ? s_.done * 10 / s_.total : 10;
  draw(true);
}

void Progress::add(int64_t requests, int64_t output_tokens, int64_t emitted, int64_t steps) {
  s_.done += requests;
  s_.done_now += requests;
  s_.output_tokens += output_tokens;
  s_.emitted += emitted;
  s_.steps += steps;
  draw(false);
}

void Progress::draw(bool force) {
  if (mode_ == Mode::Quiet) return;
  const double now = wall_now();
  s_.elapsed_s = now - t0_;
  if (mode_ == Mode::Tty) {
    fmt::print(out_, "\r\033[K{}", progress_text(s_));
    std::fflush(out_);
    line_open_ = true;
    return;
  }
  const int64_t decile = s_.total > 0 ? s_.done * 10 / s_.total : 10;
  if (force || decile > last_log_decile_ || now - last_log_t_ >= 30) {
    fmt::print(out_, "[ears-bench] {}\n", progress_text(s_));
    std::fflush(out_);
    last_log_decile_ = decile;
    last_log_t_ = now;
  }
}

void Progress::message(const std::string& line) {
  if (mode_ == Mode::Quiet) return;
  if (line_open_) fmt::print(out_, "\r\033[K");
  fmt::print(out_, "{}\n", line);
  line_open_ = false;
  if (mode_ == Mode::Tty && t0_ > 0) draw(true);
  std::fflush(out_);
}

void Progress::finish() {
  if (mode_ == Mode::Quiet) return;
  s_.elapsed_s = wall_now() - t0_;
  if (mode_ == Mode::Tty) {
    fmt::print(out_, "\r\033[K{}\n", progress_text(s_));
    line_open_ = false;
  } else if (last_log_decile_ < 10 || s_.done_now == 0) {
    fmt::print(out_, "[ears-bench] {}\n", progress_text(s_));
  }
  std::fflush(out_);
}

}  // namespace ears
