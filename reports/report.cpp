#include "reports/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "harness/base/files.h"
#include "harness/base/json.h"
#include "harness/base/error.h"
#include "reports/field_json.h"
#include "reports/markdown.h"

namespace ears {

using nlohmann::json;
namespace fs = std::filesystem;

const ArmReport* Report::find_arm(const std::string& name) const {
  for (const auto& a : arms)
    if (a.name == name) return &a;
  return nullptr;
}

const Comparison* Report::find_comparison(const std::string& arm) const {
  for (const auto& c : comparisons)
    if (c.arm == arm) return &c;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Building

namespace {

// The keys of RequestResult's fields flagged kFieldVaries (timings, run_id).
struct VaryingKeys {
  std::vector<const char*> keys;
  template <class T>
  void operator()(const char* key, const T&, const char*, unsigned flags) {
    if (flags & kFieldVaries) keys.push_back(key);
  }
  void derived(const char*, double, const char*) {}
};

// The part of a result that must agree between duplicates.
json outcome_of(const RequestResult& r) {
  static const std::vector<const char*> varying = [] {
    const RequestResult sample{};
    VaryingKeys v;
    RequestResult::fields(sample, v);
    return v.keys;
  }();
  json j = r;
  for (const char* k : varying) j.erase(k);
  return j;
}

// A pardon is an accept the exact rule would have rejected with the step's same uniform: only
// the verifiers that draw one (baseline, ears) can tell. typical and greedy accept by a threshold
// or the argmax, so their share is undefined (it read 0 % beside a typical arm's distortion).
bool counts_pardons(const json& verifier) {
  const std::string type = verifier.is_object() ? verifier.value("type", std::string()) : std::string();
  return type.empty() || type == "baseline" || type == "ears";
}

void undefine_pardons(ArmMetrics& m) {
  m.pardon_share = nan_value();
  for (auto& b : m.uncertainty_buckets) b.pardon_share = nan_value();
}

std::string join_names(const std::vector<ArmInput>& arms) {
  std::string s;
  for (const auto& a : arms) s += (s.empty() ? "" : ", ") + a.name;
  return s;
}

}  // namespace

std::vector<RequestResult> dedupe_results(const std::vector<RequestResult>& results) {
  std::vector<RequestResult> out;
  std::map<ResultKey, size_t> seen;
  for (const auto& r : results) {
    auto [it, inserted] = seen.emplace(r.key(), out.size());
    if (inserted) {
      out.push_back(r);
      continue;
    }
    const RequestResult& first = out[it->second];
    if (outcome_of(first) != outcome_of(r))
      fail("conflicting results for arm '{}' request '{}' repeat {} (runs '{}' and '{}' disagree on the output "
           "or its statistics); keep one of the two lines (grep '\"request_id\":\"{}\"' results.jsonl)",
           r.arm, r.request_id, r.repeat, first.run_id, r.run_id, r.request_id);
  }
  return out;
}

Report build_report(const std::vector<RequestResult>& results_in, const ReportInputs& inputs) {
  for (const auto& r : results_in) r.validate("results");
  const std::vector<RequestResult> results = dedupe_results(results_in);

  std::vector<ArmInput> arms = inputs.arms;
  if (arms.empty()) {
    std::set<std::string> seen;
    for (const auto& r : results)
      if (seen.insert(r.arm).second) arms.push_back(ArmInput{r.arm, json::object(), nan_value()});
  }
  {
    std::set<std::string> names;
    for (const auto& a : arms) {
      if (a.name.empty()) fail("an arm has an empty name; give every arm a name in the config");
      if (!names.insert(a.name).second) fail("arm '{}' is declared twice; arm names must be unique", a.name);
    }
    for (const auto& r : results)
      if (!names.count(r.arm))
        fail("results contain arm '{}' which is not one of the run's arms ({}); check run_meta.json or the config",
             r.arm, join_names(arms));
  }

  Report report;
  report.config = inputs.config.is_null() ? json::object() : inputs.config;
  report.environment = inputs.environment.is_null() ? json::object() : inputs.environment;
  report.dataset = inputs.dataset.is_null() ? json::object() : inputs.dataset;
  report.sources = inputs.sources;
  report.warnings = inputs.warnings;
  report.baseline = inputs.baseline.empty() ? (arms.empty() ? "" : arms.front().name) : inputs.baseline;
  if (!arms.empty() && std::none_of(arms.begin(), arms.end(), [&](const ArmInput& a) { return a.name == report.baseline; }))
    fail("baseline arm '{}' is not one of the arms ({}); set 'baseline' to one of them", report.baseline,
         join_names(arms));

  for (const auto& a : arms) {
    report.arms.push_back(ArmReport{a.name, a.verifier.is_null() ? json::object() : a.verifier,
                                    compute_arm_metrics(results, a.name, a.wall_s)});
    ArmReport& added = report.arms.back();
    if (!counts_pardons(added.verifier)) undefine_pardons(added.metrics);
    const ArmMetrics& m = added.metrics;
    if (m.wall_from_latencies && m.n_requests > m.n_errors)
      report.warnings.push_back(fmt::format("arm '{}' has no recorded wall time: its tok/s is over its batches' "
                                            "latencies, which leave out the time between them",
                                            a.name));
  }
  const ArmReport* base = report.find_arm(report.baseline);
  for (const auto& a : report.arms) {
    if (a.name == report.baseline) continue;
    report.comparisons.push_back(compare_arms(results, a.name, a.metrics, base->name, base->metrics,
                                              inputs.bootstrap_seed, inputs.bootstrap_resamples));
  }

  // Partial when the arms did not all finish the same (request, repeat) set.
  std::map<std::string, std::set<std::pair<std::string, int>>> keys;
  for (const auto& a : arms) keys[a.name];
  for (const auto& r : results) keys[r.arm].insert({r.request_id, r.repeat});
  bool uneven = false;
  for (const auto& [name, k] : keys) uneven |= (k != keys.begin()->second);
  if (uneven) report.warnings.push_back("the arms did not all finish the same requests; comparisons use the pairs present in both arms");
  report.partial = inputs.partial || uneven;
  return report;
}

// ---------------------------------------------------------------------------------------------
// JSON

namespace {

void check_schema(const json& j, const std::string& origin) {
  if (!j.is_object()) fail("{}: expected a JSON object, got {}", origin, j.type_name());
  if (!j.contains("schema_version") || !j["schema_version"].is_number_integer())
    fail("{}: missing integer 'schema_version'; is this an ears-bench file?", origin);
  const int v = j["schema_version"].get<int>();
  if (v < 1 || v > kReportSchemaVersion)
    fail("{}: schema_version {} is not supported (this ears-bench reads version {}); use a matching ears-bench",
         origin, v, kReportSchemaVersion);
}

}  // namespace

bool load_busy(double load_average_1m, double logical_cpus) {
  return logical_cpus > 0 && load_average_1m >= logical_cpus;
}

std::vector<std::string> path_fact_differences(const json& recorded, const json& other) {
  std::vector<std::string> out;
  const auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  const auto compare = [&](const char* k) {
    const json a = recorded.is_object() ? recorded.value(k, json()) : json();
    const json b = other.is_object() ? other.value(k, json()) : json();
    if (!a.is_null() && !b.is_null() && a != b) out.push_back(fmt::format("{} {} -> {}", k, text(a), text(b)));
  };
  for (const char* k : kPathFacts) compare(k);
  compare(env_key("threads"));  // the report states one count (a resume or a shard on 1 thread of 2 said nothing)
  return out;
}

std::string resumed_path_warning(const std::string& dir, const json& environment, const json& session) {
  const std::vector<std::string> diffs = path_fact_differences(environment, session);
  if (diffs.empty()) return "";
  return fmt::format("{} was resumed at {} on another path ({}): its results mix both", dir,
                     session.value(resumed_env_key("at"), std::string("?")), fmt::join(diffs, "; "));
}

std::string ArmReport::entry_owner(const json& j, const std::string& origin) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) fail("{}: every arm needs a string 'name'", origin);
  return fmt::format("arm '{}'", j["name"].get<std::string>());
}

std::string ArmInput::entry_owner(const json& j, const std::string& origin) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string())
    fail("{}: every entry of 'arms' needs a string 'name', got {}", origin, j.dump());
  return fmt::format("arm '{}'", j["name"].get<std::string>());
}

json report_to_json(const Report& report) { return field_json::to_object(report); }

Report report_from_json(const json& j, const std::string& origin) {
  check_schema(j, origin);
  Report r;
  field_json::FileReader reader{j, origin, ""};
  Report::fields(r, reader);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Sweeps

std::vector<SweepSeries> sweep_series(const Report& report) {
  std::vector<SweepSeries> out;
  for (const auto& a : report.arms) {
    if (a.name == report.baseline) continue;
    const auto type = a.verifier.find("type");
    const auto beta = a.verifier.find("beta");
    if (type == a.verifier.end() || !type->is_string() || beta == a.verifier.end() || !beta->is_number()) continue;
    const Comparison* c = report.find_comparison(a.name);
    if (!c) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const SweepSeries& s) { return s.name == type->get<std::string>(); });
    if (it == out.end()) it = out.insert(out.end(), SweepSeries{type->get<std::string>(), {}});
    SweepPoint p;
    p.arm = a.name;
    p.beta = beta->get<double>();
    p.accuracy_delta_pp = c->accuracy_delta_pp;
    p.accuracy_delta_ci95 = c->accuracy_delta_ci95;
    p.throughput_gain_pct = c->throughput_gain_pct;
    p.throughput_gain_ci95 = c->throughput_gain_ci95;
    it->points.push_back(p);
  }
  std::vector<SweepSeries> sweeps;
  for (auto& s : out) {
    std::stable_sort(s.points.begin(), s.points.end(), [](const SweepPoint& a, const SweepPoint& b) { return a.beta < b.beta; });
    std::set<double> betas;
    for (const auto& p : s.points) betas.insert(p.beta);
    if (betas.size() >= 2) sweeps.push_back(std::move(s));
  }
  return sweeps;
}

// ---------------------------------------------------------------------------------------------
// Files

void write_report_files(const Report& report, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the report directory ({})", dir.string(), ec.message());
  write_file_atomic(dir / kReportJsonFile, report_to_json(report).dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  write_file_atomic(dir / kReportMarkdownFile, render_markdown(report));
  std::vector<std::pair<std::string, std::vector<int64_t>>> hists;
  for (const auto& a : report.arms) hists.emplace_back(a.name, a.metrics.accept_length_hist);
  // Only charts with data; a re-render drops a chart that no longer has any.
  if (has_accept_length_chart(report))
    write_file_atomic(dir / kAcceptLengthChart, svg_accept_length_histogram(hists));
  else
    fs::remove(dir / kAcceptLengthChart, ec);
  if (has_sweep_chart(report))
    write_file_atomic(dir / kSweepChart, svg_sweep_chart(sweep_series(report), report.baseline));
  else
    fs::remove(dir / kSweepChart, ec);
}

std::vector<RequestResult> read_results_jsonl(const fs::path& path, bool tolerate_truncated_last_line, bool* truncated) {
  if (truncated) *truncated = false;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the results file ({}); pass a run directory written by 'ears-bench run'",
                path.string(), std::strerror(errno));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  size_t last = lines.size();  // index of the last non-blank line
  for (size_t i = lines.size(); i-- > 0;)
    if (lines[i].find_first_not_of(" \t") != std::string::npos) {
      last = i;
      break;
    }
  std::vector<RequestResult> results;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path.string(), i + 1);
    json j;
    try {
      j = json::parse(lines[i]);
    } catch (const json::parse_error& e) {
      if (tolerate_truncated_last_line && i == last) {
        if (truncated) *truncated = true;
        continue;
      }
      fail("{}: not a complete JSON object ({}); delete the line if the run was killed while writing it", where,
           e.what());
    } catch (const json::exception& e) {  // out_of_range: a number past double's range (1e999)
      fail("{}: {}; the line was edited by hand: restore it or delete it and finish with --resume", where, e.what());
    }
    RequestResult r;
    try {
      r = j.get<RequestResult>();
    } catch (const Error& e) {
      fail("{}: {}", where, e.what());
    } catch (const json::exception& e) {
      fail("{}: {}", where, e.what());
    }
    r.validate(where);
    results.push_back(std::move(r));
  }
  return results;
}

// ---------------------------------------------------------------------------------------------
// run_meta.json

json run_meta_to_json(const RunMeta& meta) { return field_json::to_object(meta); }

RunMeta run_meta_from_json(const json& j, const std::string& origin) {
  check_schema(j, origin);
  RunMeta m;
  try {
    field_json::FileReader reader{j, origin, ""};
    RunMeta::fields(m, reader);
  } catch (const json::exception& e) {
    fail("{}: {}", origin, e.what());
  }
  if (m.expected_results < 0)
    fail("{}: 'expected_results' is {}; it must be >= 0 (0 = unknown): the file was edited, restore it as ears-bench "
         "wrote it",
         origin, m.expected_results);
  return m;
}

void write_run_meta(const RunMeta& meta, const fs::path& run_dir) {
  write_file_atomic(run_dir / kRunMetaFile, run_meta_to_json(meta).dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

RunMeta read_run_meta(const fs::path& run_dir) {
  const fs::path p = run_dir / kRunMetaFile;
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("{}: not found; pass a run directory written by 'ears-bench run'", p.string());
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, or out_of_range: a number past double's range
    fail("{}: invalid JSON ({})", p.string(), e.what());
  }
  return run_meta_from_json(j, p.string());
}

namespace {
// The dataset object of the merged runs: the first run's, with the request counts summed and,
// for shards, "shard" replaced by the list of shards merged (the merged dir is no longer a shard,
// so a report of it looks for no sibling).
json merged_dataset(const std::vector<RunMeta>& metas) {
  json out = metas.front().dataset;
  if (metas.size() == 1) return out;
  int64_t n_requests = 0;
  json shards = json::array();
  for (const auto& m : metas) {
    n_requests += m.dataset.value("n_requests", int64_t{0});
    if (const auto it = m.dataset.find("shard"); it != m.dataset.end()) shards.push_back(*it);
  }
  if (out.contains("n_requests")) out["n_requests"] = n_requests;
  out.erase("shard");
  if (!shards.empty()) out["merged_shards"] = shards;
  return out;
}
}  // namespace

RunMeta merge_run_meta(const std::vector<RunMeta>& metas) {
  if (metas.empty()) fail("no run directories given; pass at least one RUN_DIR");
  RunMeta out = metas.front();
  // The environment of a part that loaded the models: an empty shard stops before, and its
  // environment has no kernel path, dtype or parameter count for the report to state.
  for (const auto& m : metas)
    if (m.environment.contains(env_key("kernel_path"))) {
      out.environment = m.environment;
      break;
    }
  out.dataset = merged_dataset(metas);
  out.arms.clear();
  out.complete = true;
  out.expected_results = 0;
  for (const auto& m : metas) {
    if (m.baseline != out.baseline)
      fail("runs '{}' and '{}' name different baselines ('{}' vs '{}'); merge runs of the same experiment only",
           out.run_id, m.run_id, out.baseline, m.baseline);
    out.complete &= m.complete;
    out.expected_results += m.expected_results;
    for (const auto& a : m.arms) {
      auto it = std::find_if(out.arms.begin(), out.arms.end(), [&](const ArmInput& x) { return x.name == a.name; });
      if (it == out.arms.end()) {
        out.arms.push_back(a);
        continue;
      }
      if (it->verifier != a.verifier)
        fail("arm '{}' has different verifiers in the runs being merged ({} vs {}); rename one of the arms", a.name,
             it->verifier.dump(), a.verifier.dump());
      it->wall_s += a.wall_s;  // NaN (unknown) in any shard makes the total unknown
      it->timed_results = it->timed_results < 0 || a.timed_results < 0 ? -1 : it->timed_results + a.timed_results;
    }
  }
  return out;
}

namespace {

struct LoadedRuns {
  RunMeta meta;
  std::vector<RequestResult> results;
  std::vector<std::string> warnings;
  bool truncated = false;
  bool missing_parts = false;  // shards of the run absent (now, or when the merged dir was made)
};

// "i/N" of a shard run; {-1, 0} for a whole run.
std::pair<int, int> shard_of(const RunMeta& m) {
  const auto it = m.dataset.find("shard");
  int i = -1, n = 0;
  if (it == m.dataset.end() || !it->is_string() || std::sscanf(it->get<std::string>().c_str(), "%d/%d", &i, &n) != 2)
    return {-1, 0};
  return {i, n};
}

// How a run directory divides the run, for messages: "1/3", "a merge of shards [0,2]" or "whole run".
std::string part_label(const RunMeta& m) {
  if (const auto it = m.dataset.find("shard"); it != m.dataset.end() && it->is_string()) return it->get<std::string>();
  if (const auto it = m.dataset.find("merged_shards"); it != m.dataset.end())
    return fmt::format("a merge of shards {}", it->dump());
  return "whole run";
}

// The runs must be disjoint parts of one experiment: no directory twice, each shard once, one
// shard count, no whole run beside shards, and the same config, models and dataset (unless
// `force`: then the differences become warnings); parts on different paths (kPathFacts) are
// warned about. Returns the missing shard indices.
std::vector<int> check_parts(const std::vector<RunMeta>& metas, const std::vector<fs::path>& dirs, bool force,
                             std::vector<std::string>& warnings) {
  if (metas.empty()) fail("no run directories given; pass at least one RUN_DIR");
  std::map<std::pair<int, int>, size_t> seen;
  for (size_t i = 0; i < dirs.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (fs::equivalent(dirs[i], dirs[j]))
        fail("{}: given twice ({}); pass each run directory once", dirs[i].string(), dirs[j].string());
    const auto s = shard_of(metas[i]);
    // Different experiments first: two whole runs of different configs are that, not an overlap.
    auto diffs = json_differences(metas[0].config, metas[i].config);
    for (auto& d : json_differences(metas[0].environment.value("fingerprint", json::object()),
                                    metas[i].environment.value("fingerprint", json::object())))
      diffs.push_back("fingerprint." + d);
    if (!diffs.empty() && !force)
      fail("{} and {} are runs of different experiments ({}); merge shards of one run, or pass --force (recorded in the report)",
           dirs[0].string(), dirs[i].string(), fmt::join(diffs, "; "));
    if (!diffs.empty())
      warnings.push_back(fmt::format("--force: {} differs from {}: {}", dirs[i].string(), dirs[0].string(), fmt::join(diffs, "; ")));
    if (const auto it = seen.find(s); it != seen.end())
      fail("{} and {} {}: their results overlap; {}", dirs[it->second].string(), dirs[i].string(),
           s.second ? fmt::format("are the same shard ({}/{}) of the run", s.first, s.second) : "are both a whole run",
           s.second ? "merge each shard once" : "pass the shards of one run (or one run alone)");
    if (!seen.empty() && seen.begin()->first.second != s.second)
      fail("{} ({}) and {} ({}) split the run differently: their results overlap; merge shards of one --shard i/N split "
           "(a merged directory takes no more shards: merge the shard directories themselves)",
           dirs[seen.begin()->second].string(), part_label(metas[seen.begin()->second]), dirs[i].string(),
           part_label(metas[i]));
    seen.emplace(s, i);
    if (const auto paths = path_fact_differences(metas[0].environment, metas[i].environment); !paths.empty())
      warnings.push_back(fmt::format("{} and {} ran on different paths ({}): the merged numbers mix both",
                                     dirs[0].string(), dirs[i].string(), fmt::join(paths, "; ")));
  }
  std::vector<int> missing;
  const int n = seen.begin()->first.second;
  for (int k = 0; k < n; ++k)
    if (!seen.count({k, n})) missing.push_back(k);
  return missing;
}

// Results the run would not write — a repeat past run.repeats, more results than it expects (a hand
// edit, another run's lines) — are refused, as `run --resume` refuses them: counted, they filled in
// for missing ones and the report passed as whole.
void check_results_in_run(const LoadedRuns& runs, const std::vector<fs::path>& run_dirs) {
  const json& run = runs.meta.config.contains("run") ? runs.meta.config["run"] : json::object();
  const int repeats = run.is_object() && run.value("repeats", json(1)).is_number_integer() ? run.value("repeats", 1) : 1;
  std::vector<std::string> dirs;
  for (const fs::path& d : run_dirs) dirs.push_back(d.string());
  const std::string where = fmt::format("{}", fmt::join(dirs, ", "));
  for (const RequestResult& r : runs.results)
    if (r.repeat < 0 || r.repeat >= repeats)
      fail("{}: arm '{}', request '{}' has repeat {} but the run's run.repeats is {}: that line is not this run's; "
           "remove it from results.jsonl",
           where, r.arm, r.request_id, r.repeat, repeats);
  const int64_t n = static_cast<int64_t>(runs.results.size()), expected = runs.meta.expected_results;
  if (expected > 0 && n > expected)
    fail("{}: {} results where the run expects {}: results.jsonl holds lines the run would not write (another run's, "
         "edited by hand); remove them",
         where, n, expected);
}

// The slow or forced paths a run recorded (environment.notices, and each resumed session's:
// harness/run/environment.h path_notices), added to `warnings` once each.
void add_notices(const json& env, std::vector<std::string>& warnings) {
  std::vector<json> lists = {env.value(env_key("notices"), json::array())};
  for (const auto& session : env.value(env_key("resumed"), json::array()))
    if (session.is_object()) lists.push_back(session.value(resumed_env_key("notices"), json::array()));
  for (const auto& list : lists)
    for (const auto& n : list)
      if (n.is_string() && std::find(warnings.begin(), warnings.end(), n.get<std::string>()) == warnings.end())
        warnings.push_back(n.get<std::string>());
}

LoadedRuns load_runs(const std::vector<fs::path>& run_dirs, bool force) {
  LoadedRuns out;
  std::vector<RunMeta> metas;
  for (const auto& dir : run_dirs) {
    metas.push_back(read_run_meta(dir));
    for (const auto& f : metas.back().environment.value(env_key("forced"), json::array()))
      out.warnings.push_back(fmt::format("{} was resumed with --force although {}", dir.string(),
                                         fmt::join(f.value("differences", std::vector<std::string>{}), "; ")));
    add_notices(metas.back().environment, out.warnings);
    for (const auto& session : metas.back().environment.value(env_key("resumed"), json::array()))
      if (const std::string w = resumed_path_warning(dir.string(), metas.back().environment, session); !w.empty())
        out.warnings.push_back(w);
  }
  const std::vector<int> missing = check_parts(metas, run_dirs, force, out.warnings);
  std::vector<RequestResult> all;
  std::map<ResultKey, size_t> owner;  // result key -> run dir
  for (size_t d = 0; d < run_dirs.size(); ++d) {
    const fs::path results = run_dirs[d] / kResultsFile;
    if (!fs::exists(results)) {
      out.warnings.push_back(fmt::format("{} is missing (no request finished)", results.string()));
      continue;
    }
    bool truncated = false;
    auto rs = read_results_jsonl(results, true, &truncated);
    if (truncated) {
      out.truncated = true;
      out.warnings.push_back(fmt::format("ignored a truncated last line in {}", results.string()));
    }
    for (const auto& r : rs) {
      const auto [it, fresh] = owner.emplace(r.key(), d);
      if (!fresh && it->second != d)
        fail("{} and {} both hold the result of arm '{}', request '{}', repeat {}: the runs overlap (their wall times "
             "would add up); pass disjoint shards",
             run_dirs[it->second].string(), run_dirs[d].string(), r.arm, r.request_id, r.repeat);
    }
    all.insert(all.end(), std::make_move_iterator(rs.begin()), std::make_move_iterator(rs.end()));
  }
  out.meta = merge_run_meta(metas);
  if (!missing.empty()) {
    const int n = shard_of(metas.front()).second;
    std::vector<std::string> names;
    for (int k : missing) names.push_back(fmt::format("{}/{}", k, n));
    out.warnings.push_back(fmt::format("missing shard(s) {} of {}: the merge covers part of the run", fmt::join(names, ", "), n));
    out.meta.complete = false;
    out.meta.dataset["missing_shards"] = missing;
    out.missing_parts = true;
  } else if (const auto it = out.meta.dataset.find("missing_shards"); it != out.meta.dataset.end() && !it->empty()) {
    // A partial merge's own directory, rendered again: still short of the same shards.
    out.warnings.push_back(fmt::format("merged without shard(s) {}: the merge covers part of the run", it->dump()));
    out.missing_parts = true;
  }
  out.results = dedupe_results(all);
  check_results_in_run(out, run_dirs);
  return out;
}

}  // namespace

Report report_from_run_dirs(const std::vector<fs::path>& run_dirs, uint64_t bootstrap_seed, int bootstrap_resamples,
                            bool force) {
  LoadedRuns runs = load_runs(run_dirs, force);
  ReportInputs in;
  in.arms = runs.meta.arms;
  in.baseline = runs.meta.baseline;
  in.config = runs.meta.config;
  in.environment = runs.meta.environment;
  in.dataset = runs.meta.dataset;
  in.warnings = runs.warnings;
  for (const auto& d : run_dirs) in.sources.push_back(d.string());
  const bool short_of_expected =
      runs.meta.expected_results > 0 && static_cast<int64_t>(runs.results.size()) < runs.meta.expected_results;
  // Missing shards have their own warning above; this one is for a run that stopped.
  if (!runs.meta.complete && !runs.missing_parts)
    in.warnings.push_back("a run did not complete (run_meta.json has complete = false)");
  if (const auto it = in.dataset.find("skipped_lines"); it != in.dataset.end() && it->is_number_integer() && *it > 0)
    in.warnings.push_back(fmt::format("{} bad dataset line(s) skipped (dataset.on_error: skip); see dataset.skipped_lines",
                                      it->get<int64_t>()));
  if (short_of_expected)
    in.warnings.push_back(fmt::format("{} results of {} expected", runs.results.size(), runs.meta.expected_results));
  in.partial = !runs.meta.complete || runs.truncated || short_of_expected;
  in.bootstrap_seed = bootstrap_seed;
  in.bootstrap_resamples = bootstrap_resamples;
  return build_report(runs.results, in);
}

void merge_run_dirs(const std::vector<fs::path>& run_dirs, const fs::path& out_dir, bool force) {
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !(fs::is_directory(out_dir, ec) && fs::is_empty(out_dir, ec)))
    fail("merge: {} already exists and is not empty; merging never overwrites: pass a new directory", out_dir.string());
  LoadedRuns runs = load_runs(run_dirs, force);
  fs::create_directories(out_dir, ec);
  if (ec) fail("{}: cannot create the output directory ({})", out_dir.string(), ec.message());
  std::string lines;
  for (const auto& r : runs.results) lines += result_to_jsonl_line(r);
  write_file_atomic(out_dir / kResultsFile, lines);
  runs.meta.complete = runs.meta.complete && !runs.truncated;
  write_run_meta(runs.meta, out_dir);
}

}  // namespace ears
