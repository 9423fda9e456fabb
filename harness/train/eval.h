// The real decoding engine (decoders/engine.h) in training: evaluation of a trained pair on
// synth-gsm test problems (greedy accuracy of the target, mean accept length tau with a draft),
// and the target's own greedy answers as EAGLE-3 training data.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace ears {

// Greedy synth-gsm test accuracy (seed 0, zero-shot chat prompts, thinking off) of a saved
// target; with a draft dir also the mean accept length tau at `gamma` (greedy verification).
struct EvalResult {
  double accuracy = 0, tau = 0, tokens_per_s = 0;
  int64_t n = 0;
};
EvalResult evaluate_pair(const std::filesystem::path& target, const std::filesystem::path& draft, int64_t n, int gamma,
                         int64_t max_new_tokens, const std::string& dtype = "auto");

struct TrainDoc;
using LogFn = std::function<void(const std::string&)>;
// Self-distillation (SpecForge's regenerate_train_data; ../shared/notes/eagle3-training.md §6):
// the first n chat documents keep their prompt (the tokens before the first weight-1 token) and get
// the target's own greedy answer instead of the dataset's (weight 1, <|im_end|> included),
// so the head learns the continuations it will be asked to predict at T = 0. A document whose
// answer reaches max_new_tokens without a stop keeps the dataset's answer. Logs one line.
void regenerate_answers(const std::filesystem::path& target, std::vector<TrainDoc>& docs, int64_t n,
                        int64_t max_new_tokens, const LogFn& log);

}  // namespace ears
