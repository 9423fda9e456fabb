#include "harness/run/decode_params.h"

#include <algorithm>

#include "datasets/dataset.h"

namespace ears::runner {

DecodeParams decode_params(const DecodeSettings& s, std::vector<int32_t> stop_ids) {
  DecodeParams p;
  p.sampling.temperature = s.temperature;
  p.sampling.top_k = s.top_k;
  p.sampling.top_p = s.top_p;
  p.gamma = s.gamma;
  p.max_new_tokens = s.max_new_tokens;
  p.measure_distortion = s.distortion;
  p.draft_greedy = s.draft_sampling == "greedy";
  p.verifier.kind = parse_verifier_kind(s.verifier);
  p.verifier.beta = s.beta;
  p.verifier.uncertainty = parse_uncertainty(s.uncertainty);
  p.verifier.typical_eps = s.eps;
  p.verifier.typical_delta = s.delta;
  p.stop_strings = s.stop;
  p.stop_ids = std::move(stop_ids);
  return p;
}

DecodeSettings decode_settings(const config::ArmSpec& a) {
  const auto& d = a.decoding;
  DecodeSettings s;
  s.temperature = d.temperature;
  s.top_k = d.top_k;
  s.top_p = d.top_p;
  s.gamma = d.gamma;
  s.max_new_tokens = d.max_new_tokens;
  s.distortion = d.distortion;
  s.draft_sampling = a.draft.sampling;
  s.verifier = a.verifier.type;
  s.beta = a.verifier.beta;
  s.uncertainty = a.verifier.uncertainty;
  s.eps = a.verifier.eps;
  s.delta = a.verifier.delta;
  s.stop = d.stop;
  return s;
}

DecodeParams decode_params(const config::ArmSpec& a, const config::DatasetSection& ds, const std::vector<int32_t>& stop_ids) {
  DecodeSettings s = decode_settings(a);
  for (const auto& stop : default_stop_strings(ds.name, ds.n_shot))
    if (std::find(s.stop.begin(), s.stop.end(), stop) == s.stop.end()) s.stop.push_back(stop);
  return decode_params(s, stop_ids);
}

}  // namespace ears::runner
