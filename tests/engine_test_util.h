// Helpers shared by the engine tests (engine_drafters_test.cpp, engine_decoding_test.cpp): the
// fixture models (loaded once per process), prompts and requests, decode params, the bookkeeping
// identities, and the memoised plain greedy reference.
#pragma once
#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "decoders/eagle3.h"
#include "decoders/engine.h"
#include "decoders/model.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace ears::test::engine_test {

inline fs::path fixture(const std::string& name) { return test::shared_dir() / "fixtures" / name; }

inline const json& expected(const std::string& model) {
  static std::map<std::string, json> cache;
  auto it = cache.find(model);
  if (it == cache.end()) it = cache.emplace(model, json::parse(test::read_file(fixture(model) / "expected.json"))).first;
  return it->second;
}

// Loaded once per process. qwen3-tiny-bf16 is upcast to float32 at load: a slightly different
// draft model (bf16-rounded weights, tied embeddings).
inline const CausalLM& target() {
  static CausalLM m = CausalLM::load(fixture("qwen3-tiny"), at::kCPU, at::kFloat);
  return m;
}
inline const CausalLM& bf16_draft() {
  static CausalLM m = CausalLM::load(fixture("qwen3-tiny-bf16"), at::kCPU, at::kFloat);
  return m;
}
inline const Eagle3Head& head() {
  static Eagle3Head h = Eagle3Head::load(fixture("eagle3-tiny"), target());
  return h;
}


inline std::vector<int64_t> ids64(const json& j) { return j.get<std::vector<int64_t>>(); }
inline std::vector<int32_t> ids32(const json& j) { return j.get<std::vector<int32_t>>(); }


inline std::vector<int64_t> to_vec(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous().view({-1});
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Prompts of different lengths: the three qwen3-tiny fixture prompts (1, 7, 33 tokens), the
// eagle3-tiny 12-token prompt and two more.
inline std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> p;
  for (const auto& c : expected("qwen3-tiny")["cases"]) p.push_back(ids32(c["prompt_ids"]));
  p.push_back(ids32(expected("eagle3-tiny")["cases"][0]["prompt_ids"]));
  p.push_back({5, 77, 150, 9, 230});
  p.push_back({300, 2, 44, 91, 18, 260, 133, 71, 12, 8, 199, 3, 54, 66, 250, 101, 17, 29, 40, 311});
  return p;
}

inline GenRequest request(const std::vector<int32_t>& prompt, const std::string& key, uint64_t seed = 7) {
  GenRequest r;
  r.prompt = prompt;
  r.run_seed = seed;
  r.key = key;
  return r;
}

inline std::vector<GenRequest> requests(const std::vector<size_t>& which, uint64_t seed = 7) {
  const auto all = prompts();
  std::vector<GenRequest> out;
  for (size_t i : which) out.push_back(request(all.at(i), "req-" + std::to_string(i), seed));
  return out;
}

inline DecodeParams params(VerifierSpec::Kind kind, int gamma, double temperature, int64_t max_new, bool draft_greedy,
                           double beta = 0.1) {
  DecodeParams p;
  p.sampling.temperature = temperature;
  p.gamma = gamma;
  p.max_new_tokens = max_new;
  p.draft_greedy = draft_greedy;
  p.verifier.kind = kind;
  p.verifier.beta = beta;
  return p;
}

template <class T>
T sum(const std::vector<T>& v) {
  return std::accumulate(v.begin(), v.end(), T{0});
}
template <class T, size_t N>
T sum(const std::array<T, N>& v) {
  return std::accumulate(v.begin(), v.end(), T{0});
}

// The bookkeeping identities every result must satisfy.
inline void check_stats(const GenResult& r, int64_t gamma, int64_t max_new, const std::string& ctx) {
  SCOPED_TRACE(ctx);
  const GenStats& s = r.stats;
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(r.finish_reason == "length" || r.finish_reason == "eos") << r.finish_reason;
  EXPECT_EQ(s.emitted(), s.accepted + s.corrections + s.bonus);
  EXPECT_EQ(s.steps, s.corrections + s.bonus);
  ASSERT_EQ(static_cast<int64_t>(s.accept_length_hist.size()), gamma + 2);
  ASSERT_EQ(static_cast<int64_t>(s.accepted_per_position.size()), gamma);
  EXPECT_EQ(sum(s.accept_length_hist), s.steps);
  EXPECT_EQ(s.accept_length_hist[0], 0);  // every step emits at least one token
  int64_t emitted_by_hist = 0;
  for (size_t n = 0; n < s.accept_length_hist.size(); ++n) emitted_by_hist += static_cast<int64_t>(n) * s.accept_length_hist[n];
  EXPECT_EQ(emitted_by_hist, s.emitted());
  EXPECT_EQ(s.accept_length_hist.back(), s.bonus);
  EXPECT_EQ(sum(s.accepted_per_position), s.accepted);
  for (size_t k = 1; k < s.accepted_per_position.size(); ++k)
    EXPECT_LE(s.accepted_per_position[k], s.accepted_per_position[k - 1]);  // accepted prefixes
  EXPECT_EQ(s.drafted, gamma * s.steps);
  EXPECT_LE(s.accepted, s.drafted);
  EXPECT_EQ(sum(s.accepted_by_u), s.accepted);
  EXPECT_EQ(sum(s.pardoned_by_u), s.pardoned);
  EXPECT_EQ(sum(s.drafted_by_u), s.distortion_n);
  EXPECT_LE(s.pardoned, s.accepted);
  // Time in the drafter only with one (the target alone reports none, not its bookkeeping).
  if (gamma == 0) EXPECT_EQ(s.draft_s, 0.0);
  if (gamma > 0 && s.steps > 0) EXPECT_GT(s.draft_s, 0.0);
  // One device->host sync for the prefill and one per step while the request was active (also
  // when it finished before its batch neighbours).
  EXPECT_EQ(s.host_syncs, s.steps + 1);
  const int64_t n_ids = static_cast<int64_t>(r.ids.size());
  EXPECT_LE(n_ids, s.emitted() + 1);
  EXPECT_GT(n_ids, s.emitted() + 1 - (gamma + 1));  // only the last step may be cut short
  EXPECT_LE(n_ids, max_new);
  if (r.finish_reason == "length") {
    EXPECT_EQ(n_ids, max_new);
  }
}

// Plain greedy decoding of the target (Engine without a drafter, T = 0), per prompt, memoised.
inline const std::vector<int32_t>& greedy_reference(const std::vector<int32_t>& prompt, int64_t max_new) {
  static std::map<std::pair<std::vector<int32_t>, int64_t>, std::vector<int32_t>> memo;
  auto key = std::make_pair(prompt, max_new);
  auto it = memo.find(key);
  if (it == memo.end()) {
    Engine plain(target(), nullptr, nullptr);
    auto res = plain.generate({request(prompt, "ref")}, params(VerifierSpec::Baseline, 1, 0.0, max_new, false));
    check_stats(res.at(0), 0, max_new, "plain greedy");
    EXPECT_EQ(res[0].finish_reason, "length");
    it = memo.emplace(key, res[0].ids).first;
  }
  return it->second;
}

}  // namespace ears::test::engine_test
