// A run's results: one results.jsonl record per finished request (make_request_result), the
// file's append-only writer and its repair after a kill, what is already done (--resume), and the
// head of report.md printed at the end. The helpers are unit-tested (tests/runner_helpers_test.cpp).
#pragma once
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "reports/result.h"

namespace ears {

struct GenResult;
struct Request;
struct RequestResult;

namespace runner {

// One results.jsonl record from the engine's output: GenStats map onto the RequestResult
// counters (distortion_n -> distortion_positions, drafted_by_u -> drafted_by_uncertainty, ...;
// uncertainty_count = the positions bucketed), output_tokens = generated ids (a stop token
// included), and the text is scored with the dataset's scorer (correct = strict-match for gsm8k,
// exact match for qa). The uncertainty deciles count the positions the verifier judged.
RequestResult make_request_result(const GenResult& g, const std::string& run_id, const std::string& arm,
                                  const Request& request, int repeat, uint64_t seed, int gamma,
                                  const std::string& scorer);

// A killed writer may leave a last line without its '\n'. If that tail is a complete JSON value
// a '\n' is appended; otherwise the file is cut back to its last complete line. Returns the
// number of bytes removed (0 when nothing was cut). A missing file is left alone.
std::size_t repair_jsonl_tail(const std::filesystem::path& file);

// Appends lines to results.jsonl: each line is one write(2); sync() fsyncs the file.
class ResultsWriter {
 public:
  explicit ResultsWriter(const std::filesystem::path& file);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;
  void append(const std::string& line);  // line must end with '\n'
  void sync();

 private:
  std::filesystem::path file_;
  int fd_ = -1;
};

// The keys that have a result.
using DoneSet = std::set<ResultKey>;
// The results already in `file` (--resume; a missing file: none). A result of an arm not in
// `arm_names` is an ears::Error: the file belongs to another config. `results`, when given,
// receives them in file order.
DoneSet read_done(const std::filesystem::path& file, const std::vector<std::string>& arm_names,
                  std::vector<RequestResult>* results = nullptr);

// The head of report.md (title, partial warning, the "## Results" table and its notes): what
// run / report / merge print on stdout at the end.
std::string report_summary(const std::string& markdown);

}  // namespace runner
}  // namespace ears
