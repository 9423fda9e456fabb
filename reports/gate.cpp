#include "reports/gate.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "harness/base/strings.h"
#include "harness/base/error.h"
#include "reports/report.h"

namespace ears {

using nlohmann::json;

namespace {

const std::string kForm = "write '<arm>: <metric> <op> <value>', e.g. 'ears: accuracy_delta_pp >= -1'";

// A gateable field is a number, a boolean, null (an undefined number) or an array of those.
bool gateable(const json& v) {
  auto scalar = [](const json& x) { return x.is_number() || x.is_boolean() || x.is_null(); };
  return scalar(v) || (v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), scalar));
}

// The report's JSON of each struct, with one element in every vector so array fields show
// their element type: the single source of the metric names.
const json& arm_fields() {
  static const json j = [] {
    ArmMetrics m;
    m.acceptance_per_position = {0};
    m.accept_length_hist = {0};
    m.uncertainty_buckets.resize(1);
    m.categories.resize(1);
    return json(m);
  }();
  return j;
}
const json& comparison_fields() {
  static const json j = json(Comparison{});
  return j;
}

std::vector<std::string> gateable_keys(const json& fields) {
  std::vector<std::string> out;
  for (const auto& [k, v] : fields.items())
    if (gateable(v)) out.push_back(k);
  return out;
}

// "name" or "name[k]" -> name, index (-1 without one).
std::string split_metric(const std::string& metric, int& index, const std::string& prefix) {
  index = -1;
  const auto open = metric.find('[');
  if (open == std::string::npos) return metric;
  const std::string digits = metric.substr(open + 1, metric.size() - open - 2);
  if (metric.back() != ']' || open == 0 || digits.empty() || digits.size() > 6 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    fail("{}: metric '{}' is malformed; write NAME or NAME[INDEX], e.g. acceptance_per_position[0]", prefix, metric);
  index = std::stoi(digits);
  return metric.substr(0, open);
}

bool compare(double actual, const std::string& op, double value) {
  if (!std::isfinite(actual)) return false;
  if (op == ">=") return actual >= value;
  if (op == ">") return actual > value;
  if (op == "<=") return actual <= value;
  if (op == "<") return actual < value;
  return std::abs(actual - value) <= 1e-9 * std::max(1.0, std::abs(value));  // "=="
}

double value_of(const json& v, const GateRule& rule, int index) {
  const json* x = &v;
  if (index >= 0) {
    if (!v.is_array()) fail("gate rule '{}': metric '{}' is not an array; drop the [index]", to_string(rule), rule.metric);
    if (static_cast<size_t>(index) >= v.size())
      fail("gate rule '{}': index {} out of range (the array has {} entries)", to_string(rule), index, v.size());
    x = &v[static_cast<size_t>(index)];
  } else if (v.is_array()) {
    fail("gate rule '{}': metric '{}' is an array; pick an entry, e.g. {}[0]", to_string(rule), rule.metric, rule.metric);
  }
  if (x->is_boolean()) return x->get<bool>() ? 1.0 : 0.0;
  if (x->is_null()) return std::nan("");
  if (!x->is_number()) fail("gate rule '{}': metric '{}' is not numeric ({})", to_string(rule), rule.metric, x->dump());
  return x->get<double>();
}

// The metric part of a rule: a known name, an optional well-formed index.
void check_metric(const std::string& metric, const std::string& prefix) {
  int index = -1;
  const std::string name = split_metric(metric, index, prefix);
  if (gate_metric_kind(name) != GateMetricKind::unknown) return;
  std::vector<std::string> all = gate_metric_names(GateMetricKind::arm);
  const auto comparison = gate_metric_names(GateMetricKind::comparison);
  all.insert(all.end(), comparison.begin(), comparison.end());
  const std::string guess = closest(name, all);
  fail("{}: unknown metric '{}'; {}", prefix, name,
       guess.empty() ? fmt::format("arm metrics: {}; comparison metrics: {}",
                                   join(gate_metric_names(GateMetricKind::arm), ", "), join(comparison, ", "))
                     : fmt::format("did you mean '{}'?", guess));
}

}  // namespace

GateMetricKind gate_metric_kind(std::string_view name) {
  const std::string key(name);
  if (arm_fields().contains(key) && gateable(arm_fields()[key])) return GateMetricKind::arm;
  if (comparison_fields().contains(key) && gateable(comparison_fields()[key])) return GateMetricKind::comparison;
  return GateMetricKind::unknown;
}

std::vector<std::string> gate_metric_names(GateMetricKind kind) {
  if (kind == GateMetricKind::arm) return gateable_keys(arm_fields());
  if (kind == GateMetricKind::comparison) return gateable_keys(comparison_fields());
  return {};
}

std::string gate_ops_list() { return join(kGateOps, " "); }

GateRule parse_gate_rule(const std::string& text, const std::string& where) {
  const std::string prefix = where.empty() ? fmt::format("gate rule '{}'", text) : where;
  GateRule g;
  const std::string rest = trim(text);
  if (rest.empty()) fail("{}: empty gate rule; {}", prefix, kForm);
  const auto op_pos = rest.find_first_of("<>=!");
  if (op_pos == std::string::npos) fail("{}: missing comparison operator; {} with op one of {}", prefix, kForm, gate_ops_list());
  // Before the operator: "<arm>: <metric>", "<arm> <metric>" or "<metric>".
  const std::string head = trim(rest.substr(0, op_pos));
  bool has_arm = true;
  if (auto colon = head.find(':'); colon != std::string::npos)
    g.arm = trim(head.substr(0, colon)), g.metric = trim(head.substr(colon + 1));
  else if (auto space = head.find_last_of(" \t"); space != std::string::npos)
    g.arm = trim(head.substr(0, space)), g.metric = trim(head.substr(space + 1));
  else
    g.metric = head, has_arm = false;
  if (has_arm && g.arm != "*" && !valid_name(g.arm))
    fail("{}: '{}' is not a valid arm name; arm names use letters, digits, '.', '_' and '-'; '*' = all arms", prefix, g.arm);
  size_t op_len = 0;
  while (op_pos + op_len < rest.size() && std::string_view("<>=!").find(rest[op_pos + op_len]) != std::string_view::npos)
    ++op_len;
  g.op = rest.substr(op_pos, op_len);
  if (!contains(kGateOps, g.op))
    fail("{}: '{}' is not a comparison operator; {}", prefix, g.op, g.op == "=" ? "did you mean '=='?" : "use one of " + gate_ops_list());
  if (g.metric.empty()) fail("{}: missing metric name; {}", prefix, kForm);
  check_metric(g.metric, prefix);
  const std::string value = trim(rest.substr(op_pos + op_len));
  if (value.empty()) fail("{}: missing threshold value; {}", prefix, kForm);
  if (!parse_double(value, g.value)) fail("{}: '{}' is not a number; {}", prefix, value, kForm);
  return g;
}

std::string to_string(const GateRule& rule) {
  const std::string body = fmt::format("{} {} {}", rule.metric, rule.op, format_number(rule.value));
  return rule.arm == "*" ? body : fmt::format("{}: {}", rule.arm, body);
}

std::vector<GateRule> parse_gate_rules_file(const std::string& text, const std::string& label) {
  std::vector<GateRule> out;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF
    // A control byte (NUL cut the message short, ESC reached the terminal) is named, not echoed.
    for (const char ch : line)
      if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t')
        fail("{}:{}: control character U+{:04X} in the rules file; remove it", label, n, static_cast<unsigned char>(ch));
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (trim(line).empty()) continue;
    out.push_back(parse_gate_rule(line, fmt::format("{}:{}", label, n)));
  }
  return out;
}

void check_gate_index(const GateRule& rule, int64_t gamma, const std::string& where) {
  int index = -1;
  const std::string name = split_metric(rule.metric, index, where);
  const bool interval = name.ends_with("_ci95");
  const int64_t length = interval                            ? 2
                         : name == "acceptance_per_position" ? gamma
                         : name == "accept_length_hist"      ? gamma + 2
                                                             : -1;
  if (index < 0 || length < 0 || index < length) return;
  if (length == 0)
    fail("{}: {}: {} is empty for arm '{}' (it does not draft); drop the rule", where, to_string(rule), name, rule.arm);
  fail("{}: {}: index {} is past the end of {}, which has {} entries{}; use an index below {}", where, to_string(rule),
       index, name, length, interval ? "" : fmt::format(" at gamma {}", gamma), length);
}

std::vector<GateRule> expand_gate_rules(const std::vector<GateRule>& rules, const std::vector<std::string>& arms,
                                        const std::string& baseline, const std::string& where) {
  std::vector<GateRule> out;
  for (const GateRule& r : rules) {
    int index = -1;
    const bool comparison = gate_metric_kind(split_metric(r.metric, index, where)) == GateMetricKind::comparison;
    if (r.arm == "*") {
      const std::size_t before = out.size();
      for (const std::string& a : arms)
        if (!(comparison && a == baseline)) out.push_back(GateRule{a, r.metric, r.op, r.value});
      if (out.size() == before)  // it would pass checking nothing
        fail("{}: checks no arm: {} compares an arm with the baseline and the only arm is the baseline '{}'; add an "
             "arm or drop the rule",
             where, r.metric, baseline);
      continue;
    }
    if (!contains(arms, r.arm)) {
      const std::string guess = closest(r.arm, arms);
      fail("{}: no arm named '{}'; {}", where, r.arm,
           guess.empty() ? fmt::format("arms are: {} ('*' = all)", join(arms, ", ")) : fmt::format("did you mean '{}'?", guess));
    }
    if (comparison && r.arm == baseline)
      fail("{}: {} compares an arm with the baseline, and '{}' is the baseline; name another arm", where, r.metric, r.arm);
    out.push_back(r);
  }
  return out;
}

std::vector<GateRule> gate_rules_from_config(const json& config) {
  std::vector<GateRule> out;
  if (!config.is_object() || !config.contains("gates") || !config["gates"].is_array()) return out;
  for (const auto& g : config["gates"]) {
    try {
      out.push_back(GateRule{g.at("arm").get<std::string>(), g.at("metric").get<std::string>(),
                             g.at("op").get<std::string>(), g.at("value").get<double>()});
    } catch (const json::exception& e) {
      fail("config.gates: malformed rule {} ({}); re-run the experiment or pass --rules/--check", g.dump(), e.what());
    }
  }
  return out;
}

namespace {

GateOutcome evaluate_rule(const Report& report, const GateRule& rule) {
  int index = -1;
  GateOutcome o{rule, to_string(rule), "arm", 0, false};
  const std::string name = split_metric(rule.metric, index, o.text);
  if (gate_metric_kind(name) == GateMetricKind::arm) {
    const ArmMetrics& m = report.find_arm(rule.arm)->metrics;
    // An arm with no request measured (a run that failed before its first result) proves nothing:
    // every check on it fails, n/a ("n_errors == 0" passed there).
    o.actual = m.n_requests > 0 ? value_of(json(m)[name], rule, index) : std::nan("");
  } else {
    const Comparison* comparison = report.find_comparison(rule.arm);
    if (!comparison)
      fail("gate rule '{}': the report has no comparison of '{}' with the baseline; re-render it with 'ears-bench report'",
           o.text, rule.arm);
    o.source = "comparison";
    o.actual = value_of(json(*comparison)[name], rule, index);
  }
  o.pass = compare(o.actual, rule.op, rule.value);
  return o;
}

}  // namespace

GateResult evaluate_gates(const Report& report, const std::vector<GateRule>& rules, bool allow_partial) {
  std::vector<std::string> arms;
  for (const auto& a : report.arms) arms.push_back(a.name);
  GateResult result;
  result.partial = report.partial;
  result.partial_allowed = report.partial && allow_partial;
  result.all_passed = !report.partial || allow_partial;
  for (const GateRule& raw : rules) {
    const std::string where = fmt::format("gate rule '{}'", to_string(raw));
    if (!contains(kGateOps, raw.op)) fail("{}: unknown operator '{}'; use one of {}", where, raw.op, gate_ops_list());
    if (!std::isfinite(raw.value)) fail("{}: the threshold must be a finite number", where);
    check_metric(raw.metric, where);
    for (const GateRule& rule : expand_gate_rules({raw}, arms, report.baseline, where)) {
      result.outcomes.push_back(evaluate_rule(report, rule));
      result.all_passed = result.all_passed && result.outcomes.back().pass;
    }
  }
  return result;
}

json gate_to_json(const GateResult& result) {
  json checks = json::array();
  for (const auto& o : result.outcomes)
    checks.push_back({{"rule", o.text},
                      {"target", o.rule.arm},
                      {"metric", o.rule.metric},
                      {"op", o.rule.op},
                      {"threshold", o.rule.value},
                      {"actual", json_number(o.actual)},
                      {"source", o.source},
                      {"pass", o.pass}});
  return {{"schema_version", 1}, {"all_passed", result.all_passed}, {"partial", result.partial}, {"checks", checks}};
}

void write_gate_json(const GateResult& result, const std::filesystem::path& file) {
  write_file_atomic(file, gate_to_json(result).dump(2) + "\n");
}

std::string gate_table(const GateResult& result, const std::string& run_dir) {
  size_t width = 4;
  for (const auto& o : result.outcomes) width = std::max(width, o.text.size());
  std::string s = fmt::format("{:<6}  {:<{}}  {}\n", "RESULT", "RULE", width, "ACTUAL");
  for (const auto& o : result.outcomes) {
    const std::string actual = std::isfinite(o.actual) ? fmt::format("{:.6g}", o.actual) : "n/a";
    s += fmt::format("{:<6}  {:<{}}  {}\n", o.pass ? "PASS" : "FAIL", o.text, width, actual);
  }
  const auto failed = static_cast<size_t>(
      std::count_if(result.outcomes.begin(), result.outcomes.end(), [](const GateOutcome& o) { return !o.pass; }));
  s += fmt::format("{} of {} checks passed{}\n", result.outcomes.size() - failed, result.outcomes.size(),
                   result.all_passed ? "" : " — GATE FAILED");
  if (result.partial_allowed)
    s += "note: the report is PARTIAL (an interrupted or incomplete run); gated anyway (--allow-partial)\n";
  else if (result.partial)
    s += fmt::format("FAIL: the report is PARTIAL (an interrupted run, one shard, missing shards): finish it with "
                     "'ears-bench run --resume {}' or merge the shards, or gate what is there with 'ears-bench gate {} "
                     "--allow-partial'\n",
                     run_dir, run_dir);
  return s;
}

}  // namespace ears
