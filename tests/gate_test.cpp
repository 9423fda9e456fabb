// Tests for reports/gate: the one gate grammar (YAML gates:, --check, --rules files), metric
// names derived from the report's JSON, "*" expansion. Evaluation against a report is in
// report_output_test.cpp (Gate.*), the YAML side in config_parse_test.cpp (ConfigGates.*).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "harness/base/error.h"
#include "reports/gate.h"
#include "reports/metrics.h"

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
  const auto arm_names = gate_metric_names(GateMetricKind::arm);
  size_t numeric = 0;
  for (const auto& [k, v] : arm.items()) numeric += v.is_number() || v.is_null() || v.is_boolean();
  EXPECT_GE(arm_names.size(), numeric);
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
}

}  // namespace
}  // namespace ears
