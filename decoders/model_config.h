// A checkpoint's config.json, parsed (Qwen3 / Qwen2 / Llama), and the dtype names.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ears {

// RoPE settings from config.json (rope_theta + rope_scaling / rope_parameters).
// type: "default", "linear" (inv_freq / factor) or "llama3" (Llama 3.x frequency smoothing).
struct RopeConfig {
  std::string type = "default";
  double theta = 10000.0;
  double factor = 1.0;                       // linear, llama3
  double low_freq_factor = 1.0;              // llama3
  double high_freq_factor = 4.0;             // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3
  bool operator==(const RopeConfig&) const = default;
};

enum class Arch { Qwen3, Qwen2, Llama };

// Parsed config.json. Every dimension comes from here; nothing is assumed about the model.
struct ModelConfig {
  std::string architecture;   // e.g. "Qwen3ForCausalLM" (or the draft's own name when not checked)
  Arch arch = Arch::Llama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;   // default: num_attention_heads
  int64_t head_dim = 0;              // default: hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  RopeConfig rope;                   // rope_theta (int or float) or rope_parameters.rope_theta
  bool tie_word_embeddings = false;
  bool qkv_bias = false;             // Qwen2: always; Llama/Qwen3: attention_bias
  bool o_bias = false;               // Llama/Qwen3: attention_bias
  bool mlp_bias = false;             // Llama: mlp_bias
  bool qk_norm = false;              // Qwen3 only
  c10::ScalarType torch_dtype = c10::ScalarType::Float;  // torch_dtype / dtype (default float32)
  int64_t max_position_embeddings = 0;  // 0 when absent
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;   // int or list in the file; empty when null/absent

  bool operator==(const ModelConfig&) const = default;

  // Parses config.json text; `origin` names the file in error messages ("<origin>: missing key
  // 'hidden_size'"). With check_architecture=false any architecture is accepted (Llama flags),
  // so a draft head can reuse the common fields and read its own extra keys.
  static ModelConfig parse(const std::string& json_text, const std::string& origin,
                           bool check_architecture = true);
  // Reads <dir>/config.json (or `dir` itself when it is a file).
  static ModelConfig load(const std::filesystem::path& dir, bool check_architecture = true);

  // The weights a checkpoint of this config holds (embeddings, every layer's projections,
  // biases and norms, the final norm, an untied lm_head): Σ numel of its tensors.
  int64_t parameter_count() const;
  // The weights a decode step streams from memory: every layer, the final norm and the lm_head
  // (= the embedding matrix when tied); the embedding lookup (a few rows) is not counted.
  int64_t streamed_parameter_count() const;
  // One decoder layer's weights (projections, biases, norms).
  int64_t layer_parameter_count() const;
};

// "float32" | "bfloat16" | "float16" (also "fp32", "bf16", "fp16", "half", "float") -> dtype.
c10::ScalarType parse_dtype(const std::string& name, const std::string& origin);
std::string dtype_name(c10::ScalarType dtype);

}  // namespace ears
