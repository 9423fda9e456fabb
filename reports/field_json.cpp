#include "reports/field_json.h"

namespace ears::field_json {

void wrong_result_type(const char* key, const json& value, const char* expected) {
  fail("result key '{}' has the wrong type ({}); expected {}", key, value.type_name(), expected);
}

void check_deciles(const char* key, std::vector<int64_t>& v) {
  if (v.empty()) v.assign(kUncertaintyDeciles, 0);
  if (v.size() != kUncertaintyDeciles)
    fail("result key '{}' has {} entries; expected {} (deciles of u)", key, v.size(), kUncertaintyDeciles);
}

double get_double(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return nan_value();
  try {
    return json_to_double(*it);
  } catch (const Error&) {
    fail("report key '{}' must be a number or null, got {}", key, it->dump());
  }
}

std::vector<double> get_doubles(const json& j, const char* key) {
  std::vector<double> v;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return v;
  if (!it->is_array()) fail("report key '{}' must be an array", key);
  for (const auto& x : *it) v.push_back(json_to_double(x));
  return v;
}

Interval get_interval(const json& j, const char* key) {
  Interval x;
  auto it = j.find(key);
  if (it != j.end()) from_json(*it, x);
  return x;
}

void wrong_report_type(const char* key, const json& value, const json::exception& e) {
  fail("report key '{}' has the wrong type ({}): {}", key, value.type_name(), e.what());
}

std::vector<std::string> string_list(const json& j, const char* key, const std::string& origin) {
  std::vector<std::string> v;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return v;
  if (!it->is_array()) fail("{}: '{}' must be an array of strings", origin, key);
  for (const auto& s : *it) {
    if (!s.is_string()) fail("{}: '{}' must be an array of strings", origin, key);
    v.push_back(s.get<std::string>());
  }
  return v;
}

}  // namespace ears::field_json
