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

void RequestResult::validate(const std::string& where) const {
  auto bad = [&](const std::string& what) {
    fail("{}: inconsistent result for arm '{}' request '{}' repeat {}: {}", where, arm, request_id, repeat, what);
  };
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
