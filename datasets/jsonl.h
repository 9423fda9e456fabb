// JSONL reading and record fields, shared by the file tasks (tasks.cpp). Internal to datasets/.
#pragma once
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ears {

// A problem with one line of a file; reported as "file:LINE: <message>".
struct LineError {
  std::string message;
};

// Reads a JSONL file, calling `on_record(json, line_number)` for every record. Bad lines (and
// LineError thrown by on_record) fail with "file:LINE: ..." or, when `skip`, are counted; returns
// the number skipped. UTF-8 validated per line; a BOM, "\r\n" and blank lines are accepted.
std::size_t read_jsonl(const std::string& path, bool skip,
                       const std::function<void(const nlohmann::json&, std::size_t)>& on_record);

// Looks up a dotted path ("turns.0", "meta.answer") in a JSON object; nullptr when absent.
const nlohmann::json* lookup(const nlohmann::json& obj, std::string_view path);
// As lookup; absent -> LineError "missing field '<field>'".
const nlohmann::json& require(const nlohmann::json& obj, std::string_view field);
std::string require_string(const nlohmann::json& obj, std::string_view field);
// A scalar as text: strings as is, numbers as JSON writes them.
std::string scalar_text(const nlohmann::json& v, std::string_view field);
// A string, a number or a list of them (null = none).
std::vector<std::string> answers_of(const nlohmann::json& v, std::string_view field);

}  // namespace ears
