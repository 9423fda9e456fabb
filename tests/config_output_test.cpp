// Tests for harness/config output: to_yaml / to_json round trips, the schema tables, and every
// shipped config.
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "harness/config/config.h"
#include "harness/config/schema.h"
#include "harness/base/error.h"
#include "tests/test_util.h"
#include "tests/config_test_util.h"

namespace fs = std::filesystem;
using namespace ears::config;
using ears::GateRule;
using namespace ears::config::config_test;

// ------------------------------------------------------------------ output

TEST(ConfigOutput, ToYamlRoundTripsAComplexSpec) {
  const std::string y =
      "name: complex\n"
      "description: \"colon: inside, and 'quotes'\"\n"
      "target: {path: /m/t, dtype: bfloat16, device: cuda:1}\n"
      "draft: {kind: eagle3, path: /m/d, sampling: greedy, aux_layers: [1, 2, 3], aux_layer_convention: sglang}\n"
      "dataset:\n"
      "  name: jsonl\n"
      "  path: data/x.jsonl\n"
      "  split: '2024'\n"
      "  limit: 7\n"
      "  offset: 2\n"
      "  n_shot: 0\n"
      "  prompt_template: \"Q: {question}\\nA:\"\n"
      "  scorer: qa\n"
      "  prompt_format: chat\n"
      "  thinking: true\n"
      "  seed: 18446744073709551615\n"
      "  on_error: skip\n"
      "  fields: {prompt: question, answer: 'true', category: kind}\n"
      "  categories: [math, 'null', ' spaced ']\n"
      "decoding: {gamma: 16, temperature: 0.7, top_p: 0.95, top_k: 20, max_new_tokens: 1000, stop: [\"\\n\\n\", \"Question:\", "
      "\"#\", \"Janet’s\"], batch_size: 4, seed: 42}\n"
      "arms:\n"
      "  - {name: ar, draft: {kind: none}}\n"
      "  - {name: spec, baseline: true, verifier: {type: baseline}}\n"
      "  - {name: greedy-t0, verifier: {type: greedy}, decoding: {temperature: 0, stop: []}}\n"
      "  - {name: ears, verifier: {type: ears, beta: [0.05, 0.125, 1e-4], uncertainty: entropy}, draft: {path: /other, "
      "aux_layers: []}}\n"
      "  - {name: typical, verifier: {type: typical, eps: 0.2, delta: 0.5}}\n"
      "run: {warmup: 0, repeats: 3, output_dir: out/dir, order: random, threads: 2}\n"
      "gates:\n"
      "  - \"ears-b0.05: accuracy_delta_pp >= -1.5\"\n"
      "  - {metric: latency_p99_s, op: \"<\", value: 2}\n";
  ExperimentSpec s = parse(y);
  ASSERT_EQ(s.arms.size(), 7u);
  EXPECT_EQ(s.arms[5].name, "ears-b0.0001");
  EXPECT_EQ(s.dataset.path, "/cfg/data/x.jsonl");
  EXPECT_EQ(s.dataset.seed, 18446744073709551615ull);
  EXPECT_EQ(s.run.output_dir, "out/dir");  // relative to the working directory, not resolved
  EXPECT_EQ(s.dataset.prompt_template, "Q: {question}\nA:");
  EXPECT_EQ(s.gates.size(), 8u);  // "*" expanded over the 7 arms
  std::string out = to_yaml(s);
  ExperimentSpec back = parse_experiment(out, "resolved.yaml", "/elsewhere");
  EXPECT_EQ(back, s) << out;
  EXPECT_EQ(to_yaml(back), out);
  EXPECT_NE(out.find("kind: none"), std::string::npos) << out;
}

TEST(ConfigOutput, ToYamlRoundTripsDefaultsAndFillsThemIn) {
  ExperimentSpec s = parse(kBase);
  std::string out = to_yaml(s);
  std::string synth = kBase;
  synth.replace(synth.find("name: gsm8k"), 11, "name: synth-gsm\n  n: 12\n  n_shot: 4\n  split: train");
  ExperimentSpec sy = parse(synth);
  EXPECT_EQ(sy.dataset.n, 12);
  EXPECT_EQ(parse(to_yaml(sy)), sy) << to_yaml(sy);
  for (const char* key : {"gamma: 5", "temperature: 0.9", "top_p: 1", "max_new_tokens: 256", "dtype: auto",
                          "prompt_format: chat", "order: interleaved", "baseline: true", "uncertainty: max_prob"})
    EXPECT_NE(out.find(key), std::string::npos) << key << "\n" << out;
  EXPECT_EQ(parse_experiment(out, "x.yaml", ""), s);
}

// dataset.scorer takes every row of datasets/scoring.h's kScorerTable and echoes it in the
// resolved YAML and report JSON; "" (the default) leaves the dataset's own scorer.
TEST(ConfigOutput, ScorerChoicesEchoed) {
  std::string nq = kBase;
  nq.replace(nq.find("name: gsm8k"), 11, "name: nq_open");
  EXPECT_EQ(parse(nq).dataset.scorer, "");
  for (const char* scorer : {"squad", "lm_eval_nq_open", "qa", "gsm8k", "none"}) {
    ExperimentSpec s = parse(nq, {std::string("dataset.scorer=") + scorer});
    EXPECT_EQ(s.dataset.scorer, scorer);
    EXPECT_NE(to_yaml(s).find(std::string("scorer: ") + scorer), std::string::npos) << to_yaml(s);
    EXPECT_EQ(to_json(s)["dataset"]["scorer"], scorer);
    EXPECT_EQ(parse(to_yaml(s)), s);
  }
  EXPECT_NE(error_of(nq, {"dataset.scorer=lm_eval"}).find("dataset.scorer: 'lm_eval' is not allowed; "),
            std::string::npos);
}

TEST(ConfigOutput, ToJsonCarriesResolvedArms) {
  ExperimentSpec s = parse(inject("      type: ears", "    decoding: {temperature: 0}") + "gates: [\"ears: accuracy >= 0.5\"]\n");
  nlohmann::json j = to_json(s);
  EXPECT_EQ(j["name"], "t");
  EXPECT_EQ(j["baseline_arm"], "base");
  EXPECT_EQ(j["arms"][1]["decoding"]["temperature"], 0.0);
  EXPECT_EQ(j["arms"][0]["decoding"]["temperature"], 0.9);
  EXPECT_EQ(j["arms"][1]["draft"]["path"], "/m/draft");
  EXPECT_EQ(j["arms"][1]["verifier"]["type"], "ears");
  EXPECT_EQ(j["decoding"]["gamma"], 5);
  EXPECT_EQ(j["gates"][0]["text"], "ears: accuracy >= 0.5");
  EXPECT_EQ(j["gates"][0]["value"], 0.5);
  EXPECT_EQ(j["dataset"]["name"], "gsm8k");
}

// Every section table (harness/config/schema.h) documents each key, and to_yaml / to_json carry
// exactly the table's keys: to_yaml in table order (leaving out only keys whose yaml_if says so),
// to_json all of them. Catches a row that is read but not written, or written under another name.
template <class S>
void expect_table_output(const detail::Table<S>& table, const S& value, const YAML::Node& yaml, const nlohmann::json& json) {
  std::vector<std::string> want_yaml, got_yaml, want_json, got_json;
  for (const auto& f : table.fields) {
    EXPECT_FALSE(f.doc.empty()) << table.schema.name << "." << f.key << " has no doc";
    EXPECT_TRUE(f.read && f.yaml && f.json) << table.schema.name << "." << f.key;
    if (!f.emit_if || f.emit_if(value)) want_yaml.emplace_back(f.key);
    want_json.emplace_back(f.key);
  }
  for (auto it = yaml.begin(); it != yaml.end(); ++it) got_yaml.push_back(it->first.Scalar());
  for (auto& [k, v] : json.items()) got_json.push_back(k);
  std::sort(want_json.begin(), want_json.end());
  std::sort(got_json.begin(), got_json.end());
  EXPECT_EQ(got_yaml, want_yaml) << table.schema.name;
  EXPECT_EQ(got_json, want_json) << table.schema.name;
}

TEST(ConfigSchema, EveryTableKeyIsDocumentedAndWritten) {
  for (const char* dataset : {"{name: jsonl, path: /d.jsonl, categories: [a]}", "{name: synth-gsm, n: 5}", "{name: spec_bench}"}) {
    SCOPED_TRACE(dataset);
    std::string yaml = inject("  seed: 0", "  gamma: 3") + "gates: [\"ears: accuracy >= 0.5\"]\n";
    const std::string gsm8k = "dataset:\n  name: gsm8k";
    yaml.replace(yaml.find(gsm8k), gsm8k.size(), std::string("dataset: ") + dataset);
    const ExperimentSpec s = parse(yaml);
    const YAML::Node y = YAML::Load(to_yaml(s));
    nlohmann::json j = to_json(s);
    EXPECT_EQ(j["baseline_arm"], "base");
    j.erase("baseline_arm");  // to_json's one key beyond the table
    expect_table_output(detail::root_table(), s, y, j);
    expect_table_output(detail::target_table(), s.target, y["target"], j["target"]);
    expect_table_output(detail::draft_table(), s.draft, y["draft"], j["draft"]);
    expect_table_output(detail::dataset_table(), s.dataset, y["dataset"], j["dataset"]);
    expect_table_output(detail::decoding_table(), s.decoding, y["decoding"], j["decoding"]);
    expect_table_output(detail::run_table(), s.run, y["run"], j["run"]);
    expect_table_output(detail::verifier_table(), s.arms[1].verifier, y["arms"][1]["verifier"], j["arms"][1]["verifier"]);
    if (s.dataset.name == "jsonl")
      EXPECT_EQ(y["dataset"]["fields"].size(), j["dataset"]["fields"].size());
  }
}

// ------------------------------------------------------------------ files

TEST(ConfigFiles, LoadExperimentReadsFilesAndReportsMissingOnes) {
  fs::path dir = fs::temp_directory_path() / "ears_config_test";
  fs::create_directories(dir);
  fs::path file = dir / "my-exp.yaml";
  {
    std::ofstream out(file);
    out << "target: {path: model}\ndraft: {path: ../draft}\ndataset: {name: synth-gsm, n: 12}\narms: [baseline, ears]\n"
        << "decoding:\n  gama: 1\n";
  }
  try {
    load_experiment(file);
    ADD_FAILURE() << "expected an error";
  } catch (const ears::Error& e) {
    EXPECT_EQ(std::string(e.what()), file.string() + ":6:3: decoding.gama: unknown key; did you mean 'gamma'?");
  }
  {
    std::ofstream out(file);
    out << "target: {path: model}\ndraft: {path: ../draft}\ndataset: {name: synth-gsm, n: 12}\narms: [baseline, ears]\n";
  }
  ExperimentSpec ok = load_experiment(file, {"dataset.n=20"});
  EXPECT_EQ(ok.name, "my-exp");
  EXPECT_EQ(ok.target.path, (dir / "model").string());
  EXPECT_EQ(ok.draft.path, (dir.parent_path() / "draft").string());
  EXPECT_EQ(ok.dataset.n, 20);
  try {
    load_experiment(dir / "nope.yaml");
    ADD_FAILURE() << "expected an error";
  } catch (const ears::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.yaml: cannot read the experiment file"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(ConfigFiles, EveryShippedConfigLoadsAndRoundTrips) {
  fs::path configs = ears::test::source_dir() / "configs";
  ASSERT_TRUE(fs::exists(configs));
  int n = 0;
  for (const auto& entry : fs::recursive_directory_iterator(configs)) {
    if (entry.path().extension() != ".yaml") continue;
    ++n;
    SCOPED_TRACE(entry.path().string());
    ExperimentSpec s;
    ASSERT_NO_THROW(s = load_experiment(entry.path())) << [&] {
      try {
        load_experiment(entry.path());
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
      return std::string();
    }();
    EXPECT_GE(s.arms.size(), 1u);
    EXPECT_EQ(s.name, entry.path().stem().string());
    EXPECT_EQ(parse_experiment(to_yaml(s), "rt.yaml", "/"), s);
  }
  EXPECT_GE(n, 8);

  ExperimentSpec gsm = load_experiment(configs / "gsm8k.yaml");
  EXPECT_EQ(gsm.dataset.name, "gsm8k");
  EXPECT_EQ(gsm.dataset.limit, 50);
  EXPECT_EQ(gsm.decoding.gamma, 5);
  EXPECT_DOUBLE_EQ(gsm.decoding.temperature, 0.9);
  EXPECT_EQ(gsm.target.path, (configs.parent_path() / "models/tiny-qwen3").lexically_normal().string());
  EXPECT_EQ(gsm.draft.path, (configs.parent_path() / "models/tiny-eagle3").lexically_normal().string());
  EXPECT_EQ(gsm.gates.size(), 2u);
  EXPECT_EQ(load_experiment(configs / "beta-sweep.yaml").arms.size(), 4u);
  ExperimentSpec paper = load_experiment(configs / "paper/gsm8k-qwen3-32b.yaml");
  EXPECT_EQ(paper.target.dtype, "bfloat16");
  EXPECT_EQ(paper.target.device, "cuda");
  EXPECT_DOUBLE_EQ(paper.arms[1].verifier.beta, 0.1);
  const ExperimentSpec quick = load_experiment(configs / "quickstart.yaml");
  EXPECT_EQ(quick.dataset.name, "synth-gsm");
  EXPECT_EQ(quick.dataset.n, 120);
  ASSERT_EQ(quick.arms.size(), 3u);
  EXPECT_EQ(quick.arms[2].draft.kind, "none");  // target alone, same prompts and seeds
  const ExperimentSpec greedy = load_experiment(configs / "quickstart-greedy.yaml");
  EXPECT_EQ(greedy.baseline_arm().name, "target-only");
  EXPECT_DOUBLE_EQ(greedy.arms[1].decoding.temperature, 0.0);
  EXPECT_EQ(load_experiment(configs / "open-stems.yaml").arms.size(), 4u);
  // decoding.distortion: on by default, switchable, round-trips.
  EXPECT_TRUE(quick.decoding.distortion);
  const ExperimentSpec off = load_experiment(configs / "quickstart.yaml", {"decoding.distortion=false"});
  EXPECT_FALSE(off.arms[0].decoding.distortion);
  EXPECT_EQ(parse_experiment(to_yaml(off), "rt.yaml", "/"), off);
}

// ------------------------------------------------------------------ the key reference

// docs/config.md's key tables are the section tables' (harness/config/reference.cpp): a key added,
// renamed or re-defaulted in a table without the doc (or the reverse) fails here.
TEST(ConfigDoc, KeyTablesMatchTheSectionTables) {
  ears::test::expect_generated_block("config.md", kConfigDocBegin, kConfigDocEnd, config_reference_markdown(),
                                     "./config_tests --gtest_filter=ConfigDoc.*");
}

// The generator reads defaults and required keys from the tables themselves.
TEST(ConfigDoc, ReferenceShowsDefaultsAndRequiredKeys) {
  const std::string md = config_reference_markdown();
  EXPECT_NE(md.find("| `gamma` | `5` |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `temperature` | `0.9` |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `dtype` | `auto` |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `path` | *required* |"), std::string::npos) << md;       // target.path
  EXPECT_NE(md.find("| `arms` | *required* |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `name` | `\"\"` |"), std::string::npos) << md;            // the file's stem
  EXPECT_NE(md.find("| `target` | *required* |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `decoding` | section `decoding` |"), std::string::npos) << md;
}
