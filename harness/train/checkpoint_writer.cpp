#include "harness/train/checkpoint_writer.h"

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <system_error>

#include "decoders/safetensors.h"
#include "harness/base/error.h"
#include "harness/base/files.h"
#include "harness/train/target.h"

namespace ears {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;


// ---------------------------------------------------------------------------------------------
// tensors -> safetensors

SafetensorsBlob safetensors_blob(const at::Tensor& t) {
  SafetensorsBlob b;
  const auto dtype = from_scalar_type(t.scalar_type());
  if (!dtype) fail("safetensors: tensor dtype {} cannot be saved", c10::toString(t.scalar_type()));
  b.dtype = safetensors_dtype_name(*dtype);
  b.shape = t.sizes().vec();
  const at::Tensor c = t.detach().to(c10::Device(c10::kCPU)).contiguous();
  b.bytes.assign(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());  // little-endian host
  return b;
}

void save_safetensors(const fs::path& file, const ParamMap& tensors, std::optional<c10::ScalarType> float_dtype) {
  SafetensorsBlobs blobs;
  for (const auto& [name, t] : tensors) {
    at::Tensor x = t.detach();
    if (float_dtype && at::isFloatingType(x.scalar_type())) x = x.to(*float_dtype);
    blobs.emplace(name, safetensors_blob(x));
  }
  write_safetensors(file, blobs);
}

// ---------------------------------------------------------------------------------------------
// Qwen3 target

ModelConfig qwen3_config(const TargetArch& a, int64_t vocab_size, int64_t eos_token_id) {
  ModelConfig c;
  c.architecture = "Qwen3ForCausalLM";
  c.arch = Arch::Qwen3;
  c.vocab_size = vocab_size;
  c.hidden_size = a.hidden;
  c.intermediate_size = a.intermediate;
  c.num_hidden_layers = a.layers;
  c.num_attention_heads = a.heads;
  c.num_key_value_heads = a.kv_heads;
  c.head_dim = a.head_dim;
  c.rms_norm_eps = a.rms_norm_eps;
  c.rope.theta = a.rope_theta;
  c.tie_word_embeddings = a.tie_word_embeddings;
  c.qk_norm = true;
  c.torch_dtype = at::kBFloat16;
  c.max_position_embeddings = a.max_position_embeddings;
  c.eos_token_ids = {eos_token_id};
  return c;
}

namespace {
// transformers' rope_scaling for ModelConfig::parse's types (decoders/model_config.cpp): null
// for the default, {rope_type, factor, ...} for linear and llama3.
ojson rope_scaling_json(const RopeConfig& r) {
  if (r.type == "default") return nullptr;
  ojson j = {{"rope_type", r.type}, {"factor", r.factor}};
  if (r.type == "llama3") {
    j["low_freq_factor"] = r.low_freq_factor;
    j["high_freq_factor"] = r.high_freq_factor;
    j["original_max_position_embeddings"] = r.original_max_position_embeddings;
  }
  return j;
}

// The keys every Llama-family config.json shares (Qwen3 target and EAGLE-3 head alike);
// ordered_json keeps this order in the file.
ojson llama_family_config(const ModelConfig& c, c10::ScalarType torch_dtype) {
  ojson j;
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = c.bos_token_id ? ojson(*c.bos_token_id) : ojson(nullptr);
  j["eos_token_id"] = c.eos_token_ids.empty()      ? ojson(nullptr)
                      : c.eos_token_ids.size() == 1 ? ojson(c.eos_token_ids[0])
                                                    : ojson(c.eos_token_ids);
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden_size;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_scaling"] = rope_scaling_json(c.rope);
  j["rope_theta"] = c.rope.theta;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["torch_dtype"] = dtype_name(torch_dtype);
  j["use_cache"] = true;
  j["vocab_size"] = c.vocab_size;
  return j;
}
}  // namespace

std::string qwen3_config_json(const ModelConfig& c, c10::ScalarType torch_dtype) {
  ojson j = {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}};
  j.update(llama_family_config(c, torch_dtype));
  j["max_window_layers"] = c.num_hidden_layers;
  j["sliding_window"] = nullptr;
  j["use_sliding_window"] = false;
  return j.dump(2) + "\n";
}

void save_qwen3(const fs::path& dir, const ParamMap& p, const ModelConfig& c, c10::ScalarType save_dtype) {
  create_output_directory(dir);
  save_safetensors(dir / "model.safetensors", p, save_dtype);
  write_file_atomic(dir / "config.json", qwen3_config_json(c, save_dtype));
}

void save_random_qwen3(const fs::path& dir, const ModelConfig& c, uint64_t seed) {
  save_qwen3(dir, init_qwen3_params(c, seed), c, at::kBFloat16);
}

// ---------------------------------------------------------------------------------------------
// EAGLE-3 head

ModelConfig eagle3_config(const Eagle3Arch& a, const ModelConfig& t) {
  ModelConfig c;
  c.architecture = "LlamaForCausalLMEagle3";
  c.arch = Arch::Llama;
  c.vocab_size = t.vocab_size;
  c.hidden_size = t.hidden_size;
  c.intermediate_size = a.intermediate;
  c.num_hidden_layers = 1;
  c.num_attention_heads = a.heads;
  c.num_key_value_heads = a.kv_heads;
  c.head_dim = a.head_dim;
  c.rms_norm_eps = t.rms_norm_eps;
  c.rope = t.rope;
  c.torch_dtype = at::kBFloat16;
  c.max_position_embeddings = t.max_position_embeddings;
  c.eos_token_ids = t.eos_token_ids;
  return c;
}

std::string eagle3_config_json(const ModelConfig& c, const ModelConfig& t, const std::vector<int>& aux, c10::ScalarType dt) {
  ojson j = {{"architectures", {"LlamaForCausalLMEagle3"}}, {"model_type", "llama"}};
  j.update(llama_family_config(c, dt));
  j["num_hidden_layers"] = 1;
  j["tie_word_embeddings"] = false;
  j["vocab_size"] = t.vocab_size;        // the target's vocabulary (ids the head reads and emits)
  j["draft_vocab_size"] = c.vocab_size;  // the head's lm_head rows (d2t maps them to target ids)
  j["target_hidden_size"] = t.hidden_size;
  j["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", aux}, {"use_aux_hidden_state", true}};
  j["mlp_bias"] = false;
  j["pretraining_tp"] = 1;
  return j.dump(2) + "\n";
}

void save_eagle3(const fs::path& dir, const ParamMap& p, const ModelConfig& c, const ModelConfig& t, const std::vector<int>& aux,
                 const DraftVocab& vocab, c10::ScalarType save_dtype) {
  const DraftVocab v = vocab.ids.empty() ? full_draft_vocab(t.vocab_size) : vocab;
  if (v.size() != c.vocab_size || v.target_vocab != t.vocab_size)
    fail("save_eagle3: a draft vocabulary of {} of {} ids for a head of {} rows and a target of {} ids", v.size(),
         v.target_vocab, c.vocab_size, t.vocab_size);
  create_output_directory(dir);
  ParamMap all = p;
  all["d2t"] = v.d2t();
  all["t2d"] = v.t2d();
  save_safetensors(dir / "model.safetensors", all, save_dtype);
  write_file_atomic(dir / "config.json", eagle3_config_json(c, t, aux, save_dtype));
}

}  // namespace ears
