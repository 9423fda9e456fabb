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
// The run's parts, in harness/run/: run_dir.h (lock, fingerprints, resume checks), plan.h (shards,
// request keys, the order), models.h (model sets per arm), decode_params.h (ArmSpec ->
// DecodeParams), environment.h (what ran), progress.h, results.h (results.jsonl, report.md's
// head). The pure helpers are unit-tested (tests/runner_helpers_test.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/run/environment.h"
#include "harness/run/plan.h"
#include "harness/run/results.h"

namespace ears {
namespace runner {

inline constexpr const char* kVersion = "0.1";

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

}  // namespace runner
}  // namespace ears
