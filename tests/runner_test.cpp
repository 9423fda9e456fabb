// The experiment runner: pure helpers (harness/run/runner.h, harness/run/progress.h) and the real
// `ears-bench` executable driven as a subprocess (run, validate, report, merge, gate, resume after
// SIGKILL, shards, SIGINT) on the tiny golden fixtures with a small byte-level tokenizer.
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

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ears;
using namespace ears::runner;

namespace {

using test::cli;
using test::show;
using test::spawn_ears;
using test::wait_for;
using Proc = test::CommandResult;

std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> out;
  std::istringstream in(test::read_file(p));
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

int count_lines(const fs::path& p) {
  const std::string s = test::read_file(p);
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

json read_json(const fs::path& p) { return json::parse(test::read_file(p)); }

// (arm, request_id, repeat) -> the result line.
std::map<std::tuple<std::string, std::string, int>, json> results_by_key(const fs::path& run_dir) {
  std::map<std::tuple<std::string, std::string, int>, json> out;
  for (const auto& l : lines_of(run_dir / "results.jsonl")) {
    json j = json::parse(l);
    auto key = std::make_tuple(j["arm"].get<std::string>(), j["request_id"].get<std::string>(), j["repeat"].get<int>());
    EXPECT_FALSE(out.count(key)) << "duplicate result " << l;
    out[key] = j;
  }
  return out;
}

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

// ---------------------------------------------------------------------------------------------
// Fixture: a model dir (qwen3-tiny + a byte-level tokenizer.json), a JSONL dataset, configs.

std::string byte_char(unsigned char b) {
  auto printable = [](int x) { return (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE; };
  int n = 0;
  for (int x = 0; x < b; ++x) n += printable(x) ? 0 : 1;
  const uint32_t cp = printable(b) ? b : 256 + n;
  std::string s;
  if (cp < 0x80) {
    s.push_back(char(cp));
  } else {
    s.push_back(char(0xC0 | (cp >> 6)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  }
  return s;
}

// 256 byte tokens (ids 0..255), a few merges (256..), and Qwen's three special tokens at 300..302:
// every id fits qwen3-tiny's 320-entry vocabulary.
json tiny_tokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(uint8_t(b))] = b;
  const std::string sp = byte_char(' ');
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"t", "h"}, {"th", "e"}, {sp, "the"}, {"i", "s"}, {sp, "is"}, {"a", "t"}, {"w", "h"}, {"wh", "at"}, {sp, "what"}};
  int id = 256;
  json m = json::array();
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    m.push_back(a + " " + b);
  }
  json added = json::array();
  int sid = 300;
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
    added.push_back({{"id", sid++}, {"content", t}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
            {"merges", m}}}};
}

struct Env {
  fs::path root, model, draft, data;
  fs::path config3;  // baseline + ears(β=0.2) + target-only, 6 requests, 16 tokens
  fs::path config2;  // baseline + ears, all 40 requests, 24 tokens (resume / shards / SIGINT)
};

void write(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

// This process's scratch directory (removed by ScratchCleanup at the end).
fs::path scratch_root() { return fs::temp_directory_path() / fmt::format("ears-runner-test-{}", ::getpid()); }

const Env& env() {
  static Env e = [] {
    Env x;
    x.root = scratch_root();
    fs::remove_all(x.root);
    fs::create_directories(x.root / "model");
    x.model = x.root / "model";
    const fs::path fixtures = test::shared_dir() / "fixtures";
    fs::create_symlink(fixtures / "qwen3-tiny" / "config.json", x.model / "config.json");
    fs::create_symlink(fixtures / "qwen3-tiny" / "model.safetensors", x.model / "model.safetensors");
    write(x.model / "tokenizer.json", tiny_tokenizer().dump());
    x.draft = fixtures / "eagle3-tiny";
    x.data = x.root / "questions.jsonl";
    std::string data;
    for (int i = 0; i < 40; ++i)
      data += json{{"prompt", fmt::format("Question {}: what is {} plus {}? The answer is", i, i, i + 1)},
                   {"answer", std::to_string(2 * i + 1)},
                   {"category", i % 2 ? "odd" : "even"}}
                  .dump() +
              "\n";
    write(x.data, data);
    const std::string common = fmt::format(
        "target: {{path: {}}}\n"
        "draft: {{kind: eagle3, path: {}}}\n"
        "dataset: {{name: jsonl, path: {}, prompt_format: raw}}\n",
        x.model.string(), x.draft.string(), x.data.string());
    x.config3 = x.root / "three.yaml";
    write(x.config3, "name: three\n" + common +
                         "decoding: {gamma: 3, temperature: 0.9, max_new_tokens: 16, seed: 7}\n"
                         "arms:\n"
                         "  - {name: baseline, verifier: {type: baseline}}\n"
                         "  - {name: ears, verifier: {type: ears, beta: 0.2}}\n"
                         "  - {name: target-only, draft: {kind: none}}\n"
                         "run: {warmup: 1}\n"
                         "gates:\n"
                         "  - \"ears: mean_accept_length >= 1\"\n"
                         "  - \"ears: throughput_gain_pct >= 100000\"\n");
    x.config2 = x.root / "two.yaml";
    write(x.config2, "name: two\n" + common +
                         "decoding: {gamma: 3, temperature: 0.9, max_new_tokens: 24, seed: 11}\n"
                         "arms:\n"
                         "  - {name: baseline, verifier: {type: baseline}}\n"
                         "  - {name: ears, verifier: {type: ears, beta: 0.2}}\n"
                         "run: {warmup: 0, order: random}\n");
    return x;
  }();
  return e;
}

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

// =============================================================================================
// Pure helpers

TEST(RunnerHelpers, ParseShard) {
  EXPECT_EQ(parse_shard("0/2").index, 0);
  EXPECT_EQ(parse_shard("3/4").count, 4);
  EXPECT_TRUE(parse_shard("1/2").active());
  EXPECT_FALSE(parse_shard("0/1").active());
  EXPECT_TRUE(parse_shard("1/3").contains(4));
  EXPECT_FALSE(parse_shard("1/3").contains(3));
  EXPECT_EQ(parse_shard("2/5").str(), "2/5");
  for (const char* bad : {"2/2", "1", "a/b", "-1/2", "0/0", "1/2/3", ""}) {
    try {
      parse_shard(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code, 2);
      EXPECT_NE(std::string(e.what()).find("--shard"), std::string::npos);
    }
  }
}

TEST(RunnerHelpers, KeysAndNames) {
  EXPECT_EQ(request_key("gsm8k/test/3", 2), "gsm8k/test/3#2");
  std::tm tm{};
  tm.tm_year = 125, tm.tm_mon = 0, tm.tm_mday = 2, tm.tm_hour = 3, tm.tm_min = 4, tm.tm_sec = 5, tm.tm_isdst = -1;
  EXPECT_EQ(timestamped_name("exp", std::mktime(&tm)), "exp-20250102-030405");
}

TEST(RunnerHelpers, InterleavedPlanRotatesArmsAndCoversEverything) {
  const auto units = plan_units(3, 7, 2, 2, "interleaved", 0);
  ASSERT_EQ(units.size(), 4u * 3u * 2u);  // 4 groups (2,2,2,1) x 3 arms x 2 repeats
  EXPECT_EQ(units[0].arm, 0u);
  EXPECT_EQ(units[3].arm, 1u);  // group 1 starts with the next arm
  EXPECT_EQ(units[6].arm, 2u);
  EXPECT_EQ(units[9].arm, 0u);
  EXPECT_EQ(units[9].requests, (std::vector<std::size_t>{6}));
  std::map<std::size_t, int> first;  // which arm goes first how often
  std::set<std::tuple<std::size_t, int, std::size_t>> seen;
  for (std::size_t i = 0; i < units.size(); ++i) {
    if (i % 3 == 0) first[units[i].arm]++;
    for (std::size_t r : units[i].requests) EXPECT_TRUE(seen.insert({units[i].arm, units[i].repeat, r}).second);
    EXPECT_EQ(units[i].requests, units[i - i % 3].requests) << "arms of a group run the same requests";
  }
  EXPECT_EQ(seen.size(), 3u * 7u * 2u);
  for (std::size_t a = 0; a < 3; ++a) EXPECT_GE(first[a], 2) << "arm " << a << " rarely goes first";
}

TEST(RunnerHelpers, RandomPlanIsASeededPermutation) {
  const auto a = plan_units(2, 10, 1, 1, "random", 5);
  const auto b = plan_units(2, 10, 1, 1, "random", 5);
  const auto c = plan_units(2, 10, 1, 1, "random", 6);
  const auto inter = plan_units(2, 10, 1, 1, "interleaved", 5);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, inter);
  auto key_set = [](const std::vector<WorkUnit>& u) {
    std::set<std::pair<std::size_t, std::size_t>> s;
    for (const auto& x : u) s.insert({x.arm, x.group});
    return s;
  };
  EXPECT_EQ(key_set(a), key_set(inter));
  EXPECT_EQ(key_set(a).size(), 20u);
  EXPECT_THROW(plan_units(2, 10, 1, 1, "sorted", 0), Error);
}

TEST(RunnerHelpers, RepairJsonlTail) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("ears-runner-tail-{}", ::getpid());
  fs::create_directories(dir);
  const fs::path f = dir / "r.jsonl";
  write(f, "{\"a\":1}\n{\"a\":2}\n{\"a\":");
  EXPECT_EQ(repair_jsonl_tail(f), 5u);
  EXPECT_EQ(test::read_file(f), "{\"a\":1}\n{\"a\":2}\n");
  EXPECT_EQ(repair_jsonl_tail(f), 0u);
  write(f, "{\"a\":1}\n{\"a\":2}");  // complete, only the newline missing
  EXPECT_EQ(repair_jsonl_tail(f), 0u);
  EXPECT_EQ(test::read_file(f), "{\"a\":1}\n{\"a\":2}\n");
  write(f, "{\"a\"");
  EXPECT_EQ(repair_jsonl_tail(f), 4u);
  EXPECT_EQ(test::read_file(f), "");
  EXPECT_EQ(repair_jsonl_tail(dir / "missing.jsonl"), 0u);
  {
    ResultsWriter w(f);
    w.append("x\n");
    w.append("y\n");
    w.sync();
  }
  EXPECT_EQ(test::read_file(f), "x\ny\n");
  fs::remove_all(dir);
}

TEST(RunnerHelpers, ProgressText) {
  EXPECT_EQ(format_duration(5), "5s");
  EXPECT_EQ(format_duration(125), "2m05s");
  EXPECT_EQ(format_duration(3725), "1h02m");
  EXPECT_EQ(format_duration(-1), "?");
  ProgressState s;
  s.done = 30, s.total = 120, s.done_now = 10, s.output_tokens = 500, s.emitted = 250, s.steps = 100, s.elapsed_s = 10;
  EXPECT_EQ(progress_text(s), "30/120 requests (25%) | 50.0 out tok/s | τ 2.50 | elapsed 10s | ETA 1m30s");
  std::FILE* f = std::tmpfile();
  Progress p(Progress::Mode::Log, 20, 0, f);
  p.start();
  for (int i = 0; i < 20; ++i) p.add(1, 4, 0, 0);
  p.finish();
  std::rewind(f);
  std::string log;
  for (int ch; (ch = std::fgetc(f)) != EOF;) log.push_back(static_cast<char>(ch));
  std::fclose(f);
  const auto n = std::count(log.begin(), log.end(), '\n');
  EXPECT_GE(n, 10);  // start + every 10 %
  EXPECT_LE(n, 12);
  EXPECT_NE(log.find("20/20 requests (100%)"), std::string::npos) << log;
}

TEST(RunnerHelpers, RequestResultMapping) {
  GenResult g;
  g.ids = {5, 6, 7, 1};
  g.text = "the answer is 7";
  g.finish_reason = "eos";
  g.prompt_tokens = 12;
  g.latency_s = 0.5, g.ttft_s = 0.1;
  auto& st = g.stats;
  st.steps = 2, st.drafted = 6, st.accepted = 3, st.corrections = 1, st.bonus = 1, st.pardoned = 1;
  st.accept_length_hist = {0, 1, 0, 0, 1};  // one step emitted 1 token, one 4: 5 = 3 + 1 + 1
  st.accepted_per_position = {1, 1, 1};
  st.drafted_by_u = {3, 3, 0, 0, 0, 0, 0, 0, 0, 0};
  st.accepted_by_u = {2, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  st.pardoned_by_u = {0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  st.uncertainty_sum = 0.9, st.distortion_sum = 0.3, st.distortion_n = 6;
  Request req{"jsonl/q/3", "what?", {"7"}, "odd", 4};
  RequestResult r = make_request_result(g, "run1", "ears", req, 1, 42, 3, "qa");
  EXPECT_NO_THROW(r.validate("mapping"));
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_EQ(r.output_ids, (std::vector<int64_t>{5, 6, 7, 1}));
  EXPECT_EQ(r.distortion_positions, 6);
  EXPECT_EQ(r.uncertainty_count, 6);
  EXPECT_EQ(r.pardoned_by_uncertainty[1], 1);
  EXPECT_EQ(r.category, "odd");
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.gamma, 3);
  EXPECT_TRUE(r.has_score);
  EXPECT_FALSE(r.correct);  // "the answer is 7" is not an exact match of "7"
  EXPECT_GT(r.f1, 0.0);
  g.text = "7";
  EXPECT_TRUE(make_request_result(g, "run1", "ears", req, 1, 42, 3, "qa").correct);
  EXPECT_FALSE(make_request_result(g, "run1", "ears", req, 1, 42, 3, "none").has_score);
  // The deciles cover the judged positions only (fewer than drafted when a step rejects early).
  st.drafted_by_u = {2, 2, 0, 0, 0, 0, 0, 0, 0, 0};
  r = make_request_result(g, "run1", "ears", req, 1, 42, 3, "qa");
  EXPECT_NO_THROW(r.validate("mapping"));
  EXPECT_EQ(r.drafted_by_uncertainty[0], 2);
  EXPECT_EQ(r.uncertainty_count, 4);
}

// =============================================================================================
// The executable

TEST(RunnerCli, RunWritesACompleteRunDirectory) {
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

  const json meta = read_json(dir / "run_meta.json");
  EXPECT_TRUE(meta["complete"].get<bool>());
  EXPECT_EQ(meta["expected_results"], 18);
  EXPECT_EQ(meta["baseline"], "baseline");
  ASSERT_EQ(meta["arms"].size(), 3u);
  for (const auto& a : meta["arms"]) EXPECT_GT(a["wall_s"].get<double>(), 0) << a.dump();
  EXPECT_EQ(meta["arms"][1]["verifier"]["beta"], 0.2);
  for (const char* k : {"device", "dtype", "threads", "libtorch", "git_commit", "hostname", "cpu_model",
                        "ears_bench_version", "command_line"})
    EXPECT_TRUE(meta["environment"].contains(k)) << k;
  EXPECT_EQ(meta["environment"]["threads"], 1);
  // What ran (harness/run/environment.h): the resolved dtype next to the requested one, the kernel
  // path, the wait policy, the CPU's ISA and the load around the run.
  for (const char* k : {"dtype_requested", "compute_dtype", "weight_dtype", "checkpoint_dtype", "kernel_path",
                        "kernel_path_best", "omp_wait_policy", "cpu_isa", "logical_cpus", "cuda_build",
                        "load_average_1m_start", "load_average_1m_end"})
    EXPECT_TRUE(meta["environment"].contains(k)) << k << " in " << meta["environment"].dump();
  EXPECT_EQ(meta["environment"]["dtype_requested"], "auto");
  EXPECT_NE(meta["environment"]["dtype"], "auto") << "dtype: auto is recorded resolved";
  EXPECT_EQ(meta["environment"]["dtype"], meta["environment"]["compute_dtype"]);
  EXPECT_NE(meta["environment"]["command_line"].get<std::string>().find("--threads 1"), std::string::npos);
  EXPECT_EQ(meta["dataset"]["n_requests"], 6);
  EXPECT_EQ(meta["dataset"]["scorer"], "squad");  // the jsonl default (was "qa", now an alias)
  EXPECT_TRUE(fs::exists(dir / "config.yaml"));
  EXPECT_NE(test::read_file(dir / "config.yaml").find("limit: 6"), std::string::npos);

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
  }
  const std::string md = test::read_file(dir / "report.md");
  EXPECT_NE(md.find("| Method"), std::string::npos) << md;
  // The configuration block above the results (also printed by `run`) says what ran.
  const auto env_line = md.find("| Computed in | ");
  ASSERT_NE(env_line, std::string::npos) << md;
  EXPECT_LT(env_line, md.find("## Results"));
  const std::string line = md.substr(env_line, md.find('\n', env_line) - env_line);
  for (const char* part : {"1 thread(s)", "kernel path", "LibTorch", "ISA"})
    EXPECT_NE(line.find(part), std::string::npos) << part << " in: " << line;
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

  // No rules given: the run's config gates (one of which fails).
  p = cli({"gate", dir});
  EXPECT_EQ(p.exit_code, 1) << show(p);
  EXPECT_NE(p.out.find("config"), std::string::npos);
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
  ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_for(pid), 128 + SIGKILL);

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

// Removes the scratch directory after every test ran, in whatever order (--gtest_shuffle).
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(scratch_root(), ec);
  }
};
const ::testing::Environment* const kScratchCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);
