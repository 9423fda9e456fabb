#include "reports/schema_doc.h"

#include <fmt/format.h>

#include <span>
#include <type_traits>

#include "reports/environment_keys.h"
#include "reports/fields.h"
#include "reports/report.h"

namespace ears {
namespace {

template <class T>
struct is_list : std::false_type {};
template <class T>
struct is_list<std::vector<T>> : std::true_type {};

// The JSON type of a member, with the struct named for nested objects.
template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, bool>) return "boolean";
  else if constexpr (std::is_integral_v<T>) return "integer";
  else if constexpr (std::is_same_v<T, double>) return "number";
  else if constexpr (std::is_same_v<T, std::string>) return "string";
  else if constexpr (std::is_same_v<T, Interval>) return "[lo, hi]";
  else if constexpr (std::is_same_v<T, nlohmann::json>) return "object";
  else if constexpr (std::is_same_v<T, UncertaintyBucket>) return "UncertaintyBucket";
  else if constexpr (std::is_same_v<T, CategoryMetrics>) return "CategoryMetrics";
  else if constexpr (std::is_same_v<T, TimeSplit>) return "TimeSplit";
  else if constexpr (std::is_same_v<T, ArmMetrics>) return "ArmMetrics";
  else if constexpr (std::is_same_v<T, Comparison>) return "Comparison";
  else if constexpr (std::is_same_v<T, ArmInput>) return "ArmInput";
  else if constexpr (std::is_same_v<T, ArmReport>) return "ArmReport";
  else if constexpr (is_list<T>::value) return "[" + type_name<typename T::value_type>() + "]";
  else static_assert(!sizeof(T), "name this member type in schema_doc.cpp");
}

struct Collector {
  std::vector<SchemaField> fields;
  template <class T>
  void operator()(const char* key, const T&, const char* doc, unsigned flags) {
    fields.push_back({key, type_name<T>(), (flags & kFieldRequired) != 0, false, doc});
  }
  void derived(const char* key, double, const char* doc) { fields.push_back({key, "number", false, true, doc}); }
};

template <FieldListed T>
SchemaTable table(const std::string& title) {
  const T sample{};
  Collector c;
  T::fields(sample, c);
  return {title, std::move(c.fields)};
}

std::string cell(const std::string& s) {
  std::string out;
  for (char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

}  // namespace

std::vector<SchemaTable> schema_tables() {
  return {table<RequestResult>("`results.jsonl`: one `RequestResult` per line"),
          table<RunMeta>("`run_meta.json`: `RunMeta`"),
          table<ArmInput>("`run_meta.json` arms[]: `ArmInput`"),
          table<Report>("`report.json`: `Report`"),
          table<ArmReport>("`report.json` arms[]: `ArmReport`"),
          table<ArmMetrics>("`report.json` arms[].metrics: `ArmMetrics`"),
          table<UncertaintyBucket>("`ArmMetrics` uncertainty_buckets[]: `UncertaintyBucket`"),
          table<CategoryMetrics>("`ArmMetrics` categories[]: `CategoryMetrics`"),
          table<TimeSplit>("`ArmMetrics` time_split_s: `TimeSplit`"),
          table<Comparison>("`report.json` comparisons[]: `Comparison`")};
}

std::string schema_tables_markdown() {
  std::string md;
  for (const auto& t : schema_tables()) {
    md += fmt::format("\n### {}\n\n| Key | Type | | Meaning |\n|---|---|---|---|\n", t.title);
    for (const auto& f : t.fields)
      md += fmt::format("| `{}` | {} | {} | {} |\n", f.key, cell(f.type),
                        f.required ? "required" : f.derived ? "derived" : "", cell(f.doc));
  }
  return md + "\n";
}

std::string environment_keys_markdown() {
  auto table = [](std::string_view title, std::span<const EnvironmentKey> keys) {
    std::string md = fmt::format("\n### {}\n\n| Key | Present | Meaning |\n|---|---|---|\n", title);
    for (const EnvironmentKey& k : keys)
      md += fmt::format("| `{}` | {} | {} |\n", k.key, k.present.empty() ? "always" : cell(std::string(k.present)),
                        cell(std::string(k.doc)));
    return md;
  };
  std::string facts;
  for (const char* k : kPathFacts) facts += fmt::format("{}`{}`", facts.empty() ? "" : ", ", k);
  return table("`environment`", kEnvironmentKeys) + table("`environment.draft`", kDraftEnvironmentKeys) +
         table("`environment.resumed[]`", kResumedEnvironmentKeys) +
         fmt::format("\nThen the path facts, as the session saw them: {}. A session that differs from the recorded "
                     "environment in any of them is warned about: the run mixes two paths.\n\n",
                     facts);
}

}  // namespace ears
