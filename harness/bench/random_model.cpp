#include "harness/bench/common.h"

#include <cstdint>
#include <filesystem>

#include "decoders/model_config.h"
#include "harness/train/checkpoint_writer.h"

namespace ears {
using namespace bench;

ModelConfig generated_config(const GeneratedModelSpec& s) {
  TargetArch arch;
  arch.hidden = s.hidden;
  arch.layers = s.layers;
  arch.heads = s.heads;
  arch.kv_heads = s.kv_heads;
  arch.head_dim = s.head_dim;
  arch.intermediate = s.intermediate;
  arch.max_position_embeddings = 4096;
  arch.tie_word_embeddings = s.tie_embeddings;
  return qwen3_config(arch, s.vocab, /*eos_token_id=*/1);
}

void write_random_qwen3(const GeneratedModelSpec& s, const fs::path& dir, uint64_t seed) {
  fs::create_directories(dir);
  save_random_qwen3(dir, generated_config(s), seed);
}

}  // namespace ears
