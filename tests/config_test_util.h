// Helpers shared by the harness/config tests (config_parse_test.cpp, config_output_test.cpp):
// a base YAML, parsing it, its error message, injecting a line.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/config/config.h"
#include "harness/base/error.h"

namespace ears::config::config_test {

// Every section in block style so tests can inject a line anywhere and know its line number.
inline const std::string kBase =
    "target:\n"
    "  path: /m/target\n"
    "draft:\n"
    "  path: /m/draft\n"
    "dataset:\n"
    "  name: gsm8k\n"
    "decoding:\n"
    "  seed: 0\n"
    "arms:\n"
    "  - name: base\n"
    "    verifier:\n"
    "      type: baseline\n"
    "  - name: ears\n"
    "    verifier:\n"
    "      type: ears\n"
    "run:\n"
    "  warmup: 1\n";

inline ExperimentSpec parse(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return parse_experiment(yaml, "t.yaml", "/cfg", overrides);
}

// The ears::Error message of parsing `yaml` (fails the test when it parses).
inline std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse(yaml, overrides);
  } catch (const ears::Error& e) {
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "error must be one line: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an error for:\n" << yaml;
  return "";
}

// kBase with `line` inserted after the first line equal to `after` (indent included in `line`).
inline std::string inject(const std::string& after, const std::string& line, std::string yaml = kBase) {
  auto pos = yaml.find(after + "\n");
  EXPECT_NE(pos, std::string::npos) << after;
  yaml.insert(pos + after.size() + 1, line + "\n");
  return yaml;
}

}  // namespace ears::config::config_test
