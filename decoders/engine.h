// The speculative decoding loop (gpt-fast style, batched). Per step, for a batch of B sequences
// in lockstep:
//   1. the drafter proposes gamma tokens (and the processed q they were drawn from);
//   2. ONE target forward over [x_last, d_1..d_gamma] at each sequence's own offset;
//   3. the verifier (decoders/verify.h) decides accepted prefixes, corrections and bonus tokens
//      (at temperature 0 greedily, for every verifier: on the CPU from the target's argmax on the
//      host, with no tensor op over the vocabulary);
//   4. ONE device->host copy brings back the step's small packed result (tokens, accepted counts,
//      paths, uncertainties, distortion, NaN flags) — the only host sync of the step;
//   5. both KV caches roll back to the accepted length; finished sequences drop out.
// With no drafter (draft kind `none`) the same loop is plain autoregressive decoding
// (gamma = 0: every step emits one "bonus" token sampled from p_t) — the speedup reference.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "decoders/sampling.h"
#include "decoders/verify.h"

namespace ears {

class CausalLM;
class Drafter;
class Tokenizer;
struct DecodeRun;  // one generate() call's state (engine.cpp)

struct DecodeParams {
  SamplingParams sampling;          // applied identically to target and draft
  int gamma = 5;                    // draft tokens per step (ignored without a drafter)
  int64_t max_new_tokens = 256;
  bool draft_greedy = false;        // draft sampling mode: argmax with one-hot q (vLLM/sglang EAGLE)
  VerifierSpec verifier;
  std::vector<std::string> stop_strings;
  std::vector<int32_t> stop_ids;    // eos etc.
  bool measure_distortion = true;   // TV(p_t, verifier-induced distribution) per drafted position
  bool sync_timing = false;         // synchronise the device at phase boundaries (GPU profiling)
  bool host_greedy = true;          // T = 0 on the CPU: the step's verdict on the host (verify.h,
                                    // "Temperature 0"); false: the tensor path a GPU takes (tests)
};

struct GenRequest {
  std::vector<int32_t> prompt;      // token ids
  uint64_t run_seed = 0;            // the request's random stream is RequestRng(run_seed, key):
  std::string key;                  // identical across arms (paired design) and batch layouts
};

constexpr int kUncertaintyBuckets = 10;  // deciles of u = 1 - max p_t

struct GenStats {
  int64_t steps = 0;                // target verification steps (decode steps when target-only)
  int64_t drafted = 0, accepted = 0, corrections = 0, bonus = 0, pardoned = 0;
  std::vector<int64_t> accepted_per_position;  // [gamma]: steps in which draft position k was accepted
  std::vector<int64_t> accept_length_hist;     // [gamma+2]: steps that emitted n tokens
  std::array<int64_t, kUncertaintyBuckets> drafted_by_u{}, accepted_by_u{}, pardoned_by_u{};
  double uncertainty_sum = 0;       // sum of u over drafted (evaluated) positions
  double distortion_sum = 0;        // sum of TV distances over drafted positions
  int64_t distortion_n = 0;
  double prefill_s = 0, draft_s = 0, verify_s = 0, other_s = 0;
  int64_t host_syncs = 0;           // device->host copies made while this request was active
  int64_t emitted() const { return accepted + corrections + bonus; }
  // τ of this request: tokens per target step (0 before the first step).
  double mean_accept_length() const { return steps ? static_cast<double>(emitted()) / static_cast<double>(steps) : 0.0; }

  // Sizes the per-position counters for gamma draft tokens per step.
  void reset(int64_t gamma);
  // One verification step: n of gamma drafts accepted; per judged position k (k <= n, k < gamma)
  // the verifier's path (2 = pardoned), u = 1 - max p_t and, when tv is non-null, the TV
  // distortion.
  void record_step(int64_t gamma, int64_t n, const float* path, const float* u, const float* tv);
};

struct GenResult {
  std::vector<int32_t> ids;         // generated ids (stop token included when it ended the request)
  std::string text;                 // decoded (special tokens skipped, cut before a stop string)
  std::string finish_reason;        // "eos" | "stop" | "length" | "error"
  std::string error;                // non-empty when the request failed: non-finite logits, or
                                    // prompt + max_new_tokens beyond the context (then no decoding)
  int64_t prompt_tokens = 0;
  double latency_s = 0, ttft_s = 0;
  GenStats stats;
};

class Engine {
 public:
  // drafter may be null (target-only). tokenizer may be null (no text, no stop strings).
  Engine(const CausalLM& target, Drafter* drafter, const Tokenizer* tokenizer);
  // Decodes a batch in lockstep; results are in request order.
  std::vector<GenResult> generate(const std::vector<GenRequest>& batch, const DecodeParams& params);

 private:
  DecodeRun prefill(const std::vector<GenRequest>& batch, const DecodeParams& params);
  void step(DecodeRun& run, const DecodeParams& params);

  const CausalLM& target_;
  Drafter* drafter_;
  const Tokenizer* tokenizer_;
};

}  // namespace ears
