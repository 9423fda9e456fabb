// Drafters propose gamma tokens per speculative step. Three kinds:
//   eagle3 — an EAGLE-3 head fed with the target's aux hidden states (decoders/eagle3.h)
//   model  — any smaller causal LM sharing the tokenizer (ModelDrafter)
//   none   — no draft: the engine decodes with the target alone (gamma = 0)
//
// Alignment contract with the engine (target cache holds every token but the last one, x_last):
//   begin():   after the target prefill of the prompt; first_tokens = x_L sampled from it.
//   propose(): gamma draft tokens continuing [..., x_last] and the processed draft
//              distribution q each was drawn from (over the TARGET vocabulary).
//   accept():  after verification: emitted [B, gamma+1] (accepted drafts, then the correction
//              or bonus token, -1 after), accepted counts (host), and the target's aux features
//              of the verification forward [B, gamma+1, F] (eagle3 only).
// All shapes are fixed per step so no host round trip is needed for them.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "decoders/sampling.h"

namespace ears {

class CausalLM;

struct Proposal {
  at::Tensor tokens;  // [B, gamma] int64 target ids
  at::Tensor probs;   // [B, gamma, V_target] float32 processed q (one-hot in greedy mode)
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string kind() const = 0;
  // Target layers whose entering hidden states the drafter consumes (empty: none).
  virtual std::vector<int> aux_layers() const { return {}; }
  virtual void begin(const at::Tensor& prompt_ids /*[B,L] right-padded*/, const std::vector<int64_t>& prompt_lengths,
                     const at::Tensor& first_tokens /*[B]*/, const std::vector<at::Tensor>& aux /*[B,L,H] each*/,
                     int64_t max_len /*cache positions needed per sequence*/) = 0;
  // uniforms: [B, gamma] (used in sample mode).
  virtual Proposal propose(int gamma, const SamplingParams& sampling, bool greedy, const at::Tensor& uniforms) = 0;
  virtual void accept(const at::Tensor& emitted, const std::vector<int64_t>& accepted,
                      const std::vector<at::Tensor>& aux /*[B,gamma+1,H] each*/) = 0;
  // Keeps only the sequences at `rows` (host indices), in that order.
  virtual void select(const std::vector<int64_t>& rows) = 0;
};

// One draft token per row from draft logits [B, V] (any float dtype): the argmax in greedy mode,
// else a sample with uniforms [B] from the processed distribution q = process_logits(logits),
// returned beside it ([B, V] float32; undefined in greedy mode). Shared by every drafter.
struct DraftToken {
  at::Tensor id;  // [B] int64, in the logits' vocabulary
  at::Tensor q;   // [B, V] float32 or undefined
};
DraftToken draft_token(const at::Tensor& logits, const SamplingParams& sampling, bool greedy, const at::Tensor& uniforms);
// Its greedy half: [B] int64 argmax of logits [B, V] (torch.argmax: the first maximum; on the CPU a
// host loop over bf16 / float32 rows).
at::Tensor greedy_token(const at::Tensor& logits);

// A smaller causal LM (or the target itself) drafting token by token with its own KV cache.
std::unique_ptr<Drafter> make_model_drafter(const CausalLM& model, int64_t target_vocab);

}  // namespace ears
