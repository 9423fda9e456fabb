// Evaluation of a trained pair on synth-gsm test problems through the real decoding engine
// (decoders/engine.h): greedy accuracy of the target, mean accept length tau with a draft.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace ears {

// Greedy synth-gsm test accuracy (seed 0, zero-shot chat prompts, thinking off) of a saved
// target; with a draft dir also the mean accept length tau at `gamma` (greedy verification).
struct EvalResult {
  double accuracy = 0, tau = 0, tokens_per_s = 0;
  int64_t n = 0;
};
EvalResult evaluate_pair(const std::filesystem::path& target, const std::filesystem::path& draft, int64_t n, int gamma,
                         int64_t max_new_tokens, const std::string& dtype = "auto");

}  // namespace ears
