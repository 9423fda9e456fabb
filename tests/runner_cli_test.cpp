// The experiment runner: the real `ears-bench` executable driven as a subprocess (run, validate,
// report, gate) on the tiny golden fixtures with a small byte-level tokenizer. This file also
// holds the test binary's scratch-directory cleanup.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <span>
#include <thread>

#include "decoders/engine.h"
#include "decoders/safetensors_header.h"
#include "datasets/dataset.h"
#include "harness/base/error.h"
#include "harness/run/progress.h"
#include "harness/run/runner.h"
#include "reports/environment_keys.h"
#include "reports/report.h"
#include "tests/test_util.h"
#include "tests/runner_test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ears;
using namespace ears::runner;
using namespace ears::test::runner_test;

namespace {

// The 3-arm run, made once for the tests that read it.
Proc g_three_arm_proc;
const fs::path& three_arm_run() {
  static fs::path dir = [] {
    fs::path d = env().root / "run3";
    g_three_arm_proc = cli({"run", env().config3.string(), "--set", "dataset.limit=6", "--out", d.string(), "--threads", "1"});
    EXPECT_EQ(g_three_arm_proc.exit_code, 0) << show(g_three_arm_proc);
    return d;
  }();
  return dir;
}

// The weights of a draft checkpoint: every tensor but the EAGLE-3 vocabulary maps (d2t, t2d).
int64_t draft_weights(const fs::path& file) {
  const std::string bytes = test::read_file(file);
  const auto h = parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), file.string());
  int64_t n = 0;
  for (const auto& t : h.tensors)
    if (t.name != "d2t" && t.name != "t2d") n += static_cast<int64_t>(t.numel());
  return n;
}

}  // namespace

// =============================================================================================
// The executable

TEST(RunnerCli, RunWritesEveryResultOnce) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path& dir = three_arm_run();
  ASSERT_TRUE(fs::exists(dir / "results.jsonl"));
  auto results = results_by_key(dir);
  EXPECT_EQ(results.size(), 18u);
  EXPECT_EQ(count_lines(dir / "results.jsonl"), 18);
  std::map<std::string, std::set<std::string>> ids;
  for (const auto& [key, j] : results) {
    ids[std::get<0>(key)].insert(std::get<1>(key));
    EXPECT_EQ(j["seed"], 7);
    EXPECT_EQ(j["error"], "");
    EXPECT_EQ(j["gamma"], std::get<0>(key) == "target-only" ? 0 : 3);
    EXPECT_LE(j["output_tokens"].get<int>(), 16);
    EXPECT_TRUE(j["has_score"].get<bool>());
  }
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids["baseline"], ids["ears"]);
  EXPECT_EQ(ids["baseline"], ids["target-only"]);
  EXPECT_EQ(ids["baseline"].size(), 6u);
}

TEST(RunnerCli, RunMetaSaysWhatRan) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path& dir = three_arm_run();
  const json meta = read_json(dir / "run_meta.json");
  EXPECT_TRUE(meta["complete"].get<bool>());
  EXPECT_EQ(meta["expected_results"], 18);
  EXPECT_EQ(meta["baseline"], "baseline");
  ASSERT_EQ(meta["arms"].size(), 3u);
  for (const auto& a : meta["arms"]) EXPECT_GT(a["wall_s"].get<double>(), 0) << a.dump();
  EXPECT_EQ(meta["arms"][1]["verifier"]["beta"], 0.2);
  // The keys of reports/environment_keys.h, and no others: every run's, the end's load and (an arm
  // drafts here) the draft's; not `resumed` / `forced` (a first session).
  const json& e = meta["environment"];
  auto listed = [](std::span<const EnvironmentKey> keys, const std::string& key) {
    return std::any_of(keys.begin(), keys.end(), [&](const EnvironmentKey& k) { return k.key == key; });
  };
  for (const EnvironmentKey& k : kEnvironmentKeys)
    EXPECT_EQ(e.contains(std::string(k.key)), k.present.empty() || k.key == "load_average_1m_end" || k.key == "draft")
        << k.key << " in " << e.dump();
  for (const auto& [key, value] : e.items())
    EXPECT_TRUE(listed(kEnvironmentKeys, key)) << key << ": written but not in reports/environment_keys.h";
  for (const EnvironmentKey& k : kDraftEnvironmentKeys) EXPECT_TRUE(e["draft"].contains(std::string(k.key))) << k.key;
  for (const auto& [key, value] : e["draft"].items())
    EXPECT_TRUE(listed(kDraftEnvironmentKeys, key)) << "draft." << key << ": written but not in reports/environment_keys.h";
  EXPECT_EQ(meta["environment"]["threads"], 1);
  // The commit the binary was built from (stamped at build time), with -dirty for local changes;
  // "unknown" only outside a git checkout.
  const std::string commit = meta["environment"]["git_commit"].get<std::string>();
  if (fs::exists(test::source_dir() / ".git"))
    EXPECT_TRUE(std::regex_match(commit, std::regex("[0-9a-f]{7,40}(-dirty)?"))) << commit;
  // What ran (harness/run/environment.h): the resolved dtype next to the requested one.
  EXPECT_EQ(meta["environment"]["dtype_requested"], "auto");
  EXPECT_NE(meta["environment"]["dtype"], "auto") << "dtype: auto is recorded resolved";
  EXPECT_EQ(meta["environment"]["dtype"], meta["environment"]["compute_dtype"]);
  // The draft's facts beside the target's: the head computes in the target's dtype and path.
  const json& draft = meta["environment"]["draft"];
  EXPECT_EQ(draft["kind"], "eagle3") << draft;
  EXPECT_EQ(draft["path"], env().draft.string());
  EXPECT_EQ(draft["device"], "cpu");
  EXPECT_EQ(draft["compute_dtype"], meta["environment"]["compute_dtype"]);
  EXPECT_EQ(draft["weight_dtype"], meta["environment"]["weight_dtype"]);
  EXPECT_EQ(draft["kernel_path"], meta["environment"]["kernel_path"]);
  EXPECT_EQ(draft["parameters"], draft_weights(env().draft / "model.safetensors"));
  // Nothing slow or forced on the default path with 1 thread.
  if (std::getenv("EARS_KERNELS") == nullptr && std::getenv("EARS_NO_CPU_KERNELS") == nullptr)
    EXPECT_EQ(meta["environment"]["notices"], json::array());
  EXPECT_NE(meta["environment"]["command_line"].get<std::string>().find("--threads 1"), std::string::npos);
  EXPECT_EQ(meta["dataset"]["n_requests"], 6);
  EXPECT_EQ(meta["dataset"]["scorer"], "squad");  // the jsonl default (was "qa", now an alias)
  EXPECT_TRUE(fs::exists(dir / "config.yaml"));
  EXPECT_NE(test::read_file(dir / "config.yaml").find("limit: 6"), std::string::npos);
}

TEST(RunnerCli, ReportJsonHasEveryArmMetricAndComparison) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path& dir = three_arm_run();
  const json report = read_json(dir / "report.json");
  EXPECT_EQ(report["schema_version"], 1);
  for (const char* k : {"threads", "compute_dtype", "weight_dtype", "kernel_path", "cpu_model", "cpu_isa", "libtorch",
                        "load_average_1m_start", "load_average_1m_end"})
    EXPECT_TRUE(report["environment"].contains(k)) << k << " in report.json's environment";
  EXPECT_GE(report["environment"]["load_average_1m_end"].get<double>(), 0);
  EXPECT_FALSE(report["partial"].get<bool>());
  EXPECT_EQ(report["baseline"], "baseline");
  ASSERT_EQ(report["arms"].size(), 3u);
  for (const auto& a : report["arms"]) {
    for (const char* k : {"n_requests", "n_errors", "n_scored", "output_tokens", "wall_s", "output_tokens_per_s",
                          "latency_p50_s", "ttft_mean_s", "mean_accept_length", "acceptance_rate",
                          "acceptance_per_position", "pardon_share", "distortion_tv_mean", "accept_length_hist",
                          "uncertainty_buckets", "accuracy", "accuracy_ci95", "categories", "time_split_s"})
      EXPECT_TRUE(a["metrics"].contains(k)) << a["name"] << " lacks " << k;
    EXPECT_EQ(a["metrics"]["n_requests"], 6);
    EXPECT_EQ(a["metrics"]["n_scored"], 6);
    EXPECT_FALSE(a["metrics"]["wall_from_latencies"].get<bool>());
  }
  const json& ears_arm = report["arms"][1];
  EXPECT_EQ(ears_arm["name"], "ears");
  EXPECT_GE(ears_arm["metrics"]["mean_accept_length"].get<double>(), 1.0);
  EXPECT_LE(ears_arm["metrics"]["mean_accept_length"].get<double>(), 4.0);
  EXPECT_EQ(report["arms"][2]["metrics"]["mean_accept_length"], 1.0);  // target-only: one token per step
  ASSERT_EQ(report["comparisons"].size(), 2u);
  for (const auto& c : report["comparisons"]) {
    EXPECT_EQ(c["baseline"], "baseline");
    EXPECT_EQ(c["n_pairs"], 6);
    EXPECT_TRUE(c.contains("throughput_gain_pct"));
    EXPECT_TRUE(c.contains("accuracy_delta_pp"));
  }}

TEST(RunnerCli, ReportMdAndStdoutSayWhatRan) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path& dir = three_arm_run();
  const std::string md = test::read_file(dir / "report.md");
  EXPECT_NE(md.find("| Method"), std::string::npos) << md;
  // The configuration block above the results (also printed by `run`) says what ran.
  const auto env_line = md.find("| Computed in | ");
  ASSERT_NE(env_line, std::string::npos) << md;
  EXPECT_LT(env_line, md.find("## Results"));
  const std::string line = md.substr(env_line, md.find('\n', env_line) - env_line);
  for (const char* part : {"1 thread(s)", "kernel path", "LibTorch", "ISA", ", ATen CPU capability "})
    EXPECT_NE(line.find(part), std::string::npos) << part << " in: " << line;
  const json run_env = read_json(dir / "run_meta.json")["environment"];
  const std::string draft = fmt::format("draft eagle3 in {} on kernel path {} (0.1M parameters)",
                                        run_env["compute_dtype"].get<std::string>(), run_env["kernel_path"].get<std::string>());
  EXPECT_NE(line.find(draft), std::string::npos) << draft << " in: " << line;
  EXPECT_NE(md.find("| Load average (1 min) | "), std::string::npos) << md;
  EXPECT_NE(md.find(" at end"), std::string::npos) << md;
  // stdout: the report's Results table, the gate table (a rule fails, still exit 0), the run dir.
  const std::string& out = g_three_arm_proc.out;
  EXPECT_NE(out.find("## Results"), std::string::npos) << out;
  EXPECT_EQ(out.find("## Environment"), std::string::npos) << out;
  EXPECT_NE(out.find("GATES FAILED"), std::string::npos) << out;
  EXPECT_NE(out.find("Run directory: " + dir.string()), std::string::npos) << out;
  EXPECT_NE(g_three_arm_proc.err.find("loaded"), std::string::npos);
  EXPECT_NE(md.find("target-only"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "accept_length.svg"));
  EXPECT_NE(test::read_file(dir / "accept_length.svg").find("<svg"), std::string::npos);
}

TEST(RunnerCli, RunEvaluatesTheConfigsGates) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path& dir = three_arm_run();
  // The config's gates were evaluated: one passes, one fails (the run still exits 0).
  const json gate = read_json(dir / "gate.json");
  ASSERT_EQ(gate["checks"].size(), 2u);
  EXPECT_TRUE(gate["checks"][0]["pass"].get<bool>());
  EXPECT_FALSE(gate["checks"][1]["pass"].get<bool>());
  EXPECT_FALSE(gate["all_passed"].get<bool>());
}

TEST(RunnerCli, RefusesToOverwriteARun) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  Proc p = cli({"run", env().config3.string(), "--out", three_arm_run().string()});
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("--resume"), std::string::npos) << p.err;
  // Resuming a complete run does no work and loads no model.
  p = cli({"run", "--resume", three_arm_run().string(), "--quiet"});
  EXPECT_EQ(p.exit_code, 0) << show(p);
  EXPECT_EQ(count_lines(three_arm_run() / "results.jsonl"), 18);
  EXPECT_EQ(p.err.find("loaded"), std::string::npos) << p.err;
}

TEST(RunnerCli, GateExitCodes) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const std::string dir = three_arm_run().string();
  Proc p = cli({"gate", dir, "--check", "baseline n_requests >= 6", "--check", "ears: acceptance_rate >= 0"});
  EXPECT_EQ(p.exit_code, 0) << show(p);
  EXPECT_NE(p.out.find("PASS"), std::string::npos);
  json gate = read_json(three_arm_run() / "gate.json");
  EXPECT_TRUE(gate["all_passed"].get<bool>());
  EXPECT_EQ(gate["checks"].size(), 2u);

  p = cli({"gate", dir, "--check", "ears mean_accept_length > 100"});
  EXPECT_EQ(p.exit_code, 1) << show(p);
  EXPECT_NE(p.out.find("FAIL"), std::string::npos);
  EXPECT_FALSE(read_json(three_arm_run() / "gate.json")["all_passed"].get<bool>());

  p = cli({"gate", dir, "--check", "ears bogus_metric >= 1"});
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("bogus_metric"), std::string::npos);
  p = cli({"gate", (env().root / "no-such-run").string(), "--check", "ears accuracy >= 0"});
  EXPECT_EQ(p.exit_code, 2) << show(p);

  // Rules file: comments, the YAML form, and a wildcard (every arm).
  const fs::path rules = env().root / "rules.txt";
  write(rules, "# thresholds\nears: acceptance_rate >= 0   # any\nn_errors == 0\n\n");
  const fs::path out = env().root / "gate-rules.json";
  p = cli({"gate", dir, "--rules", rules.string(), "--json", out.string()});
  EXPECT_EQ(p.exit_code, 0) << show(p);
  gate = read_json(out);
  EXPECT_EQ(gate["checks"].size(), 1u + 3u);
  write(rules, "ears: acceptance_rate >= 0\nears acceptance_rate => 1\n");
  p = cli({"gate", dir, "--rules", rules.string()});
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("rules.txt:2"), std::string::npos) << p.err;
  // A rules file that is a directory, missing or holds no rule is bad input, never the config's gates.
  write(rules, "# nothing here\n\n");
  for (const std::string& bad : {rules.string(), env().root.string(), (env().root / "none.txt").string()}) {
    p = cli({"gate", dir, "--rules", bad});
    EXPECT_EQ(p.exit_code, 2) << bad << "\n" << show(p);
    EXPECT_NE(p.err.find("--rules " + bad), std::string::npos) << p.err;
  }

  // A rules file an editor saved with a byte order mark reads as without one (was "'\xEF\xBB\xBFears' is not a
  // valid arm name").
  write(rules, "\xEF\xBB\xBF" "ears: acceptance_rate >= 0\n");
  p = cli({"gate", dir, "--rules", rules.string()});
  EXPECT_EQ(p.exit_code, 0) << show(p);
  // --json naming a directory: one line saying so (was "cannot replace the file (Success)").
  p = cli({"gate", dir, "--check", "ears acceptance_rate >= 0", "--json", env().root.string()});
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("--json " + env().root.string() + ": is a directory; pass a file path"), std::string::npos) << p.err;
  EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << p.err;

  // No rules given: the run's config gates (one of which fails).
  p = cli({"gate", dir});
  EXPECT_EQ(p.exit_code, 1) << show(p);
  EXPECT_NE(p.out.find("config"), std::string::npos);
}

// `report` of shards of different experiments: refused naming --force, which `report` has (as
// `merge`): the differences become warnings in the report.
TEST(RunnerCli, ReportCombinesDifferentExperimentsOnlyWithForce) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path s0 = env().root / "force-s0", s1 = env().root / "force-s1", out = env().root / "force-report";
  for (const auto& [dir, shard, gamma] : {std::tuple{s0, "0/2", "3"}, std::tuple{s1, "1/2", "2"}}) {
    Proc p = cli({"run", env().config3.string(), "--set", "dataset.limit=2", "--set", std::string("decoding.gamma=") + gamma,
                  "--shard", shard, "--out", dir.string(), "--threads", "1", "--quiet"});
    ASSERT_EQ(p.exit_code, 0) << show(p);
    // A shard's own report is PARTIAL: the config's gates, however they came out, do not pass it
    // (gate.json said all_passed: true when its checks passed, and scripts read it).
    EXPECT_NE(p.out.find("FAIL: the report is PARTIAL"), std::string::npos) << p.out;
    const json gate = read_json(dir / "gate.json");
    EXPECT_TRUE(gate["partial"].get<bool>());
    EXPECT_FALSE(gate["all_passed"].get<bool>());
  }
  Proc p = cli({"report", s0.string(), s1.string(), "--out", out.string(), "--quiet"});
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("or pass --force"), std::string::npos) << p.err;
  p = cli({"report", s0.string(), s1.string(), "--out", out.string(), "--quiet", "--force"});
  EXPECT_EQ(p.exit_code, 0) << show(p);
  EXPECT_NE(read_json(out / "report.json")["warnings"].dump().find("--force"), std::string::npos);
  // --out naming another run (here a source): its report would describe runs it does not hold.
  for (const fs::path& into : {s0, s1}) {
    p = cli({"report", s0.string(), s1.string(), "--out", into.string(), "--quiet", "--force"});
    EXPECT_EQ(p.exit_code, 2) << show(p);
    EXPECT_NE(p.err.find("report --out " + into.string() + ": a run directory"), std::string::npos) << p.err;
  }
  p = cli({"report", s0.string(), "--out", s1.string(), "--quiet"});
  EXPECT_EQ(p.exit_code, 2) << show(p);
  p = cli({"report", s0.string(), "--out", s0.string(), "--quiet"});  // itself, re-rendered
  EXPECT_EQ(p.exit_code, 0) << show(p);
}

TEST(RunnerCli, ReportRerendersAndValidateChecks) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path out = env().root / "rerendered";
  Proc p = cli({"report", three_arm_run().string(), "--out", out.string(), "--quiet"});
  EXPECT_EQ(p.exit_code, 0) << show(p);
  const json a = read_json(three_arm_run() / "report.json"), b = read_json(out / "report.json");
  EXPECT_EQ(a["arms"], b["arms"]);
  EXPECT_EQ(a["comparisons"], b["comparisons"]);

  p = cli({"validate", env().config3.string()});
  EXPECT_EQ(p.exit_code, 0) << show(p);
  EXPECT_NE(p.out.find("arms:"), std::string::npos);
  EXPECT_NE(p.out.find(env().model.string()), std::string::npos);
  EXPECT_NE(p.err.find("40 requests"), std::string::npos) << p.err;

  const fs::path bad = env().root / "bad.yaml";
  write(bad, "name: bad\ntarget: {path: " + env().model.string() + "}\ndraft: {kind: none}\n" +
                 "dataset: {name: jsonl, path: " + env().data.string() + "}\ndecoding:\n  gama: 3\narms: [baseline]\n");
  p = cli({"validate", bad.string()});
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("bad.yaml:6:"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("gamma"), std::string::npos) << p.err;

  // run.threads: negative is a config error; above 4 x the logical CPUs is this machine's error,
  // from validate and from run (before anything is written), naming the key and the range.
  p = cli({"validate", env().config3.string(), "--set", "run.threads=-1"});
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("run.threads"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find(">= 0"), std::string::npos) << p.err;
  for (const char* cmd : {"validate", "run"}) {
    const fs::path never = env().root / "never-written";
    p = std::string(cmd) == "run" ? cli({"run", env().config3.string(), "--set", "run.threads=10000", "--out", never.string()})
                                  : cli({"validate", env().config3.string(), "--set", "run.threads=10000"});
    EXPECT_EQ(p.exit_code, 2) << cmd << ": " << show(p);
    EXPECT_NE(p.err.find("run.threads: 10000 is out of range; use 0 (auto"), std::string::npos) << cmd << ": " << p.err;
    EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << p.err;
    EXPECT_FALSE(fs::exists(never / "run_meta.json"));
  }

  // A run that fails while starting (here: a CUDA device on a LibTorch without CUDA, found when the
  // models load) takes back what it wrote: the corrected command runs into the same --out.
  {
    const fs::path again = env().root / "failed-start";
    p = cli({"run", env().config3.string(), "--set", "target.device=cuda", "--set", "dataset.limit=1", "--out",
             again.string(), "--threads", "1"});
    if (p.err.find("without CUDA") != std::string::npos) {
      EXPECT_EQ(p.exit_code, 2) << show(p);
      EXPECT_FALSE(fs::exists(again)) << "a failed start left " << again;
      p = cli({"run", env().config3.string(), "--set", "dataset.limit=1", "--out", again.string(), "--threads", "1",
               "--quiet"});
      EXPECT_EQ(p.exit_code, 0) << show(p);
      EXPECT_TRUE(fs::exists(again / "report.json"));
    }
  }

  p = cli({"validate", env().config3.string(), "--set", "target.path=" + (env().root / "missing-model").string()});
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("target.path"), std::string::npos) << p.err;
  p = cli({"validate", env().config3.string(), "--set", "target.path=" + (test::shared_dir() / "fixtures/qwen3-tiny").string()});
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("tokenizer.json"), std::string::npos) << p.err;
}

// Removes the scratch directory after every test ran, in whatever order (--gtest_shuffle).
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(scratch_root(), ec);
  }
};
const ::testing::Environment* const kScratchCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);
