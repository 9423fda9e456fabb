// Dataset loading, driven by the task registry (tasks.h); see dataset.h for the formats and
// conventions.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <unordered_set>

#include "datasets/dataset.h"
#include "datasets/jsonl.h"
#include "datasets/scoring.h"
#include "datasets/tasks.h"
#include "harness/base/error.h"
#include "harness/base/rng.h"

namespace ears {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Exemplars = std::vector<std::pair<std::string, std::string>>;

// n distinct indices into [0, pool) drawn from (seed, index), excluding `exclude_question`.
std::vector<std::pair<std::string, std::string>> pick_exemplars(
    const std::vector<std::pair<std::string, std::string>>& pool, int n, uint64_t seed,
    std::size_t index, const std::string& exclude_question) {
  uint64_t state = seed ^ (0xA0761D6478BD642FULL * (static_cast<uint64_t>(index) + 1));
  std::vector<std::size_t> chosen;
  while (static_cast<int>(chosen.size()) < n) {
    std::size_t k = splitmix64_next(state) % pool.size();
    if (std::find(chosen.begin(), chosen.end(), k) != chosen.end()) continue;
    if (pool[k].first == exclude_question) continue;
    chosen.push_back(k);
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (auto k : chosen) out.push_back(pool[k]);
  return out;
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// ---- file resolution ----

const TaskSplit* find_split(const Task& task, std::string_view split) {
  for (const TaskSplit& s : task.splits)
    if (s.name == split) return &s;
  return nullptr;
}

// The file of `split`: spec.path if a file; else <dir>/<file> or <dir>/<name>/<file> for a
// directory path, else bench_data_root()/<name>/<file>. Missing: an error with a download command.
std::string resolve_file(const Task& task, const std::string& path, const std::string& split) {
  const std::string name(task.name), file(find_split(task, split)->file);
  std::vector<std::string> tried;
  fs::path target;  // where the download command puts it
  if (!path.empty()) {
    fs::path p(path);
    if (fs::is_regular_file(p)) return p.string();
    if (fs::is_directory(p)) {
      for (const fs::path& c : {p / file, p / name / file}) {
        if (fs::is_regular_file(c)) return c.string();
        tried.push_back(c.string());
      }
      target = p / file;
    } else {
      tried.push_back(p.string());
      target = p;
    }
  } else {
    fs::path c = fs::path(bench_data_root()) / name / file;
    if (fs::is_regular_file(c)) return c.string();
    tried.push_back(c.string() + (std::getenv("EARS_BENCH_DATA") ? "" : " ($EARS_BENCH_DATA unset)"));
    target = c;
  }
  std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  fail("dataset '{}': file not found; looked in: {}. Get it with: mkdir -p {} && curl -L -o {} {}{}",
       name, join(tried, ", "), dir, target.string(), task.url, file);
}

// ---- loading ----

// The task's docs, with where they came from.
struct Loaded {
  std::vector<Doc> docs;
  std::string split;      // normalized ("" = test)
  std::string id_prefix;  // request id = <id_prefix>/<doc key>
  std::string path;       // the file read ("" for generated tasks)
  std::size_t skipped = 0;
};

std::vector<Doc> read_docs(const Task& task, const DatasetSpec& spec, const std::string& file, bool skip,
                           std::size_t* skipped) {
  std::vector<Doc> docs;
  std::size_t index = 0;
  std::size_t s = read_jsonl(file, skip, [&](const json& j, std::size_t line) {
    docs.push_back(task.parse(j, spec, index));
    docs.back().source_line = line;
  });
  if (skipped) *skipped = s;
  return docs;
}

Loaded load_docs(const Task& task, const DatasetSpec& spec, bool skip) {
  Loaded l;
  l.split = spec.split.empty() ? "test" : spec.split;
  const TaskSplit* split = find_split(task, l.split);
  if (!task.splits.empty() && !split)
    fail("dataset '{}': unknown split '{}'; {}", task.name, l.split, task.split_hint);
  l.id_prefix = task.name;
  if (task.generate) {
    l.docs = task.generate(spec, l.split);
    return l;
  }
  if (task.path == TaskPath::kRequired) {
    if (spec.path.empty()) fail("dataset '{}': needs a path to a JSONL file", task.name);
    if (!fs::is_regular_file(spec.path))
      fail("dataset '{}': file not found: {}; set path to an existing JSONL file", task.name, spec.path);
    l.path = spec.path;
    l.id_prefix.append("/").append(fs::path(spec.path).stem().string());
  } else {
    l.path = resolve_file(task, spec.path, l.split);
    if (!split->id.empty()) l.id_prefix.append("/").append(split->id);
  }
  l.docs = read_docs(task, spec, l.path, skip, &l.skipped);
  return l;
}

// (question, full reference solution) of each doc: the exemplars' text.
Exemplars solutions_of(const std::vector<Doc>& docs) {
  Exemplars out;
  for (const Doc& d : docs) out.emplace_back(d.question, d.solution);
  return out;
}

// The n-shot exemplar pool: generated, the docs themselves (the few-shot split), or the
// few-shot split's file beside the file read (or in the default location).
Exemplars fewshot_pool(const Task& task, const DatasetSpec& spec, const Loaded& l, bool skip) {
  std::vector<Doc> other;
  const std::vector<Doc>* docs = &l.docs;
  if (task.generate_fewshot) {
    other = task.generate_fewshot(spec, l.split);
    docs = &other;
  } else if (l.split != task.fewshot_split) {
    std::string dir = spec.path;
    if (!dir.empty() && fs::is_regular_file(dir)) dir = fs::path(l.path).parent_path().string();
    other = read_docs(task, spec, resolve_file(task, dir, std::string(task.fewshot_split)), skip, nullptr);
    docs = &other;
  }
  Exemplars pool = solutions_of(*docs);
  if (static_cast<std::size_t>(spec.n_shot) >= pool.size())
    fail("dataset '{}': n_shot = {} needs more train examples (have {})", task.name, spec.n_shot, pool.size());
  return pool;
}

Dataset build(const Task& task, const DatasetSpec& spec, bool skip) {
  Loaded l = load_docs(task, spec, skip);
  Exemplars pool;
  if (spec.n_shot > 0) pool = fewshot_pool(task, spec, l, skip);
  Dataset ds;
  ds.resolved_path = l.path;
  ds.skipped_lines = l.skipped;
  bool any_gold = false;
  std::map<std::string, std::size_t> first_line;  // request id -> its line: a repeated id ran once
  for (std::size_t i = 0; i < l.docs.size(); ++i) {
    Doc& d = l.docs[i];
    Request r;
    r.id = l.id_prefix + "/" + d.key;
    if (const auto [at, fresh] = first_line.emplace(r.id, d.source_line); !fresh) {
      if (!skip)
        fail("{}:{}: request id '{}' repeats line {} (spec_bench: question_id); fix the record, or set "
             "dataset.on_error: skip",
             l.path, d.source_line, r.id, at->second);
      ++ds.skipped_lines;
      continue;
    }
    r.prompt = task_prompt(task, d.question,
                           spec.n_shot > 0 ? pick_exemplars(pool, spec.n_shot, spec.seed, i, d.question) : Exemplars{},
                           spec.prompt_template);
    r.gold = std::move(d.gold);
    r.category = std::move(d.category);
    r.source_line = d.source_line;
    any_gold = any_gold || !r.gold.empty();
    ds.requests.push_back(std::move(r));
  }
  ds.scorer = any_gold ? task.scorer : "none";
  return ds;
}

void check_spec(const DatasetSpec& spec) {
  if (!find_task(spec.name)) fail("unknown dataset '{}'; use one of: {}", spec.name, join(dataset_names(), ", "));
  if (spec.on_error != "fail" && spec.on_error != "skip")
    fail("dataset '{}': on_error must be 'fail' or 'skip', got '{}'", spec.name, spec.on_error);
  if (spec.n_shot < 0) fail("dataset '{}': n_shot must be >= 0, got {}", spec.name, spec.n_shot);
  if (spec.n_shot > 0 && !task_has(spec.name, &Task::n_shot))
    fail("dataset '{}': n_shot is only supported for {} (set n_shot: 0)", spec.name,
         task_names_with(&Task::n_shot, ", ", " and "));
  if (spec.n_shot > 64) fail("dataset '{}': n_shot = {} is too large (max 64)", spec.name, spec.n_shot);
  if (!spec.prompt_template.empty() && spec.prompt_template.find("{question}") == std::string::npos)
    fail("dataset '{}': prompt_template must contain '{{question}}'", spec.name);
  if (!spec.scorer.empty() && !find_scorer(spec.scorer))
    fail("dataset '{}': unknown scorer '{}'; use one of: {}", spec.name, spec.scorer, scorer_list());
}

// Keeps the requests of spec.categories (each must be present).
void keep_categories(const DatasetSpec& spec, Dataset& ds) {
  std::unordered_set<std::string> keep(spec.categories.begin(), spec.categories.end());
  std::unordered_set<std::string> present;
  for (const auto& r : ds.requests) present.insert(r.category);
  for (const auto& c : spec.categories)
    if (!present.count(c)) {
      std::vector<std::string> have(present.begin(), present.end());
      std::sort(have.begin(), have.end());
      fail("dataset '{}': no requests in category '{}'; categories present: {}", spec.name, c, join(have, ", "));
    }
  std::erase_if(ds.requests, [&](const Request& r) { return !keep.count(r.category); });
}

}  // namespace

const std::vector<std::string>& dataset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (std::string_view n : task_names()) out.emplace_back(n);
    return out;
  }();
  return names;
}

std::string bench_data_root() {
  const char* env = std::getenv("EARS_BENCH_DATA");
  return env && *env ? env : "data";
}

std::string gsm8k_prompt(const std::string& question, const Exemplars& exemplars, const std::string& prompt_template) {
  return task_prompt(*find_task("gsm8k"), question, exemplars, prompt_template);
}

std::string nq_open_prompt(const std::string& question) { return fill_prompt(task_data::kNqOpenPrompt, question); }

std::vector<std::string> default_stop_strings(const std::string& name, int n_shot) {
  const Task* t = find_task(name);
  if (!t) return {};
  auto stops = n_shot > 0 ? t->fewshot_stop : t->stop;
  return {stops.begin(), stops.end()};
}

std::string apply_stop_strings(std::string_view text, const std::vector<std::string>& stops) {
  std::size_t cut = text.size();
  for (const auto& s : stops) {
    if (s.empty()) continue;
    auto pos = text.find(s);
    if (pos != std::string_view::npos) cut = std::min(cut, pos);
  }
  return std::string(text.substr(0, cut));
}

Dataset load_dataset(const DatasetSpec& spec) {
  check_spec(spec);
  Dataset ds = build(*find_task(spec.name), spec, spec.on_error == "skip");
  if (!spec.scorer.empty()) ds.scorer = spec.scorer;
  if (!spec.categories.empty()) keep_categories(spec, ds);
  std::size_t total = ds.requests.size();
  if (spec.offset >= total)
    fail("dataset '{}': offset {} is past the end ({} requests)", spec.name, spec.offset, total);
  std::size_t end = spec.limit == 0 ? total : std::min(total, spec.offset + spec.limit);
  ds.requests = std::vector<Request>(std::make_move_iterator(ds.requests.begin() + static_cast<std::ptrdiff_t>(spec.offset)),
                                     std::make_move_iterator(ds.requests.begin() + static_cast<std::ptrdiff_t>(end)));
  return ds;
}

std::vector<std::pair<std::string, std::string>> load_solutions(const DatasetSpec& spec) {
  check_spec(spec);
  return solutions_of(load_docs(*find_task(spec.name), spec, spec.on_error == "skip").docs);
}

}  // namespace ears
