#include "harness/base/json.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "harness/base/error.h"

#include <fmt/format.h>

namespace ears {

std::string json_type(const nlohmann::json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer " + v.dump();
  if (v.is_number_float()) return "number " + v.dump();
  std::string d = v.dump();
  if (d.size() > 40) d = d.substr(0, 37) + "...";
  return std::string(v.type_name()) + " " + d;
}

nlohmann::json parse_json_object(const std::string& text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range: a number past double's range
    fail("{}: invalid JSON ({})", origin, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object at the top level", origin);
  return j;
}

const nlohmann::json* JsonKeys::find(const char* key) const {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

const nlohmann::json& JsonKeys::need(const char* key) const {
  const nlohmann::json* v = find(key);
  if (!v)
    fail("{}: missing key '{}'; a Hugging Face config.json of this architecture defines it (re-download or fix the file)",
         origin, key);
  return *v;
}

int64_t JsonKeys::as_int(const nlohmann::json& v, const char* key) const {
  constexpr double kLimit = 9223372036854775808.0;  // 2^63
  const bool whole_float = v.is_number_float() && std::floor(v.get<double>()) == v.get<double>();
  const bool too_large =
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) ||
      (whole_float && !(v.get<double>() >= -kLimit && v.get<double>() < kLimit));
  if (too_large) fail("{}: key '{}' is {}, too large for an integer here; fix the file", origin, key, v.dump());
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>();
  if (whole_float) return static_cast<int64_t>(v.get<double>());
  fail("{}: key '{}' must be an integer, got {}", origin, key, json_type(v));
}

double JsonKeys::as_double(const nlohmann::json& v, const char* key) const {
  if (v.is_number()) return v.get<double>();
  fail("{}: key '{}' must be a number, got {}", origin, key, json_type(v));
}

int64_t JsonKeys::positive_int(const char* key) const {
  const int64_t v = req_int(key);
  if (v <= 0) fail("{}: key '{}' must be positive, got {}", origin, key, v);
  return v;
}

int64_t JsonKeys::opt_int(const char* key, int64_t def) const {
  const nlohmann::json* v = find(key);
  return v ? as_int(*v, key) : def;
}

double JsonKeys::opt_double(const char* key, double def) const {
  const nlohmann::json* v = find(key);
  return v ? as_double(*v, key) : def;
}

double JsonKeys::positive_double(const char* key, bool zero_ok) const {
  const double v = req_double(key);
  if (!std::isfinite(v) || v < 0 || (v == 0 && !zero_ok))
    fail("{}: key '{}' is {}; it must be a finite number {} 0; fix the file", origin, key, v, zero_ok ? ">=" : ">");
  return v;
}

double JsonKeys::opt_positive_double(const char* key, double def) const {
  return find(key) ? positive_double(key) : def;
}

bool JsonKeys::opt_bool(const char* key, bool def) const {
  const nlohmann::json* v = find(key);
  if (!v) return def;
  if (!v->is_boolean()) fail("{}: key '{}' must be true or false, got {}", origin, key, json_type(*v));
  return v->get<bool>();
}

std::optional<std::string> JsonKeys::opt_string(const char* key) const {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail("{}: key '{}' must be a string, got {}", origin, key, json_type(*v));
  return v->get<std::string>();
}

std::vector<int64_t> JsonKeys::int_list(const char* key) const {
  const nlohmann::json* v = find(key);
  if (!v) return {};
  if (!v->is_array()) return {as_int(*v, key)};
  std::vector<int64_t> out;
  for (const auto& e : *v) out.push_back(as_int(e, key));
  return out;
}


namespace {

std::string show(const nlohmann::json* v) {
  if (!v) return "(absent)";
  std::string s = v->dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

void walk(const nlohmann::json* a, const nlohmann::json* b, const std::string& path, std::vector<std::string>& out) {
  if (a && b && *a == *b) return;
  const auto key = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  if (a && b && a->is_object() && b->is_object()) {
    for (const auto& [k, v] : a->items()) walk(&v, b->contains(k) ? &(*b)[k] : nullptr, key(k), out);
    for (const auto& [k, v] : b->items())
      if (!a->contains(k)) walk(nullptr, &v, key(k), out);
    return;
  }
  if (a && b && a->is_array() && b->is_array() && a->size() == b->size()) {
    for (size_t i = 0; i < a->size(); ++i) walk(&(*a)[i], &(*b)[i], key(std::to_string(i)), out);
    return;
  }
  out.push_back(fmt::format("{}: {} -> {}", path.empty() ? "(document)" : path, show(a), show(b)));
}

}  // namespace

std::vector<std::string> json_differences(const nlohmann::json& before, const nlohmann::json& after, size_t max) {
  std::vector<std::string> all;
  walk(&before, &after, "", all);
  if (all.size() > max) {
    const size_t more = all.size() - max;
    all.resize(max);
    all.push_back(fmt::format("... and {} more", more));
  }
  return all;
}

}  // namespace ears
