// The one mapping from user-level decoding settings (an experiment arm, or the command-line
// fields of generate / bench e2e / train's evaluation) onto the engine's DecodeParams. Every
// DecodeParams the harness decodes with is built here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "decoders/engine.h"
#include "harness/config/config.h"

namespace ears::runner {

// The user-level fields, spelled as the config and the command line spell them. The defaults are
// read off DecodeParams' own (SamplingParams, VerifierSpec), so a field left alone changes nothing.
// The config's defaults (harness/config/config.h, torch-free) are the same but for the paper's
// temperature 0.9 (tests: DecodeSettings.DefaultsAreTheEnginesAndTheConfigs).
struct DecodeSettings {
  double temperature = SamplingParams{}.temperature;
  int64_t top_k = SamplingParams{}.top_k;
  double top_p = SamplingParams{}.top_p;
  int gamma = DecodeParams{}.gamma;
  int64_t max_new_tokens = DecodeParams{}.max_new_tokens;
  bool distortion = DecodeParams{}.measure_distortion;
  std::string draft_sampling = DecodeParams{}.draft_greedy ? "greedy" : "sample";  // only "greedy" is checked for
  std::string verifier = to_string(VerifierSpec{}.kind);          // parse_verifier_kind: throws ears::Error on others
  double beta = VerifierSpec{}.beta;
  std::string uncertainty = to_string(VerifierSpec{}.uncertainty);  // parse_uncertainty: throws ears::Error on others
  double eps = VerifierSpec{}.typical_eps, delta = VerifierSpec{}.typical_delta;  // typical
  std::vector<std::string> stop;                                   // stop strings
};

// settings + stop token ids -> DecodeParams.
DecodeParams decode_params(const DecodeSettings& s, std::vector<int32_t> stop_ids);

// An arm's decoding / draft / verifier sections as DecodeSettings.
DecodeSettings decode_settings(const config::ArmSpec& arm);

// An arm's DecodeParams: its settings, its stop strings followed by the dataset's default ones
// (default_stop_strings; each once), and the model set's stop token ids.
DecodeParams decode_params(const config::ArmSpec& arm, const config::DatasetSection& dataset,
                           const std::vector<int32_t>& stop_ids);

}  // namespace ears::runner
