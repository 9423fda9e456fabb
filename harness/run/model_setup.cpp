#include "harness/run/model_setup.h"

#include <algorithm>
#include <filesystem>

#include "decoders/runtime.h"
#include "harness/base/error.h"
#include "harness/base/strings.h"
#include "harness/config/config.h"

namespace ears {

LoadedModels load_models(const ModelSetup& s, bool need_tokenizer) {
  const double t0 = now_s();
  LoadedModels m;
  if (s.target_path.empty()) fail("target.path is empty; point it at a Hugging Face checkpoint directory");
  if (!std::filesystem::is_directory(s.target_path))
    fail("target checkpoint directory '{}' does not exist; fix target.path (or --target)", s.target_path);
  const c10::Device device = parse_device(s.device, "target.device");
  std::optional<c10::ScalarType> dtype;
  if (s.dtype != "auto" && !s.dtype.empty()) dtype = parse_dtype(s.dtype, "target.dtype");
  m.target = std::make_unique<CausalLM>(CausalLM::load(s.target_path, device, dtype));

  const std::string tok = s.tokenizer_path.empty() ? s.target_path : s.tokenizer_path;
  const bool has_tok = std::filesystem::exists(std::filesystem::path(tok) / "tokenizer.json") ||
                       (std::filesystem::is_regular_file(tok));
  if (has_tok) {
    m.tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(tok));
    // Ids the embedding cannot look up would abort a run midway ("index out of range in self").
    if (m.tokenizer->vocab_size() > m.target->config().vocab_size)
      fail("tokenizer '{}' has ids up to {} but the target's config.json has vocab_size {}; use the tokenizer "
           "that belongs to this checkpoint (target.tokenizer / --tokenizer)",
           tok, m.tokenizer->vocab_size() - 1, m.target->config().vocab_size);
  } else if (need_tokenizer) {
    fail("no tokenizer.json in '{}'; pass --tokenizer DIR (or target.tokenizer) pointing at one", tok);
  }

  if (s.draft_kind == "eagle3") {
    if (s.draft_path.empty()) fail("draft.kind eagle3 needs draft.path (an EAGLE-3 checkpoint directory)");
    if (!std::filesystem::is_directory(s.draft_path))
      fail("draft checkpoint directory '{}' does not exist; fix draft.path (or --draft)", s.draft_path);
    Eagle3Options opt;
    opt.aux_layers = s.aux_layers;
    if (!contains(config::kAuxLayerConventions, s.aux_layer_convention))
      fail("draft.aux_layer_convention '{}' is not one of: {}", s.aux_layer_convention,
           join(config::kAuxLayerConventions, ", "));
    if (s.aux_layer_convention == "sglang") opt.convention = AuxLayerConvention::Sglang;
    m.head = std::make_unique<Eagle3Head>(Eagle3Head::load(s.draft_path, *m.target, opt));
    m.drafter = make_eagle3_drafter(*m.head);
  } else if (s.draft_kind == "model") {
    if (s.draft_path.empty()) fail("draft.kind model needs draft.path (a causal LM checkpoint directory)");
    if (!std::filesystem::is_directory(s.draft_path))
      fail("draft checkpoint directory '{}' does not exist; fix draft.path (or --draft)", s.draft_path);
    if (std::filesystem::equivalent(s.draft_path, s.target_path)) {
      m.drafter = make_model_drafter(*m.target, m.target->config().vocab_size);  // self-draft
    } else {
      m.draft_model = std::make_unique<CausalLM>(CausalLM::load(s.draft_path, device, dtype));
      m.drafter = make_model_drafter(*m.draft_model, m.target->config().vocab_size);
    }
  } else if (s.draft_kind != "none") {
    fail("draft.kind '{}' is not one of: {}", s.draft_kind, join(config::kDraftKinds, ", "));
  }
  m.load_s = now_s() - t0;
  return m;
}

std::vector<int32_t> stop_token_ids(const LoadedModels& m) {
  std::vector<int32_t> ids;
  if (m.tokenizer) ids = m.tokenizer->stop_token_ids();
  for (int64_t e : m.target->config().eos_token_ids)
    if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(static_cast<int32_t>(e));
  return ids;
}

}  // namespace ears
