// Each group of subcommands registers itself on the CLI11 app; the callback runs the command
// and returns its exit code through `exit_code`.
#pragma once
namespace CLI { class App; }

namespace ears {

struct CommonOptions {
  int threads = 0;       // 0 = all cores
  bool json = false;
};

void add_model_commands(CLI::App& app, CommonOptions& common, int& exit_code);   // forward, tokenize, generate
void add_bench_commands(CLI::App& app, CommonOptions& common, int& exit_code);   // bench
void add_experiment_commands(CLI::App& app, CommonOptions& common, int& exit_code);  // run, validate, report, merge, gate
void add_train_commands(CLI::App& app, CommonOptions& common, int& exit_code);       // train tokenizer|target|eagle3

}  // namespace ears
