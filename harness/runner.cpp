#include "harness/runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "datasets/dataset.h"
#include "datasets/scoring.h"
#include "decoders/engine.h"
#include "decoders/kernel_path.h"
#include "decoders/runtime.h"
#include "decoders/tokenizer.h"
#include "harness/config.h"
#include "harness/environment.h"
#include "harness/base/files.h"
#include "harness/run_dir.h"
#include "harness/base/error.h"
#include "harness/model_setup.h"
#include "harness/progress.h"
#include "reports/markdown.h"
#include "reports/report.h"

namespace ears::runner {

namespace fs = std::filesystem;
using json = nlohmann::json;

// =============================================================================================
// Pure helpers

namespace {

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

bool parse_int(const std::string& s, int& out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 9) return false;
  out = std::stoi(s);
  return true;
}

}  // namespace

std::string Shard::str() const { return fmt::format("{}/{}", index, count); }

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  Shard s;
  if (slash == std::string::npos || !parse_int(trim(text.substr(0, slash)), s.index) ||
      !parse_int(trim(text.substr(slash + 1)), s.count) || s.count < 1 || s.index >= s.count)
    fail("--shard '{}': expected i/N with 0 <= i < N, e.g. --shard 0/4 (the first of four shards)", text);
  return s;
}

std::string timestamped_name(const std::string& name, std::time_t t) {
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("{}-{}", name, buf);
}

std::string request_key(const std::string& request_id, int repeat) { return fmt::format("{}#{}", request_id, repeat); }

std::vector<WorkUnit> plan_units(std::size_t n_arms, std::size_t n_requests, std::size_t group_size, int repeats,
                                 const std::string& order, uint64_t seed) {
  if (order != "interleaved" && order != "random")
    fail("run.order '{}' is not one of: interleaved, random", order);
  if (group_size == 0) group_size = 1;
  const std::size_t n_groups = (n_requests + group_size - 1) / group_size;
  std::vector<WorkUnit> all;
  for (int r = 0; r < repeats; ++r) {
    std::vector<WorkUnit> units;
    for (std::size_t g = 0; g < n_groups; ++g) {
      std::vector<std::size_t> reqs;
      for (std::size_t i = g * group_size; i < std::min(n_requests, (g + 1) * group_size); ++i) reqs.push_back(i);
      // Rotate the arm order by one every group (continuing across repeats).
      const std::size_t shift = n_arms ? (g + static_cast<std::size_t>(r) * n_groups) % n_arms : 0;
      for (std::size_t k = 0; k < n_arms; ++k) units.push_back(WorkUnit{(k + shift) % n_arms, r, g, reqs});
    }
    if (order == "random") {
      Rng rng(seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(r + 1)));
      for (std::size_t i = units.size(); i > 1; --i) std::swap(units[i - 1], units[rng.below(i)]);
    }
    all.insert(all.end(), std::make_move_iterator(units.begin()), std::make_move_iterator(units.end()));
  }
  return all;
}

std::size_t repair_jsonl_tail(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return 0;
  const std::string text = read_file(file);
  if (text.empty() || text.back() == '\n') return 0;
  const auto nl = text.rfind('\n');
  const std::size_t keep = nl == std::string::npos ? 0 : nl + 1;
  const std::string tail = text.substr(keep);
  if (json::accept(tail)) {  // complete, only the newline is missing
    std::ofstream out(file, std::ios::binary | std::ios::app);
    out << '\n';
    if (!out) fail("{}: cannot append ({})", file.string(), std::strerror(errno));
    return 0;
  }
  fs::resize_file(file, keep, ec);
  if (ec) fail("{}: cannot cut the truncated last line ({})", file.string(), ec.message());
  return text.size() - keep;
}

ResultsWriter::ResultsWriter(const fs::path& file) : file_(file) {
  fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot open for appending ({}); check the run directory is writable", file.string(), std::strerror(errno));
}

ResultsWriter::~ResultsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultsWriter::append(const std::string& line) {
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("{}: write failed ({}); check free disk space", file_.string(), std::strerror(errno));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void ResultsWriter::sync() {
  if (::fdatasync(fd_) != 0 && errno != EINVAL && errno != EROFS)
    fail("{}: fsync failed ({})", file_.string(), std::strerror(errno));
}

std::string report_summary(const std::string& md) {
  const auto results = md.find("## Results");
  if (results == std::string::npos) return md;
  const auto next = md.find("\n## ", results);
  return next == std::string::npos ? md : md.substr(0, next + 1);
}

std::string git_commit() {
#ifdef EARS_SOURCE_DIR
  std::string dir = EARS_SOURCE_DIR;
  std::string quoted = "'";
  for (char c : dir) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  const std::string cmd = fmt::format("git -C {} rev-parse --short HEAD 2>/dev/null", quoted);
  if (std::FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[128] = {};
    std::string out;
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    const int rc = ::pclose(p);
    out = trim(out);
    if (rc == 0 && !out.empty()) return out;
  }
#endif
  return "unknown";
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  std::size_t start = 0;
  while (start < all.size()) {
    auto end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    std::string arg = all.substr(start, end - start);
    if (!out.empty()) out += ' ';
    if (arg.empty() || arg.find_first_of(" \t\"'$\\") != std::string::npos) {
      std::string q = "'";
      for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += q + "'";
    } else {
      out += arg;
    }
    start = end + 1;
  }
  return out;
}

// =============================================================================================
// The run

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

std::string target_key(const config::TargetSpec& t) { return fmt::format("{}|{}|{}", t.path, t.dtype, t.device); }

std::string draft_key(const config::DraftSpec& d) {
  if (d.kind == "none") return "none";
  return fmt::format("{}|{}|{}|{}", d.kind, d.path, fmt::join(d.aux_layers, ","), d.aux_layer_convention);
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

struct ModelSet {
  std::string tkey, dkey;
  ModelSetup setup;
  LoadedModels models;
  std::vector<int32_t> stop_ids;
  std::vector<std::vector<int32_t>> prompts;  // per selected request
};

struct ArmRun {
  const config::ArmSpec* spec = nullptr;
  std::size_t set = 0;
  bool use_drafter = false;
  DecodeParams params;
  double wall_s = 0;
};

DecodeParams decode_params(const config::ArmSpec& a, const config::DatasetSection& ds, const std::vector<int32_t>& stop_ids) {
  const auto& d = a.decoding;
  DecodeParams p;
  p.sampling.temperature = d.temperature;
  p.sampling.top_k = d.top_k;
  p.sampling.top_p = d.top_p;
  p.gamma = d.gamma;
  p.max_new_tokens = d.max_new_tokens;
  p.measure_distortion = d.distortion;
  p.draft_greedy = a.draft.sampling == "greedy";
  p.verifier.kind = parse_verifier_kind(a.verifier.type);
  p.verifier.beta = a.verifier.beta;
  p.verifier.uncertainty = parse_uncertainty(a.verifier.uncertainty);
  p.verifier.typical_eps = a.verifier.eps;
  p.verifier.typical_delta = a.verifier.delta;
  p.stop_strings = d.stop;
  for (const auto& s : default_stop_strings(ds.name, ds.n_shot))
    if (std::find(p.stop_strings.begin(), p.stop_strings.end(), s) == p.stop_strings.end()) p.stop_strings.push_back(s);
  p.stop_ids = stop_ids;
  return p;
}

std::string now_iso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
  return buf;
}

void check_checkpoint_dir(const std::string& label, const std::string& key, const std::string& path, const std::string& fix) {
  if (path.empty()) fail("{}: {} is empty; {}", label, key, fix);
  if (!fs::is_directory(path)) fail("{}: {} '{}' does not exist; {}", label, key, path, fix);
  if (!fs::exists(fs::path(path) / "config.json"))
    fail("{}: {} '{}' has no config.json (not a Hugging Face checkpoint directory); {}", label, key, path, fix);
}

}  // namespace

RequestResult make_request_result(const GenResult& g, const std::string& run_id, const std::string& arm,
                                  const Request& request, int repeat, uint64_t seed, int gamma,
                                  const std::string& scorer) {
  RequestResult r;
  r.run_id = run_id;
  r.arm = arm;
  r.request_id = request.id;
  r.repeat = repeat;
  r.seed = seed;
  r.category = request.category;
  r.prompt_tokens = g.prompt_tokens;
  r.output_tokens = static_cast<int64_t>(g.ids.size());
  r.latency_s = g.latency_s;
  r.ttft_s = g.ttft_s;
  const GenStats& st = g.stats;
  r.prefill_s = st.prefill_s;
  r.draft_s = st.draft_s;
  r.verify_s = st.verify_s;
  r.other_s = st.other_s;
  r.gamma = gamma;
  r.steps = st.steps;
  r.drafted = st.drafted;
  r.accepted = st.accepted;
  r.corrections = st.corrections;
  r.bonus = st.bonus;
  r.pardoned = st.pardoned;
  r.accepted_per_position = st.accepted_per_position;
  r.accept_length_hist = st.accept_length_hist;
  int64_t judged = 0;
  for (int d = 0; d < kUncertaintyDeciles; ++d) {
    r.drafted_by_uncertainty[d] = st.drafted_by_u[d];
    r.accepted_by_uncertainty[d] = st.accepted_by_u[d];
    r.pardoned_by_uncertainty[d] = st.pardoned_by_u[d];
    judged += st.drafted_by_u[d];
  }
  r.distortion_tv_sum = st.distortion_sum;
  r.distortion_positions = st.distortion_n;
  r.uncertainty_sum = st.uncertainty_sum;
  r.uncertainty_count = judged;
  r.text = g.text;
  r.output_ids.assign(g.ids.begin(), g.ids.end());
  r.error = g.error;
  if (r.ok() && scorer != "none" && !request.gold.empty()) {
    const Score s = score(scorer, g.text, request.gold);
    r.has_score = true;
    r.correct = s.strict;  // gsm8k: strict-match (lm-eval's first filter); qa: exact match
    r.strict_correct = s.strict;
    r.flexible_correct = s.flexible;
    r.em = s.em;
    r.f1 = s.f1;
  }
  return r;
}

// What a thread count came from, for check_threads' error: --threads, else the config's key.
static std::string threads_origin(const RunOptions& o, const std::string& config_file) {
  return o.threads ? std::string("--threads") : fmt::format("{}: run.threads", config_file);
}

int validate_experiment(const std::string& config_file, const std::vector<std::string>& overrides) {
  const config::ExperimentSpec spec = config::load_experiment(config_file, overrides);
  fmt::print("{}", config::to_yaml(spec));
  std::fflush(stdout);
  // The config checks run.threads >= 0 on any machine; the upper bound is this machine's.
  check_threads(spec.run.threads, fmt::format("{}: run.threads", config_file));
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
  const Dataset ds = load_dataset(dataset_spec(spec.dataset));
  std::string arms;
  for (const auto& a : spec.arms) arms += (arms.empty() ? "" : ", ") + a.name + (a.baseline ? " (baseline)" : "");
  fmt::print(stderr, "ok: {} arm(s): {}; dataset {}: {} requests{}{}; {} gate(s)\n", spec.arms.size(), arms,
             spec.dataset.name, ds.requests.size(), ds.resolved_path.empty() ? "" : " from ", ds.resolved_path,
             spec.gates.size());
  return 0;
}

namespace {
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
    for (const char* f : {kRunMetaFile, kConfigFile, kResultsFile, ".lock"}) fs::remove(dir / f, ec);
    if (created_dir && fs::is_empty(dir, ec)) fs::remove(dir, ec);
  }
};
}  // namespace

int run_experiment(const RunOptions& o) {
  const bool resume = !o.resume_dir.empty();
  bool created_dir = false;
  config::ExperimentSpec spec;
  fs::path dir;
  RunMeta prior;
  std::string run_id;
  Shard shard;
  std::optional<RunDirLock> lock;  // one writer per run directory, held to the end
  if (o.force && !resume) fail("--force applies to --resume only (a new run has nothing to differ from); drop it");
  if (resume) {
    if (!o.config_file.empty() || !o.overrides.empty() || !o.shard.empty() || o.limit != 0 || !o.out_dir.empty())
      fail("--resume {}: the run's own config.yaml is used; drop CONFIG, --set, --shard, --limit and --out", o.resume_dir);
    dir = o.resume_dir;
    if (fs::is_directory(dir)) lock.emplace(dir);
    const fs::path cfg = dir / kConfigFile;
    if (!fs::exists(cfg))
      fail("{}: not found; --resume needs a run directory written by 'ears-bench run'", cfg.string());
    if (!fs::exists(dir / kRunMetaFile) && !fs::exists(dir / kResultsFile))
      fail("{}: no {} (the run was stopped while starting, before any result); start it again with 'ears-bench "
           "run CONFIG --out {}'",
           dir.string(), kRunMetaFile, dir.string());
    spec = config::parse_experiment(read_file(cfg), cfg.string(), dir);
    prior = read_run_meta(dir);
    run_id = prior.run_id;
    if (prior.dataset.contains("shard") && prior.dataset["shard"].is_string())
      shard = parse_shard(prior.dataset["shard"].get<std::string>());
  } else {
    if (o.config_file.empty()) fail("run: pass CONFIG (an experiment YAML file) or --resume RUN_DIR");
    spec = config::load_experiment(o.config_file, o.overrides);
    check_threads(o.threads.value_or(spec.run.threads), threads_origin(o, o.config_file));  // before anything is written
    if (o.limit < 0) fail("--limit {}: must be >= 0 (0 = the config's dataset.limit)", o.limit);
    if (o.limit > 0 && (spec.dataset.limit == 0 || o.limit < spec.dataset.limit)) spec.dataset.limit = o.limit;
    if (!o.shard.empty()) shard = parse_shard(o.shard);
    run_id = timestamped_name(spec.name, std::time(nullptr));
    if (shard.active()) run_id += fmt::format("-shard{}of{}", shard.index, shard.count);
    if (!o.out_dir.empty()) dir = o.out_dir;
    else if (!spec.run.output_dir.empty()) dir = shard.active() ? fs::path(spec.run.output_dir) / fmt::format("shard-{}", shard.index) : fs::path(spec.run.output_dir);
    else dir = fs::path("runs") / run_id;
    if (fs::exists(dir / kResultsFile) || fs::exists(dir / kRunMetaFile))
      fail("{}: already holds a run; continue it with 'ears-bench run --resume {}' or pass another --out", dir.string(),
           dir.string());
    std::error_code ec;
    created_dir = !fs::exists(dir);
    fs::create_directories(dir, ec);
    if (ec) fail("{}: cannot create the output directory ({})", dir.string(), ec.message());
    lock.emplace(dir);
  }
  // A fresh run that fails before its first result (a wrong device, a model that does not load)
  // takes back what it wrote, so the corrected command can use the same --out.
  StartupCleanup cleanup{resume ? fs::path() : dir, created_dir};
  const int threads =
      set_threads(o.threads.value_or(spec.run.threads), threads_origin(o, resume ? (dir / kConfigFile).string() : o.config_file));
  Progress::Mode mode = Progress::detect(o.quiet);
  auto say = [&](const std::string& s) {
    if (!o.quiet) fmt::print(stderr, "{}\n", s);
  };

  // ---- dataset ----
  const Dataset dataset = load_dataset(dataset_spec(spec.dataset));
  std::vector<const Request*> reqs;
  for (std::size_t i = 0; i < dataset.requests.size(); ++i)
    if (shard.contains(i)) reqs.push_back(&dataset.requests[i]);
  if (reqs.empty())
    say(fmt::format("warning: no requests to run (the dataset has {} request(s){}); the report will be empty",
                    dataset.requests.size(), shard.active() ? fmt::format(", none in shard {}", shard.str()) : ""));
  const std::size_t n_arms = spec.arms.size();
  const int repeats = std::max(1, spec.run.repeats);
  const int64_t expected = static_cast<int64_t>(reqs.size()) * static_cast<int64_t>(n_arms) * repeats;

  // ---- run_meta / config.yaml ----
  RunMeta meta;
  meta.run_id = run_id;
  meta.baseline = spec.baseline_arm().name;
  meta.config = config::to_json(spec);
  meta.expected_results = expected;
  json dataset_json = {{"name", spec.dataset.name},
                       {"path", dataset.resolved_path},
                       {"split", spec.dataset.split},
                       {"scorer", dataset.scorer},
                       {"prompt_format", spec.dataset.prompt_format},
                       {"n_shot", spec.dataset.n_shot},
                       {"n_loaded", dataset.requests.size()},
                       {"n_requests", reqs.size()},
                       {"skipped_lines", dataset.skipped_lines}};
  if (shard.active()) dataset_json["shard"] = shard.str();
  const json fingerprint = run_fingerprint(spec, dataset.resolved_path);
  json env;
  if (resume) {
    env = prior.environment;
    const auto forced = check_resume_matches(dir, prior.config, prior.environment.value("fingerprint", json()),
                                             meta.config, fingerprint, o.force);
    if (!forced.empty()) {
      if (!env.contains("forced") || !env["forced"].is_array()) env["forced"] = json::array();
      env["forced"].push_back({{"at", now_iso()}, {"differences", forced}});
      say(fmt::format("warning: --force: resuming although {}", fmt::join(forced, "; ")));
    }
    if (!env.contains("resumed") || !env["resumed"].is_array()) env["resumed"] = json::array();
    env["resumed"].push_back({{"at", now_iso()},
                              {"command_line", command_line()},
                              {"threads", threads},
                              {"load_average_1m_start", load_average_1m()}});
    if (prior.dataset.value("n_requests", json()) != dataset_json["n_requests"])
      say(fmt::format("warning: the dataset now yields {} requests for this run, run_meta.json recorded {}",
                      reqs.size(), prior.dataset.value("n_requests", json()).dump()));
  } else {
    // The machine facts (harness/environment.h) under the run's own key names ("libtorch",
    // "load_average_1m_start"); dtype is the resolved compute dtype, dtype_requested what the
    // config says (auto); the loaded model's facts are added below.
    env = environment_json();
    env["libtorch"] = env["torch_version"];
    env["load_average_1m_start"] = env["load_average_1m"];
    env.erase("torch_version");
    env.erase("load_average_1m");
    env.erase("kernel_path");  // the process's; the model's replaces it once loaded
    env.update({{"device", spec.target.device},
                {"dtype", resolved_dtype_name(spec.target.path, spec.target.dtype, spec.target.device)},
                {"dtype_requested", spec.target.dtype},
                {"threads", threads},
                {"git_commit", git_commit()},
                {"hostname", host_name()},
                {"cpu_model", kernels::cpu_info().model},
                {"ears_bench_version", kVersion},
                {"command_line", command_line()},
                {"started_at", now_iso()},
                {"fingerprint", fingerprint}});
  }
  meta.environment = env;
  meta.dataset = dataset_json;

  std::vector<ArmRun> arms(n_arms);
  for (std::size_t i = 0; i < n_arms; ++i) {
    arms[i].spec = &spec.arms[i];
    double wall = 0;
    if (resume)
      for (const auto& a : prior.arms)
        if (a.name == spec.arms[i].name && std::isfinite(a.wall_s)) wall = a.wall_s;
    arms[i].wall_s = wall;
    meta.arms.push_back(ArmInput{spec.arms[i].name, verifier_json(spec.arms[i]), wall});
  }

  // ---- what is already done (resume) ----
  std::set<std::tuple<std::string, std::string, int>> done;
  const fs::path results_path = dir / kResultsFile;
  if (resume) {
    if (const std::size_t cut = repair_jsonl_tail(results_path))
      say(fmt::format("{}: removed a truncated last line ({} bytes)", results_path.string(), cut));
    if (fs::exists(results_path)) {
      std::set<std::string> names;
      for (const auto& a : spec.arms) names.insert(a.name);
      for (const auto& r : read_results_jsonl(results_path, false)) {
        if (!names.count(r.arm))
          fail("{}: result of arm '{}' which the run's config.yaml does not declare; this is not the run directory of "
               "this config",
               results_path.string(), r.arm);
        done.insert({r.arm, r.request_id, r.repeat});
      }
    }
    // Results of arms whose earlier wall time was lost: unknown (the report then uses Σ latencies).
    for (std::size_t i = 0; i < n_arms; ++i) {
      bool had_wall = false;
      for (const auto& a : prior.arms) had_wall |= a.name == spec.arms[i].name && std::isfinite(a.wall_s);
      bool has_results = std::any_of(done.begin(), done.end(), [&](const auto& k) { return std::get<0>(k) == spec.arms[i].name; });
      if (!had_wall && has_results) arms[i].wall_s = nan_value();
    }
  } else {
    write_file_atomic(dir / kConfigFile, config::to_yaml(spec));
  }
  meta.complete = false;
  for (std::size_t i = 0; i < n_arms; ++i) meta.arms[i].wall_s = arms[i].wall_s;
  write_run_meta(meta, dir);

  int64_t already = 0;
  for (std::size_t i = 0; i < n_arms; ++i)
    for (int rep = 0; rep < repeats; ++rep)
      for (const Request* r : reqs) already += done.count({spec.arms[i].name, r->id, rep}) ? 1 : 0;
  say(fmt::format("{} {}: {} requests x {} arms x {} repeat(s) = {} results{}; {} thread(s)",
                  resume ? "resuming" : "run", dir.string(), reqs.size(), n_arms, repeats, expected,
                  already ? fmt::format(" ({} already done)", already) : "", threads));

  // ---- models: once per distinct (target, draft); target-only arms reuse a loaded target ----
  std::vector<ModelSet> sets;
  auto find_set = [&](const std::string& tk, const std::string& dk) -> std::ptrdiff_t {
    for (std::size_t s = 0; s < sets.size(); ++s)
      if (sets[s].tkey == tk && (dk.empty() || sets[s].dkey == dk)) return static_cast<std::ptrdiff_t>(s);
    return -1;
  };
  if (already < expected) {
    auto add_set = [&](const config::ArmSpec& a) {
      ModelSet m;
      m.tkey = target_key(spec.target);
      m.dkey = draft_key(a.draft);
      m.setup.target_path = spec.target.path;
      m.setup.dtype = spec.target.dtype;
      m.setup.device = spec.target.device;
      m.setup.draft_kind = a.draft.kind;
      m.setup.draft_path = a.draft.path;
      if (!a.draft.aux_layers.empty()) m.setup.aux_layers = a.draft.aux_layers;
      m.setup.aux_layer_convention = a.draft.aux_layer_convention;
      sets.push_back(std::move(m));
    };
    for (std::size_t i = 0; i < n_arms; ++i) {
      const auto& a = spec.arms[i];
      if (a.draft.kind == "none") continue;
      std::ptrdiff_t s = find_set(target_key(spec.target), draft_key(a.draft));
      if (s < 0) add_set(a), s = static_cast<std::ptrdiff_t>(sets.size() - 1);
      arms[i].set = static_cast<std::size_t>(s);
      arms[i].use_drafter = true;
    }
    for (std::size_t i = 0; i < n_arms; ++i) {
      const auto& a = spec.arms[i];
      if (a.draft.kind != "none") continue;
      std::ptrdiff_t s = find_set(target_key(spec.target), "");
      if (s < 0) add_set(a), s = static_cast<std::ptrdiff_t>(sets.size() - 1);
      arms[i].set = static_cast<std::size_t>(s);
      arms[i].use_drafter = false;
    }
    for (auto& m : sets) {
      m.models = load_models(m.setup, /*need_tokenizer=*/true);
      m.stop_ids = stop_token_ids(m.models);
      m.prompts.reserve(reqs.size());
      for (const Request* r : reqs) {
        const std::string text =
            spec.dataset.prompt_format == "chat" ? qwen3_chat_prompt(r->prompt, spec.dataset.thinking) : r->prompt;
        m.prompts.push_back(m.models.tokenizer->encode(text));
        if (m.prompts.back().empty())
          fail("request '{}' (dataset {}): the prompt encodes to no tokens; check the dataset's prompt field", r->id,
               spec.dataset.name);
      }
      int64_t max_new = 0;
      for (const auto& a : spec.arms) max_new = std::max<int64_t>(max_new, a.decoding.max_new_tokens);
      const int64_t context = m.models.target->config().max_position_embeddings;
      const auto too_long = std::count_if(m.prompts.begin(), m.prompts.end(), [&](const auto& pr) {
        return context > 0 && static_cast<int64_t>(pr.size()) + max_new > context;
      });
      if (too_long > 0)
        fmt::print(stderr,
                   "ears-bench: warning: {} of {} prompts + max_new_tokens ({}) exceed the model's context of {} "
                   "tokens; those requests are recorded as errors\n",
                   too_long, m.prompts.size(), max_new, context);
      say(fmt::format("loaded {}{} in {:.1f} s", m.setup.target_path,
                      m.setup.draft_kind == "none" ? std::string(" (target only)")
                                                   : fmt::format(" + {} draft {}", m.setup.draft_kind, m.setup.draft_path),
                      m.models.load_s));
    }
    for (auto& a : arms) a.params = decode_params(*a.spec, spec.dataset, sets[a.set].stop_ids);
    if (!resume && !sets.empty()) {
      // What the target actually computes in: compute / weight / checkpoint dtype, kernel path.
      json facts = model_environment_json(*sets.front().models.target, spec.target.dtype);
      facts.erase("dtype_requested");
      facts.erase("device");
      env["dtype"] = facts["compute_dtype"];
      env.update(facts);
      meta.environment = env;
      write_run_meta(meta, dir);
    }

    // ---- warm-up: run.warmup requests per model set, not recorded ----
    if (spec.run.warmup > 0 && !reqs.empty()) {
      for (std::size_t s = 0; s < sets.size(); ++s) {
        const ArmRun* a = nullptr;
        for (const auto& x : arms)
          if (x.set == s && (!a || (x.use_drafter && !a->use_drafter))) a = &x;
        if (!a) continue;
        const double t0 = now_s();
        Engine engine(*sets[s].models.target, a->use_drafter ? sets[s].models.drafter.get() : nullptr,
                      sets[s].models.tokenizer.get());
        const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(spec.run.warmup), reqs.size());
        const std::size_t bs = static_cast<std::size_t>(std::max(1, a->spec->decoding.batch_size));
        for (std::size_t b = 0; b < n; b += bs) {
          std::vector<GenRequest> batch;
          for (std::size_t i = b; i < std::min(n, b + bs); ++i)
            batch.push_back(GenRequest{sets[s].prompts[i], a->spec->decoding.seed, fmt::format("warmup#{}", i)});
          engine.generate(batch, a->params);
        }
        say(fmt::format("warm-up: {} request(s) in {:.1f} s (not recorded)", n, now_s() - t0));
      }
    }
  }

  // ---- the timed loop ----
  std::size_t group = 1;
  for (const auto& a : spec.arms) group = std::max<std::size_t>(group, static_cast<std::size_t>(std::max(1, a.decoding.batch_size)));
  const std::vector<WorkUnit> units = plan_units(n_arms, reqs.size(), group, repeats, spec.run.order, spec.decoding.seed);
  cleanup.disarm();  // from here on, results may exist: --resume continues them
  Progress progress(mode, expected, already);
  bool stopped = false;
  {
    StopSignals signals;
    ResultsWriter writer(results_path);
    progress.start();
    for (const WorkUnit& u : units) {
      ArmRun& a = arms[u.arm];
      const std::string& arm_name = a.spec->name;
      std::vector<std::size_t> todo;
      for (std::size_t idx : u.requests)
        if (!done.count({arm_name, reqs[idx]->id, u.repeat})) todo.push_back(idx);
      if (todo.empty()) continue;
      ModelSet& m = sets[a.set];
      Engine engine(*m.models.target, a.use_drafter ? m.models.drafter.get() : nullptr, m.models.tokenizer.get());
      const std::size_t bs = static_cast<std::size_t>(std::max(1, a.spec->decoding.batch_size));
      const int gamma = a.use_drafter ? a.params.gamma : 0;
      for (std::size_t b = 0; b < todo.size(); b += bs) {
        if (g_stop_signal) break;
        std::vector<GenRequest> batch;
        std::vector<std::size_t> idxs(todo.begin() + static_cast<std::ptrdiff_t>(b),
                                      todo.begin() + static_cast<std::ptrdiff_t>(std::min(todo.size(), b + bs)));
        for (std::size_t idx : idxs)
          batch.push_back(GenRequest{m.prompts[idx], a.spec->decoding.seed, request_key(reqs[idx]->id, u.repeat)});
        const double t0 = now_s();
        const std::vector<GenResult> out = engine.generate(batch, a.params);
        a.wall_s += now_s() - t0;
        int64_t out_tokens = 0, emitted = 0, steps = 0;
        for (std::size_t k = 0; k < idxs.size(); ++k) {
          RequestResult r = make_request_result(out[k], run_id, arm_name, *reqs[idxs[k]], u.repeat, a.spec->decoding.seed,
                                                gamma, dataset.scorer);
          r.validate(fmt::format("arm '{}' request '{}'", arm_name, r.request_id));
          writer.append(result_to_jsonl_line(r));
          done.insert({arm_name, r.request_id, u.repeat});
          out_tokens += r.output_tokens;
          if (gamma > 0) emitted += r.emitted(), steps += r.steps;
        }
        writer.sync();
        progress.add(static_cast<int64_t>(idxs.size()), out_tokens, emitted, steps);
        // Keep the wall times in run_meta.json current for --resume after a kill (a kill between
        // the results and this write loses one batch's wall time).
        meta.arms[u.arm].wall_s = a.wall_s;
        write_run_meta(meta, dir);
      }
      if (g_stop_signal) break;
    }
    // A signal that came after the last batch stopped nothing.
    stopped = g_stop_signal != 0 && progress.state().done < expected;
    progress.finish();
  }
  const int signal = g_stop_signal;

  // ---- the end: run_meta, report, gates ----
  meta.environment["load_average_1m_end"] = load_average_1m();
  for (std::size_t i = 0; i < n_arms; ++i) meta.arms[i].wall_s = arms[i].wall_s;
  meta.complete = !stopped;
  write_run_meta(meta, dir);
  const Report report = report_from_run_dirs({dir});
  write_report_files(report, dir);
  if (!o.quiet) fmt::print("{}\n", report_summary(render_markdown(report)));
  if (!spec.gates.empty()) {
    const GateResult gates = evaluate_gates(report, spec.gates);
    write_gate_json(gates, dir / "gate.json", report.partial);
    fmt::print("Gates ({}):\n{}", (dir / "gate.json").string(), gate_table(gates));
    if (!gates.all_passed)
      fmt::print("GATES FAILED — `ears-bench run` still exits 0; `ears-bench gate {}` exits 1\n", dir.string());
  }
  for (const auto& a : report.arms)
    if (a.metrics.n_errors > 0)
      fmt::print(stderr, "ears-bench: warning: arm '{}': {} of {} requests failed (see the \"error\" field in {})\n",
                 a.name, a.metrics.n_errors, a.metrics.n_requests, results_path.string());
  if (stopped)
    fmt::print(stderr, "ears-bench: interrupted by signal {}; partial report written. Continue with: ears-bench run --resume {}\n",
               signal, dir.string());
  fmt::print("Run directory: {}  (report.md, report.json, results.jsonl{})\n", dir.string(),
             spec.gates.empty() ? "" : ", gate.json");
  return stopped ? 128 + signal : 0;
}

}  // namespace ears::runner
