// The task registry: one entry per dataset (as lm-eval's task YAMLs), holding as data its files
// per split, prompt template, stop strings, scorer and which options apply. load_dataset
// (loaders.cpp), default_stop_strings, the config's dataset names and per-dataset option rules
// (harness/config*.{h,cpp}) and every message listing the datasets derive from kTaskTable.
// Torch-free.
//
// A request's prompt (lm-eval's doc_to_text + fewshot): with n_shot exemplars (q, a),
//   for each: fill(fewshot_prompt, q) + target_delimiter + a + fewshot_delimiter
// then fill(T, question) with T = the user's prompt_template, else fewshot_prompt when there
// are exemplars, else prompt. fill() replaces every "{question}".
#pragma once
#include <array>
#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datasets/dataset.h"

namespace ears {

// One source record of a task, before prompting.
struct Doc {
  std::string question;
  std::string solution;            // full reference solution (the n-shot exemplar target)
  std::vector<std::string> gold;   // empty = throughput only
  std::string category;
  std::string key;                 // the request id is "<id prefix>/<key>"
  std::size_t source_line = 0;     // 1-based line in the file; 0 for generated data
};

// Parses one JSONL record; throws LineError (datasets/jsonl.h) for a bad one. `index` counts
// the records accepted so far (a parser advances it).
using ParseDoc = Doc (*)(const nlohmann::json& record, const DatasetSpec& spec, std::size_t& index);
// Generates the docs of a generated task for `split` (already validated).
using GenerateDocs = std::vector<Doc> (*)(const DatasetSpec& spec, const std::string& split);

struct TaskSplit {
  std::string_view name;  // as DatasetSpec::split
  std::string_view file;  // the file holding it (file tasks)
  std::string_view id;    // its name in request ids ("" = none)
};

enum class TaskPath { kOptional, kRequired, kNone };  // dataset.path: default location | needed | generated

struct Task {
  std::string_view name;
  std::string_view title;                     // for messages ("Spec-Bench")
  std::span<const std::string_view> aliases;  // spellings the config suggests `name` for
  std::span<const TaskSplit> splits;          // accepted splits (empty = any, ignored)
  std::string_view split_hint;                // after "unknown split 'x'; "
  std::string_view url;                       // download directory of the files
  TaskPath path;
  std::string_view prompt;                    // zero-shot doc_to_text
  std::string_view fewshot_prompt;            // doc_to_text with exemplars
  std::string_view target_delimiter, fewshot_delimiter;
  std::string_view fewshot_split;             // file tasks: the exemplars' split
  std::span<const std::string_view> stop;          // generation_kwargs.until, zero-shot
  std::span<const std::string_view> fewshot_stop;  // ... with n_shot > 0
  std::string_view scorer;                    // default scorer ("none" when no request has gold)
  // Which DatasetSpec / dataset options apply.
  bool n_shot = false, n = false, fields = false, categories = false;
  std::span<const std::string_view> known_categories;  // categories must be one of (empty = any)
  ParseDoc parse = nullptr;                   // file tasks
  GenerateDocs generate = nullptr;            // generated tasks
  GenerateDocs generate_fewshot = nullptr;    // generated tasks: the exemplar pool
};

// The per-task functions (tasks.cpp).
Doc parse_gsm8k_doc(const nlohmann::json& record, const DatasetSpec& spec, std::size_t& index);
Doc parse_nq_open_doc(const nlohmann::json& record, const DatasetSpec& spec, std::size_t& index);
Doc parse_spec_bench_doc(const nlohmann::json& record, const DatasetSpec& spec, std::size_t& index);
Doc parse_jsonl_doc(const nlohmann::json& record, const DatasetSpec& spec, std::size_t& index);
std::vector<Doc> synth_gsm_docs(const DatasetSpec& spec, const std::string& split);
std::vector<Doc> synth_gsm_fewshot_docs(const DatasetSpec& spec, const std::string& split);
std::vector<Doc> open_stem_docs(const DatasetSpec& spec, const std::string& split);

inline constexpr std::array<std::string_view, 13> kSpecBenchCategories = {
    "writing", "roleplay",    "reasoning",     "math", "coding",         "extraction", "stem",
    "humanities", "translation", "summarization", "qa", "math_reasoning", "rag"};

namespace task_data {
inline constexpr TaskSplit kGsm8kSplits[] = {{"test", "test.jsonl", "test"}, {"train", "train.jsonl", "train"}};
inline constexpr std::string_view kGsm8kStop[] = {"</s>", "<|im_end|>"};
inline constexpr std::string_view kGsm8kFewshotStop[] = {"Question:", "</s>", "<|im_end|>"};
inline constexpr std::string_view kNqAliases[] = {"nq", "nq-open"};
inline constexpr TaskSplit kNqSplits[] = {{"test", "NQ-open.dev.jsonl", "dev"},
                                          {"dev", "NQ-open.dev.jsonl", "dev"},
                                          {"validation", "NQ-open.dev.jsonl", "dev"},
                                          {"train", "NQ-open.train.jsonl", "train"}};
inline constexpr std::string_view kNqStop[] = {"\n", ".", ","};
inline constexpr std::string_view kSpecBenchAliases[] = {"spec-bench"};
inline constexpr TaskSplit kSpecBenchSplits[] = {{"test", "question.jsonl", ""}};
inline constexpr std::string_view kSynthAliases[] = {"synth_gsm"};
inline constexpr TaskSplit kSynthSplits[] = {{"test", "", "test"}, {"train", "", "train"}};
inline constexpr std::string_view kStemsAliases[] = {"open_stems"};
// gsm8k's zero-shot prompt: the question, then kGsm8kInstruction.
inline constexpr std::string_view kGsm8kPrompt =
    "{question}\nPlease reason step by step, and write the final answer as a number on the last "
    "line in the form \"#### <number>\".";
static_assert(kGsm8kPrompt.ends_with(kGsm8kInstruction));
inline constexpr std::string_view kNqOpenPrompt = "Answer these questions:\n\nQ: {question}?\nA:";
static_assert(kNqOpenPrompt.starts_with(kNqOpenDescription));
}  // namespace task_data

// The registry, in the order names are listed.
inline constexpr std::array<Task, 6> kTaskTable = [] {
  using namespace task_data;
  Task gsm8k{"gsm8k", "GSM8K", {}, kGsm8kSplits, "use test or train",
             "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/",
             TaskPath::kOptional, kGsm8kPrompt, "Question: {question}\nAnswer:", " ", "\n\n", "train",
             kGsm8kStop, kGsm8kFewshotStop, "gsm8k"};
  gsm8k.n_shot = true;
  gsm8k.parse = &parse_gsm8k_doc;
  Task nq{"nq_open", "NQ-open", kNqAliases, kNqSplits, "use test (= dev), dev, validation or train",
          "https://raw.githubusercontent.com/google-research-datasets/natural-questions/master/nq_open/",
          TaskPath::kOptional, kNqOpenPrompt, "", "", "", "", kNqStop, kNqStop, "squad"};
  nq.parse = &parse_nq_open_doc;
  Task sb{"spec_bench", "Spec-Bench", kSpecBenchAliases, kSpecBenchSplits, "it only has test",
          "https://raw.githubusercontent.com/hemingkx/Spec-Bench/main/data/spec_bench/",
          TaskPath::kOptional, "{question}", "", "", "", "", {}, {}, "none"};
  sb.categories = true;
  sb.known_categories = kSpecBenchCategories;
  sb.parse = &parse_spec_bench_doc;
  Task jsonl{"jsonl", "JSONL", {}, {}, "", "", TaskPath::kRequired, "{question}", "", "", "", "", {}, {}, "squad"};
  jsonl.fields = jsonl.categories = true;
  jsonl.parse = &parse_jsonl_doc;
  Task synth = gsm8k;
  synth.name = synth.title = "synth-gsm";
  synth.aliases = kSynthAliases;
  synth.splits = kSynthSplits;
  synth.url = "";
  synth.path = TaskPath::kNone;
  synth.n = true;
  synth.parse = nullptr;
  synth.generate = &synth_gsm_docs;
  synth.generate_fewshot = &synth_gsm_fewshot_docs;
  Task stems{"open-stems", "open-stems", kStemsAliases, {}, "", "", TaskPath::kNone, "{question}", "", "", "", "", {}, {}, "none"};
  stems.generate = &open_stem_docs;
  return std::array<Task, 6>{gsm8k, nq, sb, jsonl, synth, stems};
}();

// The task names, in table order.
constexpr std::array<std::string_view, kTaskTable.size()> task_names() {
  std::array<std::string_view, kTaskTable.size()> out{};
  for (std::size_t i = 0; i < kTaskTable.size(); ++i) out[i] = kTaskTable[i].name;
  return out;
}

// Every (alias, name) pair, in table order (for the config's "did you mean" suggestions).
constexpr std::size_t task_alias_count() {
  std::size_t n = 0;
  for (const Task& t : kTaskTable) n += t.aliases.size();
  return n;
}
constexpr std::array<std::pair<std::string_view, std::string_view>, task_alias_count()> task_aliases() {
  std::array<std::pair<std::string_view, std::string_view>, task_alias_count()> out{};
  std::size_t i = 0;
  for (const Task& t : kTaskTable)
    for (std::string_view a : t.aliases) out[i++] = {a, t.name};
  return out;
}

// The task named `name`, or nullptr.
const Task* find_task(std::string_view name);
// True when the task named `name` exists and has the option (&Task::n_shot, ...).
bool task_has(std::string_view name, bool Task::*option);
// The names of the tasks having the option, joined: "a, b and c" with last_sep " and ".
std::string task_names_with(bool Task::*option, std::string_view sep, std::string_view last_sep);

// fill(): every "{question}" of `tpl` replaced by `question`.
std::string fill_prompt(std::string_view tpl, const std::string& question);
// The prompt of `task` for `question` (see the top of this file).
std::string task_prompt(const Task& task, const std::string& question,
                        const std::vector<std::pair<std::string, std::string>>& exemplars,
                        const std::string& prompt_template);

}  // namespace ears
