// CI gates: threshold checks on a report's numbers. Torch-free (part of ears_reports).
//
// A check names a target (an arm name) and a metric. The metric is looked up first among the
// arm's metrics (report.json arms[].metrics: output_tokens_per_s, mean_accept_length,
// accuracy, n_errors, ...) and then among the comparison of that arm with the baseline
// (comparisons[]: throughput_gain_pct, accuracy_delta_pp, mcnemar_p, ...). Array metrics take
// an index: "acceptance_per_position[0]", "accuracy_delta_ci95[0]" (the interval's lower end).
// Unknown arm / metric / operator -> ears::Error (the CLI exits 2). A metric whose value is
// undefined (null, e.g. accuracy without gold answers) fails the check.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace ears {

struct Report;

struct GateCheck {
  std::string target;  // arm name (comparison metrics use the arm's comparison with the baseline)
  std::string metric;  // e.g. "throughput_gain_pct", "acceptance_per_position[0]"
  std::string op;      // ">=", ">", "<=", "<", "=="
  double value = 0;
};

struct GateOutcome {
  GateCheck check;
  std::string rule;    // "ears-0.5 throughput_gain_pct >= 5"
  std::string source;  // "arm" or "comparison" (where the metric was found)
  double actual = 0;   // NaN when the metric is undefined
  bool pass = false;
};

struct GateResult {
  std::vector<GateOutcome> outcomes;
  bool all_passed = true;
};

// "TARGET METRIC OP VALUE", whitespace separated, e.g. "ears-0.5 accuracy_delta_pp >= -1".
GateCheck parse_gate_check(const std::string& text);
std::string gate_rule_text(const GateCheck& check);

GateResult evaluate_gates(const Report& report, const std::vector<GateCheck>& checks);

// {"schema_version": 1, "all_passed": bool, "partial": bool,
//  "checks": [{"rule", "target", "metric", "op", "threshold", "actual", "source", "pass"}]}
nlohmann::json gate_to_json(const GateResult& result, bool report_partial = false);
void write_gate_json(const GateResult& result, const std::filesystem::path& file, bool report_partial = false);

// Fixed-width PASS/FAIL table for the terminal.
std::string gate_table(const GateResult& result);

}  // namespace ears
