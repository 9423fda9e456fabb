// Tests of reports/ output (report JSON/Markdown/SVG, run dirs) and harness/gate.
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <functional>
#include <string>
#include <vector>

#include "harness/base/error.h"
#include "reports/gate.h"
#include "reports/metrics.h"
#include "reports/markdown.h"
#include "reports/report.h"
#include "reports/result.h"
#include "reports/svg.h"
#include "tests/test_util.h"
#include "tests/report_test_util.h"

namespace ears {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

using report_test::make_result;

// ---------------------------------------------------------------------------------------------
// helpers

// A minimal well-formedness checker: one root element, balanced tags, quoted attributes, no
// stray '<' or bare '&' in text. Returns "" when fine, else what is wrong.
std::string xml_problem(const std::string& s) {
  std::vector<std::string> stack;
  size_t i = 0;
  int roots = 0;
  auto entity_ok = [&](size_t at) {
    const size_t semi = s.find(';', at);
    if (semi == std::string::npos || semi - at > 8) return false;
    const std::string name = s.substr(at + 1, semi - at - 1);
    return name == "amp" || name == "lt" || name == "gt" || name == "quot" || name == "apos" ||
           (!name.empty() && name[0] == '#');
  };
  while (i < s.size()) {
    if (s[i] == '<') {
      if (s.compare(i, 5, "<?xml") == 0) {
        const size_t end = s.find("?>", i);
        if (end == std::string::npos) return "unterminated <?xml";
        i = end + 2;
        continue;
      }
      if (s.compare(i, 4, "<!--") == 0) {
        const size_t end = s.find("-->", i);
        if (end == std::string::npos) return "unterminated comment";
        i = end + 3;
        continue;
      }
      // find the tag end, honouring quotes
      size_t j = i + 1;
      char quote = 0;
      for (; j < s.size(); ++j) {
        if (quote) {
          if (s[j] == quote) quote = 0;
          else if (s[j] == '<') return "'<' inside an attribute";
          else if (s[j] == '&' && !entity_ok(j)) return "bare '&' inside an attribute";
        } else if (s[j] == '"' || s[j] == '\'') {
          quote = s[j];
        } else if (s[j] == '>') {
          break;
        } else if (s[j] == '<') {
          return "'<' inside a tag";
        }
      }
      if (j >= s.size()) return "unterminated tag";
      std::string tag = s.substr(i + 1, j - i - 1);
      i = j + 1;
      if (!tag.empty() && tag[0] == '/') {
        const std::string name = tag.substr(1, tag.find_first_of(" \t\n") - 1);
        if (stack.empty() || stack.back() != name) return "mismatched </" + name + ">";
        stack.pop_back();
        continue;
      }
      const bool self_closing = !tag.empty() && tag.back() == '/';
      const std::string name = tag.substr(0, tag.find_first_of(" \t\n/"));
      if (name.empty()) return "empty tag name";
      if (stack.empty()) {
        if (++roots > 1) return "more than one root element";
      }
      if (!self_closing) stack.push_back(name);
      continue;
    }
    if (s[i] == '&' && !entity_ok(i)) return "bare '&' in text";
    if (stack.empty() && !std::isspace(static_cast<unsigned char>(s[i]))) return "text outside the root element";
    ++i;
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (roots != 1) return "no root element";
  return "";
}

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / fmt::format("ears_report_test_{}_{}", name, ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// ---------------------------------------------------------------------------------------------
// report

std::vector<RequestResult> sweep_results() {
  std::vector<RequestResult> rs;
  for (int i = 0; i < 30; ++i) {
    const std::string id = std::to_string(i);
    const std::string cat = i % 3 == 0 ? "qa" : "math";
    auto add = [&](const std::string& arm, int gamma, std::vector<int> steps, double lat, bool correct) {
      RequestResult r = make_result(arm, id, gamma, steps, lat);
      r.category = cat;
      r.has_score = true;
      r.correct = r.strict_correct = r.flexible_correct = correct;
      r.text = "answer <" + id + "> & \"co\"";
      rs.push_back(r);
    };
    add("baseline", 3, {2, 3, 1, 4}, 1.0 + 0.01 * i, i % 4 != 0);
    add("ears-0.3", 3, {3, 3, 4}, 0.8 + 0.01 * i, i % 4 != 0 || i == 4);
    add("ears-0.6", 3, {4, 4, 3}, 0.7 + 0.01 * i, i % 4 != 0 && i != 5);
  }
  return rs;
}

ReportInputs sweep_inputs() {
  ReportInputs in;
  in.arms = {{"baseline", {{"type", "baseline"}}, 40.0},
             {"ears-0.3", {{"type", "ears"}, {"beta", 0.3}}, 30.0},
             {"ears-0.6", {{"type", "ears"}, {"beta", 0.6}}, 25.0}};
  in.baseline = "baseline";
  in.config = {{"name", "toy"}, {"gamma", 3}};
  in.environment = {{"device", "cpu"}, {"dtype", "float32"}, {"threads", 2}, {"libtorch", "1.13.1"}};
  in.dataset = {{"name", "synth"}, {"n", 30}};
  in.bootstrap_resamples = 500;
  return in;
}

// Edits of a JSON document, each with the message reading the edited copy must fail with.
using JsonEdits = std::vector<std::pair<std::function<void(json&)>, std::string>>;

void expect_each_edit_refused(const json& original, const JsonEdits& edits,
                              const std::function<void(const json&)>& read) {
  for (const auto& [edit, expect] : edits) {
    json bad = original;
    edit(bad);
    try {
      read(bad);
      ADD_FAILURE() << "accepted: " << expect;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  }
}

TEST(Report, BuildAndJsonRoundTrip) {
  const Report r = build_report(sweep_results(), sweep_inputs());
  ASSERT_EQ(r.arms.size(), 3u);
  ASSERT_EQ(r.comparisons.size(), 2u);
  EXPECT_FALSE(r.partial);
  EXPECT_EQ(r.comparisons[0].arm, "ears-0.3");
  EXPECT_DOUBLE_EQ(r.arms[0].metrics.output_tokens_per_s, (30 * 11.0) / 40.0);  // 10 emitted + 1 each
  EXPECT_NEAR(r.comparisons[0].throughput_gain_pct, 100 * ((30 * 11.0 / 30.0) / (30 * 11.0 / 40.0) - 1), 1e-9);

  const json j = report_to_json(r);
  EXPECT_EQ(j["schema_version"], 1);
  for (const char* key : {"output_tokens_per_s", "total_tokens_per_s", "latency_mean_s", "latency_p50_s",
                          "latency_p90_s", "latency_p99_s", "ttft_mean_s", "mean_accept_length", "acceptance_rate",
                          "acceptance_per_position", "pardon_share", "distortion_tv_mean", "mean_uncertainty",
                          "accuracy", "accuracy_ci95", "n_requests", "n_errors", "output_tokens", "prompt_tokens",
                          "uncertainty_buckets", "categories"})
    EXPECT_TRUE(j["arms"][0]["metrics"].contains(key)) << key;
  for (const char* key : {"arm", "baseline", "throughput_gain_pct", "throughput_gain_ci95", "latency_change_pct",
                          "accuracy_delta_pp", "accuracy_delta_ci95", "mcnemar_p", "accept_length_ratio"})
    EXPECT_TRUE(j["comparisons"][0].contains(key)) << key;
  EXPECT_EQ(j["arms"][1]["verifier"]["beta"], 0.3);

  const Report back = report_from_json(j);
  EXPECT_EQ(report_to_json(back), j);
  const Report via_text = report_from_json(json::parse(j.dump()));
  EXPECT_EQ(report_to_json(via_text), j);

  json newer = j;
  newer["schema_version"] = 2;
  EXPECT_THROW(report_from_json(newer), Error);

  // A hand-edited field of another type: one line naming the file and the key (gate and report
  // ended in nlohmann's type_error, exit 1). The free-form objects must stay objects.
  const JsonEdits edits = {
      {[](json& d) { d["baseline"] = 5; }, "runs/x/report.json: 'baseline' has the wrong type (5); restore the file"},
      {[](json& d) { d["partial"] = "no"; }, "'partial' has the wrong type (\"no\")"},
      // Without 'partial' it gated as a whole run.
      {[](json& d) { d.erase("partial"); }, "runs/x/report.json: no 'partial'; restore the file"},
      {[](json& d) { d["config"] = json::array({1}); }, "'config' has the wrong type ([1])"},
      {[](json& d) { d["environment"] = 5; }, "'environment' has the wrong type (5)"},
      {[](json& d) { d["arms"][1]["verifier"] = "ears"; }, "'verifier' has the wrong type (\"ears\")"},
  };
  expect_each_edit_refused(j, edits, [](const json& bad) { (void)report_from_json(bad, "runs/x/report.json"); });
  // run_meta.json: the same, and a count that is not a whole number >= 0 (-1 or 1e30 made a
  // PARTIAL run render as whole).
  const JsonEdits meta_edits = {
      {[](json& m) { m["environment"] = 5; },
       "runs/x/run_meta.json: 'environment' has the wrong type (5); the file was edited"},
      {[](json& m) { m["expected_results"] = 1e30; }, "'expected_results' has the wrong type (1e+30)"},
      {[](json& m) { m["expected_results"] = -1; }, "'expected_results' is -1; it must be >= 0"},
  };
  expect_each_edit_refused(run_meta_to_json(RunMeta{}), meta_edits,
                           [](const json& bad) { (void)run_meta_from_json(bad, "runs/x/run_meta.json"); });
}

TEST(Report, RejectsUnknownArmAndBaseline) {
  auto rs = sweep_results();
  ReportInputs in = sweep_inputs();
  in.baseline = "nope";
  EXPECT_THROW(build_report(rs, in), Error);
  in = sweep_inputs();
  in.arms.pop_back();  // results of ears-0.6 now name an undeclared arm
  EXPECT_THROW(build_report(rs, in), Error);
}

// typical and greedy draw no uniform, so no accept of theirs is judged against the exact rule:
// their pardon share is n/a, not the 0 % their zero pardoned counts would give.
TEST(Report, PardonShareIsUndefinedWithoutTheExactRulesUniform) {
  ReportInputs in = sweep_inputs();
  in.arms[1].verifier = {{"type", "typical"}, {"eps", 0.09}, {"delta", 0.3}};
  in.arms[2].verifier = {{"type", "greedy"}};
  const Report r = build_report(sweep_results(), in);
  EXPECT_DOUBLE_EQ(r.arms[0].metrics.pardon_share, 0.0);  // baseline: measured, none
  for (int a : {1, 2}) {
    EXPECT_TRUE(std::isnan(r.arms[a].metrics.pardon_share)) << r.arms[a].name;
    for (const auto& b : r.arms[a].metrics.uncertainty_buckets) EXPECT_TRUE(std::isnan(b.pardon_share));
    EXPECT_GT(r.arms[a].metrics.accepted, 0);
  }
  EXPECT_TRUE(report_to_json(r)["arms"][1]["metrics"]["pardon_share"].is_null());
}

// A batched forward counts in every request it served: the time table says so for batched arms
// (an audit read a batch-4 arm's ×0.43 "decoding speed-up" beside its +18.7 % throughput).
TEST(Report, TimeTableSaysWhichArmsWereBatched) {
  auto rs = sweep_results();
  for (auto& r : rs) r.prefill_s = 0.1, r.verify_s = r.latency_s - 0.1;
  ReportInputs in = sweep_inputs();
  in.config = {{"decoding", {{"batch_size", 1}}},
               {"arms", json::array({{{"name", "baseline"}},
                                     {{"name", "ears-0.3"}},
                                     {{"name", "ears-0.6"}, {"decoding", {{"batch_size", 4}}}}})}};
  const std::string md = render_markdown(build_report(rs, in));
  EXPECT_NE(md.find("Batched arms (ears-0.6 (4)): a batched forward counts in every request it served"),
            std::string::npos) << md;
  in.config["arms"][2].erase("decoding");
  EXPECT_EQ(render_markdown(build_report(rs, in)).find("Batched arms"), std::string::npos);
}

TEST(Report, UnevenArmsArePartial) {
  auto rs = sweep_results();
  rs.pop_back();
  const Report r = build_report(rs, sweep_inputs());
  EXPECT_TRUE(r.partial);
  EXPECT_EQ(r.comparisons[1].n_pairs, 29);
}

TEST(Report, MarkdownHasPaperTableAndGainRows) {
  const Report r = build_report(sweep_results(), sweep_inputs());
  const std::string md = render_markdown(r);
  EXPECT_NE(md.find("| Method | Output tok/s | Total tok/s | Avg latency (s) | τ | Accuracy |"), std::string::npos);
  EXPECT_NE(md.find("| Relative gain: ears-0.3 vs baseline | +"), std::string::npos) << md;
  EXPECT_NE(md.find("| Relative gain: ears-0.6 vs baseline |"), std::string::npos);
  EXPECT_NE(md.find("McNemar p="), std::string::npos);
  EXPECT_NE(md.find("## Acceptance per draft position"), std::string::npos);
  EXPECT_NE(md.find("## Per category"), std::string::npos);
  EXPECT_NE(md.find("## β sweep"), std::string::npos);
  EXPECT_NE(md.find("| libtorch | 1.13.1 |"), std::string::npos);
  EXPECT_NE(md.find("(sweep.svg)"), std::string::npos);
  EXPECT_EQ(md.find("Partial results"), std::string::npos);
  // throughput of the baseline row: 330 tokens / 40 s
  EXPECT_NE(md.find("| baseline | 8.2 |"), std::string::npos) << md;
}

// Where the time goes: each arm's split with its share, per step and per decoded token, and the
// decoding speed-up row; no section when no time split was recorded.
TEST(Report, MarkdownSaysWhereTheTimeGoes) {
  EXPECT_EQ(render_markdown(build_report(sweep_results(), sweep_inputs())).find("## Where the time goes"),
            std::string::npos);
  std::vector<RequestResult> rs;
  for (int i = 0; i < 4; ++i) {
    RequestResult b = make_result("baseline", fmt::format("q{}", i), 0, std::vector<int>(8, 1), 1.0);
    b.prefill_s = 0.2, b.verify_s = 0.8;  // 8 steps, 8 decoded tokens
    RequestResult a = make_result("ears-0.3", fmt::format("q{}", i), 3, {4, 4}, 0.5);
    a.prefill_s = 0.2, a.draft_s = 0.1, a.verify_s = 0.2;  // 2 steps, 8 decoded tokens
    rs.push_back(b);
    rs.push_back(a);
  }
  auto inputs = sweep_inputs();
  inputs.arms.resize(2);  // baseline and ears-0.3
  const std::string md = render_markdown(build_report(rs, inputs));
  EXPECT_NE(md.find("| Method | Prefill (s) | Draft (s) | Verify (s) | Other (s) | Steps | Verify (ms/step) | "
                    "Draft (ms/step) | Decoding (ms/token) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| baseline | 0.800 (20.0%) | 0.000 (0.0%) | 3.200 (80.0%) | 0.000 (0.0%) | 32 | 100 | 0 | 100 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| ears-0.3 | 0.800 (40.0%) | 0.400 (20.0%) | 0.800 (40.0%) | 0.000 (0.0%) | 8 | 100 | 50.0 | "
                    "37.5 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| Decoding speed-up: ears-0.3 vs baseline | | | | | | | | ×2.67 [2.67, 2.67] |"),
            std::string::npos)
      << md;
}

TEST(Svg, ChartsAreWellFormed) {
  EXPECT_EQ(xml_problem("<svg><g></svg>"), "mismatched </svg>");
  EXPECT_NE(xml_problem("<svg>a & b</svg>"), "");
  EXPECT_NE(xml_problem("<svg></svg><svg/>"), "");
  EXPECT_EQ(xml_problem("<?xml version=\"1.0\"?>\n<svg a=\"x&amp;y\"><rect/><text>a &lt; b</text></svg>\n"), "");

  const Report r = build_report(sweep_results(), sweep_inputs());
  std::vector<std::pair<std::string, std::vector<int64_t>>> hists;
  for (const auto& a : r.arms) hists.emplace_back(a.name + " <&>", a.metrics.accept_length_hist);
  const std::string hist = svg_accept_length_histogram(hists);
  EXPECT_EQ(xml_problem(hist), "") << hist;
  EXPECT_NE(hist.find("<svg"), std::string::npos);
  EXPECT_NE(hist.find("share of steps"), std::string::npos);
  EXPECT_NE(hist.find("<rect"), std::string::npos);

  const auto sweeps = sweep_series(r);
  ASSERT_EQ(sweeps.size(), 1u);
  EXPECT_EQ(sweeps[0].name, "ears");
  ASSERT_EQ(sweeps[0].points.size(), 2u);
  EXPECT_DOUBLE_EQ(sweeps[0].points[0].beta, 0.3);
  const std::string sweep = svg_sweep_chart(sweeps, r.baseline);
  EXPECT_EQ(xml_problem(sweep), "") << sweep;
  EXPECT_NE(sweep.find("<polyline"), std::string::npos);
  EXPECT_NE(sweep.find("β=0.6"), std::string::npos);

  EXPECT_EQ(xml_problem(svg_accept_length_histogram({})), "");
  EXPECT_EQ(xml_problem(svg_sweep_chart({}, "b")), "");
}

TEST(Report, WriteFilesAtomically) {
  const fs::path dir = temp_dir("write") / "out";
  const Report r = build_report(sweep_results(), sweep_inputs());
  write_report_files(r, dir);
  for (const char* f : {"report.json", "report.md", "accept_length.svg", "sweep.svg"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos);
  const Report back = report_from_json(json::parse(test::read_file(dir / "report.json")));
  EXPECT_EQ(report_to_json(back), report_to_json(r));
  // A failure names the file asked for, not the temporary beside it (gate --json /nonexist/x.json
  // said "/nonexist/x.json.tmp.3650: cannot write").
  try {
    write_file_atomic(dir / "no-such-dir" / "gate.json", "{}");
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind((dir / "no-such-dir" / "gate.json").string() + ": cannot write (", 0), 0u)
        << e.what();
  }
  fs::remove_all(dir.parent_path());
}

// A real-shaped run: the resolved config and environment the runner writes, 2 GSM8K requests
// of the bundled toy pair, no accuracy in one variant.
ReportInputs toy_gsm8k_inputs() {
  ReportInputs in;
  in.arms = {{"baseline", {{"type", "baseline"}, {"draft", "eagle3"}}, 4.0},
             {"ears", {{"type", "ears"}, {"beta", 0.1}, {"uncertainty", "max_prob"}, {"draft", "eagle3"}}, 3.0},
             {"target-only", {{"type", "baseline"}, {"draft", "none"}}, 5.0}};
  in.baseline = "baseline";
  const json decoding = {{"batch_size", 1}, {"gamma", 5}, {"max_new_tokens", 160}, {"seed", 0},
                         {"temperature", 0.9}, {"top_k", 0}, {"top_p", 1.0}};
  json short_decoding = decoding;
  short_decoding["gamma"] = 2;
  in.config = {{"target", {{"path", "/m/tiny-qwen3"}, {"dtype", "auto"}, {"device", "cpu"}}},
               {"draft", {{"kind", "eagle3"}, {"path", "/m/tiny-eagle3"}}},
               {"decoding", decoding},
               {"arms", json::array({{{"name", "baseline"}, {"decoding", decoding}},
                                     {{"name", "ears"}, {"decoding", short_decoding}},
                                     {{"name", "target-only"}, {"decoding", decoding}}})}};
  in.environment = {{"compute_dtype", "bfloat16"}, {"checkpoint_dtype", "bfloat16"}, {"kernel_path", "avx2"},
                    {"threads", 2}, {"device", "cpu"}, {"cpu_model", "AMD EPYC"}, {"cpu_isa", "avx2 fma"},
                    {"libtorch", "1.13.0"}, {"cuda_build", false}, {"git_commit", "abc1234"},
                    {"target_parameters", 5.2e6}};
  in.dataset = {{"name", "gsm8k"}, {"n_requests", 2}};
  return in;
}

std::vector<RequestResult> toy_results(bool scored) {
  std::vector<RequestResult> rs;
  for (int i = 0; i < 2; ++i)
    for (const char* arm : {"baseline", "ears", "target-only"}) {
      const bool draft = std::string(arm) != "target-only";
      RequestResult r = make_result(arm, std::to_string(i), draft ? 5 : 0, draft ? std::vector<int>{3, 2} : std::vector<int>{1, 1, 1, 1}, 1.0);
      r.has_score = scored;
      r.correct = r.strict_correct = r.flexible_correct = scored && i == 0;
      rs.push_back(r);
    }
  return rs;
}

TEST(Report, MarkdownSaysWhatRanAndWarnsOnToyModelsAndSmallSamples) {
  const Report r = build_report(toy_results(true), toy_gsm8k_inputs());
  const std::string md = render_markdown(r);
  for (const char* line : {"| Target | /m/tiny-qwen3 (5.2M parameters) |", "| Draft | eagle3 /m/tiny-eagle3 |",
                           "| Dataset | gsm8k, 2 requests |",
                           "| Decoding | γ 5, T 0.9, top-k off, top-p 1.0, max_new_tokens 160, batch 1, seed 0 |",
                           "| Decoding (ears) | γ 2, T 0.9,",
                           "| Computed in | bfloat16 (checkpoint bfloat16), kernel path avx2, 2 thread(s), CPU AMD EPYC (ISA avx2 fma), LibTorch 1.13.0 |",
                           "| ears | ears β=0.1 (max_prob), eagle3 draft |", "| baseline | baseline (exact), eagle3 draft |",
                           "| target-only | baseline (exact), target only |", "> **Toy models** (5.2M parameters)",
                           "> **Small sample**: 2 paired request(s) (fewer than 30)"})
    EXPECT_NE(md.find(line), std::string::npos) << line << "\n" << md;
  EXPECT_LT(md.find("| Configuration |"), md.find("## Results"));  // it opens the report
  EXPECT_EQ(md.find("| Decoding (baseline)"), std::string::npos);  // only arms that differ
  EXPECT_EQ(md.find("{\"type\""), std::string::npos);            // no raw JSON verifier

  // No banner on the toy datasets, or with a real-sized target; no small-sample note at n >= 30.
  ReportInputs synth = toy_gsm8k_inputs();
  synth.dataset["name"] = "synth-gsm";
  EXPECT_EQ(render_markdown(build_report(toy_results(true), synth)).find("Toy models"), std::string::npos);
  ReportInputs big = toy_gsm8k_inputs();
  big.environment["target_parameters"] = 8.2e9;
  EXPECT_EQ(render_markdown(build_report(toy_results(true), big)).find("Toy models"), std::string::npos);
  EXPECT_EQ(render_markdown(build_report(sweep_results(), sweep_inputs())).find("Small sample"), std::string::npos);
}

TEST(Report, LoadRowJudgesTheStartAgainstTheCpuCount) {
  // The end value counts the run's own threads, so only the start is judged: busy from the CPU
  // count up (load_busy, bench's WARNING line too); no verdict without the CPU count.
  auto load_row = [](json start, json end, json cpus) {
    ReportInputs in = toy_gsm8k_inputs();
    in.environment["load_average_1m_start"] = start;
    in.environment["load_average_1m_end"] = end;
    if (!cpus.is_null()) in.environment["logical_cpus"] = cpus;
    const std::string md = render_markdown(build_report(toy_results(true), in));
    const size_t at = md.find("| Load average (1 min) | ");
    return at == std::string::npos ? std::string() : md.substr(at, md.find('\n', at) - at);
  };
  EXPECT_EQ(load_row(0.56, 2.1, 2),
            "| Load average (1 min) | 0.56 at start, 2.1 at end (2 logical CPUs: quiet at start; the end counts the "
            "run's own threads) |");
  EXPECT_NE(load_row(1.99, 3.0, 2).find("quiet at start"), std::string::npos);
  EXPECT_EQ(load_row(2, 3.0, 2),
            "| Load average (1 min) | 2 at start, 3.0 at end (busy at start: at least the 2 logical CPUs — other work "
            "shared them, the timings are noisy) |");
  EXPECT_EQ(load_row(0.5, 1.0, json()), "| Load average (1 min) | 0.5 at start, 1.0 at end |");
  EXPECT_TRUE(load_busy(4.0, 4) && !load_busy(3.9, 4) && !load_busy(9.0, 0));
}

TEST(Report, ChartsOnlyWhereTheyHaveData) {
  // A β sweep without accuracy (no gold answers): the table stays, the empty scatter goes.
  auto rs = sweep_results();
  for (auto& r : rs) r.has_score = false;
  const Report no_accuracy = build_report(rs, sweep_inputs());
  EXPECT_FALSE(has_sweep_chart(no_accuracy));
  EXPECT_TRUE(has_accept_length_chart(no_accuracy));
  const fs::path dir = temp_dir("charts");
  write_report_files(build_report(sweep_results(), sweep_inputs()), dir);
  ASSERT_TRUE(fs::exists(dir / "sweep.svg"));
  write_report_files(no_accuracy, dir);  // a re-render drops the stale chart
  EXPECT_FALSE(fs::exists(dir / "sweep.svg"));
  EXPECT_TRUE(fs::exists(dir / "accept_length.svg"));
  const std::string md = test::read_file(dir / "report.md");
  EXPECT_EQ(md.find("sweep.svg"), std::string::npos);
  EXPECT_NE(md.find("## β sweep"), std::string::npos);
  // Nothing drafted (target only): no acceptance chart either.
  std::vector<RequestResult> plain;
  for (int i = 0; i < 3; ++i) plain.push_back(make_result("base", std::to_string(i), 0, {1, 1}, 1.0));
  ReportInputs in;
  in.baseline = "base";
  const Report target_only = build_report(plain, in);
  EXPECT_FALSE(has_accept_length_chart(target_only));
  write_report_files(target_only, dir);
  EXPECT_FALSE(fs::exists(dir / "accept_length.svg"));
  EXPECT_EQ(render_markdown(target_only).find("## Charts"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Report, VerifierInWords) {
  EXPECT_EQ(verifier_in_words({{"type", "ears"}, {"beta", 0.1}, {"uncertainty", "entropy"}}), "ears β=0.1 (entropy)");
  EXPECT_EQ(verifier_in_words({{"type", "typical"}, {"eps", 0.09}, {"delta", 0.3}, {"draft", "model"}}),
            "typical ε=0.09 δ=0.3, model draft");
  EXPECT_EQ(verifier_in_words({{"type", "greedy"}}), "greedy");
}

// ---------------------------------------------------------------------------------------------
// results.jsonl and run dirs

TEST(RunDir, TruncatedLastLineIsToleratedOnlyWhenAsked) {
  const fs::path dir = temp_dir("trunc");
  const auto rs = sweep_results();
  std::string text;
  for (int i = 0; i < 3; ++i) text += result_to_jsonl_line(rs[static_cast<size_t>(i)]);
  const std::string last = result_to_jsonl_line(rs[3]);
  text += last.substr(0, last.size() / 2);  // killed mid-write
  std::ofstream(dir / "results.jsonl") << text;

  bool truncated = false;
  const auto got = read_results_jsonl(dir / "results.jsonl", true, &truncated);
  EXPECT_EQ(got.size(), 3u);
  EXPECT_TRUE(truncated);
  try {
    read_results_jsonl(dir / "results.jsonl", false);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("results.jsonl:4"), std::string::npos) << e.what();
  }
  // A broken line in the middle is an error even when tolerating.
  std::ofstream(dir / "mid.jsonl") << result_to_jsonl_line(rs[0]) << "{\"arm\": \n" << result_to_jsonl_line(rs[1]);
  EXPECT_THROW(read_results_jsonl(dir / "mid.jsonl", true), Error);
  // An inconsistent line names its line number.
  RequestResult bad = rs[0];
  bad.accepted += 1;
  std::ofstream(dir / "bad.jsonl") << result_to_jsonl_line(rs[1]) << "\n" << result_to_jsonl_line(bad);
  try {
    read_results_jsonl(dir / "bad.jsonl", true);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:3"), std::string::npos) << e.what();
  }
  // A number past double's range (a hand edit, 1e999) is this file's error, also on the last line
  // (it was LibTorch-free nlohmann's out_of_range: exit 1, no file name).
  std::string huge = result_to_jsonl_line(rs[0]);
  huge.replace(huge.find("\"latency_s\":") + 12, 1, "1e999,\"x\":");
  std::ofstream(dir / "huge.jsonl") << result_to_jsonl_line(rs[1]) << huge;
  try {
    read_results_jsonl(dir / "huge.jsonl", true);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_NE(std::string(e.what()).find("huge.jsonl:2: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("number overflow"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_results_jsonl(dir / "absent.jsonl", true), Error);
  fs::remove_all(dir);
}

void write_shard(const fs::path& dir, const std::vector<RequestResult>& rs, const ReportInputs& in, bool complete,
                 double wall_scale, const std::string& shard = "") {
  fs::create_directories(dir);
  RunMeta meta;
  meta.run_id = dir.filename().string();
  meta.arms = in.arms;
  for (auto& a : meta.arms) a.wall_s *= wall_scale;
  meta.baseline = in.baseline;
  meta.config = in.config;
  meta.environment = in.environment;
  meta.dataset = in.dataset;
  if (!shard.empty()) meta.dataset["shard"] = shard;
  std::set<std::string> ids;
  for (const auto& r : rs) ids.insert(r.request_id);
  meta.dataset["n_requests"] = ids.size();
  meta.complete = complete;
  meta.expected_results = static_cast<int64_t>(rs.size());
  write_run_meta(meta, dir);
  std::string text;
  for (const auto& r : rs) text += result_to_jsonl_line(r);
  std::ofstream(dir / kResultsFile) << text;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code, 2);
    return e.what();
  }
  return "";
}

TEST(RunDir, ShardsMergeAndRender) {
  const fs::path root = temp_dir("shards");
  const auto rs = sweep_results();
  const ReportInputs in = sweep_inputs();
  const size_t half = rs.size() / 2;
  std::vector<RequestResult> a(rs.begin(), rs.begin() + static_cast<long>(half));
  std::vector<RequestResult> b(rs.begin() + static_cast<long>(half), rs.end());
  write_shard(root / "s1", a, in, true, 0.5, "0/2");
  write_shard(root / "s2", b, in, true, 0.5, "1/2");

  const Report merged = report_from_run_dirs({root / "s1", root / "s2"}, kDefaultBootstrapSeed, 500);
  EXPECT_FALSE(merged.partial);
  EXPECT_EQ(merged.arms[0].metrics.n_requests, 30);
  EXPECT_DOUBLE_EQ(merged.arms[0].metrics.wall_s, 40.0);  // 20 + 20: disjoint shards, back to back
  EXPECT_EQ(merged.sources.size(), 2u);
  const Report direct = build_report(rs, in);
  EXPECT_EQ(merged.arms[1].metrics.output_tokens, direct.arms[1].metrics.output_tokens);
  EXPECT_DOUBLE_EQ(merged.arms[1].metrics.mean_accept_length, direct.arms[1].metrics.mean_accept_length);

  // merge writes a run dir that reports the same: a whole, complete run of every request (not
  // shard 0 of 2 looking for its sibling)
  merge_run_dirs({root / "s1", root / "s2"}, root / "merged");
  const Report again = report_from_run_dirs({root / "merged"}, kDefaultBootstrapSeed, 500);
  EXPECT_EQ(again.arms[2].metrics.n_requests, 30);
  EXPECT_DOUBLE_EQ(again.arms[2].metrics.wall_s, 25.0);
  EXPECT_FALSE(again.partial) << ::testing::PrintToString(again.warnings);
  EXPECT_TRUE(again.warnings.empty()) << ::testing::PrintToString(again.warnings);
  EXPECT_EQ(again.dataset["n_requests"], 30);
  EXPECT_FALSE(again.dataset.contains("shard"));
  EXPECT_EQ(again.dataset["merged_shards"], json::array({"0/2", "1/2"}));
  EXPECT_EQ(merged.dataset["n_requests"], 30);

  // A merge missing a shard (0 and 2 of 3) stays partial, and says which, when rendered again.
  const size_t third = rs.size() / 3;
  write_shard(root / "t0", {rs.begin(), rs.begin() + static_cast<long>(third)}, in, true, 0.3, "0/3");
  write_shard(root / "t2", {rs.begin() + static_cast<long>(2 * third), rs.end()}, in, true, 0.3, "2/3");
  merge_run_dirs({root / "t0", root / "t2"}, root / "part");
  const Report part = report_from_run_dirs({root / "part"}, kDefaultBootstrapSeed, 100);
  EXPECT_TRUE(part.partial);
  EXPECT_EQ(part.dataset["missing_shards"], json::array({1}));
  EXPECT_EQ(part.dataset["merged_shards"], json::array({"0/3", "2/3"}));
  EXPECT_NE(::testing::PrintToString(part.warnings).find("merged without shard(s) [1]"), std::string::npos)
      << ::testing::PrintToString(part.warnings);

  // An incomplete shard with a truncated last line gives a partial report with a warning.
  write_shard(root / "s4", a, in, false, 1.0);
  std::ofstream(root / "s4" / kResultsFile, std::ios::app) << "{\"arm\": \"base";
  const Report partial = report_from_run_dirs({root / "s4"}, kDefaultBootstrapSeed, 100);
  EXPECT_TRUE(partial.partial);
  EXPECT_FALSE(partial.warnings.empty());
  EXPECT_NE(render_markdown(partial).find("Partial results"), std::string::npos);

  EXPECT_THROW(report_from_run_dirs({root / "does-not-exist"}), Error);
  fs::remove_all(root);
}

// A result written twice (a resume after a kill mid-batch, two merged copies) is one result when
// only what varies between runs (kFieldVaries: run_id and the timings) differs; any other field
// differing is a conflict naming the arm, request and repeat.
TEST(RunDir, DuplicatesDifferOnlyInTimingsAndRunId) {
  const RequestResult a = sweep_results()[0];
  RequestResult b = a;
  b.run_id = "another";
  b.latency_s *= 2;
  b.ttft_s += 1;
  b.prefill_s += 1;
  b.draft_s += 1;
  b.verify_s += 1;
  b.other_s += 1;
  EXPECT_EQ(dedupe_results({a, b}).size(), 1u);
  for (auto change : std::vector<std::function<void(RequestResult&)>>{
           [](RequestResult& r) { r.text += "!"; }, [](RequestResult& r) { r.seed += 1; },
           [](RequestResult& r) { r.prompt_tokens += 1; }, [](RequestResult& r) { r.correct = !r.correct; }}) {
    RequestResult c = a;
    change(c);
    EXPECT_NE(error_of([&] { dedupe_results({a, c}); }).find("conflicting results for arm '" + a.arm + "'"),
              std::string::npos);
  }
}

// The number of lines never stands in for which results: a duplicated line hiding a missing one
// left the report whole; a repeat past run.repeats or more results than the run expects are
// refused (as `run --resume` refuses them) — they counted as extra requests.
TEST(RunDir, ResultsTheRunWouldNotWriteAreNotCounted) {
  const fs::path root = temp_dir("counts");
  const auto rs = sweep_results();
  const ReportInputs in = sweep_inputs();
  write_shard(root / "hidden", rs, in, true, 1.0);
  std::string text;
  for (size_t i = 1; i < rs.size(); ++i) text += result_to_jsonl_line(rs[i]);
  std::ofstream(root / "hidden" / kResultsFile) << text << result_to_jsonl_line(rs[1]);
  const Report hidden = report_from_run_dirs({root / "hidden"}, kDefaultBootstrapSeed, 100);
  EXPECT_TRUE(hidden.partial);
  EXPECT_NE(::testing::PrintToString(hidden.warnings).find(fmt::format("{} results of {} expected", rs.size() - 1, rs.size())),
            std::string::npos)
      << ::testing::PrintToString(hidden.warnings);

  RequestResult again = rs[0];
  again.repeat = 1;
  write_shard(root / "repeat", rs, in, true, 1.0);
  std::ofstream(root / "repeat" / kResultsFile, std::ios::app) << result_to_jsonl_line(again);
  EXPECT_NE(error_of([&] { report_from_run_dirs({root / "repeat"}); })
                .find("has repeat 1 but the run's run.repeats is 1: that line is not this run's"),
            std::string::npos);

  write_shard(root / "extra", {rs.begin(), rs.end() - 1}, in, true, 1.0);
  std::ofstream(root / "extra" / kResultsFile, std::ios::app) << result_to_jsonl_line(rs.back());
  EXPECT_NE(error_of([&] { report_from_run_dirs({root / "extra"}); })
                .find(fmt::format("{} results where the run expects {}", rs.size(), rs.size() - 1)),
            std::string::npos);
  EXPECT_NE(error_of([&] { merge_run_dirs({root / "extra"}, root / "merged"); }).find("where the run expects"),
            std::string::npos);
  fs::remove_all(root);
}

// Merging can never duplicate, mix or overstate: every refusal names the directories.
TEST(RunDir, MergeRefusesOverlapsMixesAndOverwrites) {
  const fs::path root = temp_dir("refuse");
  const auto rs = sweep_results();
  const ReportInputs in = sweep_inputs();
  const size_t half = rs.size() / 2;
  std::vector<RequestResult> a(rs.begin(), rs.begin() + static_cast<long>(half) + 3);  // 3 results overlap b
  std::vector<RequestResult> b(rs.begin() + static_cast<long>(half), rs.end());
  write_shard(root / "s1", a, in, true, 0.5, "0/2");
  write_shard(root / "s2", b, in, true, 0.5, "1/2");
  write_shard(root / "whole", rs, in, true, 1.0);
  write_shard(root / "whole2", rs, in, true, 1.0);
  write_shard(root / "s2again", b, in, true, 0.5, "1/2");
  write_shard(root / "third", b, in, true, 0.5, "1/3");
  auto report = [&](std::vector<fs::path> dirs) { return error_of([&] { report_from_run_dirs(dirs); }); };
  EXPECT_NE(report({root / "s1", root / "s2"}).find("both hold the result of arm"), std::string::npos);
  EXPECT_NE(report({root / "s2", root / "s2"}).find("given twice"), std::string::npos);
  EXPECT_NE(report({root / "whole", root / "whole2"}).find("are both a whole run: their results overlap"), std::string::npos);
  EXPECT_NE(report({root / "s2", root / "s2again"}).find("are the same shard (1/2)"), std::string::npos);
  EXPECT_NE(report({root / "s2", root / "third"}).find("split the run differently"), std::string::npos);
  // A partial merge is not "whole run" (it was called that beside the shard it lacks).
  json merged_meta = json::parse(test::read_file(root / "s2" / kRunMetaFile));
  merged_meta["dataset"].erase("shard");
  merged_meta["dataset"]["merged_shards"] = json::array({"1/2"});
  fs::create_directories(root / "m2");
  fs::copy_file(root / "s2" / kResultsFile, root / "m2" / kResultsFile);
  std::ofstream(root / "m2" / kRunMetaFile) << merged_meta.dump();
  EXPECT_NE(report({root / "m2", root / "third"}).find("(a merge of shards [\"1/2\"])"), std::string::npos)
      << report({root / "m2", root / "third"});

  // One shard of two: partial, the missing index named (JSON and warning).
  const Report one = report_from_run_dirs({root / "s2"});
  EXPECT_TRUE(one.partial);
  EXPECT_EQ(one.dataset["missing_shards"], json::array({0}));
  EXPECT_NE(::testing::PrintToString(one.warnings).find("missing shard(s) 0/2 of 2"), std::string::npos);
  // The shard itself completed: no "did not complete" warning beside the missing one (it was given).
  EXPECT_EQ(::testing::PrintToString(one.warnings).find("did not complete"), std::string::npos) << one.warnings.size();

  // Shards of different experiments: refused with the differing key, unless --force (a warning).
  ReportInputs other = in;
  other.config["gamma"] = 5;
  write_shard(root / "o2", b, other, true, 0.5, "1/2");
  write_shard(root / "o1", std::vector<RequestResult>(rs.begin(), rs.begin() + static_cast<long>(half)), in, true, 0.5, "0/2");
  EXPECT_NE(report({root / "o1", root / "o2"}).find("gamma: 3 -> 5"), std::string::npos) << report({root / "o1", root / "o2"});
  // Two whole runs of different experiments are that (they were "the same whole run of the run").
  write_shard(root / "other-whole", rs, other, true, 1.0);
  EXPECT_NE(report({root / "whole", root / "other-whole"}).find("are runs of different experiments (gamma: 3 -> 5)"),
            std::string::npos)
      << report({root / "whole", root / "other-whole"});
  const Report forced = report_from_run_dirs({root / "o1", root / "o2"}, kDefaultBootstrapSeed, 100, true);
  EXPECT_NE(::testing::PrintToString(forced.warnings).find("--force"), std::string::npos);

  // merge never overwrites a finished run.
  merge_run_dirs({root / "o1", root / "o2"}, root / "merged", true);
  EXPECT_NE(error_of([&] { merge_run_dirs({root / "o1", root / "o2"}, root / "merged", true); }).find("is not empty"),
            std::string::npos);
  // A conflicting duplicate (different output) is an error.
  std::vector<RequestResult> c = {rs[0]};
  c[0].text = "something else";
  write_shard(root / "s3", c, in, true, 1.0, "1/2");
  EXPECT_THROW(report_from_run_dirs({root / "s1", root / "s3"}), Error);
  fs::remove_all(root);
}

// Shards may run on different nodes: parts that ran on different paths (kernel path, compute
// dtype, CPU, ISA, LibTorch) merge with a warning naming the directories and values, not a
// failure; a resumed session on another path and the recorded notices are warnings too, each
// once; none of them fails a gate.
TEST(RunDir, MergeWarnsWhenPartsRanOnDifferentPaths) {
  const fs::path root = temp_dir("paths");
  const auto rs = sweep_results();
  ReportInputs in = sweep_inputs();
  in.environment.update({{"kernel_path", "amx"}, {"compute_dtype", "bfloat16"}, {"cpu_model", "Xeon"},
                         {"cpu_isa", "avx2 fma amx-bf16"}, {"notices", {"kernel path avx2, below the best"}}});
  const size_t half = rs.size() / 2;
  write_shard(root / "s1", {rs.begin(), rs.begin() + static_cast<long>(half)}, in, true, 0.5, "0/2");
  write_shard(root / "s2", {rs.begin() + static_cast<long>(half), rs.end()}, in, true, 0.5, "1/2");
  const Report same = report_from_run_dirs({root / "s1", root / "s2"}, kDefaultBootstrapSeed, 100);
  EXPECT_EQ(same.warnings, std::vector<std::string>{"kernel path avx2, below the best"}) << "the notice, once";

  // s2 edited by hand: another kernel path and CPU; s1 resumed once on another dtype.
  json meta2 = json::parse(test::read_file(root / "s2" / kRunMetaFile));
  meta2["environment"]["kernel_path"] = "avx2";
  meta2["environment"]["cpu_model"] = "EPYC";
  meta2["environment"]["threads"] = 1;
  std::ofstream(root / "s2" / kRunMetaFile, std::ios::trunc) << meta2.dump();
  json meta1 = json::parse(test::read_file(root / "s1" / kRunMetaFile));
  meta1["environment"]["threads"] = 2;
  meta1["environment"]["resumed"] = {{{"at", "T1"}, {"kernel_path", "amx"}, {"compute_dtype", "float32"}},
                                     {{"at", "T2"}, {"kernel_path", "amx"}, {"threads", 1}, {"notices", {"3 LibTorch threads"}}}};
  std::ofstream(root / "s1" / kRunMetaFile, std::ios::trunc) << meta1.dump();
  const Report mixed = report_from_run_dirs({root / "s1", root / "s2"}, kDefaultBootstrapSeed, 100);
  EXPECT_FALSE(mixed.partial);
  const std::string s1 = (root / "s1").string(), s2 = (root / "s2").string();
  EXPECT_EQ(mixed.warnings,
            (std::vector<std::string>{
                "kernel path avx2, below the best", "3 LibTorch threads",
                s1 + " was resumed at T1 on another path (compute_dtype bfloat16 -> float32): its results mix both",
                s1 + " was resumed at T2 on another path (threads 2 -> 1): its results mix both",
                s1 + " and " + s2 + " ran on different paths (kernel_path amx -> avx2; cpu_model Xeon -> EPYC; threads 2 "
                                    "-> 1): the merged numbers mix both"}));
  EXPECT_NE(render_markdown(mixed).find("> Warning: " + s1 + " and " + s2 + " ran on different paths"),
            std::string::npos);
  EXPECT_TRUE(evaluate_gates(mixed, {parse_gate_rule("ears-0.6 n_requests == 30")}).all_passed);
  // A part that stopped before loading the models (an empty shard) has no kernel path: the merged
  // report states the other part's environment, whatever the order (it stated none).
  meta2["environment"].erase("kernel_path");
  std::ofstream(root / "s2" / kRunMetaFile, std::ios::trunc) << meta2.dump();
  for (const auto& order : {std::vector<fs::path>{root / "s2", root / "s1"}, {root / "s1", root / "s2"}})
    EXPECT_EQ(report_from_run_dirs(order, kDefaultBootstrapSeed, 100).environment.value("kernel_path", ""), "amx");
  fs::remove_all(root);
}

// ---------------------------------------------------------------------------------------------
// gates

TEST(Gate, PassFailAndUnknowns) {
  const Report r = build_report(sweep_results(), sweep_inputs());
  const std::vector<GateRule> checks = {
      parse_gate_rule("ears-0.6 throughput_gain_pct >= 5"),
      {"ears-0.6", "accuracy", ">=", 0.99},
      {"baseline", "n_errors", "==", 0},
      {"ears-0.3", "acceptance_per_position[0]", ">", 0.5},
      {"ears-0.3", "accuracy_delta_ci95[1]", "<", 100},
      {"baseline", "distortion_tv_mean", "<=", 1},  // undefined (null) → fails
  };
  const GateResult g = evaluate_gates(r, checks);
  ASSERT_EQ(g.outcomes.size(), checks.size());
  EXPECT_TRUE(g.outcomes[0].pass);
  EXPECT_EQ(g.outcomes[0].source, "comparison");
  EXPECT_NEAR(g.outcomes[0].actual, r.find_comparison("ears-0.6")->throughput_gain_pct, 1e-12);
  EXPECT_FALSE(g.outcomes[1].pass);
  EXPECT_EQ(g.outcomes[1].source, "arm");
  EXPECT_TRUE(g.outcomes[2].pass);
  EXPECT_TRUE(g.outcomes[3].pass);
  EXPECT_TRUE(g.outcomes[4].pass);
  EXPECT_FALSE(g.outcomes[5].pass);
  EXPECT_FALSE(g.all_passed);
  EXPECT_TRUE(evaluate_gates(r, {checks[0], checks[2]}).all_passed);

  const std::string table = gate_table(g, "runs/x");
  EXPECT_NE(table.find("PASS    ears-0.6: throughput_gain_pct >= 5"), std::string::npos) << table;
  EXPECT_NE(table.find("FAIL"), std::string::npos);
  const json gj = gate_to_json(g);
  EXPECT_EQ(gj["all_passed"], false);
  EXPECT_EQ(gj["checks"].size(), checks.size());
  EXPECT_TRUE(gj["checks"][5]["actual"].is_null());

  for (const GateRule& bad : std::vector<GateRule>{{"ears-0.6", "no_such_metric", ">=", 1},
                                                     {"nobody", "accuracy", ">=", 1},
                                                     {"ears-0.6", "accuracy", "=>", 1},
                                                     {"baseline", "throughput_gain_pct", ">=", 1},
                                                     {"ears-0.6", "acceptance_per_position", ">=", 1},
                                                     {"ears-0.6", "acceptance_per_position[9]", ">=", 1}}) {
    try {
      evaluate_gates(r, {bad});
      ADD_FAILURE() << "expected an error for " << to_string(bad);
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code, 2);
    }
  }
  EXPECT_THROW(parse_gate_rule("ears-0.6 accuracy >="), Error);
  EXPECT_THROW(parse_gate_rule("ears-0.6 accuracy >= 1x"), Error);
  EXPECT_THROW(parse_gate_rule("ears-0.6 accuracy ~ 1"), Error);
}

}  // namespace
}  // namespace ears
