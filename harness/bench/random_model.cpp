#include "harness/bench/common.h"
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>
#include <sstream>
#include <thread>

#include "harness/bench/probe.h"
#include "decoders/kernel_path.h"
#include "decoders/layers.h"
#include "decoders/engine.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "decoders/sampling.h"
#include "decoders/verify.h"
#include "harness/run/environment.h"
#include "harness/base/error.h"
#include "harness/run/model_setup.h"
#include "harness/train/checkpoint_writer.h"

namespace ears {
using namespace bench;

int64_t streamed_param_count(const ModelConfig& c) {
  const int64_t D = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  const int64_t H = c.num_attention_heads, K = c.num_key_value_heads;
  int64_t layer = 2 * D + (H + 2 * K) * hd * D + H * hd * D + 3 * I * D;
  if (c.qkv_bias) layer += (H + 2 * K) * hd;
  if (c.o_bias) layer += D;
  if (c.mlp_bias) layer += 2 * I + D;
  if (c.qk_norm) layer += 2 * hd;
  return c.num_hidden_layers * layer + D + c.vocab_size * D;
}

int64_t param_count(const ModelConfig& c) {
  return streamed_param_count(c) + (c.tie_word_embeddings ? 0 : c.vocab_size * c.hidden_size);
}

void write_random_qwen3(const GeneratedModelSpec& s, const fs::path& dir, uint64_t seed) {
  fs::create_directories(dir);
  TargetArch arch;
  arch.hidden = s.hidden;
  arch.layers = s.layers;
  arch.heads = s.heads;
  arch.kv_heads = s.kv_heads;
  arch.head_dim = s.head_dim;
  arch.intermediate = s.intermediate;
  arch.max_position_embeddings = 4096;
  arch.tie_word_embeddings = s.tie_embeddings;
  const ModelConfig c = qwen3_config(arch, s.vocab, /*eos_token_id=*/1);
  save_random_qwen3(dir, c, seed);
}

}  // namespace ears
