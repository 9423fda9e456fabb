// libFuzzer target: the experiment YAML loader (harness/config/config.h). Arbitrary text either parses
// into a spec that survives a to_yaml round trip unchanged, or throws one ears::Error; yaml-cpp
// exceptions, crashes and hangs are bugs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "harness/config/config.h"
#include "harness/base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ears::config::ExperimentSpec spec;
  try {
    spec = ears::config::parse_experiment(text, "fuzz.yaml", "");
  } catch (const ears::Error&) {
    return 0;
  }
  const std::string yaml = ears::config::to_yaml(spec);
  try {
    if (!(ears::config::parse_experiment(yaml, "roundtrip.yaml", "") == spec)) std::abort();
  } catch (const ears::Error&) {
    std::abort();  // our own output must parse
  }
  return 0;
}
