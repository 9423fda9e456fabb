// Each group of subcommands registers itself on the CLI11 app; the callback runs the command
// and returns its exit code through `exit_code`.
#pragma once
#include <fmt/format.h>

#include <string>

#include "decoders/threads.h"

namespace CLI { class App; }

namespace ears {

struct CommonOptions {
  int threads = 0;       // 0 = auto: the idle logical CPUs (decoders/threads.h)
  bool json = false;
};

// The --threads help text every command shows (the rule: decoders/threads.h; the wait policy:
// harness/cli/main.cpp).
inline std::string threads_help(const std::string& default_text = "0") {
  return fmt::format("LibTorch intra-op threads, 0 to {} (4 x the logical CPUs); default {}; 0 = auto: those of the {} "
                     "logical CPUs that other processes leave idle at start-up (sampled for 50 ms). Idle workers "
                     "(OpenMP's and the CPU kernels' own) spin ~30 us, then sleep (GOMP_SPINCOUNT=3000), unless "
                     "OMP_WAIT_POLICY or GOMP_SPINCOUNT is set",
                     max_threads(), default_text, logical_cpus());
}

void add_env_command(CLI::App& app, CommonOptions& common, int& exit_code);      // env
void add_model_commands(CLI::App& app, CommonOptions& common, int& exit_code);   // forward, tokenize, generate
void add_bench_commands(CLI::App& app, CommonOptions& common, int& exit_code);   // bench
void add_experiment_commands(CLI::App& app, CommonOptions& common, int& exit_code);  // run, validate, report, merge, gate
void add_train_commands(CLI::App& app, CommonOptions& common, int& exit_code);       // train tokenizer|target|eagle3

}  // namespace ears
