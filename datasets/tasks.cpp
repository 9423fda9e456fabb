// The task registry's functions: lookups, prompts, and the per-task record parsers and
// generators kTaskTable points to. See tasks.h.
#include "datasets/tasks.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "datasets/jsonl.h"
#include "datasets/open_stems.h"
#include "datasets/scoring.h"
#include "datasets/synth_gsm.h"
#include "harness/base/error.h"

namespace ears {
using nlohmann::json;

const Task* find_task(std::string_view name) {
  for (const Task& t : kTaskTable)
    if (t.name == name) return &t;
  return nullptr;
}

bool task_has(std::string_view name, bool Task::*option) {
  const Task* t = find_task(name);
  return t && t->*option;
}

std::string task_names_with(bool Task::*option, std::string_view sep, std::string_view last_sep) {
  std::vector<std::string_view> names;
  for (const Task& t : kTaskTable)
    if (t.*option) names.push_back(t.name);
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? last_sep : sep;
    out += names[i];
  }
  return out;
}

std::string fill_prompt(std::string_view tpl, const std::string& question) {
  std::string out;
  std::size_t pos = 0;
  for (auto hit = tpl.find("{question}"); hit != std::string_view::npos; hit = tpl.find("{question}", pos)) {
    out.append(tpl, pos, hit - pos);
    out += question;
    pos = hit + 10;
  }
  out.append(tpl, pos);
  return out;
}

std::string task_prompt(const Task& task, const std::string& question,
                        const std::vector<std::pair<std::string, std::string>>& exemplars,
                        const std::string& prompt_template) {
  std::string out;
  for (const auto& [q, a] : exemplars) {
    out += fill_prompt(task.fewshot_prompt, q);
    out += task.target_delimiter;
    out += a;
    out += task.fewshot_delimiter;
  }
  std::string_view tpl = !prompt_template.empty() ? std::string_view(prompt_template)
                         : !exemplars.empty()     ? task.fewshot_prompt
                                                  : task.prompt;
  return out + fill_prompt(tpl, question);
}

// ---- record parsers (file tasks) ----

Doc parse_gsm8k_doc(const json& j, const DatasetSpec&, std::size_t& index) {
  Doc d;
  d.question = require_string(j, "question");
  d.solution = require_string(j, "answer");
  if (d.solution.find("####") == std::string::npos)
    throw LineError{"field 'answer' has no final '#### <answer>' line"};
  d.gold = {gsm8k_gold_from_answer(d.solution)};
  d.category = "gsm8k";
  d.key = std::to_string(index++);
  return d;
}

Doc parse_nq_open_doc(const json& j, const DatasetSpec&, std::size_t& index) {
  Doc d;
  d.question = require_string(j, "question");
  d.gold = answers_of(require(j, "answer"), "answer");
  if (d.gold.empty()) throw LineError{"field 'answer' is empty"};
  d.category = "nq_open";
  d.key = std::to_string(index++);
  return d;
}

Doc parse_spec_bench_doc(const json& j, const DatasetSpec&, std::size_t&) {
  const json& qid = require(j, "question_id");
  if (!qid.is_number_integer()) throw LineError{"field 'question_id' must be an integer"};
  const json& turns = require(j, "turns");
  if (!turns.is_array() || turns.empty() || !turns[0].is_string())
    throw LineError{"field 'turns' must be a non-empty list of strings"};
  Doc d;
  d.key = std::to_string(qid.get<long long>());
  d.question = turns[0].get<std::string>();
  d.category = require_string(j, "category");
  return d;
}

// jsonl: DatasetSpec's field mapping (empty = "prompt" / "answer" / "category"). The index
// advances once the prompt is read, so a line failing later still takes its number.
Doc parse_jsonl_doc(const json& j, const DatasetSpec& spec, std::size_t& index) {
  const std::string prompt_field = spec.prompt_field.empty() ? "prompt" : spec.prompt_field;
  const std::string answer_field = spec.answer_field.empty() ? "answer" : spec.answer_field;
  const std::string category_field = spec.category_field.empty() ? "category" : spec.category_field;
  const json& p = require(j, prompt_field);
  if (!p.is_string())
    throw LineError{fmt::format("field '{}' must be a string (set dataset.fields.prompt)", prompt_field)};
  Doc d;
  d.key = std::to_string(index++);
  d.question = p.get<std::string>();
  // A raw empty prompt encodes to no tokens: refused here, where the file and line are known.
  if (d.question.empty()) throw LineError{fmt::format("field '{}' is empty; give every record a prompt", prompt_field)};
  if (const json* a = lookup(j, answer_field)) d.gold = answers_of(*a, answer_field);
  if (const json* c = lookup(j, category_field); c && !c->is_null()) d.category = scalar_text(*c, category_field);
  return d;
}

// ---- generated tasks ----

std::vector<Doc> synth_gsm_docs(const DatasetSpec& spec, const std::string& split) {
  if (spec.synth_n == 0) fail("dataset 'synth-gsm': n must be at least 1");
  return synth_gsm_problems(spec.synth_n, spec.seed, split);
}

// Exemplars: a separate pool of synthetic train problems (never a test problem).
std::vector<Doc> synth_gsm_fewshot_docs(const DatasetSpec& spec, const std::string&) {
  return synth_gsm_problems(std::max<std::size_t>(64, 4 * static_cast<std::size_t>(spec.n_shot)),
                            spec.seed ^ 0x5EED5EED5EED5EEDULL, "train");
}

std::vector<Doc> open_stem_docs(const DatasetSpec&, const std::string&) {
  const auto& stems = open_stems();
  std::vector<Doc> out(stems.size());
  for (std::size_t i = 0; i < stems.size(); ++i) {
    out[i].question = stems[i];
    out[i].category = "stem";
    out[i].key = std::to_string(i);
  }
  return out;
}

}  // namespace ears
