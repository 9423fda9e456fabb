// The experiment runner behind `ears-bench run` (and the helpers of validate / report / merge /
// gate). run_experiment() loads an ExperimentSpec, the models (once per distinct target + draft),
// the dataset, and decodes every (arm, request, repeat) with paired seeds, writing a run
// directory:
//
//   config.yaml     the fully resolved experiment (config::to_yaml); --resume reads it back
//   run_meta.json   written at the start (complete: false), after every batch (wall times) and
//                   at the end (complete: true unless interrupted); reports/report.h
//   results.jsonl   one RequestResult per finished request, appended and fsync'ed per batch
//   report.json, report.md, accept_length.svg [, sweep.svg]   at the end (partial if stopped)
//   gate.json       when the experiment has gates
//
// Paired design: every arm decodes the same prompts with GenRequest{run_seed = the arm's
// decoding.seed, key = "<request id>#<repeat>"}, so a request's random stream never depends on
// the arm, the batch it lands in or the order. Order "interleaved": the requests are cut into
// groups of max(batch_size over arms); for each group every arm runs in turn, the arm order
// rotated by one each group. Order "random": the (arm, group) units of every repeat are shuffled
// with a PRNG seeded by decoding.seed.
//
// The pure helpers below are torch-free and unit-tested (tests/runner_test.cpp).
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "reports/gate.h"

namespace ears {

struct Report;
struct GenResult;
struct Request;
struct RequestResult;

namespace runner {

inline constexpr const char* kVersion = "0.1";
inline constexpr const char* kConfigFile = "config.yaml";

// ---- `ears-bench run` ----------------------------------------------------------------------

struct RunOptions {
  std::string config_file;             // empty with resume_dir
  std::vector<std::string> overrides;  // --set key.path=value
  std::string out_dir;                 // --out
  std::string resume_dir;              // --resume DIR
  std::string shard;                   // --shard i/N ("" = all requests)
  int64_t limit = 0;                   // --limit N (0 = the config's dataset.limit)
  std::optional<int> threads;          // --threads N (unset: the config's run.threads; 0 = auto, decoders/threads.h)
  bool quiet = false;                  // --quiet: no progress, no report table
  bool force = false;                  // --force (with --resume): continue although the config, models or
                                       // dataset changed; recorded in environment.forced and the report
};

// Runs (or resumes) an experiment; returns the process exit code: 0 finished, 130 / 143 when
// stopped by SIGINT / SIGTERM (after the in-flight batch; the report is then partial).
// User errors are ears::Error (exit code 2).
int run_experiment(const RunOptions& options);

// `ears-bench validate`: prints the resolved YAML to stdout, then checks that the target and
// every arm's draft checkpoint exist (config.json inside), that the target has a tokenizer.json,
// and that the dataset loads. Returns 0, or throws ears::Error (exit 2) naming what is missing.
int validate_experiment(const std::string& config_file, const std::vector<std::string>& overrides);

// ---- pure helpers ----------------------------------------------------------------------------

// One results.jsonl record from the engine's output: GenStats map onto the RequestResult
// counters (distortion_n -> distortion_positions, drafted_by_u -> drafted_by_uncertainty, ...;
// uncertainty_count = the positions bucketed), output_tokens = generated ids (a stop token
// included), and the text is scored with the dataset's scorer (correct = strict-match for gsm8k,
// exact match for qa). The uncertainty deciles count the positions the verifier judged.
RequestResult make_request_result(const GenResult& g, const std::string& run_id, const std::string& arm,
                                  const Request& request, int repeat, uint64_t seed, int gamma,
                                  const std::string& scorer);

struct Shard {
  int index = 0;
  int count = 1;
  bool active() const { return count > 1; }
  bool contains(std::size_t request_index) const { return static_cast<int>(request_index % count) == index; }
  std::string str() const;  // "i/N"
};
// "i/N" with 0 <= i < N; anything else is an ears::Error naming --shard.
Shard parse_shard(const std::string& text);

// "<name>-YYYYmmdd-HHMMSS" (local time).
std::string timestamped_name(const std::string& name, std::time_t t);
// The per-request generator key shared by all arms: "<request id>#<repeat>".
std::string request_key(const std::string& request_id, int repeat);

// One unit of work: one arm over one group of requests (indices into the selected requests).
struct WorkUnit {
  std::size_t arm = 0;
  int repeat = 0;
  std::size_t group = 0;
  std::vector<std::size_t> requests;
  bool operator==(const WorkUnit&) const = default;
};
// The run order (see the top of this file). order: "interleaved" | "random".
std::vector<WorkUnit> plan_units(std::size_t n_arms, std::size_t n_requests, std::size_t group_size, int repeats,
                                 const std::string& order, uint64_t seed);

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

// The head of report.md (title, partial warning, the "## Results" table and its notes): what
// run / report / merge print on stdout at the end.
std::string report_summary(const std::string& markdown);

// Facts about this machine and build for report.environment.
std::string git_commit();  // `git rev-parse --short HEAD` of the source dir, else "unknown"
std::string host_name();
std::string cpu_model();  // /proc/cpuinfo "model name" (or "unknown")
std::string command_line();  // /proc/self/cmdline, arguments joined by spaces (quoted when needed)


}  // namespace runner
}  // namespace ears
