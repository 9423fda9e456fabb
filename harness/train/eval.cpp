#include "harness/train/eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/scoring.h"
#include "datasets/synth_gsm.h"
#include "decoders/engine.h"
#include "decoders/runtime.h"
#include "decoders/tokenizer.h"
#include "harness/base/error.h"
#include "harness/run/decode_params.h"
#include "harness/run/model_setup.h"
#include "harness/train/corpus.h"
#include "harness/train/loop.h"

namespace ears {

namespace fs = std::filesystem;

namespace {

// Greedy decoding (T = 0) of gamma draft tokens a step (0: target alone), stopping at the
// tokenizer's and the config's stop ids.
DecodeParams greedy_params(const LoadedModels& m, int gamma, int64_t max_new_tokens) {
  runner::DecodeSettings s;
  s.temperature = 0;
  s.gamma = gamma;
  s.max_new_tokens = max_new_tokens;
  s.draft_sampling = "greedy";
  s.verifier = "greedy";
  s.distortion = false;
  return runner::decode_params(s, stop_token_ids(m));
}

// The target (and, with a draft directory, its EAGLE-3 head) on the CPU, with its tokenizer.
LoadedModels load_pair(const fs::path& target_dir, const fs::path& draft_dir, const std::string& dtype) {
  ModelSetup setup;
  setup.target_path = target_dir.string();
  setup.dtype = dtype;
  if (!draft_dir.empty()) {
    setup.draft_kind = "eagle3";
    setup.draft_path = draft_dir.string();
  }
  return load_models(setup, /*need_tokenizer=*/true);
}

}  // namespace

EvalResult evaluate_pair(const fs::path& target_dir, const fs::path& draft_dir, int64_t n, int gamma, int64_t max_new_tokens,
                         const std::string& dtype) {
  const LoadedModels m = load_pair(target_dir, draft_dir, dtype);
  const Tokenizer& tok = *m.tokenizer;
  const auto problems = synth_gsm_pairs(static_cast<std::size_t>(n), 0, "test");
  const DecodeParams dp = greedy_params(m, m.drafter ? gamma : 0, max_new_tokens);
  Engine engine(*m.target, m.drafter.get(), &tok);
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

void regenerate_answers(const fs::path& target_dir, std::vector<TrainDoc>& docs, int64_t n, int64_t max_new_tokens,
                        const LogFn& log) {
  const double t0 = now_s();
  const LoadedModels m = load_pair(target_dir, "", "auto");
  const DecodeParams dp = greedy_params(m, 0, max_new_tokens);
  Engine engine(*m.target, nullptr, m.tokenizer.get());
  const std::size_t count = std::min(docs.size(), static_cast<std::size_t>(std::max<int64_t>(n, 0))), batch = 16;
  std::size_t replaced = 0, tokens = 0;
  for (std::size_t i = 0; i < count; i += batch) {
    std::vector<GenRequest> reqs;
    std::vector<std::size_t> prompt_len;
    for (std::size_t j = i; j < std::min(count, i + batch); ++j) {
      const TrainDoc& d = docs[j];
      const auto first_answer = std::find(d.weight.begin(), d.weight.end(), 1.0f);
      prompt_len.push_back(static_cast<std::size_t>(first_answer - d.weight.begin()));
      if (prompt_len.back() == 0 || first_answer == d.weight.end())
        fail("regenerate: chat document {} has no prompt before its answer (prompt tokens need a weight below 1)", j);
      GenRequest g;
      g.prompt.assign(d.ids.begin(), d.ids.begin() + static_cast<std::ptrdiff_t>(prompt_len.back()));
      g.key = std::to_string(j);
      reqs.push_back(std::move(g));
    }
    const std::vector<GenResult> out = engine.generate(reqs, dp);
    for (std::size_t k = 0; k < out.size(); ++k) {
      if (out[k].finish_reason != "eos") continue;  // cut at max_new_tokens: keep the dataset's answer
      TrainDoc& d = docs[i + k];
      d.ids.resize(prompt_len[k]);
      d.weight.resize(prompt_len[k]);
      d.ids.insert(d.ids.end(), out[k].ids.begin(), out[k].ids.end());
      d.weight.insert(d.weight.end(), out[k].ids.size(), 1.0f);
      ++replaced;
      tokens += out[k].ids.size();
    }
  }
  emit(log, fmt::format("regenerate: the target's greedy answers replace {} of the first {} chat documents ({} tokens, "
                        "{:.1f} s); {} keep the dataset's answer (no stop within {} tokens)",
                        replaced, count, tokens, now_s() - t0, count - replaced, max_new_tokens));
}

}  // namespace ears
