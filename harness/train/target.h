// Training the tiny Qwen3 target from scratch (`ears-bench train target`): its fp32 parameters,
// the full-sequence training forward (LibTorch autograd through plain ATen ops and
// decoders/layers.h, no torch::nn), the weighted causal-LM loss, and the end-to-end command.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "decoders/model_config.h"
#include "harness/train/checkpoint_writer.h"
#include "harness/train/corpus.h"
#include "harness/train/loop.h"

namespace ears {

// fp32 parameters with requires_grad, named as in the HF checkpoint (no lm_head.weight when
// tied). Linear/embedding weights ~ N(0, 0.02), o_proj/down_proj scaled by 1/sqrt(2 layers),
// norms 1. Deterministic for a seed (at::manual_seed).
ParamMap init_qwen3_params(const ModelConfig& c, uint64_t seed, c10::Device device = c10::Device(c10::kCPU));

struct TrainForwardOutput {
  at::Tensor logits;                  // [B, T, V] fp32
  std::vector<at::Tensor> aux_hidden;  // HF hidden_states ids as in ForwardOptions::aux_layers
};
// Full-sequence forward without a KV cache (autograd-safe: no in-place op on a tensor that needs
// grad), using decoders/layers.h. positions [B, T], blocked [B, T, T] as in PackedBatch.
TrainForwardOutput qwen3_train_forward(const ParamMap& p, const ModelConfig& c, const at::Tensor& ids,
                                       const at::Tensor& positions, const at::Tensor& blocked,
                                       const std::vector<int>& aux_layers = {});
// Causal-LM loss: sum(weight * CE(logits, target)) / sum(weight).
at::Tensor weighted_lm_loss(const at::Tensor& logits, const at::Tensor& targets, const at::Tensor& weights);

// The building blocks the training forwards share (target and EAGLE-3 head):
// p[name], failing with the name when it is missing;
const at::Tensor& need_param(const ParamMap& p, const std::string& name);
// down(silu(gate(x)) * up(x)), out of place.
at::Tensor swiglu_mlp(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up, const at::Tensor& down);

struct TargetTrainOptions {
  std::filesystem::path out;
  std::filesystem::path tokenizer;  // dir with tokenizer.json; "" = <out> (trained there when absent)
  int32_t vocab_size = 2048;        // when a tokenizer is trained
  TargetArch arch;
  TrainSchedule schedule;
  CorpusOptions corpus;
  double natural_fraction = 0.2;
  float prompt_weight = 0.1f;
  int64_t eval_n = 0;               // > 0: greedy accuracy on that many synth-gsm test problems (seed 0)
  int64_t eval_max_new_tokens = 200;
  std::filesystem::path init;       // non-empty: start from this checkpoint's weights (continued
                                    // training; same architecture), not from a random init
};
// Trains (the tokenizer first when there is none), saves <out>/model.safetensors, config.json,
// the tokenizer files and train_log.json; evaluates when eval_n > 0.
TrainReport train_target(const TargetTrainOptions& options, const LogFn& log = {});

}  // namespace ears
