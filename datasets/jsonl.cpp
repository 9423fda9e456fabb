// JSONL reading and record fields; see jsonl.h.
#include "datasets/jsonl.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/base/error.h"
#include "harness/base/files.h"
#include "harness/base/utf8.h"

namespace ears {
using nlohmann::json;

std::size_t read_jsonl(const std::string& path, bool skip,
                       const std::function<void(const json&, std::size_t)>& on_record) {
  std::string content = read_file(path);
  std::string_view rest = utf8::strip_bom(content);
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
      } catch (const json::exception& e) {  // parse_error, or out_of_range: a number past double's range
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

}  // namespace ears
