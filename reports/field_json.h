// JSON from and to the field lists of reports/fields.h: one writer and three reading dialects.
//   - result dialect (results.jsonl): absent or null -> the default; a wrong type is
//     "result key 'K' has the wrong type (T); expected a number|string|...";
//   - report dialect (report.json's metrics and comparisons): numbers are NaN when absent or
//     null, a non-number is "report key 'K' must be a number or null, got X"; other types keep
//     their default when absent or null and a wrong type is "report key 'K' has the wrong type".
//   - file dialect: see FileReader below.
// Doubles are written as null when not finite; nested field-listed structs are objects, and
// lists of them arrays of objects; keys come out sorted (nlohmann::json objects are ordered
// maps), whatever the list order. For the .cpp files of reports/ only. Torch-free.
#pragma once
#include <nlohmann/json.hpp>

#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "harness/base/error.h"
#include "reports/fields.h"
#include "reports/metrics.h"

namespace ears::field_json {

using nlohmann::json;

// Lists whose entries are encoded one by one: doubles (NaN -> null) and field-listed structs.
template <class T>
struct is_entrywise_list : std::false_type {};
template <class T>
struct is_entrywise_list<std::vector<T>> : std::bool_constant<std::is_same_v<T, double> || FieldListed<T>> {};

template <class T>
json encode(const T& x);

struct Writer {
  json& j;
  template <class T>
  void operator()(const char* key, const T& member, const char* /*doc*/, unsigned flags) {
    if constexpr (requires { member.empty(); })
      if ((flags & kFieldOmitEmpty) && member.empty()) return;
    j[key] = encode(member);
  }
  void derived(const char* key, double value, const char* /*doc*/) { j[key] = json_number(value); }
  void operator()(const char* key, const json& member, const char* /*doc*/, unsigned flags) {
    j[key] = (flags & kFieldObject) && member.is_null() ? json::object() : member;
  }
};

template <FieldListed T>
json to_object(const T& s) {
  json j = json::object();
  Writer w{j};
  T::fields(s, w);
  return j;
}

template <class T>
json encode(const T& x) {
  if constexpr (std::is_same_v<T, double>) {
    return json_number(x);
  } else if constexpr (FieldListed<T>) {
    return to_object(x);
  } else if constexpr (is_entrywise_list<T>::value) {
    json a = json::array();
    for (const auto& e : x) a.push_back(encode(e));
    return a;
  } else {
    return json(x);  // integers, booleans, strings, integer lists, Interval ([lo, hi])
  }
}

// ---- result dialect -------------------------------------------------------------------------

[[noreturn]] void wrong_result_type(const char* key, const json& value, const char* expected);
void check_deciles(const char* key, std::vector<int64_t>& v);  // [] -> 10 zeros; else 10 entries

template <class T>
const char* expected_name() {
  if constexpr (std::is_same_v<T, std::string>) return "a string";
  else if constexpr (std::is_same_v<T, bool>) return "a boolean";
  else if constexpr (std::is_arithmetic_v<T>) return "a number";
  else return "an array of integers";
}

struct ResultReader {
  const json& j;
  template <class T>
  void operator()(const char* key, T& member, const char* /*doc*/, unsigned flags) {
    const auto it = j.find(key);
    if ((flags & kFieldRequired) && it == j.end()) fail("result is missing the required key '{}'", key);
    if (it != j.end() && !it->is_null()) {
      try {
        member = it->template get<T>();
      } catch (const json::exception&) {
        wrong_result_type(key, *it, expected_name<T>());
      }
    }
    if constexpr (std::is_same_v<T, std::vector<int64_t>>)
      if (flags & kFieldDeciles) check_deciles(key, member);
    if constexpr (std::is_same_v<T, double>)
      if ((flags & kFieldNullIsNaN) && it != j.end() && it->is_null()) member = nan_value();
  }
  void derived(const char*, double, const char*) {}
};

// ---- report dialect -------------------------------------------------------------------------

double get_double(const json& j, const char* key);
std::vector<double> get_doubles(const json& j, const char* key);
Interval get_interval(const json& j, const char* key);
[[noreturn]] void wrong_report_type(const char* key, const json& value, const json::exception& e);

struct ReportReader {
  const json& j;
  template <class T>
  void operator()(const char* key, T& member, const char* /*doc*/, unsigned flags) {
    if constexpr (std::is_same_v<T, double>) {
      member = get_double(j, key);
    } else if constexpr (std::is_same_v<T, std::vector<double>>) {
      member = get_doubles(j, key);
    } else if constexpr (std::is_same_v<T, Interval>) {
      member = get_interval(j, key);
    } else if constexpr (FieldListed<T>) {
      if (const auto it = j.find(key); it != j.end() && it->is_object()) {
        ReportReader nested{*it};
        T::fields(member, nested);
      }
    } else if constexpr (is_entrywise_list<T>::value) {  // of field-listed structs
      if (const auto it = j.find(key); it != j.end() && it->is_array())
        for (const auto& e : *it) {
          ReportReader nested{e};
          T::value_type::fields(member.emplace_back(), nested);
        }
    } else if (flags & kFieldValue) {
      member = j.value(key, T(member));
    } else if (const auto it = j.find(key); it != j.end() && !it->is_null()) {
      try {
        member = it->template get<T>();
      } catch (const json::exception& e) {
        wrong_report_type(key, *it, e);
      }
    }
  }
  void derived(const char*, double, const char*) {}
};

// ---- file dialect (report.json and run_meta.json at the top, and their arm entries) ----------
// Scalars are read as json::value (nlohmann's own error on a mismatch); JSON members are {}
// when absent or null; string lists and entry lists must be arrays ("ORIGIN: 'K' must be an
// array..."); an entry type with entry_owner() is checked by it and read field by field,
// others (ArmMetrics, Comparison) by their from_json. The required schema_version is checked
// by the caller first (report.cpp check_schema).

std::vector<std::string> string_list(const json& j, const char* key, const std::string& origin);

struct FileReader {
  const json& j;
  const std::string& origin;
  std::string owner;  // e.g. "arm 'a'" inside an entry; empty at the top

  // A value of another JSON type than the field's (a hand-edited file): one line naming the file and
  // the key, not nlohmann's type_error.
  template <class T>
  void operator()(const char* key, T& member, const char* doc, unsigned flags) {
    try {
      read(key, member, doc, flags);
    } catch (const json::exception&) {
      wrong_type(key);
    }
  }
  void derived(const char*, double, const char*) {}

 private:
  std::string fix() const {
    return origin.ends_with("report.json") ? "restore the file or re-render it with 'ears-bench report RUN_DIR'"
                                           : "the file was edited: restore it as ears-bench wrote it";
  }
  [[noreturn]] void wrong_type(const char* key) const {
    const auto it = j.find(key);
    std::string value = it == j.end() ? std::string("absent") : it->dump();
    if (value.size() > 60) value = value.substr(0, 57) + "...";
    fail("{}: {}'{}' has the wrong type ({}); {}", origin, owner.empty() ? "" : owner + ": ", key, value, fix());
  }
  [[noreturn]] void missing(const char* key) const {
    fail("{}: {}no '{}'; {}", origin, owner.empty() ? "" : owner + " has ", key, fix());
  }

  template <class T>
  void read(const char* key, T& member, const char* /*doc*/, unsigned flags) {
    const auto it = j.find(key);
    if constexpr (!is_entrywise_list<T>::value)  // a list says "missing array" (read_entries)
      if ((flags & kFieldRequired) && it == j.end()) missing(key);
    if constexpr (std::is_same_v<T, json>) {
      // Every free-form field (config, environment, dataset, verifier) is a JSON object.
      if (it != j.end() && !it->is_null() && !it->is_object()) wrong_type(key);
      if (flags & kFieldValue) member = j.value(key, json::object());
      else member = it == j.end() || it->is_null() ? json::object() : *it;
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      member = string_list(j, key, origin);
    } else if constexpr (std::is_same_v<T, double>) {
      if (it == j.end()) return;
      try {
        member = json_to_double(*it);
      } catch (const Error&) {
        fail("{}: {} has a non-numeric '{}' ({})", origin, owner, key, it->dump());
      }
    } else if constexpr (FieldListed<T>) {
      if (it != j.end()) member = it->template get<T>();
    } else if constexpr (is_entrywise_list<T>::value) {
      read_entries(it, key, member, flags);
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // Whole numbers only (1e30 converted to whatever the cast gave).
      if (it == j.end()) return;
      if (!(it->is_number_integer() || it->is_number_unsigned()) ||
          (it->is_number_unsigned() && it->template get<uint64_t>() > uint64_t(std::numeric_limits<T>::max())))
        wrong_type(key);
      member = it->template get<T>();
    } else {
      member = j.value(key, T(member));
    }
  }

  template <class T>
  void read_entries(json::const_iterator it, const char* key, std::vector<T>& out, unsigned flags) {
    if ((flags & kFieldRequired) && (it == j.end() || !it->is_array())) fail("{}: missing array '{}'", origin, key);
    if (it == j.end()) return;
    if (!it->is_array()) fail("{}: '{}' must be an array", origin, key);
    for (const auto& e : *it) {
      if constexpr (requires { T::entry_owner(e, origin); }) {
        FileReader entry{e, origin, T::entry_owner(e, origin)};
        T::fields(out.emplace_back(), entry);
      } else {
        out.push_back(e.template get<T>());
      }
    }
  }
};

template <FieldListed T, class Reader>
void from_object(const json& j, T& s) {
  s = T{};
  Reader r{j};
  T::fields(s, r);
}

}  // namespace ears::field_json
