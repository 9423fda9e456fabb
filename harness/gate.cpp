#include "harness/gate.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

#include "harness/error.h"
#include "reports/report.h"

namespace ears {

using nlohmann::json;

namespace {

const char* const kOps[] = {">=", ">", "<=", "<", "=="};

bool valid_op(const std::string& op) {
  for (const char* o : kOps)
    if (op == o) return true;
  return false;
}

bool compare(double actual, const std::string& op, double value) {
  if (!std::isfinite(actual)) return false;
  if (op == ">=") return actual >= value;
  if (op == ">") return actual > value;
  if (op == "<=") return actual <= value;
  if (op == "<") return actual < value;
  return std::abs(actual - value) <= 1e-9 * std::max(1.0, std::abs(value));  // "=="
}

// "name" or "name[k]".
void split_metric(const std::string& metric, std::string& name, int& index) {
  index = -1;
  name = metric;
  const auto open = metric.find('[');
  if (open == std::string::npos) return;
  if (metric.back() != ']' || open == 0)
    fail("gate metric '{}' is malformed; write NAME or NAME[INDEX], e.g. acceptance_per_position[0]", metric);
  name = metric.substr(0, open);
  const std::string digits = metric.substr(open + 1, metric.size() - open - 2);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    fail("gate metric '{}' has a bad index '{}'; use a non-negative integer", metric, digits);
  index = std::stoi(digits);
}

std::string numeric_keys(const json& obj) {
  std::string s;
  for (const auto& [k, v] : obj.items())
    if (v.is_number() || v.is_null() || (v.is_array() && !v.empty() && (v[0].is_number() || v[0].is_null())))
      s += (s.empty() ? "" : ", ") + k;
  return s;
}

double value_of(const json& v, const GateCheck& check, int index) {
  const json* x = &v;
  if (index >= 0) {
    if (!v.is_array()) fail("gate metric '{}' is not an array; drop the [index]", check.metric);
    if (static_cast<size_t>(index) >= v.size())
      fail("gate metric '{}': index {} out of range (the array has {} entries)", check.metric, index, v.size());
    x = &v[static_cast<size_t>(index)];
  } else if (v.is_array()) {
    fail("gate metric '{}' is an array; pick an entry, e.g. {}[0]", check.metric, check.metric);
  }
  if (x->is_boolean()) return x->get<bool>() ? 1.0 : 0.0;
  if (x->is_null()) return std::nan("");
  if (!x->is_number()) fail("gate metric '{}' is not numeric ({})", check.metric, x->dump());
  return x->get<double>();
}

}  // namespace

std::string gate_rule_text(const GateCheck& c) { return fmt::format("{} {} {} {:g}", c.target, c.metric, c.op, c.value); }

GateCheck parse_gate_check(const std::string& text) {
  std::istringstream in(text);
  GateCheck c;
  std::string value, extra;
  if (!(in >> c.target >> c.metric >> c.op >> value) || (in >> extra))
    fail("gate rule '{}' must be 'TARGET METRIC OP VALUE', e.g. 'ears-0.5 throughput_gain_pct >= 5'", text);
  if (!valid_op(c.op)) fail("gate rule '{}': unknown operator '{}'; use one of >= > <= < ==", text, c.op);
  try {
    size_t used = 0;
    c.value = std::stod(value, &used);
    if (used != value.size()) throw std::invalid_argument(value);
  } catch (const std::exception&) {
    fail("gate rule '{}': threshold '{}' is not a number", text, value);
  }
  return c;
}

GateResult evaluate_gates(const Report& report, const std::vector<GateCheck>& checks) {
  GateResult result;
  for (const auto& check : checks) {
    if (!valid_op(check.op))
      fail("gate rule '{}': unknown operator '{}'; use one of >= > <= < ==", gate_rule_text(check), check.op);
    if (!std::isfinite(check.value)) fail("gate rule '{}': the threshold must be a finite number", gate_rule_text(check));
    const ArmReport* arm = report.find_arm(check.target);
    if (!arm) {
      std::string names;
      for (const auto& a : report.arms) names += (names.empty() ? "" : ", ") + a.name;
      fail("gate rule '{}': unknown arm '{}'; the report's arms are: {}", gate_rule_text(check), check.target, names);
    }
    std::string name;
    int index = -1;
    split_metric(check.metric, name, index);
    const json arm_json = arm->metrics;
    const Comparison* comparison = report.find_comparison(check.target);
    const json comparison_json = comparison ? json(*comparison) : json::object();

    GateOutcome o;
    o.check = check;
    o.rule = gate_rule_text(check);
    if (arm_json.contains(name)) {
      o.source = "arm";
      o.actual = value_of(arm_json[name], check, index);
    } else if (comparison_json.contains(name)) {
      o.source = "comparison";
      o.actual = value_of(comparison_json[name], check, index);
    } else if (!comparison && json(Comparison{}).contains(name)) {
      fail("gate rule '{}': '{}' is a comparison metric but '{}' is the baseline (it has no comparison); "
           "gate a non-baseline arm",
           o.rule, name, check.target);
    } else {
      fail("gate rule '{}': unknown metric '{}'; arm metrics: {}; comparison metrics: {}", o.rule, name,
           numeric_keys(arm_json), numeric_keys(json(Comparison{})));
    }
    o.pass = compare(o.actual, check.op, check.value);
    result.all_passed = result.all_passed && o.pass;
    result.outcomes.push_back(std::move(o));
  }
  return result;
}

json gate_to_json(const GateResult& result, bool report_partial) {
  json checks = json::array();
  for (const auto& o : result.outcomes)
    checks.push_back({{"rule", o.rule},
                      {"target", o.check.target},
                      {"metric", o.check.metric},
                      {"op", o.check.op},
                      {"threshold", o.check.value},
                      {"actual", json_number(o.actual)},
                      {"source", o.source},
                      {"pass", o.pass}});
  return {{"schema_version", 1}, {"all_passed", result.all_passed}, {"partial", report_partial}, {"checks", checks}};
}

void write_gate_json(const GateResult& result, const std::filesystem::path& file, bool report_partial) {
  write_file_atomic(file, gate_to_json(result, report_partial).dump(2) + "\n");
}

std::string gate_table(const GateResult& result) {
  size_t width = 4;
  for (const auto& o : result.outcomes) width = std::max(width, o.rule.size());
  std::string s = fmt::format("{:<6}  {:<{}}  {}\n", "RESULT", "RULE", width, "ACTUAL");
  for (const auto& o : result.outcomes) {
    const std::string actual = std::isfinite(o.actual) ? fmt::format("{:.6g}", o.actual) : "n/a";
    s += fmt::format("{:<6}  {:<{}}  {}\n", o.pass ? "PASS" : "FAIL", o.rule, width, actual);
  }
  const size_t failed = static_cast<size_t>(
      std::count_if(result.outcomes.begin(), result.outcomes.end(), [](const GateOutcome& o) { return !o.pass; }));
  s += fmt::format("{} of {} checks passed{}\n", result.outcomes.size() - failed, result.outcomes.size(),
                   result.all_passed ? "" : " — GATE FAILED");
  return s;
}

}  // namespace ears
