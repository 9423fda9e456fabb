#include "decoders/model_config.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "harness/base/files.h"
#include "harness/base/json.h"
#include "harness/base/error.h"

namespace ears {

namespace {

using json = nlohmann::json;

RopeConfig parse_rope(const json& j, const std::string& origin) {
  JsonKeys k{j, origin};
  RopeConfig rope;
  const json* params = k.find("rope_parameters");  // transformers v5 layout
  const json* scaling = k.find("rope_scaling");
  if (params && !params->is_object())
    fail("{}: key 'rope_parameters' must be an object, got {}", origin, json_type(*params));
  if (scaling && !scaling->is_object())
    fail("{}: key 'rope_scaling' must be an object or null, got {}", origin, json_type(*scaling));
  rope.theta = k.opt_positive_double("rope_theta", 10000.0);
  if (params) {
    JsonKeys p{*params, origin};
    rope.theta = p.opt_positive_double("rope_theta", rope.theta);
  }
  const json* spec = scaling ? scaling : params;
  if (!spec) return rope;
  const std::string spec_origin = origin + (scaling ? " rope_scaling" : " rope_parameters");
  JsonKeys s{*spec, spec_origin};
  std::string type = s.opt_string("rope_type").value_or(s.opt_string("type").value_or("default"));
  if (type == "default") return rope;
  if (type == "linear") {
    rope.type = type;
    rope.factor = s.positive_double("factor");
    return rope;
  }
  if (type == "llama3") {
    rope.type = type;
    rope.factor = s.positive_double("factor");
    rope.low_freq_factor = s.positive_double("low_freq_factor");
    rope.high_freq_factor = s.positive_double("high_freq_factor");
    rope.original_max_position_embeddings = s.positive_int("original_max_position_embeddings");
    // Between the two wavelengths the frequencies are interpolated over high - low.
    if (rope.high_freq_factor <= rope.low_freq_factor)
      fail("{}: rope_scaling high_freq_factor ({}) must be larger than low_freq_factor ({}); fix the file", origin,
           rope.high_freq_factor, rope.low_freq_factor);
    return rope;
  }
  fail("{}: rope_scaling type '{}' is not supported (supported: default, linear, llama3; YaRN and "
       "dynamic scaling are not implemented); remove rope_scaling to run at the native context length",
       origin, type);
}

}  // namespace

c10::ScalarType parse_dtype(const std::string& name, const std::string& origin) {
  if (name == "float32" || name == "fp32" || name == "float") return at::kFloat;
  if (name == "bfloat16" || name == "bf16") return at::kBFloat16;
  if (name == "float16" || name == "fp16" || name == "half") return at::kHalf;
  fail("{}: dtype '{}' is not supported (use float32, bfloat16 or float16)", origin, name);
}

std::string dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "float32";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: return c10::toString(dtype);
  }
}

namespace {

// Architecture: architectures[0], else model_type mapped to its HF class name.
void parse_architecture(const JsonKeys& k, bool check_architecture, ModelConfig& c) {
  const std::string& origin = k.origin;
  if (const json* a = k.find("architectures")) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string())
      fail("{}: key 'architectures' must be a non-empty list of strings, got {}", origin, json_type(*a));
    c.architecture = (*a)[0].get<std::string>();
  } else if (auto mt = k.opt_string("model_type")) {
    c.architecture = *mt == "qwen3" ? "Qwen3ForCausalLM"
                     : *mt == "qwen2" ? "Qwen2ForCausalLM"
                     : *mt == "llama" ? "LlamaForCausalLM"
                                      : *mt;
  } else if (check_architecture) {
    fail("{}: missing key 'architectures' (and no 'model_type')", origin);
  }
  if (c.architecture == "Qwen3ForCausalLM") {
    c.arch = Arch::Qwen3;
  } else if (c.architecture == "Qwen2ForCausalLM") {
    c.arch = Arch::Qwen2;
  } else if (c.architecture == "LlamaForCausalLM") {
    c.arch = Arch::Llama;
  } else if (check_architecture) {
    fail("{}: architecture '{}' is not supported (supported: Qwen3ForCausalLM, Qwen2ForCausalLM, "
         "LlamaForCausalLM)",
         origin, c.architecture);
  }
}

// Sizes and heads: every count positive, heads grouped evenly, head_dim even (RoPE).
void parse_shape(const JsonKeys& k, ModelConfig& c) {
  const std::string& origin = k.origin;
  c.vocab_size = k.positive_int("vocab_size");
  c.hidden_size = k.positive_int("hidden_size");
  c.intermediate_size = k.positive_int("intermediate_size");
  c.num_hidden_layers = k.positive_int("num_hidden_layers");
  c.num_attention_heads = k.positive_int("num_attention_heads");
  c.num_key_value_heads = k.opt_int("num_key_value_heads", c.num_attention_heads);
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0)
    fail("{}: num_attention_heads ({}) must be a positive multiple of num_key_value_heads ({})", origin,
         c.num_attention_heads, c.num_key_value_heads);
  if (k.find("head_dim")) {
    c.head_dim = k.positive_int("head_dim");
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail("{}: missing key 'head_dim' and hidden_size ({}) is not divisible by num_attention_heads ({})",
           origin, c.hidden_size, c.num_attention_heads);
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) fail("{}: head_dim {} must be even for RoPE", origin, c.head_dim);
}

// Special token ids (a draft head's config may describe another vocabulary: checked for targets only)
// and sliding windows, which this implementation does not have.
void check_target_only_keys(const JsonKeys& k, const ModelConfig& c) {
  std::vector<int64_t> special = c.eos_token_ids;
  if (c.bos_token_id) special.push_back(*c.bos_token_id);
  for (int64_t id : special)
    if (id < 0 || id >= c.vocab_size)
      fail("{}: special token id {} (eos_token_id / bos_token_id) is outside the vocabulary [0, {}); fix "
           "config.json",
           k.origin, id, c.vocab_size);
  if (c.arch != Arch::Llama && k.opt_bool("use_sliding_window", false))
    fail("{}: use_sliding_window is true; sliding-window attention is not supported", k.origin);
}

}  // namespace

ModelConfig ModelConfig::parse(const std::string& json_text, const std::string& origin,
                               bool check_architecture) {
  const json j = parse_json_object(json_text, origin);
  JsonKeys k{j, origin};
  ModelConfig c;
  parse_architecture(k, check_architecture, c);
  parse_shape(k, c);
  // Every MLP here (a target's layers, an EAGLE-3 head's) is SiLU-gated: checked for both.
  if (auto act = k.opt_string("hidden_act"); act && *act != "silu")
    fail("{}: hidden_act '{}' is not supported (only silu: ears-bench's MLPs are SiLU-gated); use a checkpoint "
         "trained with silu",
         k.origin, *act);
  c.rms_norm_eps = k.positive_double("rms_norm_eps", /*zero_ok=*/true);
  c.rope = parse_rope(j, origin);
  c.tie_word_embeddings = k.opt_bool("tie_word_embeddings", false);
  const bool attention_bias = k.opt_bool("attention_bias", false);
  c.qk_norm = c.arch == Arch::Qwen3;
  c.qkv_bias = c.arch == Arch::Qwen2 ? true : attention_bias;
  c.o_bias = c.arch == Arch::Qwen2 ? false : attention_bias;
  c.mlp_bias = c.arch == Arch::Llama ? k.opt_bool("mlp_bias", false) : false;
  if (auto dt = k.opt_string("torch_dtype")) {
    c.torch_dtype = parse_dtype(*dt, origin + " (torch_dtype)");
  } else if (auto dt2 = k.opt_string("dtype")) {
    c.torch_dtype = parse_dtype(*dt2, origin + " (dtype)");
  }
  c.max_position_embeddings = k.opt_int("max_position_embeddings", 0);
  const auto bos = k.int_list("bos_token_id");
  if (!bos.empty()) c.bos_token_id = bos[0];
  c.eos_token_ids = k.int_list("eos_token_id");
  if (k.find("max_position_embeddings") && c.max_position_embeddings <= 0)
    fail("{}: max_position_embeddings is {}; it must be a positive context length (or absent)", origin,
         c.max_position_embeddings);
  if (check_architecture) check_target_only_keys(k, c);
  return c;
}

ModelConfig ModelConfig::load(const std::filesystem::path& dir, bool check_architecture) {
  const auto path = std::filesystem::is_directory(dir) ? dir / "config.json" : dir;
  return parse(read_file(path, "config.json", "is this a Hugging Face model directory?"), path.string(), check_architecture);
}

int64_t ModelConfig::layer_parameter_count() const {
  const int64_t h = hidden_size, q = num_attention_heads * head_dim, kv = num_key_value_heads * head_dim;
  int64_t layer = h * (q + 2 * kv) + q * h + 3 * intermediate_size * h + 2 * h;  // qkv, o, gate/up/down, 2 norms
  if (qkv_bias) layer += q + 2 * kv;
  if (o_bias) layer += h;
  if (mlp_bias) layer += 2 * intermediate_size + h;
  if (qk_norm) layer += 2 * head_dim;
  return layer;
}

int64_t ModelConfig::streamed_parameter_count() const {
  return num_hidden_layers * layer_parameter_count() + hidden_size + vocab_size * hidden_size;
}

int64_t ModelConfig::parameter_count() const {
  return streamed_parameter_count() + (tie_word_embeddings ? 0 : vocab_size * hidden_size);
}

}  // namespace ears
