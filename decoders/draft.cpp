// What every drafter shares (decoders/draft.h).
#include "decoders/draft.h"

#include <ATen/ATen.h>

namespace ears {

DraftToken draft_token(const at::Tensor& logits, const SamplingParams& sampling, bool greedy, const at::Tensor& uniforms) {
  const at::Tensor l = logits.to(at::kFloat);
  if (greedy) return {l.argmax(-1), at::Tensor()};
  ProcessedProbs q = process_logits(l, sampling);
  return {sample_from_probs(q.probs, uniforms), q.probs};
}

}  // namespace ears
