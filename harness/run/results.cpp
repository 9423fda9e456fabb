#include "harness/run/results.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "datasets/dataset.h"
#include "datasets/scoring.h"
#include "decoders/engine.h"
#include "harness/base/error.h"
#include "harness/base/files.h"
#include "reports/report.h"

namespace ears::runner {

namespace fs = std::filesystem;
using json = nlohmann::json;

RequestResult make_request_result(const GenResult& g, const std::string& run_id, const std::string& arm,
                                  const Request& request, int repeat, uint64_t seed, int gamma,
                                  const std::string& scorer) {
  RequestResult r;
  r.run_id = run_id;
  r.arm = arm;
  r.request_id = request.id;
  r.repeat = repeat;
  r.seed = seed;
  r.category = request.category;
  r.prompt_tokens = g.prompt_tokens;
  r.output_tokens = static_cast<int64_t>(g.ids.size());
  r.latency_s = g.latency_s;
  r.ttft_s = g.ttft_s;
  const GenStats& st = g.stats;
  r.prefill_s = st.prefill_s;
  r.draft_s = st.draft_s;
  r.verify_s = st.verify_s;
  r.other_s = st.other_s;
  r.gamma = gamma;
  r.steps = st.steps;
  r.drafted = st.drafted;
  r.accepted = st.accepted;
  r.corrections = st.corrections;
  r.bonus = st.bonus;
  r.pardoned = st.pardoned;
  r.accepted_per_position = st.accepted_per_position;
  r.accept_length_hist = st.accept_length_hist;
  int64_t judged = 0;
  static_assert(kUncertaintyDeciles == kUncertaintyBuckets, "the engine's buckets are the report's deciles");
  for (int d = 0; d < kUncertaintyDeciles; ++d) {
    r.drafted_by_uncertainty[d] = st.drafted_by_u[d];
    r.accepted_by_uncertainty[d] = st.accepted_by_u[d];
    r.pardoned_by_uncertainty[d] = st.pardoned_by_u[d];
    judged += st.drafted_by_u[d];
  }
  r.distortion_tv_sum = st.distortion_sum;
  r.distortion_positions = st.distortion_n;
  r.uncertainty_sum = st.uncertainty_sum;
  r.uncertainty_count = judged;
  r.text = g.text;
  r.output_ids.assign(g.ids.begin(), g.ids.end());
  r.error = g.error;
  if (r.ok() && scorer != "none" && !request.gold.empty()) {
    const Score s = score(scorer, g.text, request.gold);
    r.has_score = true;
    r.correct = s.strict;  // gsm8k: strict-match (lm-eval's first filter); qa: exact match
    r.strict_correct = s.strict;
    r.flexible_correct = s.flexible;
    r.em = s.em;
    r.f1 = s.f1;
  }
  return r;
}

std::size_t repair_jsonl_tail(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return 0;
  const std::string text = read_file(file);
  if (text.empty() || text.back() == '\n') return 0;
  const auto nl = text.rfind('\n');
  const std::size_t keep = nl == std::string::npos ? 0 : nl + 1;
  const std::string tail = text.substr(keep);
  if (json::accept(tail)) {  // complete, only the newline is missing
    std::ofstream out(file, std::ios::binary | std::ios::app);
    out << '\n';
    if (!out) fail("{}: cannot append ({})", file.string(), std::strerror(errno));
    return 0;
  }
  fs::resize_file(file, keep, ec);
  if (ec) fail("{}: cannot cut the truncated last line ({})", file.string(), ec.message());
  return text.size() - keep;
}

ResultsWriter::ResultsWriter(const fs::path& file) : file_(file) {
  fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot open for appending ({}); check the run directory is writable", file.string(), std::strerror(errno));
}

ResultsWriter::~ResultsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultsWriter::append(const std::string& line) {
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("{}: write failed ({}); check free disk space", file_.string(), std::strerror(errno));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void ResultsWriter::sync() {
  if (::fdatasync(fd_) != 0 && errno != EINVAL && errno != EROFS)
    fail("{}: fsync failed ({})", file_.string(), std::strerror(errno));
}

DoneSet read_done(const fs::path& file, const std::vector<std::string>& arm_names, std::vector<RequestResult>* results) {
  DoneSet done;
  if (!fs::exists(file)) return done;
  const std::set<std::string> names(arm_names.begin(), arm_names.end());
  std::vector<RequestResult> all = read_results_jsonl(file, false);
  for (const auto& r : all) {
    if (!names.count(r.arm))
      fail("{}: result of arm '{}' which the run's config.yaml does not declare; this is not the run directory of "
           "this config",
           file.string(), r.arm);
    done.insert(r.key());
  }
  if (results) *results = std::move(all);
  return done;
}

std::string report_summary(const std::string& md) {
  const auto results = md.find("## Results");
  if (results == std::string::npos) return md;
  const auto next = md.find("\n## ", results);
  return next == std::string::npos ? md : md.substr(0, next + 1);
}

}  // namespace ears::runner
