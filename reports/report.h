// The report of one experiment: per-arm metrics + paired comparisons, its JSON schema,
// the Markdown and SVG renderings, and re-reading run directories (ears-bench report / merge).
// Torch-free.
//
// report.json (schema_version 1) = Report, run_meta.json (written by the runner into every run
// dir, beside results.jsonl) = RunMeta. Each struct below, like RequestResult and the metrics
// structs, lists its JSON fields once in fields() (reports/fields.h): the JSON is written and
// read from those lists, and docs/report-schema.md's field tables are generated from them.
// Numbers that are undefined (no scored requests, no drafts, ...) are null.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/base/files.h"  // write_file_atomic
#include "reports/environment_keys.h"
#include "reports/metrics.h"
#include "reports/result.h"
#include "reports/svg.h"

namespace ears {

inline constexpr int kReportSchemaVersion = 1;

// A run directory's files: every reader and writer names them through these.
inline constexpr const char* kConfigFile = "config.yaml";           // the experiment as run
inline constexpr const char* kRunMetaFile = "run_meta.json";        // arms, environment, fingerprints
inline constexpr const char* kResultsFile = "results.jsonl";        // one line per generation
inline constexpr const char* kReportJsonFile = "report.json";
inline constexpr const char* kReportMarkdownFile = "report.md";
inline constexpr const char* kAcceptLengthChart = "accept_length.svg";
inline constexpr const char* kSweepChart = "sweep.svg";
inline constexpr const char* kGateFile = "gate.json";
inline constexpr const char* kLockFile = ".lock";                   // the writer's flock (run_dir.h)

struct ArmInput {
  std::string name;
  nlohmann::json verifier;  // e.g. {"type": "ears", "beta": 0.5}; sweeps group on type + beta
  double wall_s = nan_value();
  int64_t timed_results = -1;  // results whose generation wall_s covers; -1 = unknown

  // The field list (reports/fields.h): run_meta.json arms[].
  using FieldListTag = void;
  template <class S, class V>
  static void fields(S& a, V& v) {
    v("name", a.name, "arm name", 0);
    v("verifier", a.verifier, "the verifier as configured, e.g. {\"type\": \"ears\", \"beta\": 0.5}",
      kFieldValue | kFieldObject);
    v("wall_s", a.wall_s, "Σ of the arm's generation wall time, s; null/absent = unknown (Σ latencies is used)", 0);
    v("timed_results", a.timed_results,
      "results.jsonl lines of the arm that wall_s covers; -1/absent = unknown. A resume that finds fewer (lines "
      "deleted by hand) drops wall_s: it timed results that are gone",
      0);
  }
  // Reading an entry of 'arms': an ears::Error naming `origin` unless it has a string 'name';
  // returns "arm 'NAME'" for later messages.
  static std::string entry_owner(const nlohmann::json& j, const std::string& origin);
};

struct ReportInputs {
  std::vector<ArmInput> arms;  // table order; empty = the arms found in the results, in order
  std::string baseline;       // empty = the first arm
  nlohmann::json config = nlohmann::json::object();
  nlohmann::json environment = nlohmann::json::object();
  nlohmann::json dataset = nlohmann::json::object();
  bool partial = false;
  std::vector<std::string> sources;
  std::vector<std::string> warnings;
  uint64_t bootstrap_seed = kDefaultBootstrapSeed;
  int bootstrap_resamples = kDefaultBootstrapResamples;
};

struct ArmReport {
  std::string name;
  nlohmann::json verifier;
  ArmMetrics metrics;

  // The field list (reports/fields.h): report.json arms[].
  using FieldListTag = void;
  template <class S, class V>
  static void fields(S& a, V& v) {
    v("name", a.name, "arm name", 0);
    v("verifier", a.verifier, "the verifier as configured", 0);
    v("metrics", a.metrics, "the arm's metrics", kFieldRequired);
  }
  static std::string entry_owner(const nlohmann::json& j, const std::string& origin);  // as ArmInput's
};

// Whether other work shared the CPUs when a timing started: the 1-minute load average at least the
// logical CPU count (one earlier run alone keeps it near 1; the run's own threads push the value
// read at the end up, so only the one read at the start is judged). bench's WARNING line and
// report.md's load row both say it from this.
bool load_busy(double load_average_1m, double logical_cpus);

// "kernel_path avx2 -> aten" for each of kPathFacts both objects hold with different values.
std::vector<std::string> path_fact_differences(const nlohmann::json& recorded, const nlohmann::json& other);
// "<dir> was resumed at <at> on another path (kernel_path avx2 -> aten): its results mix both";
// "" when the session's path facts match the recorded environment's.
std::string resumed_path_warning(const std::string& dir, const nlohmann::json& environment,
                                 const nlohmann::json& session);

// The fields report.json and run_meta.json share (Report and RunMeta carry them).
template <class S, class V>
void experiment_fields(S& s, V& v) {
  v("config", s.config, "the resolved experiment spec, as given by the runner", 0);
  v("environment", s.environment,
    "what ran: device, dtype, kernel path, threads, libtorch, CPU, git commit, fingerprint, ...", 0);
  v("dataset", s.dataset, "name, path, number of requests, shard, skipped_lines, merged_shards, missing_shards, ...", 0);
}

struct Report {
  int schema_version = kReportSchemaVersion;
  bool partial = false;
  std::string baseline;
  nlohmann::json config = nlohmann::json::object();
  nlohmann::json environment = nlohmann::json::object();
  nlohmann::json dataset = nlohmann::json::object();
  std::vector<std::string> sources;
  std::vector<std::string> warnings;
  std::vector<ArmReport> arms;
  std::vector<Comparison> comparisons;

  const ArmReport* find_arm(const std::string& name) const;                // nullptr if absent
  const Comparison* find_comparison(const std::string& arm) const;        // nullptr if absent

  // The field list (reports/fields.h): report.json.
  using FieldListTag = void;
  template <class S, class V>
  static void fields(S& r, V& v) {
    v("schema_version", r.schema_version, "1; a reader refuses a newer one", kFieldRequired);
    // Required: a report without it would gate as whole (every ears-bench wrote it).
    v("partial", r.partial, "a run was interrupted, results are missing or the arms' request sets differ",
      kFieldRequired);
    v("baseline", r.baseline, "the arm every comparison is against", 0);
    experiment_fields(r, v);
    v("sources", r.sources, "run directories merged into this report (may be empty)", 0);
    v("warnings", r.warnings, "e.g. a truncated last line that was ignored", 0);
    v("arms", r.arms, "per arm: name, verifier, metrics", kFieldRequired);
    v("comparisons", r.comparisons, "each non-baseline arm against the baseline", 0);
  }
};

// Validates every result, removes identical duplicates (error on conflicting ones), computes
// the metrics of every arm and the comparison of every non-baseline arm with the baseline.
// ears::Error when a result names an undeclared arm or the baseline is not an arm.
Report build_report(const std::vector<RequestResult>& results, const ReportInputs& inputs);

nlohmann::json report_to_json(const Report& report);
// ears::Error on a bad / newer schema or a field of the wrong type, naming `origin` (the file).
Report report_from_json(const nlohmann::json& j, const std::string& origin = kReportJsonFile);

// Sweeps: non-baseline arms grouped by verifier "type", ordered by verifier "beta"; only groups
// with >= 2 distinct betas are returned. Points come from the comparisons.
std::vector<SweepSeries> sweep_series(const Report& report);

// Writes report.json, report.md (reports/markdown.h) and the charts that have data
// (accept_length.svg when an arm drafted, sweep.svg for a β sweep with accuracy) into `dir`
// (created if needed), each atomically (temp file + rename); a chart without data is removed.
void write_report_files(const Report& report, const std::filesystem::path& dir);

// results.jsonl: one RequestResult per line, validated; blank lines are skipped. With
// `tolerate_truncated_last_line`, a last line that is not valid JSON (a killed writer) is
// ignored and *truncated (if given) set to true; otherwise it is an ears::Error naming the line.
std::vector<RequestResult> read_results_jsonl(const std::filesystem::path& path, bool tolerate_truncated_last_line,
                                              bool* truncated = nullptr);

// Removes exact duplicates of (arm, request_id, repeat); two results for the same key whose
// outcome differs (text, ids, token counts, step counters, score, error) are an ears::Error.
// Timings and run_id may differ between duplicates (the first one is kept).
std::vector<RequestResult> dedupe_results(const std::vector<RequestResult>& results);

struct RunMeta {
  int schema_version = kReportSchemaVersion;
  std::string run_id;
  std::string baseline;
  std::vector<ArmInput> arms;
  nlohmann::json config = nlohmann::json::object();
  nlohmann::json environment = nlohmann::json::object();
  nlohmann::json dataset = nlohmann::json::object();
  bool complete = false;
  int64_t expected_results = 0;

  // The field list (reports/fields.h): run_meta.json.
  using FieldListTag = void;
  template <class S, class V>
  static void fields(S& m, V& v) {
    v("schema_version", m.schema_version, "1; a reader refuses a newer one", kFieldRequired);
    v("run_id", m.run_id, "the run's id (also in every result)", 0);
    v("baseline", m.baseline, "the baseline arm", 0);
    experiment_fields(m, v);  // read before arms: none of them can fail
    v("arms", m.arms, "the configured arms with their wall times", 0);
    v("complete", m.complete, "false while running / after a kill", 0);
    v("expected_results", m.expected_results, "lines results.jsonl will hold when complete (0 = unknown)", 0);
  }
};

nlohmann::json run_meta_to_json(const RunMeta& meta);
RunMeta run_meta_from_json(const nlohmann::json& j, const std::string& origin);
void write_run_meta(const RunMeta& meta, const std::filesystem::path& run_dir);  // atomic
RunMeta read_run_meta(const std::filesystem::path& run_dir);

// Merges the run_meta.json of several run dirs (shards): arms are united in first-seen order
// (the same arm must carry the same verifier), wall times are summed (the shards are disjoint:
// the time one process would take for all of them back to back), config / environment come
// from the first dir, dataset too with n_requests summed and "shard" replaced by
// "merged_shards" (the list merged), complete = all complete, expected_results summed.
RunMeta merge_run_meta(const std::vector<RunMeta>& metas);

// ears-bench report RUN_DIR...: reads run_meta.json + results.jsonl of every dir (a truncated
// last line is tolerated and recorded in warnings), merges shards (dedupe_results), and builds
// the report. partial = some run incomplete, fewer results than expected, a truncated line, or
// missing shards (dataset.missing_shards, and a warning naming them). Refused (ears::Error):
// a directory given twice, the same shard twice, different --shard splits, a whole run beside
// shards, a result held by two dirs (overlap), and runs whose config / model / dataset
// fingerprints differ — the last unless `force` (then a warning in the report).
Report report_from_run_dirs(const std::vector<std::filesystem::path>& run_dirs,
                            uint64_t bootstrap_seed = kDefaultBootstrapSeed,
                            int bootstrap_resamples = kDefaultBootstrapResamples, bool force = false);

// ears-bench merge OUT_DIR RUN_DIR...: the same checks, then writes the merged run_meta.json and
// deduplicated results.jsonl into out_dir (atomically); out_dir must not exist or be empty.
void merge_run_dirs(const std::vector<std::filesystem::path>& run_dirs, const std::filesystem::path& out_dir,
                    bool force = false);

}  // namespace ears
