// Experiment configuration: a YAML file (plus `--set key.path=value` overrides) parsed into a
// validated, fully resolved ExperimentSpec. Torch-free; plain structs of strings and numbers so
// that other modules map them onto their own types (DecodeParams, verifier enums, ...).
//
// Every user mistake is an ears::Error (exit code 2) with one line:
//   <file>:<line>:<col>: <key path>: <problem>; <fix>
// e.g. "configs/gsm8k.yaml:12:3: decoding.gama: unknown key; did you mean 'gamma'?"
// Values that came from --set are located as "(from --set)" instead of file:line:col.
// Key paths use dots and 0-based list indices, exactly as --set spells them: arms.1.verifier.beta.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/scoring.h"
#include "datasets/tasks.h"
#include "decoders/param_ranges.h"
#include "reports/gate.h"

namespace ears::config {

// ---- allowed values (validated by the parser; other modules may rely on them) ----
inline constexpr std::array<std::string_view, 4> kDtypes = {"auto", "float32", "bfloat16", "float16"};
inline constexpr std::array<std::string_view, 3> kDraftKinds = {"eagle3", "model", "none"};
inline constexpr std::array<std::string_view, 2> kDraftSampling = {"sample", "greedy"};
inline constexpr std::array<std::string_view, 2> kAuxLayerConventions = {"hf", "sglang"};
inline constexpr auto kVerifierTypes = ranges::kVerifierNames;  // decoders/param_ranges.h
inline constexpr auto kUncertainty = ranges::kUncertaintyNames;
inline constexpr auto kDatasetNames = ears::task_names();  // datasets/tasks.h kTaskTable
inline constexpr std::array<std::string_view, 2> kPromptFormats = {"raw", "chat"};
inline constexpr std::array<std::string_view, 2> kOnError = {"fail", "skip"};
inline constexpr auto kScorers = ears::scorer_names();  // datasets/scoring.h kScorerTable
inline constexpr std::array<std::string_view, 2> kRunOrders = {"interleaved", "random"};
inline constexpr auto kSpecBenchCategories = ears::kSpecBenchCategories;  // datasets/tasks.h
inline constexpr int kMaxGamma = 16;


// ---- sections ----
struct TargetSpec {
  std::string path;            // required; absolute after resolution (relative -> YAML file's dir)
  std::string dtype = "auto";  // auto (= checkpoint's torch_dtype) | float32 | bfloat16 | float16
  std::string device = "cpu";  // cpu | cuda | cuda:N
  bool operator==(const TargetSpec&) const = default;
};

struct DraftSpec {
  std::string kind = "eagle3";      // eagle3 | model | none
  std::string path;                 // required unless kind == none; resolved like target.path
  std::string sampling = "sample";  // sample | greedy (greedy: one-hot q, as vLLM's EAGLE)
  std::string dtype = "auto";
  std::vector<int> aux_layers;      // empty = the checkpoint's eagle_aux_hidden_state_layer_ids
  std::string aux_layer_convention = "hf";  // hf: id i = hidden state entering layer i (EAGLE,
                                            // vLLM, our fixtures); sglang: output of layer i
  bool operator==(const DraftSpec&) const = default;
};

struct DatasetFields {  // jsonl only: which JSON keys hold what
  std::string prompt = "prompt";
  std::string answer = "answer";
  std::string category = "category";
  bool operator==(const DatasetFields&) const = default;
};

struct DatasetSection {
  // Which keys apply to which dataset is the task registry's (datasets/tasks.h kTaskTable).
  std::string name;                  // required: a kDatasetNames entry
  std::string path;                  // file or directory; empty = the loader's default
                                     // ($EARS_BENCH_DATA or data/); required for jsonl, not
                                     // allowed for generated datasets; resolved like target.path
  std::string split;                 // empty = the dataset's standard split (loader decides)
  std::int64_t limit = 0;            // 0 = all requests
  std::int64_t offset = 0;
  int n_shot = 0;                    // gsm8k / synth-gsm only
  std::string prompt_format = "chat";  // raw | chat
  bool thinking = false;               // chat template with thinking enabled (chat only)
  std::uint64_t seed = 0;              // synthetic generation / sampling of the data
  std::int64_t n = 200;                // synth-gsm only: number of generated problems
  std::string on_error = "fail";       // fail | skip  (bad JSONL lines)
  std::string prompt_template;         // empty = the dataset's prompt; else must contain {question}
  std::string scorer;                  // empty = the dataset's scorer; else a kScorers name:
                                       // gsm8k | squad | lm_eval_nq_open | qa (= squad) | none
  DatasetFields fields;
  std::vector<std::string> categories;  // spec_bench / jsonl: keep only these (empty = all)
  bool operator==(const DatasetSection&) const = default;
};

struct DecodingSpec {
  int gamma = 5;             // draft tokens per step, 1..16
  double temperature = 0.9;  // the paper's setting; 0 = greedy target
  double top_p = 1.0;        // (0, 1]
  int top_k = 0;             // 0 = off
  int max_new_tokens = 256;
  std::vector<std::string> stop;
  int batch_size = 1;
  std::uint64_t seed = 0;  // run seed; per-request generators derive from (seed, request id)
  bool distortion = true;  // measure TV(p_t, verifier-induced distribution) per drafted position;
                           // costs ~4x the verifier at a 152k vocabulary (same cost in every arm)
  bool operator==(const DecodingSpec&) const = default;
};

struct VerifierSpec {
  std::string type = "baseline";         // baseline | ears | typical | greedy
  double beta = 0.1;                      // ears: tolerance scale, >= 0
  std::string uncertainty = "max_prob";   // ears: max_prob | entropy
  double eps = 0.09;                      // typical: probability floor, [0, 1]
  double delta = 0.3;                     // typical: entropy scale, >= 0
  bool operator==(const VerifierSpec&) const = default;
};

struct ArmSpec {
  std::string name;        // unique; [A-Za-z0-9._-]+; default = verifier type
  bool baseline = false;   // exactly one arm of a parsed spec has baseline == true
  VerifierSpec verifier;
  DecodingSpec decoding;   // fully resolved: top-level decoding + this arm's overrides
  DraftSpec draft;         // fully resolved: top-level draft + this arm's overrides
  bool operator==(const ArmSpec&) const = default;
};

struct RunSpec {
  int warmup = 1;                  // warm-up requests per arm, not measured
  int repeats = 1;
  std::string output_dir;          // empty = runner's default runs/<name>-<timestamp>;
                                   // relative paths are relative to the working directory
  std::string order = "interleaved";  // interleaved | random
  int threads = 0;                 // 0 = the logical CPUs idle at start-up (decoders/threads.h)
  bool operator==(const RunSpec&) const = default;
};


struct ExperimentSpec {
  std::string name;  // default: the file's stem; [A-Za-z0-9._-]+
  std::string description;
  TargetSpec target;
  DraftSpec draft;        // top-level draft (arms hold resolved copies)
  DatasetSection dataset;
  DecodingSpec decoding;  // top-level decoding (arms hold resolved copies)
  std::vector<ArmSpec> arms;  // >= 1, sweeps expanded
  RunSpec run;
  std::vector<GateRule> gates;  // every rule names an arm ("*" expanded by parse_experiment)

  std::size_t baseline_index() const;  // the arm with baseline == true
  const ArmSpec& baseline_arm() const { return arms.at(baseline_index()); }
  bool operator==(const ExperimentSpec&) const = default;
};

// Reads and parses `file`; relative paths inside resolve against the file's directory.
ExperimentSpec load_experiment(const std::filesystem::path& file,
                               const std::vector<std::string>& overrides = {});

// Parses YAML text. `file_label` prefixes error locations; `base_dir` resolves relative paths
// (empty = leave them relative). Each override is "key.path=value" (value parsed as YAML).
ExperimentSpec parse_experiment(const std::string& yaml_text, const std::string& file_label,
                                const std::filesystem::path& base_dir,
                                const std::vector<std::string>& overrides = {});

// Fully resolved YAML (every default filled, paths absolute); parse_experiment(to_yaml(s)) == s.
std::string to_yaml(const ExperimentSpec& spec);
// JSON for report.json: like to_yaml, but every arm carries its full decoding and draft.
nlohmann::json to_json(const ExperimentSpec& spec);

// docs/config.md's key tables (between the markers), generated from the section tables: every
// key of every section with its default and meaning. config_tests checks the doc against it.
inline constexpr const char* kConfigDocBegin = "<!-- BEGIN key tables: generated from harness/config's section tables -->";
inline constexpr const char* kConfigDocEnd = "<!-- END key tables -->";
std::string config_reference_markdown();


}  // namespace ears::config
