// ears-bench: evaluation harness and benchmarking CLI for speculative decoding.
#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <string>
#include <vector>

#include "decoders/runtime.h"
#include "harness/cli/commands.h"
#include "harness/run/environment.h"
#include "harness/base/error.h"
#include "harness/base/strings.h"
#include "harness/base/utf8.h"

namespace {

// First line of a message: user-facing errors are one line, never a backtrace; bytes that are
// not UTF-8 (echoed from a corrupt file or argument) become U+FFFD, never raw on the terminal.
std::string first_line(const std::string& s) { return ears::utf8::sanitize(s.substr(0, s.find('\n'))); }

// A command-line mistake CLI11 found (unknown option, missing argument, bad number): one line
// naming the command, pointing at its --help, exit 2. --help and --version print and exit 0.
int parse_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  if (e.get_exit_code() == 0) return app.exit(e);
  CLI::App* cmd = &app;
  std::string path = "ears-bench";
  for (auto subs = cmd->get_subcommands(); !subs.empty(); subs = cmd->get_subcommands())
    cmd = subs.front(), path += " " + cmd->get_name();
  std::string what = first_line(e.what());
  std::vector<std::string> names;  // the commands under the one recognised, if it has any
  for (const CLI::App* sub : cmd->get_subcommands([](CLI::App*) { return true; })) names.push_back(sub->get_name());
  if (!names.empty()) {
    const std::string list = fmt::format("commands: {}", fmt::join(names, ", "));
    if (cmd == &app && argc > 1 && argv[1][0] != '-') {
      const std::string guess = ears::closest(argv[1], names);
      what = fmt::format("unknown command '{}' ({}{})", argv[1], guess.empty() ? "" : fmt::format("did you mean '{}'? ", guess),
                         list);
      if (std::string_view(argv[1]) == "resume") what += "; resume a run with 'ears-bench run --resume DIR'";
    } else {
      what = fmt::format("{} ({})", what, list);
    }
  }
  fmt::print(stderr, "ears-bench: error: {}: {}; see '{} --help'\n", path, what, path);
  return 2;
}

}  // namespace

// Idle OpenMP workers spin briefly, then sleep, unless OMP_WAIT_POLICY / GOMP_SPINCOUNT say
// otherwise: a one-time re-exec with GOMP_SPINCOUNT set (harness/run/environment.h), from the ELF
// preinit hook, before any library's constructor. Cost, `ears-bench --version` (2-vCPU VM, load
// ~4, 41 runs each): 0.80 s min / 0.97 s median with the variable set (no re-exec), 1.02 / 1.29 s
// without: +0.2-0.3 s, the dynamic loading of LibTorch's ~290 libraries done twice. (Re-executing
// from main() instead, after LibTorch's static initialisers, cost +0.4-0.47 s.)
__attribute__((section(".preinit_array"), used)) static void (*const kOmpWaitPreinit)(int, char**, char**) =
    ears::omp_wait_preinit;

int main(int argc, char** argv) {
  ears::default_omp_wait(argv);  // only when the preinit hook above did not run
  ears::tune_malloc();
  ears::apply_onednn_cap();
  CLI::App app{"ears-bench — evaluate speculative decoding verifiers (baseline, EARS, ...) on real models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ears-bench 0.1");
  ears::CommonOptions common;
  int exit_code = 0;
  ears::add_env_command(app, common, exit_code);
  ears::add_model_commands(app, common, exit_code);
  ears::add_bench_commands(app, common, exit_code);
  ears::add_experiment_commands(app, common, exit_code);
  ears::add_train_commands(app, common, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return parse_error(app, e, argc, argv);
  } catch (const ears::Error& e) {
    fmt::print(stderr, "ears-bench: error: {}\n", first_line(e.what()));
    return e.exit_code;
  } catch (const c10::Error& e) {
    fmt::print(stderr, "ears-bench: error: LibTorch: {}\n", first_line(e.what_without_backtrace()));
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ears-bench: error: {}\n", first_line(e.what()));
    return 1;
  }
  return exit_code;
}
