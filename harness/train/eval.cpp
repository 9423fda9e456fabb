#include "harness/train/eval.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/scoring.h"
#include "datasets/synth_gsm.h"
#include "decoders/eagle3.h"
#include "decoders/engine.h"
#include "decoders/runtime.h"
#include "decoders/tokenizer.h"
#include "harness/run/decode_params.h"
#include "harness/train/corpus.h"

namespace ears {

namespace fs = std::filesystem;

EvalResult evaluate_pair(const fs::path& target_dir, const fs::path& draft_dir, int64_t n, int gamma, int64_t max_new_tokens,
                         const std::string& dtype) {
  std::optional<c10::ScalarType> dt;
  if (dtype != "auto") dt = parse_dtype(dtype, "eval dtype");
  const CausalLM target = CausalLM::load(target_dir, c10::Device(c10::kCPU), dt);
  const Tokenizer tok = Tokenizer::load(target_dir);
  std::unique_ptr<Eagle3Head> head;
  std::unique_ptr<Drafter> drafter;
  if (!draft_dir.empty()) {
    head = std::make_unique<Eagle3Head>(Eagle3Head::load(draft_dir, target));
    drafter = make_eagle3_drafter(*head);
  }
  const auto problems = synth_gsm_pairs(static_cast<std::size_t>(n), 0, "test");
  runner::DecodeSettings s;
  s.temperature = 0;
  s.gamma = drafter ? gamma : 0;
  s.max_new_tokens = max_new_tokens;
  s.draft_sampling = "greedy";
  s.verifier = "greedy";
  s.distortion = false;
  std::vector<int32_t> stop_ids = tok.stop_token_ids();
  for (int64_t e : target.config().eos_token_ids)
    if (std::find(stop_ids.begin(), stop_ids.end(), e) == stop_ids.end()) stop_ids.push_back(static_cast<int32_t>(e));
  const DecodeParams dp = runner::decode_params(s, std::move(stop_ids));
  Engine engine(target, drafter.get(), &tok);
  EvalResult res;
  int64_t correct = 0, steps = 0, emitted = 0, tokens = 0;
  double seconds = 0;
  const std::size_t batch = 16;
  for (std::size_t i = 0; i < problems.size(); i += batch) {
    std::vector<GenRequest> reqs;
    for (std::size_t j = i; j < std::min(problems.size(), i + batch); ++j) {
      GenRequest g;
      g.prompt = tok.encode(qwen3_chat_prompt(synth_user_message(problems[j].first), false));
      g.key = std::to_string(j);
      reqs.push_back(std::move(g));
    }
    const double t0 = now_s();
    const std::vector<GenResult> out = engine.generate(reqs, dp);
    seconds += now_s() - t0;
    for (std::size_t j = 0; j < out.size(); ++j) {
      const std::string gold = gsm8k_gold_from_answer(problems[i + j].second);
      if (score("gsm8k", out[j].text, {gold}).strict) ++correct;
      steps += out[j].stats.steps;
      emitted += out[j].stats.emitted();
      tokens += static_cast<int64_t>(out[j].ids.size());
    }
  }
  res.n = static_cast<int64_t>(problems.size());
  res.accuracy = res.n ? static_cast<double>(correct) / static_cast<double>(res.n) : 0;
  res.tau = steps ? static_cast<double>(emitted) / static_cast<double>(steps) : 0;
  res.tokens_per_s = seconds > 0 ? static_cast<double>(tokens) / seconds : 0;
  return res;
}

}  // namespace ears
