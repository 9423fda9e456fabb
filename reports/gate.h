// CI gates: threshold rules on a report's numbers. One grammar, one type, one parser for the
// YAML `gates:` list, `ears-bench gate --check` and `--rules` files. Torch-free.
//
// Grammar (whitespace around the parts is free):
//   RULE   := [ARM (":" | " ")] METRIC OP VALUE
//   ARM    := an arm name ([A-Za-z0-9._-]+) or "*"; absent = "*" = every arm (every non-baseline
//             arm for comparison metrics)
//   METRIC := NAME | NAME "[" INDEX "]"    e.g. accuracy, acceptance_per_position[0],
//             accuracy_delta_ci95[0] (an interval's lower end)
//   OP     := ">=" | ">" | "<=" | "<" | "=="   ("==" holds within a relative 1e-9: rounding noise)
//   VALUE  := a finite number
// e.g. "ears: accuracy_delta_pp >= -1", "ears-0.5 throughput_gain_pct >= 5", "n_errors == 0".
//
// Metric names are derived from the report's JSON, not listed here: NAME is a numeric field of
// an arm's metrics (report.json arms[].metrics: output_tokens_per_s, accuracy, n_errors, ...) or
// of its comparison with the baseline (comparisons[]: throughput_gain_pct, accuracy_delta_pp,
// mcnemar_p, ...); the arm's metrics are looked up first. A metric whose value is undefined
// (null, e.g. accuracy without gold answers) fails its rule. Bad rules -> ears::Error (exit 2).
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <array>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ears {

struct Report;

inline constexpr std::array<std::string_view, 5> kGateOps = {">=", "<=", ">", "<", "=="};
// kGateOps for messages: ">= <= > < ==".
std::string gate_ops_list();

struct GateRule {
  std::string arm = "*";  // an arm name; "*" = every arm (see expand_gate_rules)
  std::string metric;     // NAME or NAME[INDEX]
  std::string op;         // one of kGateOps
  double value = 0;
  bool operator==(const GateRule&) const = default;
};

// Where a metric NAME (without index) lives in report.json.
enum class GateMetricKind { unknown, arm, comparison };
GateMetricKind gate_metric_kind(std::string_view name);
std::vector<std::string> gate_metric_names(GateMetricKind kind);  // in report.json order

// Parses one rule. `where` (e.g. "gates.txt:3", "--check") prefixes error messages; empty =
// "gate rule '<text>'". Arm existence is checked later (expand_gate_rules / evaluate_gates).
GateRule parse_gate_rule(const std::string& text, const std::string& where = "");
std::string to_string(const GateRule& rule);  // "ARM: METRIC OP VALUE" (no ARM for "*"), parseable

// A rules file: one rule per line, '#' starts a comment, blank lines skipped. Errors name
// "<label>:<line>".
std::vector<GateRule> parse_gate_rules_file(const std::string& text, const std::string& label);

// "*" rules -> one rule per arm (per non-baseline arm for comparison metrics); named arms must
// exist, and a comparison metric may not name the baseline. Errors are prefixed by `where`.
std::vector<GateRule> expand_gate_rules(const std::vector<GateRule>& rules, const std::vector<std::string>& arms,
                                        const std::string& baseline, const std::string& where = "gate");

// A rule's [index] past the array its metric will have, where the config fixes that length
// (an interval: 2 bounds; acceptance_per_position: the arm's gamma; accept_length_hist: gamma + 2;
// `gamma` 0 for an arm that does not draft): refused before a run (it failed after the whole run).
void check_gate_index(const GateRule& rule, int64_t gamma, const std::string& where);

// The rules stored in a report's config (report.json config.gates: [{arm, metric, op, value}]).
std::vector<GateRule> gate_rules_from_config(const nlohmann::json& config);

struct GateOutcome {
  GateRule rule;
  std::string text;    // to_string(rule)
  std::string source;  // "arm" or "comparison" (where the metric was found)
  double actual = 0;   // NaN when the metric is undefined
  bool pass = false;
};

struct GateResult {
  std::vector<GateOutcome> outcomes;
  bool partial = false;          // the report is PARTIAL (an interrupted run, missing shards, a shard's own)
  bool partial_allowed = false;  // gated anyway (`gate --allow-partial`)
  bool all_passed = true;        // every check passed, and the report is whole unless partial_allowed
};

// "*" rules are expanded here (expand_gate_rules); arms, metrics and indices are checked. A PARTIAL
// report never passes unless `allow_partial`: `gate` and the gate.json `run` writes share this rule.
GateResult evaluate_gates(const Report& report, const std::vector<GateRule>& rules, bool allow_partial = false);

// {"schema_version": 1, "all_passed": bool, "partial": bool,
//  "checks": [{"rule", "target", "metric", "op", "threshold", "actual", "source", "pass"}]}
nlohmann::json gate_to_json(const GateResult& result);
void write_gate_json(const GateResult& result, const std::filesystem::path& file);

// Fixed-width PASS/FAIL table for the terminal; for a PARTIAL report, a last line saying why it
// fails (with how to finish `run_dir`) or that it was gated anyway.
std::string gate_table(const GateResult& result, const std::string& run_dir);

}  // namespace ears
