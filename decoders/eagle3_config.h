// An EAGLE-3 head's config.json, in either layout a user downloads:
//   - eagle: the layer's keys at the top level, the aux ids in eagle_config (architectures
//     LlamaForCausalLMEagle3, as SafeAILab/EAGLE, SpecForge and sglang write it), or at the top
//     level, where vLLM's speculators conversion puts them (both: they must be the same list);
//   - speculators: vLLM's speculators library (speculators_model_type "eagle3", e.g. RedHatAI's
//     *speculator.eagle3 heads): the layer's keys under transformer_layer_config, the head's own
//     (draft_vocab_size, target_hidden_size, eagle_aux_hidden_state_layer_ids, norm_before_residual,
//     ...) at the top level. Its aux ids are vLLM's: HF hidden_states indices, as ours.
// What the head's layer computes (decoders/eagle3.h) is the same in both but for two switches
// speculators added and vLLM reads, norm_before_residual and norm_before_fc. Keys that would change the math in ways the head
// does not implement are refused with a one-line error naming the file and the key, never ignored.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "decoders/model_config.h"

namespace ears {

struct Eagle3Config {
  enum class Layout { eagle, speculators };
  Layout layout = Layout::eagle;
  ModelConfig layer;                         // the decoder layer (Llama flags; vocab_size = the target's)
  int64_t draft_vocab = 0;                   // draft_vocab_size (default: layer.vocab_size)
  int64_t target_hidden = 0;                 // target_hidden_size (default: layer.hidden_size)
  std::optional<std::vector<int>> aux_ids;   // as the file gives them (eagle_config / top level)
  // aux_ids came from eagle_config (the ids sglang reads, +1 under its convention), not only from
  // the top-level key (vLLM's, HF hidden_states ids: the speculators layout, or vLLM's conversion of
  // an EAGLE config). An eagle-layout file may hold both; they must then agree.
  bool aux_ids_in_eagle_config = false;
  // The layer's first residual is hidden_norm(g) instead of g (speculators' norm_before_residual;
  // vLLM reads the key in either layout: absent, false in the eagle layout, true in speculators').
  bool norm_before_residual = false;
  // One RMSNorm (weight input_norm.weight, [n_aux * target_hidden]) over the concatenated aux
  // features before fc (speculators' norm_before_fc, e.g. RedHatAI's gpt-oss-20b head).
  bool norm_before_fc = false;

  // `origin` names the file in errors.
  static Eagle3Config parse(const std::string& json_text, const std::string& origin);
  static Eagle3Config load(const std::filesystem::path& dir);  // <dir>/config.json
};

const char* layout_name(Eagle3Config::Layout layout);

}  // namespace ears
