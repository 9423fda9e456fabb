#include "reports/result.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <numeric>

#include "harness/base/error.h"
#include "reports/field_json.h"

namespace ears {
namespace {

using nlohmann::json;

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

// The fields of type T that carry `flag`, as (key, value) in field-list order.
template <class T>
struct Flagged {
  unsigned flag;
  std::vector<std::pair<const char*, T>> out;
  template <class M>
  void operator()(const char* key, const M& member, const char*, unsigned flags) {
    if constexpr (std::is_same_v<M, T>)
      if (flags & flag) out.emplace_back(key, member);
  }
  void derived(const char*, double, const char*) {}
};

template <class T>
std::vector<std::pair<const char*, T>> flagged(const RequestResult& r, unsigned flag) {
  Flagged<T> v{flag, {}};
  RequestResult::fields(r, v);
  return std::move(v.out);
}

}  // namespace

namespace {

// Fails with "<where>: inconsistent result for arm ... request ... repeat ...: <what>".
struct Inconsistency {
  const RequestResult& r;
  const std::string& where;
  [[noreturn]] void operator()(const std::string& what) const {
    fail("{}: inconsistent result for arm '{}' request '{}' repeat {}: {}", where, r.arm, r.request_id, r.repeat,
         what);
  }
};

// Step counters: acceptance within drafting, at most one correction or bonus per step.
void check_counters(const RequestResult& r, const Inconsistency& bad) {
  if (r.accepted > r.drafted) bad(fmt::format("accepted {} > drafted {}", r.accepted, r.drafted));
  if (r.pardoned > r.accepted) bad(fmt::format("pardoned {} > accepted {}", r.pardoned, r.accepted));
  if (r.corrections + r.bonus > r.steps)
    bad(fmt::format("corrections {} + bonus {} > steps {} (at most one per step)", r.corrections, r.bonus, r.steps));
  if (r.gamma > 0 && r.drafted > r.steps * r.gamma)
    bad(fmt::format("drafted {} > steps {} x gamma {}", r.drafted, r.steps, r.gamma));
  if (r.output_tokens > r.emitted() + 1)
    bad(fmt::format("output_tokens {} > emitted {} (accepted + corrections + bonus) + 1 prefill token",
                    r.output_tokens, r.emitted()));
}

// accepted_per_position sums to accepted and falls with the position (acceptance is a prefix);
// accept_length_hist counts every step and every emitted token.
void check_acceptance_shape(const RequestResult& r, const Inconsistency& bad) {
  const auto& per_pos = r.accepted_per_position;
  if (!per_pos.empty() && sum(per_pos) != r.accepted)
    bad(fmt::format("sum(accepted_per_position) = {} != accepted {}", sum(per_pos), r.accepted));
  for (size_t k = 0; k < per_pos.size(); ++k) {
    if (per_pos[k] < 0 || per_pos[k] > r.steps)
      bad(fmt::format("accepted_per_position[{}] = {} outside [0, steps {}]", k, per_pos[k], r.steps));
    if (k > 0 && per_pos[k] > per_pos[k - 1])
      bad(fmt::format("accepted_per_position[{}] > accepted_per_position[{}] (acceptance is a prefix)", k, k - 1));
  }
  if (r.accept_length_hist.empty()) return;
  int64_t n = 0, tokens = 0;
  for (size_t k = 0; k < r.accept_length_hist.size(); ++k) {
    if (r.accept_length_hist[k] < 0) bad(fmt::format("accept_length_hist[{}] is negative", k));
    n += r.accept_length_hist[k];
    tokens += r.accept_length_hist[k] * static_cast<int64_t>(k);
  }
  if (n != r.steps) bad(fmt::format("sum(accept_length_hist) = {} != steps {}", n, r.steps));
  if (tokens != r.emitted())
    bad(fmt::format("tokens in accept_length_hist = {} != emitted {} = accepted {} + corrections {} + bonus {}",
                    tokens, r.emitted(), r.accepted, r.corrections, r.bonus));
}

// The deciles count the positions the verifier judged (up to and including the first rejection
// of each step), so they cover every accepted token but not every drafted one.
void check_uncertainty_deciles(const RequestResult& r, const Inconsistency& bad) {
  const int64_t drafted_u = sum(r.drafted_by_uncertainty);
  if (drafted_u > r.drafted) bad(fmt::format("sum(drafted_by_uncertainty) = {} > drafted {}", drafted_u, r.drafted));
  if (drafted_u != 0 && sum(r.accepted_by_uncertainty) != r.accepted)
    bad(fmt::format("sum(accepted_by_uncertainty) = {} != accepted {}", sum(r.accepted_by_uncertainty), r.accepted));
  for (int d = 0; d < kUncertaintyDeciles; ++d) {
    const int64_t dr = r.drafted_by_uncertainty[d], ac = r.accepted_by_uncertainty[d], pa = r.pardoned_by_uncertainty[d];
    if (dr < 0 || ac < 0 || pa < 0) bad(fmt::format("uncertainty bucket {} is negative", d));
    if (ac > dr && drafted_u != 0) bad(fmt::format("accepted_by_uncertainty[{}] > drafted_by_uncertainty[{}]", d, d));
    if (pa > ac && drafted_u != 0) bad(fmt::format("pardoned_by_uncertainty[{}] > accepted_by_uncertainty[{}]", d, d));
  }
}

}  // namespace

void RequestResult::validate(const std::string& where) const {
  const Inconsistency bad{*this, where};
  if (arm.empty()) fail("{}: result has an empty 'arm'", where);
  if (request_id.empty()) fail("{}: result of arm '{}' has an empty 'request_id'", where, arm);
  if (repeat < 0) bad("repeat < 0");
  for (auto [name, v] : flagged<int64_t>(*this, kFieldNonNegative))
    if (v < 0) bad(fmt::format("{} = {} is negative", name, v));
  if (gamma < 0) bad("gamma < 0");
  for (auto [name, v] : flagged<std::vector<int64_t>>(*this, kFieldDeciles))
    if (v.size() != kUncertaintyDeciles) bad("uncertainty histograms must have 10 entries");
  if (!ok()) return;  // a failed request may stop mid-step: only the basic checks apply

  for (auto [name, v] : flagged<double>(*this, kFieldNonNegative))
    if (!(v >= 0)) bad(fmt::format("{} = {} is negative or NaN", name, v));
  check_counters(*this, bad);
  check_acceptance_shape(*this, bad);
  check_uncertainty_deciles(*this, bad);
}

void to_json(json& j, const RequestResult& r) { j = field_json::to_object(r); }

void from_json(const json& j, RequestResult& r) {
  if (!j.is_object()) fail("result is not a JSON object (got {})", j.type_name());
  field_json::from_object<RequestResult, field_json::ResultReader>(j, r);
}

std::string result_to_jsonl_line(const RequestResult& r) {
  json j = r;
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace ears
