#include "reports/result.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <numeric>

#include "harness/base/error.h"

namespace ears {
namespace {

using nlohmann::json;

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

json finite_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

// Typed reads: missing key -> default; wrong type -> ears::Error naming the key.
template <class T>
void read(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    fail("result key '{}' has the wrong type ({}); expected {}", key, it->type_name(),
         std::is_same_v<T, std::string> ? "a string"
         : std::is_same_v<T, bool>      ? "a boolean"
         : std::is_arithmetic_v<T>      ? "a number"
                                        : "an array of integers");
  }
}

template <class T>
void read_required(const json& j, const char* key, T& out) {
  if (!j.contains(key)) fail("result is missing the required key '{}'", key);
  read(j, key, out);
}

void read_buckets(const json& j, const char* key, std::vector<int64_t>& out) {
  read(j, key, out);
  if (out.empty()) out.assign(kUncertaintyDeciles, 0);
  if (out.size() != kUncertaintyDeciles)
    fail("result key '{}' has {} entries; expected {} (deciles of u)", key, out.size(), kUncertaintyDeciles);
}

}  // namespace

void RequestResult::validate(const std::string& where) const {
  auto bad = [&](const std::string& what) {
    fail("{}: inconsistent result for arm '{}' request '{}' repeat {}: {}", where, arm, request_id, repeat, what);
  };
  if (arm.empty()) fail("{}: result has an empty 'arm'", where);
  if (request_id.empty()) fail("{}: result of arm '{}' has an empty 'request_id'", where, arm);
  if (repeat < 0) bad("repeat < 0");
  for (auto [name, v] : {std::pair{"prompt_tokens", prompt_tokens}, {"output_tokens", output_tokens},
                         {"steps", steps}, {"drafted", drafted}, {"accepted", accepted},
                         {"corrections", corrections}, {"bonus", bonus}, {"pardoned", pardoned},
                         {"distortion_positions", distortion_positions},
                         {"uncertainty_count", uncertainty_count}})
    if (v < 0) bad(fmt::format("{} = {} is negative", name, v));
  if (gamma < 0) bad("gamma < 0");
  if (drafted_by_uncertainty.size() != kUncertaintyDeciles || accepted_by_uncertainty.size() != kUncertaintyDeciles ||
      pardoned_by_uncertainty.size() != kUncertaintyDeciles)
    bad("uncertainty histograms must have 10 entries");
  if (!ok()) return;  // a failed request may stop mid-step: only the basic checks apply

  for (auto [name, v] : {std::pair{"latency_s", latency_s}, {"ttft_s", ttft_s}, {"prefill_s", prefill_s},
                         {"draft_s", draft_s}, {"verify_s", verify_s}, {"other_s", other_s},
                         {"distortion_tv_sum", distortion_tv_sum}, {"uncertainty_sum", uncertainty_sum}})
    if (!(v >= 0)) bad(fmt::format("{} = {} is negative or NaN", name, v));

  if (accepted > drafted) bad(fmt::format("accepted {} > drafted {}", accepted, drafted));
  if (pardoned > accepted) bad(fmt::format("pardoned {} > accepted {}", pardoned, accepted));
  if (corrections + bonus > steps)
    bad(fmt::format("corrections {} + bonus {} > steps {} (at most one per step)", corrections, bonus, steps));
  if (gamma > 0 && drafted > steps * gamma)
    bad(fmt::format("drafted {} > steps {} x gamma {}", drafted, steps, gamma));
  if (output_tokens > emitted() + 1)
    bad(fmt::format("output_tokens {} > emitted {} (accepted + corrections + bonus) + 1 prefill token",
                    output_tokens, emitted()));
  if (!accepted_per_position.empty()) {
    if (sum(accepted_per_position) != accepted)
      bad(fmt::format("sum(accepted_per_position) = {} != accepted {}", sum(accepted_per_position), accepted));
    for (size_t k = 0; k < accepted_per_position.size(); ++k) {
      if (accepted_per_position[k] < 0 || accepted_per_position[k] > steps)
        bad(fmt::format("accepted_per_position[{}] = {} outside [0, steps {}]", k, accepted_per_position[k], steps));
      if (k > 0 && accepted_per_position[k] > accepted_per_position[k - 1])
        bad(fmt::format("accepted_per_position[{}] > accepted_per_position[{}] (acceptance is a prefix)", k, k - 1));
    }
  }
  if (!accept_length_hist.empty()) {
    int64_t n = 0, tokens = 0;
    for (size_t k = 0; k < accept_length_hist.size(); ++k) {
      if (accept_length_hist[k] < 0) bad(fmt::format("accept_length_hist[{}] is negative", k));
      n += accept_length_hist[k];
      tokens += accept_length_hist[k] * static_cast<int64_t>(k);
    }
    if (n != steps) bad(fmt::format("sum(accept_length_hist) = {} != steps {}", n, steps));
    if (tokens != emitted())
      bad(fmt::format("tokens in accept_length_hist = {} != emitted {} = accepted {} + corrections {} + bonus {}",
                      tokens, emitted(), accepted, corrections, bonus));
  }
  const int64_t drafted_u = sum(drafted_by_uncertainty);
  // The deciles count the positions the verifier judged (up to and including the first
  // rejection of each step), so they cover every accepted token but not every drafted one.
  if (drafted_u > drafted)
    bad(fmt::format("sum(drafted_by_uncertainty) = {} > drafted {}", drafted_u, drafted));
  if (drafted_u != 0 && sum(accepted_by_uncertainty) != accepted)
    bad(fmt::format("sum(accepted_by_uncertainty) = {} != accepted {}", sum(accepted_by_uncertainty), accepted));
  for (int d = 0; d < kUncertaintyDeciles; ++d) {
    if (drafted_by_uncertainty[d] < 0 || accepted_by_uncertainty[d] < 0 || pardoned_by_uncertainty[d] < 0)
      bad(fmt::format("uncertainty bucket {} is negative", d));
    if (accepted_by_uncertainty[d] > drafted_by_uncertainty[d] && drafted_u != 0)
      bad(fmt::format("accepted_by_uncertainty[{}] > drafted_by_uncertainty[{}]", d, d));
    if (pardoned_by_uncertainty[d] > accepted_by_uncertainty[d] && drafted_u != 0)
      bad(fmt::format("pardoned_by_uncertainty[{}] > accepted_by_uncertainty[{}]", d, d));
  }
}

void to_json(json& j, const RequestResult& r) {
  j = json::object();
  j["run_id"] = r.run_id;
  j["arm"] = r.arm;
  j["request_id"] = r.request_id;
  j["repeat"] = r.repeat;
  j["seed"] = r.seed;
  j["category"] = r.category;
  j["prompt_tokens"] = r.prompt_tokens;
  j["output_tokens"] = r.output_tokens;
  j["latency_s"] = finite_or_null(r.latency_s);
  j["ttft_s"] = finite_or_null(r.ttft_s);
  j["prefill_s"] = finite_or_null(r.prefill_s);
  j["draft_s"] = finite_or_null(r.draft_s);
  j["verify_s"] = finite_or_null(r.verify_s);
  j["other_s"] = finite_or_null(r.other_s);
  j["gamma"] = r.gamma;
  j["steps"] = r.steps;
  j["drafted"] = r.drafted;
  j["accepted"] = r.accepted;
  j["corrections"] = r.corrections;
  j["bonus"] = r.bonus;
  j["pardoned"] = r.pardoned;
  j["accepted_per_position"] = r.accepted_per_position;
  j["accept_length_hist"] = r.accept_length_hist;
  j["drafted_by_uncertainty"] = r.drafted_by_uncertainty;
  j["accepted_by_uncertainty"] = r.accepted_by_uncertainty;
  j["pardoned_by_uncertainty"] = r.pardoned_by_uncertainty;
  j["distortion_tv_sum"] = finite_or_null(r.distortion_tv_sum);
  j["distortion_positions"] = r.distortion_positions;
  j["uncertainty_sum"] = finite_or_null(r.uncertainty_sum);
  j["uncertainty_count"] = r.uncertainty_count;
  j["text"] = r.text;
  if (!r.output_ids.empty()) j["output_ids"] = r.output_ids;
  j["has_score"] = r.has_score;
  j["correct"] = r.correct;
  j["strict_correct"] = r.strict_correct;
  j["flexible_correct"] = r.flexible_correct;
  j["em"] = finite_or_null(r.em);
  j["f1"] = finite_or_null(r.f1);
  j["error"] = r.error;
}

void from_json(const json& j, RequestResult& r) {
  if (!j.is_object()) fail("result is not a JSON object (got {})", j.type_name());
  r = RequestResult{};
  read(j, "run_id", r.run_id);
  read_required(j, "arm", r.arm);
  read_required(j, "request_id", r.request_id);
  read(j, "repeat", r.repeat);
  read(j, "seed", r.seed);
  read(j, "category", r.category);
  read(j, "prompt_tokens", r.prompt_tokens);
  read_required(j, "output_tokens", r.output_tokens);
  read_required(j, "latency_s", r.latency_s);
  read(j, "ttft_s", r.ttft_s);
  read(j, "prefill_s", r.prefill_s);
  read(j, "draft_s", r.draft_s);
  read(j, "verify_s", r.verify_s);
  read(j, "other_s", r.other_s);
  read(j, "gamma", r.gamma);
  read(j, "steps", r.steps);
  read(j, "drafted", r.drafted);
  read(j, "accepted", r.accepted);
  read(j, "corrections", r.corrections);
  read(j, "bonus", r.bonus);
  read(j, "pardoned", r.pardoned);
  read(j, "accepted_per_position", r.accepted_per_position);
  read(j, "accept_length_hist", r.accept_length_hist);
  read_buckets(j, "drafted_by_uncertainty", r.drafted_by_uncertainty);
  read_buckets(j, "accepted_by_uncertainty", r.accepted_by_uncertainty);
  read_buckets(j, "pardoned_by_uncertainty", r.pardoned_by_uncertainty);
  read(j, "distortion_tv_sum", r.distortion_tv_sum);
  read(j, "distortion_positions", r.distortion_positions);
  read(j, "uncertainty_sum", r.uncertainty_sum);
  read(j, "uncertainty_count", r.uncertainty_count);
  read(j, "text", r.text);
  read(j, "output_ids", r.output_ids);
  read(j, "has_score", r.has_score);
  read(j, "correct", r.correct);
  read(j, "strict_correct", r.strict_correct);
  read(j, "flexible_correct", r.flexible_correct);
  read(j, "em", r.em);
  read(j, "f1", r.f1);
  read(j, "error", r.error);
  // A null latency (NaN on the writer's side) must not pass as 0.
  if (j.contains("latency_s") && j["latency_s"].is_null()) r.latency_s = std::nan("");
}

std::string result_to_jsonl_line(const RequestResult& r) {
  json j = r;
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace ears
