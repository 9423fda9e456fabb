// Experiment commands: run, validate, report, merge, gate (harness/run/runner.h does the work).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "harness/cli/commands.h"
#include "harness/base/files.h"
#include "harness/base/error.h"
#include "harness/base/utf8.h"
#include "reports/gate.h"
#include "harness/run/runner.h"
#include "reports/markdown.h"
#include "reports/report.h"

namespace ears {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<fs::path> as_paths(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

void check_run_dirs(const std::vector<std::string>& dirs) {
  for (const auto& d : dirs) {
    if (!fs::is_directory(d)) fail("{}: not a directory; pass run directories written by 'ears-bench run'", d);
    if (!fs::exists(fs::path(d) / kRunMetaFile))
      fail("{}: no {} inside; pass run directories written by 'ears-bench run'", d, kRunMetaFile);
  }
}

struct ReportArgs {
  std::vector<std::string> dirs;
  std::string out;
  bool quiet = false;
  bool force = false;
};

int run_report(const ReportArgs& a) {
  check_run_dirs(a.dirs);
  if (a.out.empty() && a.dirs.size() > 1)
    fail("report: {} run directories are combined into one report; pass --out DIR for it", a.dirs.size());
  const fs::path out = a.out.empty() ? fs::path(a.dirs.front()) : fs::path(a.out);
  // Into another run's directory, its report.json would describe runs it does not hold (and `gate` read it).
  const bool own_dir = a.dirs.size() == 1 && fs::exists(out) && fs::equivalent(out, a.dirs.front());
  if (!own_dir && (fs::exists(out / kRunMetaFile) || fs::exists(out / kResultsFile)))
    fail("report --out {}: a run directory (it holds {} or {}) whose own report this would replace; pass a new "
         "directory",
         out.string(), kRunMetaFile, kResultsFile);
  const Report report =
      report_from_run_dirs(as_paths(a.dirs), kDefaultBootstrapSeed, kDefaultBootstrapResamples, a.force);
  write_report_files(report, out);
  if (!a.quiet) fmt::print("{}\n", runner::report_summary(render_markdown(report)));
  fmt::print("Report written to {}{}\n", out.string(), report.partial ? " (PARTIAL)" : "");
  return 0;
}

struct MergeArgs {
  std::string out;
  std::vector<std::string> shards;
  bool quiet = false;
  bool force = false;
};

int run_merge(const MergeArgs& a) {
  check_run_dirs(a.shards);
  for (const auto& s : a.shards)
    if (fs::exists(a.out) && fs::exists(s) && fs::equivalent(a.out, s))
      fail("merge: OUT_DIR '{}' is one of the shard directories; pass a new directory", a.out);
  merge_run_dirs(as_paths(a.shards), a.out, a.force);
  const fs::path cfg = fs::path(a.shards.front()) / kConfigFile;
  if (fs::exists(cfg)) write_file_atomic(fs::path(a.out) / kConfigFile, read_file(cfg, "the config"));
  const Report report = report_from_run_dirs(as_paths(a.shards), kDefaultBootstrapSeed, kDefaultBootstrapResamples, a.force);
  write_report_files(report, a.out);
  if (!a.quiet) fmt::print("{}\n", runner::report_summary(render_markdown(report)));
  fmt::print("Merged {} run directories into {}{}\n", a.shards.size(), a.out, report.partial ? " (PARTIAL)" : "");
  return 0;
}

struct GateArgs {
  std::string dir;
  std::string rules;
  std::vector<std::string> checks;
  std::string json_out;
  bool allow_partial = false;
};

// A report older than its run directory would gate numbers the run no longer has: a resume killed
// before it re-rendered (run_meta.json says incomplete, the old report whole), or results.jsonl
// holding other results than the report counts. One line and exit 2; 'report DIR' re-renders.
void check_report_is_current(const fs::path& dir, const Report& report) {
  if (!fs::exists(dir / kRunMetaFile)) return;  // a combined report's own directory
  const RunMeta meta = read_run_meta(dir);
  std::set<ResultKey> keys;
  if (fs::exists(dir / kResultsFile))
    for (const auto& r : read_results_jsonl(dir / kResultsFile, true)) keys.insert(r.key());
  int64_t counted = 0;
  for (const auto& arm : report.arms) counted += arm.metrics.n_requests;
  std::string why;
  if (!meta.complete && !report.partial)
    why = fmt::format("{} says the run did not complete (running, or killed), but the report is whole",
                      (dir / kRunMetaFile).string());
  else if (static_cast<int64_t>(keys.size()) != counted)
    why = fmt::format("{} holds {} results, the report counts {}", (dir / kResultsFile).string(), keys.size(), counted);
  if (!why.empty())
    fail("{}: older than its run ({}); re-render it with 'ears-bench report {}' (or finish the run with 'ears-bench "
         "run --resume {}')",
         (dir / kReportJsonFile).string(), why, dir.string(), dir.string());
}

int run_gate(const GateArgs& a) {
  const fs::path report_file = fs::path(a.dir) / kReportJsonFile;
  if (!fs::exists(report_file))
    fail("{}: not found; gate a run directory with a report (see 'ears-bench run' / 'ears-bench report {}')",
         report_file.string(), a.dir);
  json j;
  try {
    j = json::parse(read_file(report_file, "the report"));
  } catch (const json::exception& e) {  // parse_error, or out_of_range: a number past double's range
    fail("{}: invalid JSON ({}); re-render it with 'ears-bench report {}'", report_file.string(), e.what(), a.dir);
  }
  const Report report = report_from_json(j, report_file.string());
  check_report_is_current(a.dir, report);
  std::vector<GateRule> checks;
  if (!a.rules.empty()) {
    if (!fs::is_regular_file(a.rules))
      fail("--rules {}: not a readable file; pass a file with one rule per line ('ARM: METRIC OP VALUE')", a.rules);
    const std::string text = read_file(a.rules, "the gate rules");
    auto more = parse_gate_rules_file(std::string(utf8::strip_bom(text)), a.rules);
    if (more.empty())
      fail("--rules {}: the file holds no rule (only blank lines or comments); add 'ARM: METRIC OP VALUE' lines",
           a.rules);
    checks.insert(checks.end(), more.begin(), more.end());
  }
  for (const auto& c : a.checks) checks.push_back(parse_gate_rule(c, "--check"));
  std::string origin = a.rules.empty() ? "the command line" : a.checks.empty() ? a.rules : a.rules + " and --check";
  if (checks.empty()) {
    checks = gate_rules_from_config(report.config);
    origin = "the run's config";
  }
  if (checks.empty())
    fail("gate: no rules; pass --rules FILE or --check \"ARM METRIC OP VALUE\", or add 'gates:' to the experiment config");
  // A partial report (an interrupted run, missing shards) never passes by accident.
  const GateResult result = evaluate_gates(report, checks, a.allow_partial);
  const fs::path out = a.json_out.empty() ? fs::path(a.dir) / kGateFile : fs::path(a.json_out);
  if (!a.json_out.empty() && fs::is_directory(out))
    fail("--json {}: is a directory; pass a file path, e.g. {}", out.string(), (out / kGateFile).string());
  // The verdict first: a run directory that cannot take gate.json (read-only) still shows it.
  fmt::print("Gate of {} ({} check(s) from {}):\n{}", a.dir, result.outcomes.size(), origin, gate_table(result, a.dir));
  std::fflush(stdout);
  try {
    write_gate_json(result, out);
  } catch (const Error& e) {
    fail("{}{}", e.what(), a.json_out.empty() ? "; or write gate.json elsewhere with --json PATH" : "");
  }
  fmt::print("{} -> {}\n", result.all_passed ? "PASS" : "FAIL", out.string());
  return result.all_passed ? 0 : 1;
}

// `ears-bench run`
void add_run_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<runner::RunOptions>();
  auto* sub = app.add_subcommand("run", "Run an experiment: every arm over the same prompts and seeds; writes a run directory");
  sub->add_option("config", o->config_file, "Experiment YAML (omit with --resume)");
  sub->add_option("--set", o->overrides, "Override a config key, e.g. --set decoding.gamma=3 (repeatable)")->allow_extra_args(false);
  sub->add_option("--out", o->out_dir, "Run directory (default: run.output_dir, else runs/<name>-<timestamp>)");
  sub->add_option("--resume", o->resume_dir, "Continue an interrupted run in this directory (uses its config.yaml)");
  sub->add_option("--shard", o->shard, "Run only requests with index % N == i, e.g. --shard 0/4 (combine with 'merge')");
  sub->add_option("--limit", o->limit, "Use at most the first N requests of the dataset");
  auto threads = std::make_shared<int>(0);
  auto* threads_opt = sub->add_option("--threads", *threads, threads_help("the config's run.threads"));
  sub->add_flag("--quiet", o->quiet, "No progress display and no report table");
  sub->add_flag("--force", o->force, "With --resume: continue although config.yaml, the models or the dataset changed (recorded in the report)");
  sub->callback([o, threads, threads_opt, &exit_code] {
    if (threads_opt->count() > 0) o->threads = *threads;
    exit_code = runner::run_experiment(*o);
  });
}

// `ears-bench validate`
void add_validate_command(CLI::App& app, int& exit_code) {
  auto file = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto* sub = app.add_subcommand("validate", "Print the fully resolved config; check model paths and the dataset");
  sub->add_option("config", *file, "Experiment YAML")->required();
  sub->add_option("--set", *overrides, "Override a config key (repeatable)")->allow_extra_args(false);
  sub->callback([file, overrides, &exit_code] { exit_code = runner::validate_experiment(*file, *overrides); });
}

// `ears-bench report`
void add_report_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ReportArgs>();
  auto* sub = app.add_subcommand("report", "Re-render a run's report, or combine several run directories into one");
  sub->add_option("run_dirs", a->dirs, "Run directories")->required();
  sub->add_option("--out", a->out, "Where to write the report (default: the run directory; required for several)");
  sub->add_flag("--quiet", a->quiet, "Do not print the report table");
  sub->add_flag("--force", a->force, "Combine runs whose config, models or dataset differ (recorded in the report)");
  sub->callback([a, &exit_code] { exit_code = run_report(*a); });
}

// `ears-bench merge`
void add_merge_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<MergeArgs>();
  auto* sub = app.add_subcommand("merge", "Merge shard run directories into OUT_DIR (results, run_meta, report)");
  sub->add_option("out_dir", a->out, "Merged run directory")->required();
  sub->add_option("shard_dirs", a->shards, "Shard run directories")->required();
  sub->add_flag("--quiet", a->quiet, "Do not print the report table");
  sub->add_flag("--force", a->force, "Merge runs whose config, models or dataset differ (recorded in the report)");
  sub->callback([a, &exit_code] { exit_code = run_merge(*a); });
}

// `ears-bench gate`
void add_gate_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<GateArgs>();
  auto* sub = app.add_subcommand("gate", "Check a run's report against thresholds; exit 0 pass, 1 fail, 2 bad input");
  sub->add_option("run_dir", a->dir, "Run directory with report.json")->required();
  sub->add_option("--rules", a->rules, "File with one rule per line ('ARM: METRIC OP VALUE'; # comments)");
  sub->add_option("--check", a->checks, "A rule, e.g. --check \"ears accuracy_delta_pp >= -1\" (repeatable)")->allow_extra_args(false);
  sub->add_option("--json", a->json_out, "Where to write gate.json (default: RUN_DIR/gate.json)");
  sub->add_flag("--allow-partial", a->allow_partial,
                "Gate a PARTIAL report (interrupted run, missing shards) instead of failing it");
  sub->callback([a, &exit_code] { exit_code = run_gate(*a); });
}

}  // namespace

void add_experiment_commands(CLI::App& app, CommonOptions&, int& exit_code) {
  add_run_command(app, exit_code);
  add_validate_command(app, exit_code);
  add_report_command(app, exit_code);
  add_merge_command(app, exit_code);
  add_gate_command(app, exit_code);
}

}  // namespace ears
