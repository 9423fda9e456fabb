// `ears-bench run` and `validate`: run_experiment() puts the steps of a run together (open the
// run directory, the resume checks, the plan, the models, the timed loop, the reports); the parts
// live next to it in harness/run/ (runner.h lists them).
#include "harness/run/runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>

#include "datasets/dataset.h"
#include "decoders/engine.h"
#include "decoders/layers.h"
#include "decoders/model_config.h"
#include "decoders/runtime.h"
#include "harness/base/error.h"
#include "harness/base/files.h"
#include "harness/config/config.h"
#include "harness/run/models.h"
#include "harness/run/progress.h"
#include "harness/run/run_dir.h"
#include "reports/gate.h"
#include "reports/markdown.h"
#include "reports/report.h"

namespace ears::runner {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  static const char msg[] = "\nears-bench: stopping after the batch in flight (send the signal again to abort now)\n";
  const ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)ignored;
}

// SIGINT / SIGTERM set a flag (the handler resets itself: a second signal kills at once).
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

DatasetSpec dataset_spec(const config::DatasetSection& d) {
  DatasetSpec s;
  s.name = d.name;
  s.path = d.path;
  s.split = d.split.empty() ? "test" : d.split;
  s.limit = static_cast<std::size_t>(d.limit);
  s.offset = static_cast<std::size_t>(d.offset);
  s.n_shot = d.n_shot;
  s.seed = d.seed;
  s.synth_n = static_cast<std::size_t>(d.n);
  s.on_error = d.on_error;
  s.prompt_field = d.fields.prompt;
  s.answer_field = d.fields.answer;
  s.category_field = d.fields.category;
  s.prompt_template = d.prompt_template;
  s.scorer = d.scorer;
  s.categories = d.categories;
  return s;
}

json verifier_json(const config::ArmSpec& a) {
  json v = {{"type", a.verifier.type}};
  if (a.verifier.type == "ears") {
    v["beta"] = a.verifier.beta;
    v["uncertainty"] = a.verifier.uncertainty;
  } else if (a.verifier.type == "typical") {
    v["eps"] = a.verifier.eps;
    v["delta"] = a.verifier.delta;
  }
  v["draft"] = a.draft.kind;
  return v;
}

void check_checkpoint_dir(const std::string& label, const std::string& key, const std::string& path, const std::string& fix) {
  if (path.empty()) fail("{}: {} is empty; {}", label, key, fix);
  if (!fs::is_directory(path)) fail("{}: {} '{}' does not exist; {}", label, key, path, fix);
  if (!fs::exists(fs::path(path) / "config.json"))
    fail("{}: {} '{}' has no config.json (not a Hugging Face checkpoint directory); {}", label, key, path, fix);
}

// The target's (with its tokenizer.json) and each draft's checkpoint directory, named by the key
// holding it: checked by `validate`, by a new run before it writes anything, and by --resume before
// it compares fingerprints (a missing directory read as a changed fingerprint there, and --force
// recorded it before the load failed).
void check_model_dirs(const std::string& config_file, const config::ExperimentSpec& spec) {
  check_checkpoint_dir(config_file, "target.path", spec.target.path, "point target.path at a Hugging Face checkpoint directory");
  if (!fs::exists(fs::path(spec.target.path) / "tokenizer.json"))
    fail("{}: target.path '{}' has no tokenizer.json (the runner encodes the prompts with it); copy the model's "
         "tokenizer.json into that directory",
         config_file, spec.target.path);
  std::set<std::string> drafts;
  for (std::size_t i = 0; i < spec.arms.size(); ++i) {
    const auto& d = spec.arms[i].draft;
    if (d.kind == "none" || !drafts.insert(d.path).second) continue;
    check_checkpoint_dir(config_file, fmt::format("arms.{}.draft.path (arm '{}')", i, spec.arms[i].name), d.path,
                         "point draft.path at the draft checkpoint directory, or set draft.kind: none");
  }
}

// Where run.threads came from, for its range error: the file, or the --set that replaced it.
std::string threads_key(const std::string& config_file, const std::vector<std::string>& overrides) {
  for (const auto& ov : overrides)
    if (ov.rfind("run.threads=", 0) == 0) return "(from --set) run.threads";
  return fmt::format("{}: run.threads", config_file);
}

// What a thread count came from, for check_threads' error: --threads, else the config's key.
std::string threads_origin(const RunOptions& o, const std::string& config_file) {
  return o.threads ? std::string("--threads") : threads_key(config_file, o.overrides);
}

// Removes what a fresh run wrote (config.yaml, run_meta.json, an empty results.jsonl, the directory
// when the run created it and it is empty) unless disarmed; never throws (it runs while an
// exception unwinds).
struct StartupCleanup {
  fs::path dir;  // empty: nothing to clean (--resume)
  bool created_dir = false;
  bool armed = true;
  void disarm() { armed = false; }
  ~StartupCleanup() {
    if (!armed || dir.empty() || std::uncaught_exceptions() == 0) return;
    std::error_code ec;
    if (fs::exists(dir / kResultsFile, ec) && fs::file_size(dir / kResultsFile, ec) > 0) return;
    for (const char* f : {kRunMetaFile, kConfigFile, kResultsFile, kLockFile}) fs::remove(dir / f, ec);
    if (created_dir && fs::is_empty(dir, ec)) fs::remove(dir, ec);
  }
};

// Everything one `ears-bench run` session holds, filled in step by step by run_experiment.
struct Run {
  explicit Run(const RunOptions& options) : o(options), resume(!options.resume_dir.empty()) {}
  const RunOptions& o;
  const bool resume;
  config::ExperimentSpec spec;
  fs::path dir;
  bool created_dir = false;
  RunMeta prior;  // --resume: run_meta.json as found
  std::string run_id;
  Shard shard;
  std::optional<RunDirLock> lock;  // one writer per run directory, held to the end
  int threads = 0;
  Say say;
  Dataset dataset;
  std::vector<const Request*> reqs;  // the shard's requests
  int repeats = 1;
  int64_t expected = 0;  // results of the whole run
  int64_t already = 0;   // of those, found in results.jsonl (--resume)
  RunMeta meta;
  std::vector<ArmRun> arms;
  DoneSet done;
  std::vector<ModelSet> sets;  // loaded only when something is left to do
  fs::path results_path() const { return dir / kResultsFile; }
};

// --resume DIR: the run's own config.yaml, run id and shard; the directory is locked.
void open_resumed(Run& r) {
  const RunOptions& o = r.o;
  if (!o.config_file.empty() || !o.overrides.empty() || !o.shard.empty() || o.limit != 0 || !o.out_dir.empty())
    fail("--resume {}: the run's own config.yaml is used; drop CONFIG, --set, --shard, --limit and --out", o.resume_dir);
  r.dir = o.resume_dir;
  if (fs::is_directory(r.dir)) r.lock.emplace(r.dir);
  const fs::path cfg = r.dir / kConfigFile;
  if (!fs::exists(cfg))
    fail("{}: not found: the run stopped before writing it, or {} is not a run directory; start the run again "
         "with 'ears-bench run CONFIG --out {}'",
         cfg.string(), r.dir.string(), r.dir.string());
  if (!fs::exists(r.dir / kRunMetaFile) && !fs::exists(r.dir / kResultsFile))
    fail("{}: no {} (the run was stopped while starting, before any result); start it again with 'ears-bench "
         "run CONFIG --out {}'",
         r.dir.string(), kRunMetaFile, r.dir.string());
  // Results without run_meta.json (deleted or lost): their wall times and environment are gone.
  if (!fs::exists(r.dir / kRunMetaFile))
    fail("{}: not found beside {}: the results cannot be resumed without it; start over with 'ears-bench run {} "
         "--out NEW_DIR'",
         (r.dir / kRunMetaFile).string(), kResultsFile, cfg.string());
  r.spec = config::parse_experiment(read_file(cfg), cfg.string(), r.dir);
  r.prior = read_run_meta(r.dir);
  r.run_id = r.prior.run_id;
  if (r.prior.dataset.contains("shard") && r.prior.dataset["shard"].is_string())
    r.shard = parse_shard(r.prior.dataset["shard"].get<std::string>());
}

// A new run: CONFIG with --set / --limit / --shard, a new run id; the directory (--out, else
// run.output_dir, else runs/<run id>) must hold no run; it is created and locked.
void open_fresh(Run& r) {
  const RunOptions& o = r.o;
  if (o.config_file.empty()) fail("run: pass CONFIG (an experiment YAML file) or --resume RUN_DIR");
  r.spec = config::load_experiment(o.config_file, o.overrides);
  check_threads(o.threads.value_or(r.spec.run.threads), threads_origin(o, o.config_file));  // before anything is written
  check_model_dirs(o.config_file, r.spec);
  if (o.limit < 0) fail("--limit {}: must be >= 0 (0 = the config's dataset.limit)", o.limit);
  if (o.limit > 0 && (r.spec.dataset.limit == 0 || o.limit < r.spec.dataset.limit)) r.spec.dataset.limit = o.limit;
  if (!o.shard.empty()) r.shard = parse_shard(o.shard);
  r.run_id = timestamped_name(r.spec.name, std::time(nullptr));
  if (r.shard.active()) r.run_id += fmt::format("-shard{}of{}", r.shard.index, r.shard.count);
  const std::string& output_dir = r.spec.run.output_dir;
  if (!o.out_dir.empty()) r.dir = o.out_dir;
  else if (!output_dir.empty()) r.dir = r.shard.active() ? fs::path(output_dir) / fmt::format("shard-{}", r.shard.index) : fs::path(output_dir);
  else r.dir = fs::path("runs") / r.run_id;
  if (fs::is_directory(r.dir)) r.lock.emplace(r.dir);  // a live writer there is named first (its pid)
  if (fs::exists(r.dir / kResultsFile) || fs::exists(r.dir / kRunMetaFile))
    fail("{}: already holds a run; continue it with 'ears-bench run --resume {}' or pass another --out", r.dir.string(),
         r.dir.string());
  r.created_dir = create_output_directory(r.dir);
  if (!r.lock) r.lock.emplace(r.dir);
}

// The dataset and the shard's requests; the number of results the run will have.
void select_requests(Run& r) {
  r.dataset = load_dataset(dataset_spec(r.spec.dataset));
  for (std::size_t i = 0; i < r.dataset.requests.size(); ++i)
    if (r.shard.contains(i)) r.reqs.push_back(&r.dataset.requests[i]);
  if (r.reqs.empty())
    r.say(fmt::format("warning: no requests to run (the dataset has {} request(s){}); the report will be empty",
                      r.dataset.requests.size(), r.shard.active() ? fmt::format(", none in shard {}", r.shard.str()) : ""));
  r.repeats = std::max(1, r.spec.run.repeats);
  r.expected = static_cast<int64_t>(r.reqs.size()) * static_cast<int64_t>(r.spec.arms.size()) * r.repeats;
}

// run_meta.json's "dataset".
json dataset_json(const Run& r) {
  json d = {{"name", r.spec.dataset.name},
            {"path", r.dataset.resolved_path},
            {"split", r.spec.dataset.split},
            {"scorer", r.dataset.scorer},
            {"prompt_format", r.spec.dataset.prompt_format},
            {"n_shot", r.spec.dataset.n_shot},
            {"n_loaded", r.dataset.requests.size()},
            {"n_requests", r.reqs.size()},
            {"skipped_lines", r.dataset.skipped_lines}};
  if (r.shard.active()) d["shard"] = r.shard.str();
  return d;
}

// A new run's environment: the machine facts (harness/run/environment.h); dtype is the resolved compute dtype,
// dtype_requested what the config says (auto); the loaded model's facts are added later.
json fresh_environment(const Run& r, const json& fingerprint) {
  const config::TargetSpec& target = r.spec.target;
  json env = environment_json();
  env.erase("kernel_path");  // the process's; the model's replaces it once loaded
  env.update({{"device", target.device},
              {"dtype", resolved_dtype_name(target.path, target.dtype, target.device)},
              {"dtype_requested", target.dtype},
              {"threads", r.threads},
              {"git_commit", git_commit()},
              {"hostname", host_name()},
              {"ears_bench_version", kVersion},
              {"command_line", command_line()},
              {"started_at", now_iso()},
              {"fingerprint", fingerprint}});
  set_path_notices(env, {env["dtype"].get<std::string>()}, target.device);
  return env;
}

// A resumed session's entry (kResumedEnvironmentKeys), then what it computes with: each of
// kPathFacts (reports/environment_keys.h: the target's resolved dtype and kernel path, the CPU,
// LibTorch, the build), so that list decides what a session records and what is compared.
json resumed_session(const Run& r) {
  const config::TargetSpec& target = r.spec.target;
  const std::string dtype = resolved_dtype_name(target.path, target.dtype, target.device);
  json now = environment_json();  // the machine's facts; the target's dtype, path and the build's below
  now[env_key("compute_dtype")] = dtype;
  now.erase(env_key("kernel_path"));  // the process's; the target's replaces it
  try {
    now[env_key("kernel_path")] =
        layers::kernel_path_name(parse_device(target.device), parse_dtype(dtype, "target.dtype"));
  } catch (const std::exception&) {  // loading the model says what is wrong
  }
  now[env_key("git_commit")] = git_commit();
  json s = {{resumed_env_key("at"), now_iso()},
            {resumed_env_key("command_line"), command_line()},
            {resumed_env_key("threads"), r.threads},
            {resumed_env_key("load_average_1m_start"), now[env_key("load_average_1m_start")]},
            {resumed_env_key("notices"), path_notices(r.threads, dtype, target.device)}};
  for (const char* k : kPathFacts)
    if (now.contains(k)) s[k] = now[k];
  return s;
}

// A resumed run's environment: the recorded one after the resume checks (check_resume_matches;
// with --force the differences go to "forced"), with this session added to "resumed" (and a
// warning when it runs on another path than the recorded one).
json resumed_environment(const Run& r, const json& fingerprint, const json& dataset) {
  check_model_dirs((r.dir / kConfigFile).string(), r.spec);
  json env = r.prior.environment;
  const auto forced = check_resume_matches(r.dir, r.prior.config, r.prior.environment.value("fingerprint", json()),
                                           r.meta.config, fingerprint, r.o.force);
  if (!forced.empty()) {
    if (!env.contains("forced") || !env["forced"].is_array()) env["forced"] = json::array();
    env["forced"].push_back({{"at", now_iso()}, {"differences", forced}});
    r.say(fmt::format("warning: --force: resuming although {}", fmt::join(forced, "; ")));
  }
  if (!env.contains("resumed") || !env["resumed"].is_array()) env["resumed"] = json::array();
  env["resumed"].push_back(resumed_session(r));
  if (const std::string w = resumed_path_warning(r.dir.string(), env, env["resumed"].back()); !w.empty())
    r.say("warning: " + w);
  if (r.prior.dataset.value("n_requests", json()) != dataset["n_requests"])
    r.say(fmt::format("warning: the dataset now yields {} requests for this run, run_meta.json recorded {}",
                      r.reqs.size(), r.prior.dataset.value("n_requests", json()).dump()));
  return env;
}

// run_meta.json in memory (config, environment, dataset) and the arms with their earlier wall times.
void start_meta(Run& r) {
  RunMeta& meta = r.meta;
  meta.run_id = r.run_id;
  meta.baseline = r.spec.baseline_arm().name;
  meta.config = config::to_json(r.spec);
  meta.expected_results = r.expected;
  const json dataset = dataset_json(r);
  const json fingerprint = run_fingerprint(r.spec, r.dataset);
  meta.environment = r.resume ? resumed_environment(r, fingerprint, dataset) : fresh_environment(r, fingerprint);
  // This session's slow or forced paths (the report lists them among its warnings).
  const json& session = r.resume ? meta.environment["resumed"].back() : meta.environment;
  for (const std::string& line : notice_lines(session)) r.say(line);
  meta.dataset = dataset;
  r.arms.resize(r.spec.arms.size());
  for (std::size_t i = 0; i < r.arms.size(); ++i) {
    const config::ArmSpec& spec = r.spec.arms[i];
    r.arms[i].spec = &spec;
    double wall = 0;
    int64_t timed = r.resume ? -1 : 0;  // a resumed run's prior count, unknown until read
    for (const auto& a : r.prior.arms)
      if (a.name == spec.name && std::isfinite(a.wall_s)) wall = a.wall_s, timed = a.timed_results;
    r.arms[i].wall_s = wall;
    meta.arms.push_back(ArmInput{spec.name, verifier_json(spec), wall, timed});
  }
}

// --resume: every result already written must be one this run would write (a request of its
// shard, a repeat it runs); another run's lines would be counted as this run's.
void check_done_in_run(const Run& r) {
  std::set<std::string> ids;
  for (const Request* q : r.reqs) ids.insert(q->id);
  for (const auto& [arm, id, repeat] : r.done)
    if (!ids.count(id) || repeat < 0 || repeat >= r.repeats)
      fail("{}: holds a result (arm '{}', request '{}', repeat {}) that this run does not make ({} requests{}, {} "
           "repeat(s)); it is not this run's results file: move the line or the file aside",
           r.results_path().string(), arm, id, repeat, r.reqs.size(), r.shard.active() ? " in its shard" : "", r.repeats);
}

// A resume's warning: said now and kept among the session's notices, which every report of the
// run lists (stderr alone was lost under --quiet and in report.json).
void resume_warning(Run& r, const std::string& text) {
  r.say("warning: " + text);
  r.meta.environment[env_key("resumed")].back()[resumed_env_key("notices")].push_back(text);
}

// --resume: repairs results.jsonl's tail and reads what is done; arms whose earlier wall time was
// lost but that have results get an unknown wall time (the report then times their batches by
// their latencies: latency_wall_s).
void find_done(Run& r) {
  if (const std::size_t cut = repair_jsonl_tail(r.results_path()))
    r.say(fmt::format("{}: removed a truncated last line ({} bytes)", r.results_path().string(), cut));
  std::vector<std::string> names;
  for (const auto& a : r.spec.arms) names.push_back(a.name);
  std::vector<RequestResult> written;
  r.done = read_done(r.results_path(), names, &written);
  check_done_in_run(r);
  for (std::size_t i = 0; i < r.arms.size(); ++i) {
    ArmRun& arm = r.arms[i];
    ArmInput& recorded = r.meta.arms[i];
    bool had_wall = false;
    for (const auto& a : r.prior.arms) had_wall |= a.name == arm.spec->name && std::isfinite(a.wall_s);
    std::vector<const RequestResult*> mine;  // the arm's results in file order
    for (const auto& res : written)
      if (res.arm == arm.spec->name) mine.push_back(&res);
    const auto present = static_cast<int64_t>(mine.size());
    if (!had_wall && present > 0) arm.wall_s = nan_value();
    // More results than the recorded wall time covers: a kill between a batch's results and its
    // run_meta.json update. That batch's time comes from its latencies (it read as free: +104 %).
    if (std::isfinite(arm.wall_s) && recorded.timed_results >= 0 && present > recorded.timed_results) {
      const std::vector<const RequestResult*> untimed(mine.begin() + recorded.timed_results, mine.end());
      arm.wall_s += latency_wall_s(untimed);
      resume_warning(r, fmt::format("arm '{}': {} result(s) were written after its last recorded wall time (a kill "
                                    "between the two writes); their batch's time is taken from their latencies",
                                    arm.spec->name, untimed.size()));
      recorded.timed_results = present;
    }
    // Fewer results than the recorded wall time covers (lines deleted by hand, to redo them): that
    // time counted results that are gone, and added to the redo it understated tok/s silently.
    // (run_experiment copies arm.wall_s into the recorded arm next.)
    if (std::isfinite(arm.wall_s) && recorded.timed_results > present) {
      resume_warning(r, fmt::format("arm '{}' has {} result(s) of the {} its recorded wall time covers; its "
                                    "throughput is computed from its batches' latencies",
                                    arm.spec->name, present, recorded.timed_results));
      arm.wall_s = nan_value();
    }
    recorded.timed_results = std::isfinite(arm.wall_s) && recorded.timed_results >= 0 ? present : -1;
  }
}

// The start line: what runs, how much of it is already done.
void announce(Run& r) {
  for (const auto& arm : r.arms)
    for (int rep = 0; rep < r.repeats; ++rep)
      for (const Request* q : r.reqs) r.already += r.done.count({arm.spec->name, q->id, rep}) ? 1 : 0;
  r.say(fmt::format("{} {}: {} requests x {} arms x {} repeat(s) = {} results{}; {} thread(s)",
                    r.resume ? "resuming" : "run", r.dir.string(), r.reqs.size(), r.arms.size(), r.repeats, r.expected,
                    r.already ? fmt::format(" ({} already done)", r.already) : "", r.threads));
}

// The model sets, each arm's DecodeParams, the model facts (target and draft) in run_meta.json
// when the run has none yet (a new run, or one whose first session died while loading: without
// them later sessions on other kernel paths were never compared), the warm-up.
void load_models(Run& r) {
  r.sets = assign_model_sets(r.spec, r.arms);
  load_model_sets(r.sets, r.arms, r.spec, r.reqs, r.say);
  if (!r.meta.environment.contains(env_key("target_parameters")) && !r.sets.empty()) {
    // What the target actually computes in: compute / weight / checkpoint dtype, kernel path.
    json facts = model_environment_json(*r.sets.front().models.target, r.spec.target.dtype);
    facts.erase("dtype_requested");
    facts.erase("device");
    r.meta.environment["dtype"] = facts["compute_dtype"];
    r.meta.environment.update(facts);
    // The draft's facts (the first drafting arm's draft): what its head or model computed in.
    for (const ModelSet& set : r.sets)
      if (set.models.drafter && !r.meta.environment.contains("draft"))
        r.meta.environment["draft"] = draft_environment_json(set.models, set.setup);
    write_run_meta(r.meta, r.dir);
  }
  warm_up(r.sets, r.arms, r.spec.run.warmup, r.reqs.size(), r.say);
}

// The units in run order; a group is the largest batch of any arm.
std::vector<WorkUnit> plan(const Run& r) {
  std::size_t group = 1;
  for (const auto& a : r.spec.arms)
    group = std::max<std::size_t>(group, static_cast<std::size_t>(std::max(1, a.decoding.batch_size)));
  return plan_units(r.arms.size(), r.reqs.size(), group, r.repeats, r.spec.run.order, r.spec.decoding.seed);
}

// Where the timed loop writes: results.jsonl and the progress display.
struct Sinks {
  ResultsWriter& writer;
  Progress& progress;
};

// One batch of a unit: decodes `idxs`, appends and fsyncs their results, keeps the arm's wall time
// in run_meta.json current for --resume after a kill (a kill between the results and that write
// loses one batch's wall time).
void run_batch(Run& r, const WorkUnit& u, Engine& engine, const std::vector<std::size_t>& idxs, Sinks out) {
  ArmRun& a = r.arms[u.arm];
  const ModelSet& m = r.sets[a.set];
  const int gamma = a.use_drafter ? a.params.gamma : 0;
  std::vector<GenRequest> batch;
  for (std::size_t idx : idxs)
    batch.push_back(GenRequest{m.prompts[idx], a.spec->decoding.seed, request_key(r.reqs[idx]->id, u.repeat)});
  const double t0 = now_s(), started = unix_time_s();
  const std::vector<GenResult> results = engine.generate(batch, a.params);
  a.wall_s += now_s() - t0;
  int64_t out_tokens = 0, emitted = 0, steps = 0;
  for (std::size_t k = 0; k < idxs.size(); ++k) {
    RequestResult res = make_request_result(results[k], r.run_id, a.spec->name, *r.reqs[idxs[k]], u.repeat,
                                            a.spec->decoding.seed, gamma, r.dataset.scorer);
    res.start_s = started;
    res.validate(fmt::format("arm '{}' request '{}'", a.spec->name, res.request_id));
    out.writer.append(result_to_jsonl_line(res));
    r.done.insert({a.spec->name, res.request_id, u.repeat});
    out_tokens += res.output_tokens;
    if (gamma > 0) emitted += res.emitted(), steps += res.steps;
  }
  out.writer.sync();
  out.progress.add(static_cast<int64_t>(idxs.size()), out_tokens, emitted, steps);
  r.meta.arms[u.arm].wall_s = a.wall_s;
  if (r.meta.arms[u.arm].timed_results >= 0) r.meta.arms[u.arm].timed_results += static_cast<int64_t>(idxs.size());
  write_run_meta(r.meta, r.dir);
}

// One unit: the requests of its group not yet done, in batches of the arm's batch_size; stops
// between batches on a signal.
void run_unit(Run& r, const WorkUnit& u, Sinks out) {
  const ArmRun& a = r.arms[u.arm];
  std::vector<std::size_t> todo;
  for (std::size_t idx : u.requests)
    if (!r.done.count({a.spec->name, r.reqs[idx]->id, u.repeat})) todo.push_back(idx);
  if (todo.empty()) return;
  ModelSet& m = r.sets[a.set];
  Engine engine(*m.models.target, a.use_drafter ? m.models.drafter.get() : nullptr, m.models.tokenizer.get());
  const std::size_t bs = static_cast<std::size_t>(std::max(1, a.spec->decoding.batch_size));
  for (std::size_t b = 0; b < todo.size(); b += bs) {
    if (g_stop_signal) break;
    const std::vector<std::size_t> idxs(todo.begin() + static_cast<std::ptrdiff_t>(b),
                                        todo.begin() + static_cast<std::ptrdiff_t>(std::min(todo.size(), b + bs)));
    run_batch(r, u, engine, idxs, out);
  }
}

// The timed loop over `units`; returns the signal that stopped it before the end, else 0.
int run_units(Run& r, const std::vector<WorkUnit>& units, Progress::Mode mode) {
  Progress progress(mode, r.expected, r.already);
  bool stopped = false;
  {
    StopSignals signals;
    ResultsWriter writer(r.results_path());
    progress.start();
    for (const WorkUnit& u : units) {
      run_unit(r, u, Sinks{writer, progress});
      if (g_stop_signal) break;
    }
    // A signal that came after the last batch stopped nothing.
    stopped = g_stop_signal != 0 && progress.state().done < r.expected;
    progress.finish();
  }
  return stopped ? static_cast<int>(g_stop_signal) : 0;
}

// The end: run_meta.json (complete unless stopped), report.json / report.md / the plots, gate.json,
// the summary on stdout and the warnings on stderr. Returns the exit code.
int finish(Run& r, int stopped_by) {
  r.meta.environment["load_average_1m_end"] = load_average_1m();
  for (std::size_t i = 0; i < r.arms.size(); ++i) r.meta.arms[i].wall_s = r.arms[i].wall_s;
  r.meta.complete = stopped_by == 0;
  write_run_meta(r.meta, r.dir);
  const Report report = report_from_run_dirs({r.dir});
  write_report_files(report, r.dir);
  if (!r.o.quiet) fmt::print("{}\n", report_summary(render_markdown(report)));
  if (!r.spec.gates.empty()) {
    const GateResult gates = evaluate_gates(report, r.spec.gates);
    write_gate_json(gates, r.dir / kGateFile);
    fmt::print("Gates ({}):\n{}", (r.dir / kGateFile).string(), gate_table(gates, r.dir.string()));
    if (!gates.all_passed && stopped_by == 0)
      fmt::print("GATES FAILED — `ears-bench run` still exits 0; `ears-bench gate {}` exits 1\n", r.dir.string());
    else if (!gates.all_passed)
      fmt::print("GATES FAILED (the run was interrupted: its report is partial)\n");
  }
  for (const auto& a : report.arms)
    if (a.metrics.n_errors > 0)
      fmt::print(stderr, "ears-bench: warning: arm '{}': {} of {} requests failed (see the \"error\" field in {})\n",
                 a.name, a.metrics.n_errors, a.metrics.n_requests, r.results_path().string());
  if (stopped_by)
    fmt::print(stderr, "ears-bench: interrupted by signal {}; partial report written. Continue with: ears-bench run --resume {}\n",
               stopped_by, r.dir.string());
  fmt::print("Run directory: {}  (report.md, report.json, results.jsonl{})\n", r.dir.string(),
             r.spec.gates.empty() ? "" : ", gate.json");
  return stopped_by ? 128 + stopped_by : 0;
}

}  // namespace

int run_experiment(const RunOptions& o) {
  Run r(o);
  if (o.force && !r.resume) fail("--force applies to --resume only (a new run has nothing to differ from); drop it");
  if (r.resume) open_resumed(r);
  else open_fresh(r);
  // A fresh run that fails before its first result (a wrong device, a model that does not load)
  // takes back what it wrote, so the corrected command can use the same --out.
  StartupCleanup cleanup{r.resume ? fs::path() : r.dir, r.created_dir};
  r.threads = set_threads(o.threads.value_or(r.spec.run.threads),
                          threads_origin(o, r.resume ? (r.dir / kConfigFile).string() : o.config_file));
  const Progress::Mode mode = Progress::detect(o.quiet);
  r.say = [&o](const std::string& s) {
    if (!o.quiet) fmt::print(stderr, "{}\n", s);
  };
  select_requests(r);
  start_meta(r);
  if (r.resume) find_done(r);
  else write_file_atomic(r.dir / kConfigFile, config::to_yaml(r.spec));
  r.meta.complete = false;
  for (std::size_t i = 0; i < r.arms.size(); ++i) r.meta.arms[i].wall_s = r.arms[i].wall_s;
  write_run_meta(r.meta, r.dir);
  announce(r);
  if (r.already < r.expected) load_models(r);
  const std::vector<WorkUnit> units = plan(r);
  cleanup.disarm();  // from here on, results may exist: --resume continues them
  const int stopped_by = run_units(r, units, mode);
  return finish(r, stopped_by);
}

int validate_experiment(const std::string& config_file, const std::vector<std::string>& overrides) {
  const config::ExperimentSpec spec = config::load_experiment(config_file, overrides);
  // The config checks run.threads >= 0 on any machine; the upper bound is this machine's.
  check_threads(spec.run.threads, threads_key(config_file, overrides));
  check_model_dirs(config_file, spec);
  check_max_new_tokens_fit(spec, ModelConfig::load(spec.target.path).max_position_embeddings);
  const Dataset ds = load_dataset(dataset_spec(spec.dataset));
  // The resolved config once every check passed: a failed validate prints its one error line only.
  fmt::print("{}", config::to_yaml(spec));
  std::fflush(stdout);
  std::string arms;
  for (const auto& a : spec.arms) arms += (arms.empty() ? "" : ", ") + a.name + (a.baseline ? " (baseline)" : "");
  fmt::print(stderr, "ok: {} arm(s): {}; dataset {}: {} requests{}{}; {} gate(s)\n", spec.arms.size(), arms,
             spec.dataset.name, ds.requests.size(), ds.resolved_path.empty() ? "" : " from ", ds.resolved_path,
             spec.gates.size());
  return 0;
}

}  // namespace ears::runner
