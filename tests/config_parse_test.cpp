// Tests for harness/config parsing: YAML -> validated ExperimentSpec, defaults, validation errors,
// --set overrides, sweeps, gates.
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

namespace {

// 1-based line of the first line containing `needle`.
int line_of(const std::string& text, const std::string& needle) {
  auto pos = text.find(needle);
  EXPECT_NE(pos, std::string::npos) << needle;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

// ------------------------------------------------------------------ defaults and resolution

TEST(Config, DefaultsAreFilled) {
  ExperimentSpec s = parse(kBase);
  EXPECT_EQ(s.name, "t");  // file stem
  EXPECT_EQ(s.target.path, "/m/target");
  EXPECT_EQ(s.target.dtype, "auto");
  EXPECT_EQ(s.target.device, "cpu");
  EXPECT_EQ(s.draft.kind, "eagle3");
  EXPECT_EQ(s.draft.sampling, "sample");
  EXPECT_EQ(s.draft.aux_layer_convention, "hf");
  EXPECT_TRUE(s.draft.aux_layers.empty());
  EXPECT_EQ(s.dataset.prompt_format, "chat");
  EXPECT_FALSE(s.dataset.thinking);
  EXPECT_EQ(s.dataset.limit, 0);
  EXPECT_EQ(s.dataset.on_error, "fail");
  EXPECT_EQ(s.decoding.gamma, 5);
  EXPECT_DOUBLE_EQ(s.decoding.temperature, 0.9);
  EXPECT_DOUBLE_EQ(s.decoding.top_p, 1.0);
  EXPECT_EQ(s.decoding.top_k, 0);
  EXPECT_EQ(s.decoding.max_new_tokens, 256);
  EXPECT_EQ(s.decoding.batch_size, 1);
  ASSERT_EQ(s.arms.size(), 2u);
  EXPECT_EQ(s.baseline_index(), 0u);
  EXPECT_TRUE(s.arms[0].baseline);
  EXPECT_FALSE(s.arms[1].baseline);
  EXPECT_EQ(s.arms[1].verifier.type, "ears");
  EXPECT_DOUBLE_EQ(s.arms[1].verifier.beta, 0.1);
  EXPECT_EQ(s.arms[1].verifier.uncertainty, "max_prob");
  EXPECT_EQ(s.arms[1].decoding, s.decoding);
  EXPECT_EQ(s.arms[1].draft, s.draft);
  EXPECT_EQ(s.run.warmup, 1);
  EXPECT_EQ(s.run.repeats, 1);
  EXPECT_EQ(s.run.output_dir, "");
  EXPECT_EQ(s.run.order, "interleaved");
  EXPECT_EQ(s.run.threads, 0);
  EXPECT_TRUE(s.gates.empty());
}

TEST(Config, RelativePathsResolveAgainstTheFileDirectory) {
  std::string y = kBase;
  y.replace(y.find("/m/target"), 9, "../models/tiny-qwen3");
  y.replace(y.find("/m/draft"), 8, "./d/../eagle");
  ExperimentSpec s = parse_experiment(y, "configs/x.yaml", "/repo/configs");
  EXPECT_EQ(s.target.path, "/repo/models/tiny-qwen3");
  EXPECT_EQ(s.draft.path, "/repo/configs/eagle");
  EXPECT_EQ(s.name, "x");
}

TEST(Config, EnvironmentExpansionInPaths) {
  ::setenv("EARS_CFG_TEST_MODELS", "/big/disk", 1);
  ::unsetenv("EARS_CFG_TEST_UNSET");
  std::string y = kBase;
  y.replace(y.find("/m/target"), 9, "${EARS_CFG_TEST_MODELS}/qwen");
  y.replace(y.find("/m/draft"), 8, "${EARS_CFG_TEST_UNSET:-/fallback}/eagle");
  ExperimentSpec s = parse(y);
  EXPECT_EQ(s.target.path, "/big/disk/qwen");
  EXPECT_EQ(s.draft.path, "/fallback/eagle");

  std::string bad = kBase;
  bad.replace(bad.find("/m/target"), 9, "${EARS_CFG_TEST_UNSET}/qwen");
  std::string e = error_of(bad);
  EXPECT_TRUE(starts_with(e, "t.yaml:2:9: target.path: environment variable EARS_CFG_TEST_UNSET is not set;")) << e;
}

TEST(Config, ArmShorthandAndDefaultArmName) {
  std::string y = kBase.substr(0, kBase.find("arms:")) + "arms:\n  - baseline\n  - verifier: {type: typical}\n";
  ExperimentSpec s = parse(y);
  ASSERT_EQ(s.arms.size(), 2u);
  EXPECT_EQ(s.arms[0].name, "baseline");
  EXPECT_EQ(s.arms[1].name, "typical");
  EXPECT_DOUBLE_EQ(s.arms[1].verifier.eps, 0.09);
  EXPECT_DOUBLE_EQ(s.arms[1].verifier.delta, 0.3);
}

TEST(Config, ExplicitBaselineFlag) {
  ExperimentSpec s = parse(inject("  - name: ears", "    baseline: true"));
  EXPECT_EQ(s.baseline_index(), 1u);
  EXPECT_FALSE(s.arms[0].baseline);
  EXPECT_EQ(s.baseline_arm().name, "ears");
}

// The ids are kept as written with their convention; the head shifts sglang ids (decoders/eagle3.cpp,
// BundledModels.EagleAuxLayersFollowTheConvention).
TEST(Config, AuxLayersKeepTheirConvention) {
  ExperimentSpec s = parse(inject("  path: /m/draft", "  aux_layers: [1, 3, 5]\n  aux_layer_convention: sglang"));
  EXPECT_EQ(s.draft.aux_layers, (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(s.draft.aux_layer_convention, "sglang");
  ExperimentSpec h = parse(inject("  path: /m/draft", "  aux_layers: [2, 3, 3]"));
  EXPECT_EQ(h.draft.aux_layers, (std::vector<int>{2, 3, 3}));
  EXPECT_EQ(h.draft.aux_layer_convention, "hf");
}

// ------------------------------------------------------------------ per-arm overrides and sweeps

TEST(Config, PerArmDecodingAndDraftOverrides) {
  std::string y = inject("      type: ears", "    decoding: {temperature: 0, gamma: 3}\n    draft: {sampling: greedy}");
  y = inject("      type: baseline", "    draft: {kind: none}", y);
  ExperimentSpec s = parse(y);
  EXPECT_EQ(s.arms[0].draft.kind, "none");
  EXPECT_EQ(s.arms[0].decoding, s.decoding);
  EXPECT_DOUBLE_EQ(s.arms[1].decoding.temperature, 0.0);
  EXPECT_EQ(s.arms[1].decoding.gamma, 3);
  EXPECT_EQ(s.arms[1].decoding.max_new_tokens, 256);  // inherited
  EXPECT_EQ(s.arms[1].draft.sampling, "greedy");
  EXPECT_EQ(s.arms[1].draft.path, "/m/draft");  // inherited
  EXPECT_DOUBLE_EQ(s.decoding.temperature, 0.9);  // top level untouched
}

TEST(Config, TargetOnlyArmsNeedNoDraftPath) {
  std::string y =
      "target: {path: /t}\ndataset: {name: gsm8k}\narms:\n  - {name: ar, draft: {kind: none}}\n";
  ExperimentSpec s = parse(y);
  EXPECT_EQ(s.arms[0].draft.kind, "none");
  std::string e = error_of("target: {path: /t}\ndataset: {name: gsm8k}\narms:\n  - {name: ar}\n");
  EXPECT_TRUE(starts_with(e, "t.yaml:1:1: draft.path: missing required key")) << e;
}

TEST(Config, BetaSweepExpandsIntoArms) {
  std::string y = kBase;
  y.replace(y.find("      type: ears\n"), 16, "      type: ears\n      beta: [0.05, 0.1, 0.2]\n");
  ExperimentSpec s = parse(y);
  ASSERT_EQ(s.arms.size(), 4u);
  EXPECT_EQ(s.arms[0].name, "base");
  EXPECT_EQ(s.arms[1].name, "ears-b0.05");
  EXPECT_EQ(s.arms[2].name, "ears-b0.1");
  EXPECT_EQ(s.arms[3].name, "ears-b0.2");
  EXPECT_DOUBLE_EQ(s.arms[1].verifier.beta, 0.05);
  EXPECT_DOUBLE_EQ(s.arms[3].verifier.beta, 0.2);
  EXPECT_EQ(s.arms[2].verifier.type, "ears");
  EXPECT_EQ(s.baseline_index(), 0u);

  std::string bad = inject("      beta: [0.05, 0.1, 0.2]", "      uncertainty: entropy", y);
  bad.replace(bad.find("[0.05, 0.1, 0.2]"), 16, "[0.05, -0.1]");
  EXPECT_NE(error_of(bad).find("arms.1.verifier.beta.1: -0.1 is out of range; beta must be >= 0"), std::string::npos);
  std::string empty = y;
  empty.replace(empty.find("[0.05, 0.1, 0.2]"), 16, "[]");
  EXPECT_NE(error_of(empty).find("arms.1.verifier.beta: empty beta sweep"), std::string::npos);
  std::string base_sweep = inject("  - name: ears", "    baseline: true", y);
  EXPECT_NE(error_of(base_sweep).find("arms.1.baseline: a beta sweep expands into several arms"), std::string::npos);
}

TEST(Config, SweepNameCollisionIsADuplicate) {
  std::string y = kBase.substr(0, kBase.find("arms:")) +
                  "arms:\n  - {name: ears, verifier: {type: ears, beta: [0.1, 0.2]}}\n"
                  "  - {name: ears-b0.2, verifier: {type: ears}}\n";
  std::string e = error_of(y);
  EXPECT_NE(e.find("duplicate arm name 'ears-b0.2'"), std::string::npos) << e;
}

// ------------------------------------------------------------------ validation errors

TEST(ConfigErrors, UnknownKeySuggestsTheClosestKey) {
  std::string y = inject("decoding:", "  gama: 3");
  EXPECT_EQ(error_of(y), "t.yaml:8:3: decoding.gama: unknown key; did you mean 'gamma'?");
  std::string top = "targt:\n  path: /x\n" + kBase;
  EXPECT_EQ(error_of(top), "t.yaml:1:1: targt: unknown key; did you mean 'target'?");
  std::string nested = inject("      type: ears", "      betta: 0.2");
  EXPECT_EQ(error_of(nested), "t.yaml:16:7: arms.1.verifier.betta: unknown key; did you mean 'beta'?");
}

TEST(ConfigErrors, MisplacedKeyNamesItsSection) {
  std::string e = error_of(inject("  path: /m/target", "  max_new_tokens: 3"));
  EXPECT_TRUE(starts_with(e, "t.yaml:3:3: target.max_new_tokens: unknown key; 'max_new_tokens' belongs under decoding"))
      << e;
  std::string far = error_of(inject("decoding:", "  zzzzzz: 1"));
  EXPECT_NE(far.find("unknown key; allowed keys: gamma, temperature, top_p"), std::string::npos) << far;
}

TEST(ConfigErrors, DuplicateKey) {
  std::string e = error_of(inject("  seed: 0", "  seed: 1"));
  EXPECT_EQ(e, "t.yaml:9:3: decoding.seed: duplicate key; keep only one of them");
}

TEST(ConfigErrors, WrongTypes) {
  std::string y = inject("decoding:", "  gamma: five");
  EXPECT_TRUE(starts_with(error_of(y), "t.yaml:8:10: decoding.gamma: expected an integer, got 'five'; ")) << error_of(y);
  EXPECT_NE(error_of(inject("decoding:", "  gamma: 2.5")).find("expected an integer, got '2.5'"), std::string::npos);
  EXPECT_NE(error_of(inject("decoding:", "  temperature: hot")).find("decoding.temperature: expected a number, got 'hot'"),
            std::string::npos);
  EXPECT_NE(error_of(inject("decoding:", "  gamma: [1, 2]")).find("decoding.gamma: expected an integer, got a list"),
            std::string::npos);
  EXPECT_NE(error_of(inject("dataset:", "  thinking: maybe")).find("dataset.thinking: expected true or false, got 'maybe'"),
            std::string::npos);
  EXPECT_NE(error_of(inject("  path: /m/target", "  device: {a: 1}")).find("target.device: expected a string, got a mapping"),
            std::string::npos);
  EXPECT_NE(error_of(inject("  path: /m/draft", "  aux_layers: 3")).find("draft.aux_layers: expected a list of layer ids"),
            std::string::npos);
  EXPECT_NE(error_of("target: /x\n" + kBase.substr(kBase.find("draft:"))).find("t.yaml:1:9: target: expected a mapping"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + "gates: ears\n").find("gates: expected a list of rules"), std::string::npos);
}

struct RangeCase {
  std::string after, line, key_path, problem;
};

// synth-gsm generates its problems in memory: n has a ceiling (2e9 died of bad_alloc, 5e6 hung).
TEST(ConfigErrors, SynthGsmSizeHasACeiling) {
  std::string yaml = kBase;
  const auto pos = yaml.find("  name: gsm8k\n");
  ASSERT_NE(pos, std::string::npos);
  yaml.replace(pos, 14, "  name: synth-gsm\n  n: 2000000000\n");
  EXPECT_NE(error_of(yaml).find("dataset.n: 2000000000 is out of range; n must be >= 1 and <= 100000"),
            std::string::npos)
      << error_of(yaml);
}

TEST(ConfigErrors, EveryOutOfRangeValueNamesTheRange) {
  const std::vector<RangeCase> cases = {
      {"decoding:", "  gamma: 0", "decoding.gamma", "0 is out of range; gamma must be >= 1 and <= 16"},
      {"decoding:", "  gamma: 17", "decoding.gamma", "17 is out of range; gamma must be >= 1 and <= 16"},
      {"decoding:", "  temperature: -0.5", "decoding.temperature", "-0.5 is out of range; temperature must be 0 (greedy) or >= 0.01"},
      {"decoding:", "  temperature: 1e-39", "decoding.temperature", "1e-39 is out of range; temperature must be 0"},
      {"decoding:", "  top_p: 0", "decoding.top_p", "0 is out of range; top_p must be > 0 and <= 1"},
      {"decoding:", "  top_p: 1.5", "decoding.top_p", "1.5 is out of range; top_p must be > 0 and <= 1"},
      {"decoding:", "  top_k: -1", "decoding.top_k", "-1 is out of range; top_k must be >= 0"},
      {"decoding:", "  max_new_tokens: 0", "decoding.max_new_tokens", "0 is out of range; max_new_tokens must be >= 1"},
      {"decoding:", "  batch_size: 0", "decoding.batch_size", "0 is out of range; batch_size must be >= 1"},
      {"  name: gsm8k", "  seed: -3", "dataset.seed", "-3 is out of range; seed must be >= 0"},
      {"decoding:", "  stop: ['']", "decoding.stop.0", "empty stop string"},
      {"      type: ears", "      beta: -0.1", "arms.1.verifier.beta", "-0.1 is out of range; beta must be >= 0"},
      {"      type: ears", "      eps: 1.5", "arms.1.verifier.eps", "1.5 is out of range; eps must be > 0 and <= 1"},
      {"      type: ears", "      eps: 0", "arms.1.verifier.eps", "0 is out of range; eps must be > 0 and <= 1"},
      {"      type: ears", "      delta: -1", "arms.1.verifier.delta", "-1 is out of range; delta must be > 0"},
      {"      type: ears", "      delta: 0", "arms.1.verifier.delta", "0 is out of range; delta must be > 0"},
      {"      type: ears", "      uncertainty: variance", "arms.1.verifier.uncertainty",
       "'variance' is not allowed; use one of max_prob|entropy"},
      {"      type: ears", "      uncertainty: entropi", "arms.1.verifier.uncertainty",
       "'entropi' is not allowed; did you mean 'entropy'? (allowed: max_prob|entropy)"},
      {"  path: /m/target", "  dtype: fp16", "target.dtype",
       "'fp16' is not allowed; did you mean 'float16'? (allowed: auto|float32|bfloat16|float16)"},
      {"  path: /m/target", "  dtype: int8", "target.dtype", "'int8' is not allowed; use one of auto|float32|bfloat16|float16"},
      {"  path: /m/target", "  device: gpu", "target.device", "'gpu' is not a valid device; use cpu, cuda or cuda:N"},
      {"  path: /m/target", "  device: cuda:x", "target.device", "'cuda:x' is not a valid device"},
      {"  path: /m/draft", "  kind: eagle2", "draft.kind", "'eagle2' is not allowed; did you mean 'eagle3'?"},
      {"  path: /m/draft", "  sampling: random", "draft.sampling", "'random' is not allowed; use one of sample|greedy"},
      {"  path: /m/draft", "  dtype: bf16", "draft.dtype", "did you mean 'bfloat16'?"},
      {"  path: /m/draft", "  aux_layers: [1, -2]", "draft.aux_layers.1", "-2 is out of range; aux_layers must be >= 0"},
      {"  path: /m/draft", "  aux_layer_convention: vllm", "draft.aux_layer_convention", "use one of hf|sglang"},
      {"  name: gsm8k", "  prompt_format: markdown", "dataset.prompt_format", "use one of raw|chat"},
      {"  name: gsm8k", "  on_error: ignore", "dataset.on_error", "use one of fail|skip"},
      {"  name: gsm8k", "  limit: -1", "dataset.limit", "-1 is out of range; limit must be >= 0"},
      {"  name: gsm8k", "  offset: -1", "dataset.offset", "-1 is out of range; offset must be >= 0"},
      {"  name: gsm8k", "  n_shot: 100", "dataset.n_shot", "100 is out of range; n_shot must be >= 0 and <= 64"},
      {"  name: gsm8k", "  n: 10", "dataset.n", "n only applies to synth-gsm, not gsm8k"},
      {"  name: gsm8k", "  scorer: exact", "dataset.scorer", "'exact' is not allowed; use one of gsm8k|squad|lm_eval_nq_open|qa|none"},
      {"  name: gsm8k", "  prompt_template: 'Q: {q}'", "dataset.prompt_template", "the template has no {question} placeholder"},
      {"  name: gsm8k", "  categories: [math]", "dataset.categories", "categories only applies to spec_bench and jsonl"},
      {"  name: gsm8k", "  fields: {prompt: q}", "dataset.fields", "fields only applies to name: jsonl"},
      {"  name: gsm8k", "  prompt_format: raw\n  thinking: true", "dataset.thinking",
       "thinking only applies to prompt_format: chat"},
      {"  warmup: 1", "  repeats: 0", "run.repeats", "0 is out of range; repeats must be >= 1"},
      {"  warmup: 1", "  threads: -2", "run.threads", "-2 is out of range; threads must be >= 0"},
      {"  warmup: 1", "  order: sorted", "run.order", "use one of interleaved|random"},
      {"      type: baseline", "    name: base", "arms.0.name", "duplicate key"},
  };
  for (const auto& tc : cases) {
    std::string y = inject(tc.after, tc.line);
    std::string e = error_of(y);
    std::string first_line = tc.line.substr(0, tc.line.find('\n'));
    std::string key_line = tc.line.find('\n') == std::string::npos ? tc.line : tc.line.substr(tc.line.find('\n') + 1);
    int line = line_of(y, tc.after + "\n" + first_line) + 1 + (tc.line.find('\n') == std::string::npos ? 0 : 1);
    EXPECT_TRUE(starts_with(e, fmt::format("t.yaml:{}:", line))) << tc.line << " -> " << e;
    EXPECT_NE(e.find(": " + tc.key_path + ": "), std::string::npos) << tc.line << " -> " << e;
    EXPECT_NE(e.find(tc.problem), std::string::npos) << tc.line << " -> " << e;
  }
}

TEST(ConfigErrors, BadEnumValuesAtTheValuePosition) {
  std::string y = inject("      type: ears", "      uncertainty: entropi");
  EXPECT_TRUE(starts_with(error_of(y), "t.yaml:16:20: arms.1.verifier.uncertainty:")) << error_of(y);
  std::string v = kBase;
  v.replace(v.find("type: ears"), 10, "type: earz");
  EXPECT_EQ(error_of(v),
            "t.yaml:15:13: arms.1.verifier.type: 'earz' is not allowed; did you mean 'ears'? "
            "(allowed: baseline|ears|typical|greedy)");
  std::string d = kBase;
  d.replace(d.find("name: gsm8k"), 11, "name: squad");
  EXPECT_NE(error_of(d).find("dataset.name: 'squad' is not allowed; use one of gsm8k|nq_open|spec_bench|jsonl|synth-gsm|open-stems"),
            std::string::npos);
  std::string cat = kBase;
  cat.replace(cat.find("name: gsm8k"), 11, "name: spec_bench\n  categories: [qa, mathh]");
  EXPECT_NE(error_of(cat).find("t.yaml:7:20: dataset.categories.1: 'mathh' is not a Spec-Bench category; did you mean 'math'?"),
            std::string::npos)
      << error_of(cat);
}

TEST(ConfigErrors, MissingRequired) {
  std::string no_target = kBase.substr(kBase.find("draft:"));
  EXPECT_TRUE(starts_with(error_of(no_target), "t.yaml:1:1: target: missing required section;")) << error_of(no_target);
  std::string no_path = kBase;
  no_path.replace(no_path.find("  path: /m/target\n"), 18, "  device: cpu\n");
  EXPECT_TRUE(starts_with(error_of(no_path), "t.yaml:2:3: target.path: missing required key; add 'path:")) << error_of(no_path);
  std::string no_ds_name = kBase;
  no_ds_name.replace(no_ds_name.find("  name: gsm8k\n"), 14, "  limit: 3\n");
  EXPECT_TRUE(starts_with(error_of(no_ds_name), "t.yaml:6:3: dataset.name: missing required key;")) << error_of(no_ds_name);
  std::string no_dataset = kBase;
  no_dataset.replace(no_dataset.find("dataset:\n  name: gsm8k\n"), 23, "");
  EXPECT_NE(error_of(no_dataset).find("dataset: missing required section"), std::string::npos);
  std::string no_arms = kBase.substr(0, kBase.find("arms:"));
  EXPECT_TRUE(starts_with(error_of(no_arms), "t.yaml:1:1: arms: missing required section;")) << error_of(no_arms);
  EXPECT_NE(error_of(no_arms + "arms: []\n").find("arms: no arms; add at least one arm"), std::string::npos);
  std::string no_draft_path = kBase;
  no_draft_path.replace(no_draft_path.find("  path: /m/draft\n"), 17, "  kind: model\n");
  EXPECT_TRUE(starts_with(error_of(no_draft_path), "t.yaml:4:3: draft.path: missing required key (draft kind model)"))
      << error_of(no_draft_path);
  std::string jsonl = kBase;
  jsonl.replace(jsonl.find("name: gsm8k"), 11, "name: jsonl");
  EXPECT_NE(error_of(jsonl).find("dataset.path: missing required key; add 'path: <file.jsonl>'"), std::string::npos);
  std::string synth = kBase;
  synth.replace(synth.find("name: gsm8k"), 11, "name: synth-gsm\n  path: x.jsonl");
  EXPECT_NE(error_of(synth).find("dataset.path: synth-gsm is generated, it reads no file"), std::string::npos);
  std::string nq = kBase;
  nq.replace(nq.find("name: gsm8k"), 11, "name: nq_open\n  n_shot: 5");
  EXPECT_NE(error_of(nq).find("dataset.n_shot: n_shot only applies to gsm8k and synth-gsm, not nq_open"), std::string::npos);
  std::string synth_n = kBase;
  synth_n.replace(synth_n.find("name: gsm8k"), 11, "name: synth-gsm\n  n: 0");
  EXPECT_NE(error_of(synth_n).find("dataset.n: 0 is out of range; n must be >= 1"), std::string::npos);
  std::string gate = kBase + "gates:\n  - {metric: accuracy, value: 1}\n";
  EXPECT_NE(error_of(gate).find("gates.0.op: missing required key"), std::string::npos) << error_of(gate);
}

// The draft computes in the target's dtype; float16 only on a GPU (LibTorch emulates it on CPU).
TEST(ConfigErrors, DraftDtypeFollowsTheTargetAndFloat16NeedsAGpu) {
  EXPECT_EQ(error_of(inject("  path: /m/draft", "  dtype: float32")),
            "t.yaml:5:10: draft.dtype: the draft computes in the target's dtype (target.dtype: auto), not float32; "
            "write 'dtype: auto' or leave the key out");
  std::string arm = inject("  - name: ears", "    draft: {dtype: bfloat16}");
  EXPECT_TRUE(starts_with(error_of(arm), "t.yaml:14:20: arms.1.draft.dtype: the draft computes in the target's dtype"))
      << error_of(arm);
  const ExperimentSpec same = parse(inject("  path: /m/draft", "  dtype: bfloat16",
                                           inject("  path: /m/target", "  dtype: bfloat16")));
  EXPECT_EQ(same.arms[1].draft.dtype, "bfloat16");
  EXPECT_TRUE(starts_with(error_of(kBase, {"target.dtype=float16"}), "(from --set): target.dtype: float16 is not computed on CPU"))
      << error_of(kBase, {"target.dtype=float16"});
  const std::string f16 = inject("  path: /m/target", "  dtype: float16");
  EXPECT_TRUE(starts_with(error_of(f16), "t.yaml:3:10: target.dtype: float16 is not computed on CPU (LibTorch emulates it); "
                                         "use bfloat16 (the same weight bytes) or float32, or device: cuda"))
      << error_of(f16);
  EXPECT_EQ(parse(f16, {"target.device=cuda"}).target.dtype, "float16");
}

TEST(ConfigErrors, DuplicateArmNamesAndBaselines) {
  std::string y = kBase;
  y.replace(y.find("  - name: ears"), 14, "  - name: base");
  EXPECT_EQ(error_of(y), "t.yaml:13:11: arms: duplicate arm name 'base'; give each arm a unique name");
  std::string two = inject("  - name: base", "    baseline: true");
  two = inject("  - name: ears", "    baseline: yes", two);
  EXPECT_NE(error_of(two).find("more than one baseline arm ('base' and 'ears')"), std::string::npos) << error_of(two);
  std::string bad_name = kBase;
  bad_name.replace(bad_name.find("  - name: ears"), 14, "  - name: e a r s");
  EXPECT_NE(error_of(bad_name).find("arms.1.name: 'e a r s' is not a valid arm name"), std::string::npos);
  EXPECT_NE(error_of("name: my run\n" + kBase).find("t.yaml:1:7: name: 'my run' is not a valid experiment name"),
            std::string::npos);
}

// A beta sweep on an arm whose rule reads no beta made two identical arms.
TEST(ConfigErrors, BetaSweepOnlyOnEarsArms) {
  EXPECT_EQ(error_of(inject("      type: baseline", "      beta: [0.05, 0.5]")),
            "t.yaml:13:13: arms.0.verifier.beta: a beta sweep applies to type ears only, and this arm's type is "
            "baseline; give the sweep to an ears arm, or a single beta");
  EXPECT_NE(error_of(kBase, {"arms.0.verifier.beta=[0.1]"}).find("a beta sweep applies to type ears only"),
            std::string::npos);
  // A single beta there stays legal (every resolved config.yaml writes one for each arm).
  EXPECT_EQ(parse(inject("      type: baseline", "      beta: 0.3")).arms[0].verifier.beta, 0.3);
  EXPECT_EQ(parse(kBase, {"arms.1.verifier.beta=[0.1, 0.2]"}).arms.size(), 3u);
}

TEST(ConfigErrors, YamlSyntaxErrorHasFileLineColumn) {
  std::string y = kBase + "gates: [\"a\", \n";
  std::string e = error_of(y);
  EXPECT_TRUE(starts_with(e, "t.yaml:")) << e;
  EXPECT_NE(e.find("syntax error"), std::string::npos) << e;
  std::string indent = "target:\n  path: /x\n   device: cpu\n";
  std::string e2 = error_of(indent);
  EXPECT_TRUE(starts_with(e2, "t.yaml:3:")) << e2;
  EXPECT_NE(e2.find("(yaml): syntax error"), std::string::npos) << e2;
  EXPECT_EQ(error_of(""), "t.yaml:1:1: (document): the file is empty; it needs at least target, dataset and arms");
  EXPECT_NE(error_of("- a\n- b\n").find("(document): expected a mapping of sections, got a list"), std::string::npos);
  // A second document would be dropped unread: refused where it starts.
  const std::string two = error_of(kBase + "---\nname: other\n");
  EXPECT_TRUE(starts_with(two, "t.yaml:")) << two;
  EXPECT_NE(two.find("(document): a second YAML document (after '---'); one experiment per file"), std::string::npos) << two;
  // YAML::LoadAll loops forever on "," (fuzz_config found it; corpus/config/regression-loadall-comma.yaml).
  EXPECT_NE(error_of(",").find("the file is empty"), std::string::npos);
  // Not printable UTF-8 text (fuzz_config found these breaking the to_yaml round trip).
  EXPECT_EQ(error_of("name: x\ntarget: {path: m\x18}\n"),
            "t.yaml:2:17: (yaml): control character U+0018 is not allowed in YAML; remove it");
  EXPECT_EQ(error_of("name: x\ntarget: {path: \xe8\xe7}\n"),
            "t.yaml:2:16: (yaml): invalid UTF-8 (byte 0xE8); save the file as UTF-8 text");
  EXPECT_NE(error_of(kBase + "description: \"a\\x18b\"\n").find("description: the value contains the control character U+0018"),
            std::string::npos);  // A list key written as a single string goes through the same check (it once skipped it).
  EXPECT_NE(error_of(inject("decoding:", "  stop: \"a\\x07b\"")).find("decoding.stop: the value contains the control character U+0007"),
            std::string::npos);
  EXPECT_NE(error_of(inject("decoding:", "  stop: [\"\\N\"]")).find("decoding.stop.0: the value is not valid UTF-8 (byte 0x85)"),
            std::string::npos);  // yaml-cpp's "\N" is a lone byte (fuzz_config found it breaking the round trip)
  EXPECT_NE(error_of(kBase + "description: \"a\\_\"\n").find("description: the value is not valid UTF-8 (byte 0xA0)"),
            std::string::npos);
}

// ------------------------------------------------------------------ --set overrides

TEST(ConfigOverrides, SetScalarsPathsAndListIndices) {
  ExperimentSpec s = parse(kBase, {"decoding.gamma=3", "dataset.limit=5", "target.path=/x", "arms.1.verifier.beta=0.2",
                                   "run.threads=2", "decoding.stop=[\"\\n\", 'Question:']", "name=override"});
  EXPECT_EQ(s.decoding.gamma, 3);
  EXPECT_EQ(s.arms[1].decoding.gamma, 3);  // arms inherit overridden top level
  EXPECT_EQ(s.dataset.limit, 5);
  EXPECT_EQ(s.target.path, "/x");
  EXPECT_DOUBLE_EQ(s.arms[1].verifier.beta, 0.2);
  EXPECT_DOUBLE_EQ(s.arms[0].verifier.beta, 0.1);
  EXPECT_EQ(s.run.threads, 2);
  EXPECT_EQ(s.decoding.stop, (std::vector<std::string>{"\n", "Question:"}));
  EXPECT_EQ(s.name, "override");
}

TEST(ConfigOverrides, ArmByNameCreatesMissingSectionsAndRelativePathsUseCwd) {
  std::string no_run = kBase.substr(0, kBase.find("run:"));
  ExperimentSpec s = parse(no_run, {"arms.ears.verifier.beta=0.3", "run.order=random", "arms.0.decoding.temperature=0",
                                    "draft.path=rel/eagle"});
  EXPECT_DOUBLE_EQ(s.arms[1].verifier.beta, 0.3);
  EXPECT_EQ(s.run.order, "random");
  EXPECT_DOUBLE_EQ(s.arms[0].decoding.temperature, 0.0);
  EXPECT_DOUBLE_EQ(s.arms[1].decoding.temperature, 0.9);
  EXPECT_EQ(s.draft.path, (fs::current_path() / "rel/eagle").lexically_normal().string());
  ExperimentSpec sweep = parse(kBase, {"arms.1.verifier.beta=[0.3, 0.4]"});
  ASSERT_EQ(sweep.arms.size(), 3u);
  EXPECT_EQ(sweep.arms[2].name, "ears-b0.4");
}

TEST(ConfigOverrides, Errors) {
  EXPECT_EQ(error_of(kBase, {"decoding.gama=3"}), "(from --set): decoding.gama: unknown key; did you mean 'gamma'?");
  for (const char* empty : {"decoding.gamma=", "decoding.gamma=~", "decoding.gamma=null", "decoding.gamma=  "})
    EXPECT_TRUE(starts_with(error_of(kBase, {empty}), "(from --set): decoding.gamma: no value (")) << error_of(kBase, {empty});
  EXPECT_EQ(error_of(kBase, {"decodng.gamma=3"}), "(from --set): decodng: unknown key; did you mean 'decoding'?");
  std::string e = error_of(kBase, {"decoding.gamma=five"});
  EXPECT_TRUE(starts_with(e, "(from --set): decoding.gamma: expected an integer, got 'five';")) << e;
  EXPECT_TRUE(starts_with(error_of(kBase, {"decoding.gamma=40"}), "(from --set): decoding.gamma: 40 is out of range; gamma must be >= 1 and <= 16"));
  EXPECT_EQ(error_of(kBase, {"arms.5.verifier.beta=0.2"}),
            "(from --set): arms.5: index out of range; arms has 2 entries (indices 0..1, 0-based)");
  EXPECT_NE(error_of(kBase, {"arms.eras.verifier.beta=0.2"}).find("no entry named 'eras' in arms; did you mean 'ears'?"),
            std::string::npos);
  EXPECT_NE(error_of(kBase, {"arms.1.verifier.bta=0.2"}).find("(from --set): arms.1.verifier.bta: unknown key; did you mean 'beta'?"),
            std::string::npos);
  EXPECT_NE(error_of(kBase, {"decoding.gamma"}).find("expected key.path=value"), std::string::npos);
  EXPECT_NE(error_of(kBase, {"decoding.gamma.x=1"}).find("(from --set): decoding.gamma.x: decoding.gamma is a single value"),
            std::string::npos);
  EXPECT_NE(error_of(kBase, {"decoding.stop=[a, b"}).find("is not valid YAML"), std::string::npos);
  EXPECT_NE(error_of(kBase, {"gates.0=x"}).find("(from --set): gates: the file has no gates list to index into"), std::string::npos)
      << error_of(kBase, {"gates.0=x"});
  EXPECT_NE(error_of(kBase, {"target.device=gpu"}).find("(from --set): target.device: 'gpu' is not a valid device"),
            std::string::npos);
}

// ------------------------------------------------------------------ gates

TEST(ConfigGates, InExperimentBothFormsAndArmChecks) {
  std::string y = kBase +
                  "gates:\n"
                  "  - \"ears: accuracy_delta_pp >= -1.0\"\n"
                  "  - {metric: throughput_gain_pct, arm: ears, op: \">=\", value: 0}\n"
                  "  - {metric: accuracy, op: \">\", value: 0.1}\n";
  ExperimentSpec s = parse(y);
  ASSERT_EQ(s.gates.size(), 4u);
  EXPECT_EQ(s.gates[0], (GateRule{"ears", "accuracy_delta_pp", ">=", -1.0}));
  EXPECT_EQ(s.gates[1], (GateRule{"ears", "throughput_gain_pct", ">=", 0.0}));
  EXPECT_EQ(s.gates[2], (GateRule{"base", "accuracy", ">", 0.1}));  // "*" = every arm
  EXPECT_EQ(s.gates[3], (GateRule{"ears", "accuracy", ">", 0.1}));
  // "*" with a comparison metric: every arm except the baseline.
  ExperimentSpec star = parse(kBase + "gates: [\"*: throughput_gain_pct > 0\", \"latency_change_pct < 10\"]\n");
  ASSERT_EQ(star.gates.size(), 2u);
  EXPECT_EQ(star.gates[0], (GateRule{"ears", "throughput_gain_pct", ">", 0.0}));
  EXPECT_EQ(star.gates[1], (GateRule{"ears", "latency_change_pct", "<", 10.0}));

  EXPECT_EQ(error_of(kBase + "gates:\n  - \"eras: accuracy >= 0\"\n"),
            "t.yaml:19:5: gates.0: no arm named 'eras'; did you mean 'ears'?");
  EXPECT_NE(error_of(kBase + "gates:\n  - \"base: accuracy_delta_pp >= 0\"\n")
                .find("gates.0: accuracy_delta_pp compares an arm with the baseline, and 'base' is the baseline; name another arm"),
            std::string::npos);
  const std::string unknown = error_of(kBase + "gates:\n  - \"ears: acc >= 0\"\n");
  EXPECT_EQ(unknown.rfind("t.yaml:19:5: gates.0: unknown metric 'acc'; arm metrics: ", 0), 0u) << unknown;
  for (const char* name : {"output_tokens_per_s", "n_errors", "acceptance_per_position", "throughput_gain_pct", "mcnemar_p"})
    EXPECT_NE(unknown.find(name), std::string::npos) << name;
  // The YAML takes every rule `gate --check` takes (one grammar): counts, array entries.
  ExperimentSpec more = parse(kBase + "gates: [\"n_errors == 0\", \"ears: acceptance_per_position[0] > 0.2\", "
                                      "\"ears accuracy_delta_ci95[0] >= -5\"]\n");
  ASSERT_EQ(more.gates.size(), 4u);
  EXPECT_EQ(more.gates[0], (GateRule{"base", "n_errors", "==", 0}));
  EXPECT_EQ(more.gates[2], (GateRule{"ears", "acceptance_per_position[0]", ">", 0.2}));
  EXPECT_EQ(more.gates[3], (GateRule{"ears", "accuracy_delta_ci95[0]", ">=", -5}));
  // An entry past what the arm's gamma gives (5 positions) is refused here, not after the run.
  EXPECT_EQ(error_of(kBase + "gates: [\"ears: acceptance_per_position[5] > 0\"]\n"),
            "t.yaml:18:9: gates.0: ears: acceptance_per_position[5] > 0: index 5 is past the end of "
            "acceptance_per_position, which has 5 entries at gamma 5; use an index below 5");
  EXPECT_EQ(parse(kBase + "gates: [\"ears: acceptance_per_position[2] > 0\"]\n", {"arms.1.decoding.gamma=3"}).gates.size(),
            1u);
  EXPECT_NE(error_of(kBase + "gates: [\"ears: acceptance_per_position[3] > 0\"]\n", {"arms.1.decoding.gamma=3"})
                .find("which has 3 entries at gamma 3"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + "gates:\n  - {metric: accuracy, op: \">=\", value: 1, extra: 2}\n").find("gates.0.extra: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + "gates:\n  - {metric: accuracy, op: \">=\", value: lots}\n").find("'lots' is not a number"),
            std::string::npos);
}
