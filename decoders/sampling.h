// Logit processing (temperature, top-k, top-p), inverse-CDF sampling and per-request randomness.
//
// Everything here is a batched tensor function that runs unchanged on CPU or CUDA; nothing
// synchronises with the host. The one exception is RequestRng, which draws its uniforms on the
// host from a CPU generator (small [n] tensors) so that a request's random stream depends only
// on (run seed, request id): not on the batch it lands in, the device or the thread count.
#pragma once
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harness/base/rng.h"  // splitmix64, fnv1a64

namespace ears {

struct SamplingParams {
  double temperature = 1;  // 0 = greedy (one-hot of the argmax); else >= 0.01 (param_ranges.h)
  int64_t top_k = 0;       // 0 = off; keeps every token whose logit ties the k-th largest (HF)
  double top_p = 1;        // 1 = off; in (0, 1]
};

// Throws ears::Error naming the offending key (`where` prefixes it, e.g. "config.yaml: sampling").
void validate(const SamplingParams& params, std::string_view where = "sampling");

struct ProcessedProbs {
  at::Tensor probs;     // float32 [..., V]; exact zeros outside the kept set
  at::Tensor max_prob;  // float32 [...];    max over V of probs, from the softmax's own 1/Z;
                        // NaN for a row whose logits hold NaN or +inf (also at temperature 0)
};

// temperature -> top-k -> top-p (HuggingFace order and semantics: top-p keeps the smallest set
// of tokens, in descending probability, whose cumulative probability is >= top_p, always at
// least the top token; top-p is applied to the distribution already truncated by top-k), then a
// float32 softmax over the kept tokens. Input: logits [..., V] of any floating dtype.
// When top_k == 0 and top_p == 1 nothing is sorted. temperature == 0: probs = one-hot(argmax),
// max_prob = 1. A row whose logits are all -inf gives NaN (as softmax does).
ProcessedProbs process_logits(const at::Tensor& logits, const SamplingParams& params);

// Greedy selection on the host: torch.argmax over each row of a CPU [N, V] bf16 / float32 tensor
// (the first maximum, NaN counting as the maximum), two 8-lane passes a row on AVX2 CPUs (the scalar
// loop elsewhere) instead of a float copy and a reduction kernel; `finite` is 0 for a row whose
// maximum is NaN or +/-inf (a NaN or +inf logit, or all -inf), the rows process_logits gives a NaN
// max_prob at temperature 0.
struct HostArgmax {
  std::vector<int64_t> ids;     // [N]
  std::vector<uint8_t> finite;  // [N]
};
HostArgmax host_argmax(const at::Tensor& logits);
// The logits host_argmax reads: on the CPU, in bf16 or float32.
bool host_argmax_reads(c10::Device device, at::ScalarType dtype);

// Inverse-CDF sampling, one uniform in [0, 1) per row: probs [N, V] (non-negative, need not be
// normalised: the row total is used), uniforms [N] -> int64 ids [N] on probs' device. Two binary
// searches per row after one cumulative sum; no argmax, no host sync. The CDF is float32 (on the
// CPU accumulated in double, entry by entry): a zero-probability id has a step of exactly zero
// and is never drawn; an id whose probability is below float32's spacing at its running sum
// (~6e-8 of the row total) may get no interval (a bias below 1e-7 per id). An all-zero row
// returns id 0.
at::Tensor sample_from_probs(const at::Tensor& probs, const at::Tensor& uniforms);

// The seed of a request's generator:
//   request_seed(run_seed, id) = splitmix64(splitmix64(run_seed) ^ id)
// (for a fixed run seed distinct ids give distinct 64-bit seeds). NOTE: LibTorch's CPU generator
// (mt19937) only uses the low 32 bits of its seed, so two requests of one run share a stream
// with probability ~ n^2 / 2^33 (about 1e-4 for 1000 requests): harmless for benchmarking.
uint64_t request_seed(uint64_t run_seed, uint64_t request_id);

// One request's random stream: a LibTorch CPU generator seeded by request_seed(run_seed, id).
// Not thread-safe across threads sharing one object (each request owns its RequestRng).
class RequestRng {
 public:
  RequestRng(uint64_t run_seed, uint64_t request_id);
  RequestRng(uint64_t run_seed, std::string_view request_key);  // id = fnv1a64(request_key)

  at::Tensor uniforms(int64_t n);  // float32 [n] in [0, 1) on CPU; advances the stream
  uint64_t seed() const { return seed_; }
  at::Generator& generator() { return gen_; }  // for at:: random ops on CPU tensors

 private:
  uint64_t seed_;
  at::Generator gen_;
};

// [B, n] float32 on `device`: row b = rngs[b]->uniforms(n). One host-to-device copy (from pinned
// memory, non-blocking) when the device is not the CPU; no synchronisation.
at::Tensor batch_uniforms(const std::vector<RequestRng*>& rngs, int64_t n, c10::Device device);

}  // namespace ears
