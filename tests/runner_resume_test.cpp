// The experiment runner: the real `ears-bench` executable driven as a subprocess on the tiny golden
// fixtures — resume after SIGKILL, one writer per run dir, shards, SIGINT / SIGTERM, fault
// injection, determinism across thread counts.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <random>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "decoders/engine.h"
#include "datasets/dataset.h"
#include "harness/base/error.h"
#include "harness/run/progress.h"
#include "harness/run/runner.h"
#include "reports/report.h"
#include "tests/test_util.h"
#include "tests/runner_test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ears;
using namespace ears::runner;
using namespace ears::test::runner_test;

namespace {

// Same outcome: text, ids, counters and score (timings and run_id differ between runs).
void expect_same_outcomes(const fs::path& a, const fs::path& b) {
  auto ra = results_by_key(a), rb = results_by_key(b);
  ASSERT_EQ(ra.size(), rb.size());
  for (const auto& [key, ja] : ra) {
    ASSERT_TRUE(rb.count(key)) << std::get<0>(key) << " " << std::get<1>(key);
    const json& jb = rb.at(key);
    for (const char* k : {"text", "output_ids", "output_tokens", "steps", "accepted", "corrections", "bonus", "pardoned",
                          "correct", "em", "f1", "accept_length_hist"})
      EXPECT_EQ(ja.value(k, json()), jb.value(k, json())) << k << " of " << std::get<0>(key) << " " << std::get<1>(key);
  }
}

// The uninterrupted 2-arm reference run (30 requests).
const fs::path& reference_run() {
  static fs::path dir = [] {
    fs::path d = env().root / "ref";
    Proc p = cli({"run", env().config2.string(), "--limit", "30", "--out", d.string(), "--threads", "1", "--quiet"});
    EXPECT_EQ(p.exit_code, 0) << show(p);
    return d;
  }();
  return dir;
}

// A copy of the reference run to edit, at env().root / name.
fs::path reference_copy(const std::string& name) {
  const fs::path dir = env().root / name;
  fs::copy(reference_run(), dir, fs::copy_options::recursive);
  return dir;
}

// Starts the full 2-arm run into `dir` and returns once it has written 2 results (stdout/stderr
// go to <log>.out / <log>.err); -1 when the run ended before that (it cannot be signalled then).
pid_t start_config2_run(const fs::path& dir, const fs::path& log) {
  const pid_t pid = spawn_ears({"run", env().config2.string(), "--out", dir.string(), "--threads", "1"},
                               log.string() + ".out", log.string() + ".err");
  const auto t0 = std::chrono::steady_clock::now();
  while ((!fs::exists(dir / "results.jsonl") || count_lines(dir / "results.jsonl") < 2) &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != 0) return -1;
  return pid;
}

}  // namespace

TEST(RunnerCli, ResumeAfterSigkillMatchesAnUninterruptedRun) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path& ref = reference_run();
  ASSERT_EQ(count_lines(ref / "results.jsonl"), 60);
  const fs::path dir = env().root / "killed";
  const pid_t pid = spawn_ears({"run", env().config2.string(), "--limit", "30", "--out", dir.string(), "--threads", "1"},
                          env().root / "killed.out", env().root / "killed.err");
  const auto t0 = std::chrono::steady_clock::now();
  int lines = 0;
  while ((lines = fs::exists(dir / "results.jsonl") ? count_lines(dir / "results.jsonl") : 0) < 8 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "the run finished before it could be killed";
  ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_for(pid), 128 + SIGKILL);
  const int kept = count_lines(dir / "results.jsonl");
  EXPECT_GE(kept, 8);
  EXPECT_LT(kept, 60);
  EXPECT_FALSE(read_json(dir / "run_meta.json")["complete"].get<bool>());
  // A writer killed mid-line leaves a truncated last line.
  {
    std::ofstream out(dir / "results.jsonl", std::ios::app | std::ios::binary);
    out << R"({"run_id":"x","arm":"baseline","request_id":"jso)";
  }
  Proc p = cli({"run", "--resume", dir.string(), "--threads", "1"});
  EXPECT_EQ(p.exit_code, 0) << show(p);
  EXPECT_NE(p.err.find("truncated"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find(fmt::format("{} already done", kept)), std::string::npos) << p.err;
  EXPECT_EQ(count_lines(dir / "results.jsonl"), 60);
  expect_same_outcomes(ref, dir);
  const json report = read_json(dir / "report.json"), ref_report = read_json(ref / "report.json");
  EXPECT_FALSE(report["partial"].get<bool>());
  EXPECT_TRUE(read_json(dir / "run_meta.json")["complete"].get<bool>());
  ASSERT_EQ(report["arms"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(report["arms"][i]["metrics"]["accuracy"], ref_report["arms"][i]["metrics"]["accuracy"]);
    EXPECT_EQ(report["arms"][i]["metrics"]["mean_accept_length"], ref_report["arms"][i]["metrics"]["mean_accept_length"]);
    EXPECT_EQ(report["arms"][i]["metrics"]["n_requests"], 30);
  }
  EXPECT_EQ(read_json(dir / "run_meta.json")["environment"]["resumed"].size(), 1u);
  // A kill costs at most one batch's wall time: each arm keeps its measured wall time.
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(report["arms"][i]["metrics"]["wall_from_latencies"].get<bool>()) << i;
}

// Lines deleted by hand to redo them: the arm's recorded wall time covered results that are gone,
// and added to the redo's it understated tok/s without a word. The resume says so and the arm's
// speed comes from Σ latencies; the other arm keeps its wall time.
TEST(RunnerCli, ResumeAfterDeletedLinesDropsTheirWallTime) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path& ref = reference_run();
  const fs::path dir = reference_copy("deleted");
  const json ref_report = read_json(ref / "report.json");
  const std::string arm = ref_report["arms"][1]["name"].get<std::string>();
  std::string kept;
  {
    std::ifstream in(dir / "results.jsonl");
    for (std::string line; std::getline(in, line);)
      if (json::parse(line)["arm"] != arm) kept += line + "\n";
  }
  std::ofstream(dir / "results.jsonl", std::ios::trunc) << kept;
  Proc p = cli({"run", "--resume", dir.string(), "--threads", "1"});
  ASSERT_EQ(p.exit_code, 0) << show(p);
  EXPECT_NE(p.err.find("warning: arm '" + arm + "' has 0 result(s) of the 30 its recorded wall time covers"),
            std::string::npos)
      << p.err;
  const json report = read_json(dir / "report.json");
  EXPECT_FALSE(report["arms"][0]["metrics"]["wall_from_latencies"].get<bool>());
  EXPECT_EQ(report["arms"][0]["metrics"]["wall_s"], ref_report["arms"][0]["metrics"]["wall_s"]);
  EXPECT_TRUE(report["arms"][1]["metrics"]["wall_from_latencies"].get<bool>());
  EXPECT_EQ(report["arms"][1]["metrics"]["n_requests"], 30);
}

// A kill between a batch's results and its run_meta.json update (simulated: the arm's recorded
// wall time and count without its last result): the resume adds that batch's latency, says so,
// and the report keeps the warning (the batch had read as free time: +104 % in an audit).
TEST(RunnerCli, ResumeAfterAKillBetweenResultsAndWallTimeAddsTheBatch) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = reference_copy("untimed");
  const std::string arm = read_json(dir / "report.json")["arms"][1]["name"].get<std::string>();
  double last_latency = 0;
  {
    std::ifstream in(dir / "results.jsonl");
    for (std::string line; std::getline(in, line);)
      if (const json j = json::parse(line); j["arm"] == arm) {
        last_latency = j["latency_s"].get<double>();
        EXPECT_GT(j["start_s"].get<double>(), 1.7e9);  // recorded, Unix time
      }
  }
  json meta = read_json(dir / "run_meta.json");
  const double full_wall = meta["arms"][1]["wall_s"].get<double>();
  meta["arms"][1]["wall_s"] = full_wall - last_latency;
  meta["arms"][1]["timed_results"] = 29;
  meta["complete"] = false;
  std::ofstream(dir / "run_meta.json", std::ios::trunc) << meta.dump(2);
  Proc p = cli({"run", "--resume", dir.string(), "--threads", "1"});
  ASSERT_EQ(p.exit_code, 0) << show(p);
  const std::string warning = "arm '" + arm + "': 1 result(s) were written after its last recorded wall time";
  EXPECT_NE(p.err.find(warning), std::string::npos) << p.err;
  const json report = read_json(dir / "report.json");
  EXPECT_FALSE(report["arms"][1]["metrics"]["wall_from_latencies"].get<bool>());
  EXPECT_NEAR(report["arms"][1]["metrics"]["wall_s"].get<double>(), full_wall, 1e-9);
  EXPECT_NE(report["warnings"].dump().find(warning), std::string::npos) << report["warnings"].dump();
}

// "other = the rest of the latency": every result's split sums to its latency (an audit found one
// request's split 17 % short), both arms.
TEST(RunnerCli, EveryResultsTimeSplitSumsToItsLatency) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  std::ifstream in(reference_run() / "results.jsonl");
  int n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    const json j = json::parse(line);
    const double split = j["prefill_s"].get<double>() + j["draft_s"].get<double>() + j["verify_s"].get<double>() +
                         j["other_s"].get<double>();
    EXPECT_NEAR(split, j["latency_s"].get<double>(), 1e-6 + 1e-9 * j["latency_s"].get<double>()) << line;
    EXPECT_GE(j["other_s"].get<double>(), 0);
  }
  EXPECT_EQ(n, 60);
}

// gate reads report.json; a report older than its run (a resume killed before it re-rendered, or
// results edited since) passed with exit 0 in an audit. Now one line naming the fix, exit 2.
TEST(RunnerCli, GateRefusesAReportOlderThanItsRun) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = reference_copy("stale");
  const std::vector<std::string> gate = {"gate", dir.string(), "--check", "n_errors == 0"};
  EXPECT_EQ(cli(gate).exit_code, 0);
  {  // gate.json cannot be written there: the verdict is still shown, and the error names --json
    fs::remove(dir / "gate.json");
    fs::create_directories(dir / "gate.json");
    const Proc q = cli(gate);
    EXPECT_EQ(q.exit_code, 2) << show(q);
    EXPECT_NE(q.out.find("2 of 2 checks passed"), std::string::npos) << show(q);
    EXPECT_NE(q.err.find("or write gate.json elsewhere with --json PATH"), std::string::npos) << show(q);
    fs::remove(dir / "gate.json");
  }
  json meta = read_json(dir / "run_meta.json");
  meta["complete"] = false;  // a resume started (and was killed)
  std::ofstream(dir / "run_meta.json", std::ios::trunc) << meta.dump(2);
  Proc p = cli(gate);
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("report.json: older than its run (" + (dir / "run_meta.json").string() +
                       " says the run did not complete"),
            std::string::npos)
      << p.err;
  EXPECT_NE(p.err.find("re-render it with 'ears-bench report " + dir.string() + "'"), std::string::npos) << p.err;
  meta["complete"] = true;
  std::ofstream(dir / "run_meta.json", std::ios::trunc) << meta.dump(2);
  std::string head;
  {
    std::ifstream in(dir / "results.jsonl");
    std::string line;
    for (int i = 0; i < 40 && std::getline(in, line); ++i) head += line + "\n";
  }
  std::ofstream(dir / "results.jsonl", std::ios::trunc) << head;
  p = cli(gate);
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("results.jsonl holds 40 results, the report counts 60"), std::string::npos) << p.err;
}

// A session resumed on another kernel path (EARS_KERNELS set this time) records its path facts and
// notices in its "resumed" entry, says so on stderr, and the report warns that the run mixes paths.
TEST(RunnerCli, ResumeOnAnotherKernelPathIsRecordedAndWarned) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = reference_copy("repath");
  const json recorded = read_json(dir / "run_meta.json")["environment"];
  if (recorded["kernel_path"] == "aten") GTEST_SKIP() << "the run already took the aten path";
  Proc p;
  {
    test::ScopedEnv path("EARS_KERNELS", "aten");
    p = cli({"run", "--resume", dir.string(), "--threads", "1"});
  }
  ASSERT_EQ(p.exit_code, 0) << show(p);
  const json session = read_json(dir / "run_meta.json")["environment"]["resumed"].back();
  // Its keys: reports/environment_keys.h's for a resumed session, and each of the path facts.
  for (const EnvironmentKey& k : kResumedEnvironmentKeys) EXPECT_TRUE(session.contains(std::string(k.key))) << k.key;
  for (const char* k : kPathFacts) EXPECT_TRUE(session.contains(k)) << k;
  EXPECT_EQ(session.size(), std::size(kResumedEnvironmentKeys) + std::size(kPathFacts)) << session;
  EXPECT_EQ(session["kernel_path"], "aten") << session;
  for (const char* k : {"compute_dtype", "cpu_model", "cpu_isa", "libtorch"}) EXPECT_EQ(session[k], recorded[k]) << k;
  const std::string capped = fmt::format("kernel path aten, below this CPU's best {}: EARS_KERNELS=aten caps it",
                                         recorded["kernel_path_best"].get<std::string>());
  ASSERT_EQ(session["notices"].size(), 1u) << session;
  EXPECT_EQ(session["notices"][0].get<std::string>().rfind(capped, 0), 0u) << session;
  const std::string mixed = fmt::format("{} was resumed at {} on another path (kernel_path {} -> aten): its results mix both",
                                        dir.string(), session["at"].get<std::string>(), recorded["kernel_path"].get<std::string>());
  EXPECT_NE(p.err.find("ears-bench: notice: " + capped), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("warning: " + mixed), std::string::npos) << p.err;
  // The report's warnings: the first session's own notices (under a masked suite, its capped path's),
  // then this session's, then the mix.
  json warnings = recorded.value("notices", json::array());
  warnings.push_back(session["notices"][0]);
  warnings.push_back(mixed);
  const json report = read_json(dir / "report.json");
  EXPECT_EQ(report["warnings"], warnings) << report["warnings"];
  EXPECT_NE(test::read_file(dir / "report.md").find("> Warning: " + mixed), std::string::npos);
}

// A first session that died while loading the models left no model facts; the session that loads
// them records them, so a later session on another path is compared with something (an audit's
// sessions on avx512bf16 then avx2 mixed results with no warning).
TEST(RunnerCli, ModelFactsAreRecordedByTheFirstSessionThatLoads) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = reference_copy("diedloading");
  json meta = read_json(dir / "run_meta.json");
  const json full = meta["environment"];
  for (const char* k : {"target_parameters", "kernel_path", "compute_dtype", "weight_dtype", "checkpoint_dtype",
                        "weight_pages", "draft"})
    meta["environment"].erase(k);
  for (auto& a : meta["arms"]) a["wall_s"] = 0, a["timed_results"] = 0;
  meta["complete"] = false;
  std::ofstream(dir / "run_meta.json", std::ios::trunc) << meta.dump(2);
  std::ofstream(dir / "results.jsonl", std::ios::trunc);
  fs::remove(dir / "report.json");
  Proc p = cli({"run", "--resume", dir.string(), "--threads", "1", "--quiet"});
  ASSERT_EQ(p.exit_code, 0) << show(p);
  const json env_now = read_json(dir / "run_meta.json")["environment"];
  for (const char* k : {"target_parameters", "kernel_path", "compute_dtype", "draft"})
    EXPECT_EQ(env_now.value(k, json()), full[k]) << k;
}

// Each dead end of a killed start names its way out (an audit went in circles between 'run' and
// '--resume'), and a killed writer's temp files go once the next writer holds the lock.
TEST(RunnerCli, KilledStartsNameTheirWayOut) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path bare = env().root / "killedstart";
  fs::create_directories(bare);
  std::ofstream(bare / ".lock");
  std::ofstream(bare / "config.yaml.tmp.123") << "partial";
  std::ofstream(bare / "notes.tmp.1") << "the user's";  // --out may name a directory with other files

  Proc p = cli({"run", "--resume", bare.string()});
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("start the run again with 'ears-bench run CONFIG --out " + bare.string() + "'"),
            std::string::npos) << p.err;
  p = cli({"run", env().config2.string(), "--limit", "2", "--out", bare.string(), "--threads", "1", "--quiet"});
  EXPECT_EQ(p.exit_code, 0) << show(p);
  EXPECT_FALSE(fs::exists(bare / "config.yaml.tmp.123"));
  EXPECT_TRUE(fs::exists(bare / "notes.tmp.1"));

  const fs::path lost = reference_copy("lostmeta");
  fs::remove(lost / "run_meta.json");
  p = cli({"run", "--resume", lost.string()});
  EXPECT_EQ(p.exit_code, 2) << show(p);
  EXPECT_NE(p.err.find("start over with 'ears-bench run " + (lost / "config.yaml").string() + " --out NEW_DIR'"),
            std::string::npos) << p.err;
}

// One writer per run directory (a second one fails at once, a killed one leaves no lock), and
// --resume refuses a config.yaml edited since the start unless --force (recorded in the report).
TEST(RunnerCli, OneWriterPerRunDirAndResumeRefusesAChangedConfig) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = env().root / "locked";
  const pid_t pid = start_config2_run(dir, env().root / "locked");
  ASSERT_GT(pid, 0) << "the run finished before the second writer started";
  ::kill(pid, SIGSTOP);  // it keeps its lock but cannot finish while the second writers try
  Proc second = cli({"run", "--resume", dir.string(), "--threads", "1", "--quiet"});
  EXPECT_EQ(second.exit_code, 2) << show(second);
  EXPECT_NE(second.err.find(fmt::format("another ears-bench process (pid {}) is writing this run directory", pid)),
            std::string::npos) << second.err;
  Proc fresh = cli({"run", env().config2.string(), "--out", dir.string(), "--quiet"});
  EXPECT_EQ(fresh.exit_code, 2) << show(fresh);
  // The live writer is named, not "already holds a run; continue it with --resume" (which it refuses).
  EXPECT_NE(fresh.err.find(fmt::format("another ears-bench process (pid {})", pid)), std::string::npos) << fresh.err;
  ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_for(pid), 128 + SIGKILL);

  // A draft directory that no longer exists: named as such, before any fingerprint comparison
  // (it read as a changed fingerprint, and --force then recorded a "forced" entry before failing).
  const std::string recorded = test::read_file(dir / "config.yaml");
  std::string gone = recorded;
  const size_t draft_at = gone.find("eagle3-tiny");
  ASSERT_NE(draft_at, std::string::npos) << gone;
  gone.replace(draft_at, 11, "eagle3-gone");
  std::ofstream(dir / "config.yaml", std::ios::trunc) << gone;
  Proc missing = cli({"run", "--resume", dir.string(), "--threads", "1", "--quiet", "--force"});
  EXPECT_EQ(missing.exit_code, 2) << show(missing);
  EXPECT_NE(missing.err.find("arms.0.draft.path (arm 'baseline') '"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("eagle3-gone' does not exist; point draft.path at the draft checkpoint directory"),
            std::string::npos)
      << missing.err;
  EXPECT_FALSE(read_json(dir / "run_meta.json")["environment"].contains("forced"));
  std::ofstream(dir / "config.yaml", std::ios::trunc) << recorded;

  std::string yaml = test::read_file(dir / "config.yaml");
  for (size_t at; (at = yaml.find("gamma: 3")) != std::string::npos;) yaml.replace(at, 8, "gamma: 2");
  std::ofstream(dir / "config.yaml", std::ios::trunc) << yaml;
  Proc changed = cli({"run", "--resume", dir.string(), "--threads", "1", "--quiet"});
  EXPECT_EQ(changed.exit_code, 2) << show(changed);
  EXPECT_NE(changed.err.find("decoding.gamma: 3 -> 2"), std::string::npos) << changed.err;
  EXPECT_NE(changed.err.find("--force"), std::string::npos) << changed.err;
  EXPECT_EQ(cli({"run", env().config2.string(), "--out", (env().root / "new").string(), "--force"}).exit_code, 2);

  Proc forced = cli({"run", "--resume", dir.string(), "--threads", "1", "--quiet", "--force"});
  ASSERT_EQ(forced.exit_code, 0) << show(forced);
  const json report = read_json(dir / "report.json");
  EXPECT_NE(report["warnings"].dump().find("resumed with --force although"), std::string::npos) << report["warnings"];
  EXPECT_NE(test::read_file(dir / "report.md").find("decoding.gamma: 3 -> 2"), std::string::npos);
}

TEST(RunnerCli, ShardsMergeIntoTheFullRun) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path root = env().root / "sharded";
  for (int i = 0; i < 2; ++i) {
    Proc p = cli({"run", env().config2.string(), "--limit", "30", "--shard", fmt::format("{}/2", i), "--out",
                  (root / fmt::format("shard-{}", i)).string(), "--threads", "1", "--quiet"});
    ASSERT_EQ(p.exit_code, 0) << show(p);
    EXPECT_EQ(count_lines(root / fmt::format("shard-{}", i) / "results.jsonl"), 30);
    EXPECT_EQ(read_json(root / fmt::format("shard-{}", i) / "run_meta.json")["dataset"]["shard"], fmt::format("{}/2", i));
  }
  Proc p = cli({"merge", (root / "merged").string(), (root / "shard-0").string(), (root / "shard-1").string(), "--quiet"});
  ASSERT_EQ(p.exit_code, 0) << show(p);
  expect_same_outcomes(reference_run(), root / "merged");
  const json report = read_json(root / "merged" / "report.json");
  EXPECT_FALSE(report["partial"].get<bool>());
  EXPECT_EQ(report["arms"][0]["metrics"]["n_requests"], 30);
  EXPECT_EQ(report["sources"].size(), 2u);
  EXPECT_TRUE(fs::exists(root / "merged" / "config.yaml"));
  EXPECT_EQ(cli({"gate", (root / "merged").string(), "--check", "ears n_requests == 30"}).exit_code, 0);
  // The merged directory is a whole run: rendered again, it is still complete.
  Proc again = cli({"report", (root / "merged").string(), "--quiet"});
  ASSERT_EQ(again.exit_code, 0) << show(again);
  EXPECT_FALSE(read_json(root / "merged" / "report.json")["partial"].get<bool>()) << again.out;

  // A shard resumed with another shard's result in its file: refused, not counted as its own.
  const fs::path mixed = root / "mixed";
  fs::copy(root / "shard-0", mixed);
  fs::remove(mixed / "report.json");
  std::string other = test::read_file(root / "shard-1" / "results.jsonl");
  other = other.substr(0, other.find('\n') + 1);
  std::ofstream(mixed / "results.jsonl", std::ios::app) << other;
  Proc resumed = cli({"run", "--resume", mixed.string(), "--threads", "1", "--quiet"});
  EXPECT_EQ(resumed.exit_code, 2) << show(resumed);
  EXPECT_NE(resumed.err.find("that this run does not make (15 requests in its shard, 1 repeat(s))"), std::string::npos)
      << resumed.err;
}

TEST(RunnerCli, SigintStopsAfterTheBatchWithAPartialReport) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = env().root / "interrupted";
  const pid_t pid = start_config2_run(dir, env().root / "int");
  ASSERT_GT(pid, 0) << "the run finished before it could be interrupted";
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_for(pid), 130) << test::read_file(env().root / "int.err");
  const int n = count_lines(dir / "results.jsonl");
  EXPECT_LT(n, 80);
  const json report = read_json(dir / "report.json");
  EXPECT_TRUE(report["partial"].get<bool>());
  EXPECT_FALSE(read_json(dir / "run_meta.json")["complete"].get<bool>());
  EXPECT_NE(test::read_file(dir / "report.md").find("artial"), std::string::npos);
  EXPECT_NE(test::read_file(env().root / "int.err").find("--resume"), std::string::npos);
  // Every line is whole: the in-flight batch finished before the process stopped.
  for (const auto& l : lines_of(dir / "results.jsonl")) EXPECT_NO_THROW(json::parse(l));
  // A partial report fails its gate even when every rule holds, unless --allow-partial.
  Proc g = cli({"gate", dir.string(), "--check", "n_errors == 0"});
  EXPECT_EQ(g.exit_code, 1) << show(g);
  EXPECT_NE(g.out.find("PARTIAL"), std::string::npos) << g.out;
  EXPECT_FALSE(read_json(dir / "gate.json")["all_passed"].get<bool>());
  g = cli({"gate", dir.string(), "--check", "n_errors == 0", "--allow-partial"});
  EXPECT_EQ(g.exit_code, 0) << show(g);
}

TEST(RunnerCli, SigtermStopsLikeSigint) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = env().root / "terminated";
  const pid_t pid = start_config2_run(dir, env().root / "term");
  ASSERT_GT(pid, 0) << "the run finished before it could be terminated";
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_for(pid), 128 + SIGTERM) << test::read_file(env().root / "term.err");
  EXPECT_TRUE(read_json(dir / "report.json")["partial"].get<bool>());
  EXPECT_FALSE(read_json(dir / "run_meta.json")["complete"].get<bool>());
  for (const auto& l : lines_of(dir / "results.jsonl")) EXPECT_NO_THROW(json::parse(l));
  // And it resumes to the full run.
  Proc p = cli({"run", "--resume", dir.string(), "--threads", "1", "--quiet"});
  EXPECT_EQ(p.exit_code, 0) << show(p);
  EXPECT_EQ(count_lines(dir / "results.jsonl"), 80);
}

// Fault injection: SIGKILL at 20 random points (while starting, loading, mid-batch, between
// batches, while writing), resuming after each; the result equals an uninterrupted run with
// nothing lost or duplicated.
TEST(RunnerCli, TwentyRandomKillsThenResumeLoseAndDuplicateNothing) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path& ref = reference_run();
  const fs::path dir = env().root / "killed20";
  std::mt19937 rng(20261122);
  int kills = 0, attempts = 0;
  std::set<int> kill_lines;  // results.jsonl line counts seen at the kills
  while (kills < 20 && attempts < 60) {
    ++attempts;
    const bool started = fs::exists(dir / "run_meta.json");
    std::vector<std::string> args =
        started ? std::vector<std::string>{"run", "--resume", dir.string(), "--threads", "1", "--quiet"}
                : std::vector<std::string>{"run", env().config2.string(), "--limit", "30", "--out", dir.string(),
                                           "--threads", "1", "--quiet"};
    const int before = fs::exists(dir / "results.jsonl") ? count_lines(dir / "results.jsonl") : 0;
    const pid_t pid = spawn_ears(args, env().root / "k20.out", env().root / "k20.err");
    // Kill point: `delay_ms` after the results file holds `want` lines (0-3 new ones; 0 new: while
    // starting or loading, 0-900 ms after the start), or at once when the run got past `want`:
    // so a fast build (LibTorch 2.x writes a line every few ms here) cannot finish its 60 lines
    // inside one delay, and is killed 20 times like a slow one.
    const int want = before + std::uniform_int_distribution<int>(0, 3)(rng);
    const int delay_ms = want == before ? std::uniform_int_distribution<int>(0, 900)(rng)
                                        : std::uniform_int_distribution<int>(0, 25)(rng);
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<std::chrono::steady_clock::time_point> reached;
    int status = 0;
    bool exited = false;
    while (!exited && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
      const int lines = fs::exists(dir / "results.jsonl") ? count_lines(dir / "results.jsonl") : 0;
      if (lines > want) break;
      if (lines == want && !reached) reached = std::chrono::steady_clock::now();
      if (reached && std::chrono::steady_clock::now() - *reached >= std::chrono::milliseconds(delay_ms)) break;
      exited = ::waitpid(pid, &status, WNOHANG) == pid;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (!exited && ::waitpid(pid, &status, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      EXPECT_EQ(wait_for(pid), 128 + SIGKILL);
      ++kills;
      kill_lines.insert(fs::exists(dir / "results.jsonl") ? count_lines(dir / "results.jsonl") : 0);
    } else {
      ASSERT_TRUE(exited || WIFEXITED(status)) << test::read_file(env().root / "k20.err");
      // It finished (or failed) before the kill: only a complete run may end on its own.
      ASSERT_EQ(WEXITSTATUS(status), 0) << test::read_file(env().root / "k20.err");
      break;
    }
  }
  EXPECT_EQ(kills, 20) << "attempts " << attempts;
  EXPECT_GE(kill_lines.size(), 8u) << "the kills should land at many different points of the run";
  Proc p = cli({"run", "--resume", dir.string(), "--threads", "1", "--quiet"});
  ASSERT_EQ(p.exit_code, 0) << show(p);
  EXPECT_EQ(count_lines(dir / "results.jsonl"), 60);
  expect_same_outcomes(ref, dir);  // also fails on any duplicate (arm, request, repeat)
  const json report = read_json(dir / "report.json"), ref_report = read_json(ref / "report.json");
  EXPECT_FALSE(report["partial"].get<bool>());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(report["arms"][i]["metrics"]["n_requests"], 30);
    EXPECT_EQ(report["arms"][i]["metrics"]["accuracy"], ref_report["arms"][i]["metrics"]["accuracy"]);
    EXPECT_EQ(report["arms"][i]["metrics"]["output_tokens"], ref_report["arms"][i]["metrics"]["output_tokens"]);
  }
}

// Determinism: the same config and seed give the same outputs with 1 and 2 threads.
TEST(RunnerCli, SameOutputsAcrossThreadCounts) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = env().root / "two-threads";
  Proc p = cli({"run", env().config2.string(), "--limit", "30", "--out", dir.string(), "--threads", "2", "--quiet"});
  ASSERT_EQ(p.exit_code, 0) << show(p);
  EXPECT_EQ(read_json(dir / "run_meta.json")["environment"]["threads"], 2);
  expect_same_outcomes(reference_run(), dir);
}

// A batched run at T > 0 (several rows sampled per call) prints nothing on stderr with --quiet:
// no LibTorch warning (searchsorted once warned about a non-contiguous [B, 1] view).
TEST(RunnerCli, BatchedSampledRunIsQuietOnStderr) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = env().root / "batched-quiet";
  Proc p = cli({"run", env().config3.string(), "--set", "dataset.limit=6", "--set", "decoding.batch_size=3", "--out",
                dir.string(), "--threads", "1", "--quiet"});
  ASSERT_EQ(p.exit_code, 0) << show(p);
  EXPECT_EQ(p.err, "") << show(p);
}
