// Turns user-level model settings (paths, draft kind, dtype, device) into loaded objects:
// the target CausalLM, its tokenizer, and a Drafter (eagle3 | model | none). Shared by the
// generate/forward commands and the experiment runner.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "decoders/draft.h"
#include "decoders/eagle3.h"
#include "decoders/model.h"
#include "decoders/tokenizer.h"

namespace ears {

struct ModelSetup {
  std::string target_path;
  std::string dtype = "auto";       // auto = the checkpoint's torch_dtype
  std::string device = "cpu";
  std::string tokenizer_path;       // default: target_path
  std::string draft_kind = "none";  // eagle3 | model | none
  std::string draft_path;
  std::optional<std::vector<int>> aux_layers;
  std::string aux_layer_convention = "hf";  // hf | sglang
};

struct LoadedModels {
  std::unique_ptr<CausalLM> target;
  std::unique_ptr<CausalLM> draft_model;  // kind model
  std::unique_ptr<Eagle3Head> head;       // kind eagle3
  std::unique_ptr<Drafter> drafter;       // null for kind none
  std::unique_ptr<Tokenizer> tokenizer;   // null when tokenizer_path has no tokenizer.json and !need_tokenizer
  double load_s = 0;
};

LoadedModels load_models(const ModelSetup& setup, bool need_tokenizer);

// Stop token ids for generation: the tokenizer's (<|im_end|>, <|endoftext|>, eos) plus the
// target config's eos_token_id(s).
std::vector<int32_t> stop_token_ids(const LoadedModels& models);

}  // namespace ears
