// The legal range of each sampling and verifier parameter, stated once. decoders' validate()
// (sampling.cpp, verify.cpp) enforces them at run time; the config tables
// (harness/config/schema.cpp) check the same ranges at load time with a located message.
// Torch-free and header-only (it needs only harness/base) so that the config library can use it.
#pragma once
#include <array>
#include <cmath>
#include <string_view>

#include "harness/base/error.h"

namespace ears::ranges {

struct Range {
  bool (*ok)(double);    // true when the value is legal
  std::string_view fix;  // "<key> must be ...": the range in words, ending every message
};

// Below kMinTemperature, logits / T overflow float32 (a logit of 10 at T = 1e-38) or every token
// but the argmax underflows: greedy in effect with NaN risk. vLLM raises such values to 0.01 with a
// warning; here they are refused, so the report's T is the T that ran.
inline constexpr double kMinTemperature = 0.01;
inline constexpr Range kTemperature{[](double v) { return v == 0 || (v >= kMinTemperature && std::isfinite(v)); },
                                    "temperature must be 0 (greedy) or >= 0.01"};
inline constexpr Range kTopP{[](double v) { return v > 0 && v <= 1; }, "top_p must be > 0 and <= 1 (1 = off)"};
inline constexpr Range kTopK{[](double v) { return v >= 0; }, "top_k must be >= 0 (0 = off)"};
inline constexpr Range kBeta{[](double v) { return v >= 0 && std::isfinite(v); },
                             "beta must be >= 0 (0 = the exact baseline)"};
// typical acceptance: eps = 0 or delta = 0 accepts nothing; eps is a probability floor.
inline constexpr Range kEps{[](double v) { return v > 0 && v <= 1; }, "eps must be > 0 and <= 1"};
inline constexpr Range kDelta{[](double v) { return v > 0 && std::isfinite(v); }, "delta must be > 0"};

// The verifier rules and EARS's uncertainty measures by name, in the order of VerifierSpec::Kind
// and VerifierSpec::Uncertainty (decoders/verify.h): parse / to_string and the config's allowed
// values both read these.
inline constexpr std::array<std::string_view, 4> kVerifierNames = {"baseline", "ears", "typical", "greedy"};
inline constexpr std::array<std::string_view, 2> kUncertaintyNames = {"max_prob", "entropy"};

// float16 on CPU: refused by the config (located, with "or device: cuda" added) and by
// CausalLM::load (for generate's --dtype), in these words.
inline constexpr std::string_view kFloat16OnCpu = "float16 is not computed on CPU (LibTorch emulates it)";
inline constexpr std::string_view kFloat16OnCpuFix = "use bfloat16 (the same weight bytes) or float32";

// A device name: cpu, cuda or cuda:N. The config checks the spelling at load time
// (harness/config/yaml.cpp), parse_device (decoders/runtime.cpp) the same at run time, and then
// whether this LibTorch and machine have it.
inline bool is_device_name(std::string_view v) {
  if (v == "cpu" || v == "cuda") return true;
  if (v.substr(0, 5) != "cuda:" || v.size() == 5) return false;
  for (char ch : v.substr(5))
    if (ch < '0' || ch > '9') return false;
  return true;
}
inline constexpr std::string_view kDeviceFix = "use cpu, cuda or cuda:N (e.g. cuda:0)";

// The run-time check (decoders' validate()): "<where>.<key> = <v> is invalid; <fix>" as an ears::Error.
inline void check(const Range& r, std::string_view where, std::string_view key, double v) {
  if (!r.ok(v)) fail("{}.{} = {} is invalid; {}", where, key, v, r.fix);
}

}  // namespace ears::ranges
