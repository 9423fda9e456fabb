// Base layer: JSON helpers: the one typed reader of JSON keys (checkpoint config.json files) and
// the difference listing of the run directory, merge and report code.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ears {

// "integer 3", "number 0.5", "string \"abc\"" ...: a value's JSON type and (shortened) text, for errors.
std::string json_type(const nlohmann::json& v);

// `text` parsed as one JSON object; else a one-line error: "ORIGIN: invalid JSON (...)" or "ORIGIN:
// expected a JSON object at the top level".
nlohmann::json parse_json_object(const std::string& text, const std::string& origin);

// Typed access to the keys of one JSON object with one-line errors naming the file and the key:
// "ORIGIN: key 'K' must be an integer, got string \"x\"". A null value counts as absent.
struct JsonKeys {
  const nlohmann::json& j;
  const std::string& origin;

  const nlohmann::json* find(const char* key) const;
  const nlohmann::json& need(const char* key) const;  // missing: "...a Hugging Face config.json ... defines it"
  int64_t as_int(const nlohmann::json& v, const char* key) const;  // integers, and floats holding one
  double as_double(const nlohmann::json& v, const char* key) const;
  int64_t req_int(const char* key) const { return as_int(need(key), key); }
  int64_t positive_int(const char* key) const;
  int64_t opt_int(const char* key, int64_t def) const;
  double req_double(const char* key) const { return as_double(need(key), key); }
  double opt_double(const char* key, double def) const;
  // A finite number > 0 (>= 0 with zero_ok): RoPE's theta and factors, RMSNorm's epsilon.
  double positive_double(const char* key, bool zero_ok = false) const;
  double opt_positive_double(const char* key, double def) const;
  bool opt_bool(const char* key, bool def) const;
  std::optional<std::string> opt_string(const char* key) const;
  std::vector<int64_t> int_list(const char* key) const;  // an int, a list of ints, or absent ({})
};

// The leaves where `before` and `after` differ, as "key.path: BEFORE -> AFTER" (list entries by
// index, e.g. "arms.1.decoding.gamma: 5 -> 2"; a missing side prints as "(absent)"), in key
// order, at most `max` of them (then "... and N more").
std::vector<std::string> json_differences(const nlohmann::json& before, const nlohmann::json& after, size_t max = 8);

}  // namespace ears
