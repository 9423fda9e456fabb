// The experiment runner's pure helpers (harness/run/runner.h, harness/run/progress.h): shards,
// keys, plans, JSONL tail repair, progress text, result mapping.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "decoders/engine.h"
#include "datasets/dataset.h"
#include "decoders/safetensors_header.h"
#include "harness/base/error.h"
#include "harness/run/decode_params.h"
#include "harness/run/progress.h"
#include "harness/run/run_dir.h"
#include "harness/run/runner.h"
#include "reports/report.h"
#include "tests/test_util.h"
#include "tests/runner_test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ears;
using namespace ears::runner;
using namespace ears::test::runner_test;

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

// What --resume and merge compare: a retrained checkpoint saved under the same names (same header)
// passed, so did a changed tokenizer and changed prompts (few-shot exemplars, a generator).
TEST(RunnerHelpers, FingerprintsSeeWeightsTokenizerAndPrompts) {
  const fs::path dir = test::temp_dir("fingerprint");
  const fs::path a = dir / "a", b = dir / "b";
  fs::copy(test::source_dir() / "models" / "tiny-qwen3", a);
  fs::copy(test::source_dir() / "models" / "tiny-qwen3", b);
  const std::string fp = checkpoint_fingerprint(a);
  EXPECT_EQ(fp.size(), 16u);
  EXPECT_EQ(checkpoint_fingerprint(b), fp);  // the content, not the path or the times
  EXPECT_EQ(checkpoint_fingerprint(dir / "none"), "");

  const fs::path st = b / "model.safetensors";
  std::string bytes = test::read_file(st);
  const SafetensorsHeader h =
      parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), st.string());
  const SafetensorsTensor* g0 = h.find("model.layers.0.mlp.gate_proj.weight");
  const SafetensorsTensor* g1 = h.find("model.layers.1.mlp.gate_proj.weight");
  ASSERT_TRUE(g0 && g1 && g0->nbytes() == g1->nbytes());
  auto rewrite = [&](const std::string& content) {
    std::ofstream(st, std::ios::binary | std::ios::trunc) << content;
    return checkpoint_fingerprint(b);
  };
  std::string swapped = bytes;  // two same-shaped tensors exchanged: the header is unchanged
  std::copy_n(bytes.begin() + static_cast<long>(g1->begin), g1->nbytes(), swapped.begin() + static_cast<long>(g0->begin));
  std::copy_n(bytes.begin() + static_cast<long>(g0->begin), g0->nbytes(), swapped.begin() + static_cast<long>(g1->begin));
  EXPECT_NE(rewrite(swapped), fp);
  std::string inner = bytes;  // one byte of a tensor's 5th sampled block (of 10)
  inner[g0->begin + g0->nbytes() * 4 / 9 + 1] ^= 0x40;
  EXPECT_NE(rewrite(inner), fp);
  EXPECT_EQ(rewrite(bytes), fp);
  std::ofstream(b / "tokenizer.json", std::ios::app) << " ";
  EXPECT_NE(checkpoint_fingerprint(b), fp);

  std::vector<Request> reqs(2);
  reqs[0].id = "gsm8k/test/0", reqs[0].prompt = "Q: 1+1?", reqs[0].gold = {"2"};
  reqs[1].id = "gsm8k/test/1", reqs[1].prompt = "Q: 2+2?", reqs[1].gold = {"4"};
  const std::string rp = requests_fingerprint(reqs);
  EXPECT_EQ(requests_fingerprint(reqs), rp);
  for (auto change : std::vector<std::function<void(std::vector<Request>&)>>{
           [](auto& r) { r[1].prompt += " "; }, [](auto& r) { r[0].gold = {"3"}; }, [](auto& r) { r[1].id = "x"; },
           [](auto& r) { std::swap(r[0], r[1]); }, [](auto& r) { r.pop_back(); }}) {
    std::vector<Request> other = reqs;
    change(other);
    EXPECT_NE(requests_fingerprint(other), rp);
  }
  fs::remove_all(dir);
}

// One set of decoding defaults: the engine's (DecodeParams{}), which DecodeSettings reads, and the
// torch-free config's, which must say the same but for the paper's temperature 0.9.
TEST(DecodeSettings, DefaultsAreTheEnginesAndTheConfigs) {
  const DecodeParams engine{};
  const DecodeParams settings = decode_params(DecodeSettings{}, {});
  const DecodeParams config = decode_params(decode_settings(config::ArmSpec{}), {});
  for (const DecodeParams* p : {&settings, &config}) {
    const std::string which = p == &settings ? "DecodeSettings{}" : "config::ArmSpec{}";
    EXPECT_EQ(p->sampling.top_k, engine.sampling.top_k) << which;
    EXPECT_EQ(p->sampling.top_p, engine.sampling.top_p) << which;
    EXPECT_EQ(p->gamma, engine.gamma) << which;
    EXPECT_EQ(p->max_new_tokens, engine.max_new_tokens) << which;
    EXPECT_EQ(p->measure_distortion, engine.measure_distortion) << which;
    EXPECT_EQ(p->draft_greedy, engine.draft_greedy) << which;
    EXPECT_EQ(p->verifier.kind, engine.verifier.kind) << which;
    EXPECT_EQ(p->verifier.beta, engine.verifier.beta) << which;
    EXPECT_EQ(p->verifier.uncertainty, engine.verifier.uncertainty) << which;
    EXPECT_EQ(p->verifier.typical_eps, engine.verifier.typical_eps) << which;
    EXPECT_EQ(p->verifier.typical_delta, engine.verifier.typical_delta) << which;
    EXPECT_TRUE(p->stop_strings.empty()) << which;
  }
  EXPECT_EQ(settings.sampling.temperature, engine.sampling.temperature);
  EXPECT_EQ(config.sampling.temperature, 0.9);
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
