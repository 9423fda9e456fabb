// What every drafter shares (decoders/draft.h).
#include "decoders/draft.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>

namespace ears {

at::Tensor greedy_token(const at::Tensor& logits) {
  if (host_argmax_reads(logits.device(), logits.scalar_type()) && logits.dim() == 2 && logits.size(1) > 0)
    return at::tensor(host_argmax(logits).ids, at::TensorOptions().dtype(at::kLong));
  return logits.to(at::kFloat).argmax(-1);
}

DraftToken draft_token(const at::Tensor& logits, const SamplingParams& sampling, bool greedy, const at::Tensor& uniforms) {
  if (greedy) return {greedy_token(logits), at::Tensor()};
  const at::Tensor l = logits.to(at::kFloat);
  ProcessedProbs q = process_logits(l, sampling);
  return {sample_from_probs(q.probs, uniforms), q.probs};
}

}  // namespace ears
