// Tests for reports/gate: the one gate grammar (YAML gates:, --check, --rules files), metric
// names derived from the report's JSON, "*" expansion, and each operator and index evaluated on a
// hand-built report (GateEvaluate.*). Evaluation against a built report is in
// report_output_test.cpp (Gate.*), the YAML side in config_parse_test.cpp (ConfigGates.*).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness/base/error.h"
#include "reports/gate.h"
#include "reports/metrics.h"
#include "reports/report.h"

namespace ears {
namespace {

using nlohmann::json;

std::string message_of(const std::string& text, const std::string& where = "") {
  try {
    parse_gate_rule(text, where);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code, 2);
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << text;
  return "";
}

TEST(GateGrammar, Forms) {
  GateRule g = parse_gate_rule("ears: accuracy_delta_pp >= -1.0");
  EXPECT_EQ(g, (GateRule{"ears", "accuracy_delta_pp", ">=", -1.0}));
  EXPECT_EQ(parse_gate_rule("ears-0.5 throughput_gain_pct >= 5"), (GateRule{"ears-0.5", "throughput_gain_pct", ">=", 5.0}));
  EXPECT_EQ(parse_gate_rule("* accuracy == 1").arm, "*");
  EXPECT_EQ(parse_gate_rule("*: accuracy >= 0.5").arm, "*");
  GateRule all = parse_gate_rule("  mean_accept_length>2.5 ");
  EXPECT_EQ(all, (GateRule{"*", "mean_accept_length", ">", 2.5}));
  EXPECT_EQ(parse_gate_rule("ears-b0.1: latency_p99_s <= 3").arm, "ears-b0.1");
  EXPECT_EQ(parse_gate_rule("x: n_requests == 50").op, "==");
  EXPECT_EQ(parse_gate_rule("x: accuracy < 1e-3").value, 1e-3);
  EXPECT_EQ(parse_gate_rule("ears-0.5 acceptance_per_position[0]>0.25"),
            (GateRule{"ears-0.5", "acceptance_per_position[0]", ">", 0.25}));
  EXPECT_EQ(parse_gate_rule("  n_errors == 0 "), (GateRule{"*", "n_errors", "==", 0}));
  EXPECT_EQ(parse_gate_rule("ears: accuracy_delta_ci95[0] >= -2").metric, "accuracy_delta_ci95[0]");
  for (const char* text : {"ears: accuracy_delta_pp >= -1", "throughput_gain_pct > 5", "a.b-c_d: accuracy == 0.5",
                           "x: acceptance_per_position[2] <= 0.5"})
    EXPECT_EQ(to_string(parse_gate_rule(text)), text);
}

// Metric names come from the report's JSON: every numeric field of an arm's metrics and of a
// comparison, including the ones a hand-written list had missed (n_errors, arrays).
TEST(GateGrammar, MetricNamesAreTheReportsNumericFields) {
  const json arm = ArmMetrics{}, comparison = Comparison{};
  for (const char* name : {"n_errors", "output_tokens_per_s", "acceptance_per_position", "accuracy_ci95", "pardon_share"}) {
    EXPECT_TRUE(arm.contains(name)) << name;
    EXPECT_EQ(gate_metric_kind(name), GateMetricKind::arm) << name;
  }
  for (const char* name : {"throughput_gain_pct", "accuracy_delta_pp", "mcnemar_p", "accuracy_delta_ci95", "n_pairs"}) {
    EXPECT_TRUE(comparison.contains(name)) << name;
    EXPECT_EQ(gate_metric_kind(name), GateMetricKind::comparison) << name;
  }
  // Not numbers: objects, arrays of objects, strings.
  for (const char* name : {"categories", "uncertainty_buckets", "time_split_s", "arm", "baseline", "speed"})
    EXPECT_EQ(gate_metric_kind(name), GateMetricKind::unknown) << name;
  EXPECT_EQ(gate_metric_kind("identical_share"), GateMetricKind::comparison);  // a derived field
  // The lists an unknown metric's message shows: each holds the metrics CI configs gate on (a
  // literal list, not one derived from the same JSON), and no name is in both.
  const auto arm_names = gate_metric_names(GateMetricKind::arm);
  const auto comparison_names = gate_metric_names(GateMetricKind::comparison);
  auto in = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (const char* name : {"output_tokens_per_s", "mean_accept_length", "accuracy", "n_errors",
                           "acceptance_per_position", "latency_p99_s", "wall_from_latencies"}) {
    EXPECT_TRUE(in(arm_names, name)) << name;
    EXPECT_FALSE(in(comparison_names, name)) << name;
  }
  for (const char* name : {"throughput_gain_pct", "accuracy_delta_pp", "identical_share", "mcnemar_p",
                           "accuracy_delta_ci95"}) {
    EXPECT_TRUE(in(comparison_names, name)) << name;
    EXPECT_FALSE(in(arm_names, name)) << name;
  }
  EXPECT_FALSE(in(arm_names, "categories"));
}

TEST(GateGrammar, InvalidRulesNameTheProblem) {
  EXPECT_EQ(message_of("ears: acuracy >= 0.5"), "gate rule 'ears: acuracy >= 0.5': unknown metric 'acuracy'; did you mean 'accuracy'?");
  EXPECT_EQ(message_of("ears: acuracy >= 0.5", "rules.txt:3"), "rules.txt:3: unknown metric 'acuracy'; did you mean 'accuracy'?");
  const std::string speed = message_of("ears: speed >= 1");
  EXPECT_NE(speed.find("arm metrics: "), std::string::npos) << speed;
  EXPECT_NE(speed.find("output_tokens_per_s"), std::string::npos) << speed;
  EXPECT_NE(speed.find("comparison metrics: "), std::string::npos) << speed;
  EXPECT_NE(message_of("ears: accuracy = 1").find("'=' is not a comparison operator; did you mean '=='?"), std::string::npos);
  EXPECT_NE(message_of("ears: accuracy => 1").find("'=>' is not a comparison operator; use one of >= <= > < =="), std::string::npos);
  EXPECT_NE(message_of("ears: accuracy 1").find("missing comparison operator"), std::string::npos);
  EXPECT_NE(message_of("ears: accuracy >=").find("missing threshold value"), std::string::npos);
  EXPECT_NE(message_of("ears: accuracy >= high").find("'high' is not a number"), std::string::npos);
  EXPECT_NE(message_of("ears: accuracy >= 1x").find("'1x' is not a number"), std::string::npos);
  EXPECT_NE(message_of("my arm: accuracy >= 1").find("'my arm' is not a valid arm name"), std::string::npos);
  EXPECT_NE(message_of(": accuracy >= 1").find("is not a valid arm name"), std::string::npos);
  EXPECT_NE(message_of("a b c >= 1").find("'a b' is not a valid arm name"), std::string::npos);
  EXPECT_NE(message_of("ears: >= 1").find("missing metric name"), std::string::npos);
  EXPECT_NE(message_of("ears: acceptance_per_position[x] >= 1").find("is malformed"), std::string::npos);
  EXPECT_NE(message_of("ears: acceptance_per_position[0 >= 1").find("is malformed"), std::string::npos);
  EXPECT_NE(message_of("").find("empty gate rule"), std::string::npos);
  for (const char* bad : {"ears accuracy", "ears accuracy = 1", "ears accuracy >= ", "ears accuracy >= abc", ""})
    EXPECT_EQ(message_of(bad, "rules.txt:7").rfind("rules.txt:7: ", 0), 0u) << bad;
}

TEST(GateGrammar, RulesFilesSkipCommentsAndNameTheLine) {
  auto rules = parse_gate_rules_file("# CI rules\n\nears: accuracy_delta_pp >= -1  # one pp\nbaseline n_errors == 0\n", "r");
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[1], (GateRule{"baseline", "n_errors", "==", 0}));
  try {
    parse_gate_rules_file("ears: accuracy >= 0\n\nears: accuracy >< 1\n", "r.txt");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("r.txt:3: ", 0), 0u) << e.what();
  }
  // A control byte is named, not printed (a NUL cut the message short, ESC reached the terminal);
  // CRLF line ends stay fine.
  EXPECT_EQ(parse_gate_rules_file("ears: accuracy >= 0\r\n", "r").size(), 1u);
  for (const char ch : {'\0', '\x1b'}) {
    try {
      parse_gate_rules_file(std::string("ears: accuracy >= 0\nears: accuracy >= 1") + ch + "junk\n", "r.txt");
      ADD_FAILURE() << int(ch);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), fmt::format("r.txt:2: control character U+{:04X} in the rules file; remove it",
                                                   static_cast<int>(ch)));
    }
  }
}

TEST(GateGrammar, ConfigRulesRoundTrip) {
  json cfg = {{"gates", json::array({{{"arm", "ears"}, {"metric", "accuracy"}, {"op", "<="}, {"value", 0.5}}})}};
  const auto from_cfg = gate_rules_from_config(cfg);
  ASSERT_EQ(from_cfg.size(), 1u);
  EXPECT_EQ(from_cfg[0], (GateRule{"ears", "accuracy", "<=", 0.5}));
  EXPECT_TRUE(gate_rules_from_config(json::object()).empty());
  EXPECT_THROW(gate_rules_from_config(json{{"gates", json::array({{{"arm", "ears"}}})}}), Error);
}

TEST(GateGrammar, WildcardsExpandPerArmAndArmsAreChecked) {
  const std::vector<std::string> arms = {"base", "ears", "typ"};
  const auto rules = expand_gate_rules({GateRule{"*", "n_errors", "==", 0}, GateRule{"*", "accuracy_delta_pp", ">=", -1},
                                        GateRule{"typ", "accuracy", ">=", 0}},
                                       arms, "base");
  ASSERT_EQ(rules.size(), 3u + 2u + 1u);
  EXPECT_EQ(rules[0].arm, "base");
  EXPECT_EQ(rules[3].arm, "ears");  // comparison metrics skip the baseline
  EXPECT_EQ(rules[4].arm, "typ");
  auto error = [&](const GateRule& r) {
    try {
      expand_gate_rules({r}, arms, "base", "g.txt:1");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error({"eras", "accuracy", ">=", 0}), "g.txt:1: no arm named 'eras'; did you mean 'ears'?");
  EXPECT_EQ(error({"base", "accuracy_delta_pp", ">=", 0}),
            "g.txt:1: accuracy_delta_pp compares an arm with the baseline, and 'base' is the baseline; name another arm");
  EXPECT_EQ(error({"base", "accuracy", ">=", 0}), "");
  // A wildcard comparison over a report whose only arm is the baseline checked nothing and passed.
  try {
    expand_gate_rules({GateRule{"*", "throughput_gain_pct", ">=", 10}}, {"solo"}, "solo", "g.txt:2");
    ADD_FAILURE() << "a rule checking no arm was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "g.txt:2: checks no arm: throughput_gain_pct compares an arm with the baseline and "
                                     "the only arm is the baseline 'solo'; add an arm or drop the rule");
  }
}

// ---------------------------------------------------------------------------------------------
// evaluation on a hand-built report: every operator on and either side of its threshold, indices

// Arms "base" and "ears"; ears has τ = 2.5, acceptance_per_position [0.9, 0.5, 0.2] (all
// different, so a wrong index shows) and no distortion (null); its comparison has
// accuracy_delta_ci95 [-1.5, 4].
Report gate_report() {
  Report r;
  r.baseline = "base";
  ArmReport base{"base", json::object(), ArmMetrics{}}, ears{"ears", json::object(), ArmMetrics{}};
  base.metrics.n_requests = ears.metrics.n_requests = 4;
  ears.metrics.mean_accept_length = 2.5;
  ears.metrics.acceptance_per_position = {0.9, 0.5, 0.2};
  r.arms = {base, ears};
  Comparison c;
  c.arm = "ears";
  c.baseline = "base";
  c.accuracy_delta_ci95 = {-1.5, 4.0};
  r.comparisons = {c};
  return r;
}

GateOutcome outcome_of(const Report& r, const std::string& metric, const std::string& op, double value) {
  const GateResult g = evaluate_gates(r, {GateRule{"ears", metric, op, value}});
  EXPECT_EQ(g.outcomes.size(), 1u);
  EXPECT_EQ(g.all_passed, g.outcomes.at(0).pass);
  return g.outcomes.at(0);
}

// Each operator with the actual value (τ = 2.5) just below, on and just above the threshold:
// the expected PASS/FAIL written out, so a swapped or off-by-equality operator fails a row.
TEST(GateEvaluate, EveryOperatorBelowOnAndAboveItsThreshold) {
  struct Row {
    const char* op;
    bool below, on, above;  // pass when actual = threshold − ε, threshold, threshold + ε
  };
  const Row rows[] = {{">=", false, true, true}, {">", false, false, true}, {"<=", true, true, false},
                      {"<", true, false, false}, {"==", false, true, false}};
  ASSERT_EQ(std::size(rows), kGateOps.size());  // a new operator needs its row
  const Report r = gate_report();
  const double actual = 2.5, eps = 1e-6;  // ε far above "=="'s tolerance (2.5e-9) and rounding
  for (const Row& row : rows) {
    EXPECT_TRUE(std::find(kGateOps.begin(), kGateOps.end(), row.op) != kGateOps.end()) << row.op;
    const GateOutcome below = outcome_of(r, "mean_accept_length", row.op, actual + eps);
    EXPECT_EQ(below.actual, actual) << row.op;
    EXPECT_EQ(below.pass, row.below) << "2.5 " << row.op << " 2.5 + eps";
    EXPECT_EQ(outcome_of(r, "mean_accept_length", row.op, actual).pass, row.on) << "2.5 " << row.op << " 2.5";
    EXPECT_EQ(outcome_of(r, "mean_accept_length", row.op, actual - eps).pass, row.above)
        << "2.5 " << row.op << " 2.5 - eps";
    // An undefined (null) metric fails every operator, whatever the threshold.
    for (double t : {-1e9, 0.0, 1e9}) EXPECT_FALSE(outcome_of(r, "distortion_tv_mean", row.op, t).pass) << row.op << t;
  }
  // "==" forgives a relative 1e-9 (rounding in report.json) and no more.
  EXPECT_TRUE(outcome_of(r, "mean_accept_length", "==", actual * (1 + 0.5e-9)).pass);
  EXPECT_FALSE(outcome_of(r, "mean_accept_length", "==", actual * (1 + 2e-9)).pass);
}

// A PARTIAL report fails whatever its checks give, unless gated with allow_partial (`gate
// --allow-partial`); gate.json and the table say which. `run` and `gate` share this rule.
TEST(GateEvaluate, APartialReportFailsUnlessAllowed) {
  Report r = gate_report();
  const GateRule passing{"ears", "mean_accept_length", ">=", 1};
  EXPECT_TRUE(evaluate_gates(r, {passing}).all_passed);
  r.partial = true;
  const GateResult strict = evaluate_gates(r, {passing});
  ASSERT_EQ(strict.outcomes.size(), 1u);
  EXPECT_TRUE(strict.outcomes[0].pass);
  EXPECT_FALSE(strict.all_passed);
  EXPECT_EQ(gate_to_json(strict)["partial"], true);
  EXPECT_EQ(gate_to_json(strict)["all_passed"], false);
  EXPECT_NE(gate_table(strict, "runs/x").find("FAIL: the report is PARTIAL"), std::string::npos) << gate_table(strict, "runs/x");
  const GateResult allowed = evaluate_gates(r, {passing}, /*allow_partial=*/true);
  EXPECT_TRUE(allowed.all_passed);
  EXPECT_EQ(gate_to_json(allowed)["partial"], true);
  EXPECT_NE(gate_table(allowed, "runs/x").find("gated anyway"), std::string::npos);
  EXPECT_FALSE(evaluate_gates(r, {GateRule{"ears", "mean_accept_length", ">=", 9}}, true).all_passed);
}

// An [index] past an array whose length the config fixes is refused before the run (it failed after
// the whole run): interval bounds 2, per draft position gamma, the accept-length histogram gamma + 2.
TEST(GateGrammar, IndicesPastTheConfiguredLengthAreRefused) {
  const auto error_of = [](const std::string& metric, int64_t gamma) -> std::string {
    try {
      check_gate_index(GateRule{"ears", metric, ">=", 0}, gamma, "gates.0");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  for (const auto& [metric, gamma] : std::vector<std::pair<std::string, int64_t>>{
           {"accuracy_ci95[1]", 5}, {"throughput_gain_ci95[0]", 0}, {"acceptance_per_position[4]", 5},
           {"accept_length_hist[6]", 5}, {"accept_length_hist[1]", 0}, {"mean_accept_length", 5}})
    EXPECT_EQ(error_of(metric, gamma), "") << metric;
  EXPECT_EQ(error_of("accuracy_ci95[2]", 5),
            "gates.0: ears: accuracy_ci95[2] >= 0: index 2 is past the end of accuracy_ci95, which has 2 entries; use an "
            "index below 2");
  EXPECT_EQ(error_of("acceptance_per_position[5]", 5),
            "gates.0: ears: acceptance_per_position[5] >= 0: index 5 is past the end of acceptance_per_position, which "
            "has 5 entries at gamma 5; use an index below 5");
  EXPECT_NE(error_of("accept_length_hist[7]", 5).find("which has 7 entries at gamma 5"), std::string::npos);
  EXPECT_EQ(error_of("acceptance_per_position[0]", 0),
            "gates.0: ears: acceptance_per_position[0] >= 0: acceptance_per_position is empty for arm 'ears' (it does "
            "not draft); drop the rule");
}

// An arm without a single request measured (a run that failed before its first result) passes no
// check, not even "n_errors == 0", which it did.
TEST(GateEvaluate, AnArmWithoutRequestsPassesNothing) {
  Report r = gate_report();
  const GateRule no_errors{"ears", "n_errors", "==", 0};
  ASSERT_TRUE(evaluate_gates(r, {no_errors}).all_passed);
  for (auto& a : r.arms)
    if (a.name == "ears") a.metrics = ArmMetrics{};
  const GateResult g = evaluate_gates(r, {no_errors}, /*allow_partial=*/true);
  ASSERT_EQ(g.outcomes.size(), 1u);
  EXPECT_FALSE(g.outcomes[0].pass);
  EXPECT_TRUE(std::isnan(g.outcomes[0].actual));
  EXPECT_FALSE(g.all_passed);
}

// NAME[INDEX] reads entry INDEX: the entries all differ, so reading any other one shows; an
// index past the end is a bad rule (exit 2) naming the array's size.
TEST(GateEvaluate, IndexPicksThatEntry) {
  const Report r = gate_report();
  const double per_position[] = {0.9, 0.5, 0.2};
  const bool above_07[] = {true, false, false};
  for (int k = 0; k < 3; ++k) {
    const GateOutcome o = outcome_of(r, "acceptance_per_position[" + std::to_string(k) + "]", ">", 0.7);
    EXPECT_EQ(o.actual, per_position[k]) << k;
    EXPECT_EQ(o.pass, above_07[k]) << k;
    EXPECT_EQ(o.source, "arm");
  }
  const GateOutcome lo = outcome_of(r, "accuracy_delta_ci95[0]", ">=", -1);
  const GateOutcome hi = outcome_of(r, "accuracy_delta_ci95[1]", ">=", -1);
  EXPECT_EQ(lo.actual, -1.5);
  EXPECT_FALSE(lo.pass);
  EXPECT_EQ(hi.actual, 4.0);
  EXPECT_TRUE(hi.pass);
  EXPECT_EQ(lo.source, "comparison");
  auto error_of = [&](const std::string& metric) {
    try {
      evaluate_gates(r, {GateRule{"ears", metric, ">=", 0}});
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code, 2);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("acceptance_per_position[3]"),
            "gate rule 'ears: acceptance_per_position[3] >= 0': index 3 out of range (the array has 3 entries)");
  EXPECT_NE(error_of("accuracy_delta_ci95[2]").find("index 2 out of range (the array has 2 entries)"),
            std::string::npos);
  EXPECT_NE(error_of("mean_accept_length[0]").find("is not an array"), std::string::npos);
}

}  // namespace
}  // namespace ears
