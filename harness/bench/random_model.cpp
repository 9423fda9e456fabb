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

int64_t streamed_param_count(const ModelConfig& c) { return c.streamed_parameter_count(); }

int64_t param_count(const ModelConfig& c) { return c.parameter_count(); }

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
