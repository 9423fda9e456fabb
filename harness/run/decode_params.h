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
// DecodeParams' own (SamplingParams, VerifierSpec), so a field left alone changes nothing.
struct DecodeSettings {
  double temperature = 1;
  int64_t top_k = 0;
  double top_p = 1;
  int gamma = 5;
  int64_t max_new_tokens = 256;
  bool distortion = true;                  // DecodeParams::measure_distortion
  std::string draft_sampling = "sample";   // sample | greedy (only "greedy" is checked for)
  std::string verifier = "baseline";       // parse_verifier_kind: throws ears::Error on others
  double beta = 0.1;
  std::string uncertainty = "max_prob";    // parse_uncertainty: throws ears::Error on others
  double eps = 0.09, delta = 0.3;          // typical
  std::vector<std::string> stop;           // stop strings
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
