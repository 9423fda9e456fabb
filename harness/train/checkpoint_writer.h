// What a trained (or random) checkpoint is on disk: the ModelConfig of the tiny Qwen3 target and
// of its EAGLE-3 head, their Hugging Face config.json, and at::Tensor maps -> model.safetensors
// (through the torch-free harness/train/safetensors_writer.h). The layout is the one
// decoders/model.h CausalLM::load and decoders/eagle3.h Eagle3Head::load read (see
// ../shared/fixtures/README.md and ../shared/notes/eagle3-training.md).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "decoders/model_config.h"
#include "harness/train/draft_vocab.h"
#include "harness/train/safetensors_writer.h"

namespace ears {

using ParamMap = std::map<std::string, at::Tensor>;  // Hugging Face tensor names

// ---- tensors -> safetensors ----------------------------------------------------------------

// A tensor's bytes (copied to the CPU, contiguous) with its safetensors dtype string.
SafetensorsBlob safetensors_blob(const at::Tensor& t);
// Writes every tensor; floating tensors are converted to `float_dtype` when given (bf16 save).
void save_safetensors(const std::filesystem::path& file, const ParamMap& tensors,
                      std::optional<c10::ScalarType> float_dtype = std::nullopt);

// ---- the Qwen3 target ------------------------------------------------------------------------

struct TargetArch {
  int64_t hidden = 256, layers = 6, heads = 4, kv_heads = 2, head_dim = 64, intermediate = 768;
  int64_t max_position_embeddings = 1024;
  double rope_theta = 1000000.0, rms_norm_eps = 1e-6;
  bool tie_word_embeddings = true;
};
ModelConfig qwen3_config(const TargetArch& arch, int64_t vocab_size, int64_t eos_token_id);
// config.json text (Qwen3ForCausalLM, torch_dtype as given).
std::string qwen3_config_json(const ModelConfig& c, c10::ScalarType torch_dtype);

// Writes config.json + model.safetensors (dtype save_dtype) into dir (created).
void save_qwen3(const std::filesystem::path& dir, const ParamMap& p, const ModelConfig& c,
                c10::ScalarType save_dtype = c10::kBFloat16);
// save_qwen3 of the untrained weights init_qwen3_params(c, seed) (harness/train/target.h) in
// bf16: a random checkpoint of any shape (bench models; same bytes for the same seed).
void save_random_qwen3(const std::filesystem::path& dir, const ModelConfig& c, uint64_t seed);

// ---- the EAGLE-3 head ------------------------------------------------------------------------

struct Eagle3Arch {
  int64_t heads = 4, kv_heads = 2, head_dim = 64, intermediate = 768;
  std::vector<int> aux_layers;  // HF hidden_states ids; empty = train_eagle3's default (resolve_aux_layers)
};
// The head's ModelConfig (hidden = target hidden, 1 layer, the whole target vocabulary; train_eagle3
// sets vocab_size to a reduced draft vocabulary's size).
ModelConfig eagle3_config(const Eagle3Arch& arch, const ModelConfig& target);
std::string eagle3_config_json(const ModelConfig& head, const ModelConfig& target, const std::vector<int>& aux_layers,
                               c10::ScalarType torch_dtype);

// config.json + model.safetensors: the tensors of `p` (train_eagle3 adds embed_tokens.weight, the
// target's embedding) and the draft vocabulary's d2t [Vd] I64 and t2d [V] BOOL, Vd = head.vocab_size
// (an empty `vocab`: the whole target vocabulary, d2t zeros).
void save_eagle3(const std::filesystem::path& dir, const ParamMap& p, const ModelConfig& head, const ModelConfig& target,
                 const std::vector<int>& aux_layers, const DraftVocab& vocab = {},
                 c10::ScalarType save_dtype = c10::kBFloat16);

}  // namespace ears
