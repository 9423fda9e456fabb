// Dataset loaders and prompt builders; see dataset.h for the formats and conventions.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "harness/base/files.h"
#include "harness/base/rng.h"
#include "datasets/dataset.h"
#include "datasets/open_stems.h"
#include "datasets/scoring.h"
#include "datasets/synth_gsm.h"
#include "harness/base/utf8.h"
#include "harness/base/error.h"

namespace ears {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A problem with one line of a file; reported as "file:LINE: <message>".
struct LineError {
  std::string message;
};

// Reads a JSONL file, calling `on_record(json, line_number)` for every record. Bad lines (and
// LineError thrown by on_record) fail with "file:LINE: ..." or, when `skip`, are counted.
template <class F>
std::size_t read_jsonl(const std::string& path, bool skip, F&& on_record) {
  std::string content = read_file(path);
  std::string_view rest = content;
  if (rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);  // UTF-8 BOM
  std::size_t line_no = 0, records = 0, skipped = 0;
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank line
    try {
      if (auto bad = utf8::first_invalid(line); bad != std::string_view::npos)
        throw LineError{fmt::format("invalid UTF-8 at byte {} of the line; the file must be "
                                    "UTF-8 text",
                                    bad + 1)};
      json j;
      try {
        j = json::parse(line);
      } catch (const json::parse_error& e) {
        std::string what = e.what();
        if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
        throw LineError{fmt::format("invalid JSON ({})", what)};
      }
      if (!j.is_object()) throw LineError{"expected a JSON object on each line"};
      on_record(j, line_no);
      ++records;
    } catch (const LineError& e) {
      if (!skip) fail("{}:{}: {}", path, line_no, e.message);
      ++skipped;
    }
  }
  if (line_no == 0 || (records == 0 && skipped == 0))
    fail("{}: empty file (expected one JSON object per line)", path);
  if (records == 0)
    fail("{}: no usable records ({} bad lines skipped); check the file format", path, skipped);
  return skipped;
}

// Looks up a dotted path ("turns.0", "meta.answer") in a JSON object; nullptr when absent.
const json* lookup(const json& obj, std::string_view path) {
  const json* cur = &obj;
  while (!path.empty()) {
    auto dot = path.find('.');
    std::string key(path.substr(0, dot));
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
    if (cur->is_object()) {
      auto it = cur->find(key);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (cur->is_array() && !key.empty() &&
               std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      std::size_t idx = std::stoul(key);
      if (idx >= cur->size()) return nullptr;
      cur = &(*cur)[idx];
    } else {
      return nullptr;
    }
  }
  return cur;
}

const json& require(const json& obj, std::string_view field) {
  const json* v = lookup(obj, field);
  if (!v) throw LineError{fmt::format("missing field '{}'", field)};
  return *v;
}

std::string require_string(const json& obj, std::string_view field) {
  const json& v = require(obj, field);
  if (!v.is_string()) throw LineError{fmt::format("field '{}' must be a string", field)};
  return v.get<std::string>();
}

// A scalar as text: strings as is, numbers as JSON writes them.
std::string scalar_text(const json& v, std::string_view field) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  throw LineError{fmt::format("field '{}' must be a string or a number", field)};
}

std::vector<std::string> answers_of(const json& v, std::string_view field) {
  std::vector<std::string> out;
  if (v.is_array()) {
    for (const auto& a : v) {
      if (!a.is_string() && !a.is_number())
        throw LineError{fmt::format("field '{}' must be a string, a number or a list of them",
                                    field)};
      out.push_back(scalar_text(a, field));
    }
  } else if (v.is_string() || v.is_number()) {
    out.push_back(scalar_text(v, field));
  } else if (!v.is_null()) {
    throw LineError{
        fmt::format("field '{}' must be a string, a number or a list of them", field)};
  }
  return out;
}

std::string apply_template(const std::string& tpl, const std::string& question) {
  std::string out;
  std::size_t pos = 0;
  for (auto hit = tpl.find("{question}"); hit != std::string::npos;
       hit = tpl.find("{question}", pos)) {
    out.append(tpl, pos, hit - pos);
    out += question;
    pos = hit + 10;
  }
  out.append(tpl, pos);
  return out;
}

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

// ---- file resolution ----

struct FileInfo {
  std::string file;  // default file name
  std::string url;   // where to get it
};

FileInfo default_file(const std::string& name, const std::string& split) {
  if (name == "gsm8k")
    return {split + ".jsonl",
            "https://raw.githubusercontent.com/openai/grade-school-math/master/"
            "grade_school_math/data/" +
                split + ".jsonl"};
  if (name == "nq_open") {
    std::string f = split == "train" ? "NQ-open.train.jsonl" : "NQ-open.dev.jsonl";
    return {f, "https://raw.githubusercontent.com/google-research-datasets/natural-questions/"
               "master/nq_open/" +
                   f};
  }
  return {"question.jsonl",
          "https://raw.githubusercontent.com/hemingkx/Spec-Bench/main/data/spec_bench/"
          "question.jsonl"};
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

std::string resolve_file(const std::string& name, const std::string& path,
                         const std::string& split) {
  FileInfo info = default_file(name, split);
  std::vector<std::string> tried;
  fs::path target;  // where the download command puts it
  if (!path.empty()) {
    fs::path p(path);
    if (fs::is_regular_file(p)) return p.string();
    if (fs::is_directory(p)) {
      for (const fs::path& c : {p / info.file, p / name / info.file}) {
        if (fs::is_regular_file(c)) return c.string();
        tried.push_back(c.string());
      }
      target = p / info.file;
    } else {
      tried.push_back(p.string());
      target = p;
    }
  } else {
    fs::path c = fs::path(bench_data_root()) / name / info.file;
    if (fs::is_regular_file(c)) return c.string();
    tried.push_back(c.string() + (std::getenv("EARS_BENCH_DATA") ? "" : " ($EARS_BENCH_DATA unset)"));
    target = c;
  }
  std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  fail("dataset '{}': file not found; looked in: {}. Get it with: mkdir -p {} && curl -L -o {} {}",
       name, join(tried, ", "), dir, target.string(), info.url);
}

// ---- loaders ----

std::string normalized_split(const DatasetSpec& spec) {
  return spec.split.empty() ? "test" : spec.split;
}

std::vector<std::pair<std::string, std::string>> read_gsm8k_pairs(const std::string& file,
                                                                  bool skip,
                                                                  std::size_t* skipped,
                                                                  std::vector<std::size_t>* lines) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t s = read_jsonl(file, skip, [&](const json& j, std::size_t line) {
    std::string q = require_string(j, "question");
    std::string a = require_string(j, "answer");
    if (a.find("####") == std::string::npos)
      throw LineError{"field 'answer' has no final '#### <answer>' line"};
    out.emplace_back(std::move(q), std::move(a));
    if (lines) lines->push_back(line);
  });
  if (skipped) *skipped = s;
  return out;
}

Dataset load_gsm8k(const DatasetSpec& spec, bool skip) {
  std::string split = normalized_split(spec);
  if (split != "test" && split != "train")
    fail("dataset 'gsm8k': unknown split '{}'; use test or train", split);
  Dataset ds;
  ds.scorer = "gsm8k";
  ds.resolved_path = resolve_file("gsm8k", spec.path, split);
  std::vector<std::size_t> lines;
  auto rows = read_gsm8k_pairs(ds.resolved_path, skip, &ds.skipped_lines, &lines);

  std::vector<std::pair<std::string, std::string>> train;
  if (spec.n_shot > 0) {
    if (split == "train") {
      train = rows;
    } else {
      // The train file beside the test file (or in the default location).
      std::string train_path = spec.path;
      if (!train_path.empty() && fs::is_regular_file(train_path))
        train_path = fs::path(ds.resolved_path).parent_path().string();
      train = read_gsm8k_pairs(resolve_file("gsm8k", train_path, "train"), skip, nullptr,
                               nullptr);
    }
    if (static_cast<std::size_t>(spec.n_shot) >= train.size())
      fail("dataset 'gsm8k': n_shot = {} needs more train examples (have {})", spec.n_shot,
           train.size());
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Request r;
    r.id = fmt::format("gsm8k/{}/{}", split, i);
    auto exemplars = spec.n_shot > 0
                         ? pick_exemplars(train, spec.n_shot, spec.seed, i, rows[i].first)
                         : std::vector<std::pair<std::string, std::string>>{};
    r.prompt = gsm8k_prompt(rows[i].first, exemplars, spec.prompt_template);
    r.gold = {gsm8k_gold_from_answer(rows[i].second)};
    r.category = "gsm8k";
    r.source_line = lines[i];
    ds.requests.push_back(std::move(r));
  }
  return ds;
}

Dataset load_nq_open(const DatasetSpec& spec, bool skip) {
  std::string split = normalized_split(spec);
  if (split != "test" && split != "dev" && split != "validation" && split != "train")
    fail("dataset 'nq_open': unknown split '{}'; use test (= dev), dev, validation or train",
         split);
  std::string id_split = split == "train" ? "train" : "dev";
  Dataset ds;
  ds.scorer = "squad";
  ds.resolved_path = resolve_file("nq_open", spec.path, split);
  std::size_t index = 0;
  ds.skipped_lines = read_jsonl(ds.resolved_path, skip, [&](const json& j, std::size_t line) {
    std::string q = require_string(j, "question");
    auto gold = answers_of(require(j, "answer"), "answer");
    if (gold.empty()) throw LineError{"field 'answer' is empty"};
    Request r;
    r.id = fmt::format("nq_open/{}/{}", id_split, index++);
    r.prompt = spec.prompt_template.empty() ? nq_open_prompt(q)
                                            : apply_template(spec.prompt_template, q);
    r.gold = std::move(gold);
    r.category = "nq_open";
    r.source_line = line;
    ds.requests.push_back(std::move(r));
  });
  return ds;
}

Dataset load_spec_bench(const DatasetSpec& spec, bool skip) {
  std::string split = normalized_split(spec);
  if (split != "test") fail("dataset 'spec_bench': unknown split '{}'; it only has test", split);
  Dataset ds;
  ds.scorer = "none";
  ds.resolved_path = resolve_file("spec_bench", spec.path, split);
  ds.skipped_lines = read_jsonl(ds.resolved_path, skip, [&](const json& j, std::size_t line) {
    const json& qid = require(j, "question_id");
    if (!qid.is_number_integer()) throw LineError{"field 'question_id' must be an integer"};
    const json& turns = require(j, "turns");
    if (!turns.is_array() || turns.empty() || !turns[0].is_string())
      throw LineError{"field 'turns' must be a non-empty list of strings"};
    Request r;
    r.id = fmt::format("spec_bench/{}", qid.get<long long>());
    std::string q = turns[0].get<std::string>();
    r.prompt = spec.prompt_template.empty() ? q : apply_template(spec.prompt_template, q);
    r.category = require_string(j, "category");
    r.source_line = line;
    ds.requests.push_back(std::move(r));
  });
  return ds;
}

Dataset load_jsonl(const DatasetSpec& spec, bool skip) {
  if (spec.path.empty()) fail("dataset 'jsonl': needs a path to a JSONL file");
  if (!fs::is_regular_file(spec.path))
    fail("dataset 'jsonl': file not found: {}; set path to an existing JSONL file", spec.path);
  std::string prompt_field = spec.prompt_field.empty() ? "prompt" : spec.prompt_field;
  std::string answer_field = spec.answer_field.empty() ? "answer" : spec.answer_field;
  std::string category_field = spec.category_field.empty() ? "category" : spec.category_field;
  std::string stem = fs::path(spec.path).stem().string();
  Dataset ds;
  ds.resolved_path = spec.path;
  std::size_t index = 0;
  bool any_gold = false;
  ds.skipped_lines = read_jsonl(ds.resolved_path, skip, [&](const json& j, std::size_t line) {
    const json& p = require(j, prompt_field);
    if (!p.is_string())
      throw LineError{fmt::format("field '{}' must be a string (set prompt_field)", prompt_field)};
    Request r;
    r.id = fmt::format("jsonl/{}/{}", stem, index++);
    std::string q = p.get<std::string>();
    r.prompt = spec.prompt_template.empty() ? q : apply_template(spec.prompt_template, q);
    if (const json* a = lookup(j, answer_field)) r.gold = answers_of(*a, answer_field);
    if (const json* c = lookup(j, category_field); c && !c->is_null())
      r.category = scalar_text(*c, category_field);
    r.source_line = line;
    any_gold = any_gold || !r.gold.empty();
    ds.requests.push_back(std::move(r));
  });
  ds.scorer = any_gold ? "squad" : "none";
  return ds;
}

Dataset load_synth_gsm(const DatasetSpec& spec) {
  std::string split = normalized_split(spec);
  if (split != "test" && split != "train")
    fail("dataset 'synth-gsm': unknown split '{}'; use test or train", split);
  if (spec.synth_n == 0) fail("dataset 'synth-gsm': n must be at least 1");
  Dataset ds;
  ds.scorer = "gsm8k";
  ds.requests = synth_gsm(spec.synth_n, spec.seed, split);
  if (spec.n_shot > 0 || !spec.prompt_template.empty()) {
    auto rows = synth_gsm_pairs(spec.synth_n, spec.seed, split);
    std::vector<std::pair<std::string, std::string>> train;
    // Exemplars: a separate pool of synthetic train problems (never a test problem).
    if (spec.n_shot > 0)
      train = synth_gsm_pairs(std::max<std::size_t>(64, 4 * static_cast<std::size_t>(spec.n_shot)),
                              spec.seed ^ 0x5EED5EED5EED5EEDULL, "train");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      auto exemplars = spec.n_shot > 0
                           ? pick_exemplars(train, spec.n_shot, spec.seed, i, rows[i].first)
                           : std::vector<std::pair<std::string, std::string>>{};
      ds.requests[i].prompt = gsm8k_prompt(rows[i].first, exemplars, spec.prompt_template);
    }
  }
  return ds;
}

Dataset load_open_stems(const DatasetSpec& spec) {
  Dataset ds;
  ds.scorer = "none";
  ds.requests = open_stem_requests();
  if (!spec.prompt_template.empty())
    for (auto& r : ds.requests) r.prompt = apply_template(spec.prompt_template, r.prompt);
  return ds;
}

}  // namespace

const std::vector<std::string>& dataset_names() {
  static const std::vector<std::string> names = {"gsm8k", "nq_open",   "spec_bench",
                                                 "jsonl", "synth-gsm", "open-stems"};
  return names;
}

std::string bench_data_root() {
  const char* env = std::getenv("EARS_BENCH_DATA");
  return env && *env ? env : "data";
}

std::string gsm8k_prompt(const std::string& question,
                         const std::vector<std::pair<std::string, std::string>>& exemplars,
                         const std::string& prompt_template) {
  std::string out;
  for (const auto& [q, a] : exemplars) out += "Question: " + q + "\nAnswer: " + a + "\n\n";
  if (!prompt_template.empty())
    out += apply_template(prompt_template, question);
  else if (!exemplars.empty())
    out += "Question: " + question + "\nAnswer:";
  else
    out += question + "\n" + std::string(kGsm8kInstruction);
  return out;
}

std::string nq_open_prompt(const std::string& question) {
  return std::string(kNqOpenDescription) + "Q: " + question + "?\nA:";
}

std::vector<std::string> default_stop_strings(const std::string& name, int n_shot) {
  if (name == "gsm8k" || name == "synth-gsm") {
    if (n_shot > 0) return {"Question:", "</s>", "<|im_end|>"};
    return {"</s>", "<|im_end|>"};
  }
  if (name == "nq_open") return {"\n", ".", ","};
  return {};
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
  const auto& names = dataset_names();
  if (std::find(names.begin(), names.end(), spec.name) == names.end())
    fail("unknown dataset '{}'; use one of: {}", spec.name, join(names, ", "));
  if (spec.on_error != "fail" && spec.on_error != "skip")
    fail("dataset '{}': on_error must be 'fail' or 'skip', got '{}'", spec.name, spec.on_error);
  if (spec.n_shot < 0) fail("dataset '{}': n_shot must be >= 0, got {}", spec.name, spec.n_shot);
  if (spec.n_shot > 0 && spec.name != "gsm8k" && spec.name != "synth-gsm")
    fail("dataset '{}': n_shot is only supported for gsm8k and synth-gsm (set n_shot: 0)",
         spec.name);
  if (spec.n_shot > 64) fail("dataset '{}': n_shot = {} is too large (max 64)", spec.name, spec.n_shot);
  if (!spec.prompt_template.empty() &&
      spec.prompt_template.find("{question}") == std::string::npos)
    fail("dataset '{}': prompt_template must contain '{{question}}'", spec.name);
  if (!spec.scorer.empty() && !find_scorer(spec.scorer))
    fail("dataset '{}': unknown scorer '{}'; use one of: {}", spec.name, spec.scorer,
         scorer_list());

  bool skip = spec.on_error == "skip";
  Dataset ds;
  if (spec.name == "gsm8k") ds = load_gsm8k(spec, skip);
  else if (spec.name == "nq_open") ds = load_nq_open(spec, skip);
  else if (spec.name == "spec_bench") ds = load_spec_bench(spec, skip);
  else if (spec.name == "jsonl") ds = load_jsonl(spec, skip);
  else if (spec.name == "synth-gsm") ds = load_synth_gsm(spec);
  else ds = load_open_stems(spec);
  if (!spec.scorer.empty()) ds.scorer = spec.scorer;

  if (!spec.categories.empty()) {
    std::unordered_set<std::string> keep(spec.categories.begin(), spec.categories.end());
    std::unordered_set<std::string> present;
    for (const auto& r : ds.requests) present.insert(r.category);
    for (const auto& c : spec.categories)
      if (!present.count(c)) {
        std::vector<std::string> have(present.begin(), present.end());
        std::sort(have.begin(), have.end());
        fail("dataset '{}': no requests in category '{}'; categories present: {}", spec.name, c,
             join(have, ", "));
      }
    std::erase_if(ds.requests, [&](const Request& r) { return !keep.count(r.category); });
  }
  std::size_t total = ds.requests.size();
  if (spec.offset >= total)
    fail("dataset '{}': offset {} is past the end ({} requests)", spec.name, spec.offset, total);
  std::size_t end = spec.limit == 0 ? total : std::min(total, spec.offset + spec.limit);
  ds.requests = std::vector<Request>(std::make_move_iterator(ds.requests.begin() + static_cast<std::ptrdiff_t>(spec.offset)),
                                     std::make_move_iterator(ds.requests.begin() + static_cast<std::ptrdiff_t>(end)));
  return ds;
}

}  // namespace ears
