// What every drafter shares (decoders/draft.h).
#include "decoders/draft.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <cmath>

#include "decoders/bf16_bits.h"

namespace ears {

namespace {
// torch.argmax over each row of a CPU [B, V] bf16 / float32 tensor, on the host (one loop instead
// of a float copy and a reduction kernel): the first maximum, NaN counting as the maximum.
template <class E, class Widen>
at::Tensor host_argmax(const at::Tensor& logits, Widen widen) {
  const at::Tensor l = logits.contiguous();
  const int64_t B = l.size(0), V = l.size(1);
  at::Tensor ids = at::empty({B}, at::TensorOptions().dtype(at::kLong));
  const E* base = reinterpret_cast<const E*>(l.data_ptr());
  for (int64_t b = 0; b < B; ++b) {
    const E* row = base + b * V;
    int64_t best = 0;
    float best_v = widen(row[0]);
    for (int64_t v = 1; v < V && !std::isnan(best_v); ++v) {
      const float x = widen(row[v]);
      if (x > best_v || std::isnan(x)) best = v, best_v = x;
    }
    ids.data_ptr<int64_t>()[b] = best;
  }
  return ids;
}
}  // namespace

at::Tensor greedy_token(const at::Tensor& logits) {
  if (logits.device().is_cpu() && logits.dim() == 2 && logits.size(1) > 0) {
    if (logits.scalar_type() == at::kFloat) return host_argmax<float>(logits, [](float x) { return x; });
    if (logits.scalar_type() == at::kBFloat16)
      return host_argmax<uint16_t>(logits, [](uint16_t x) { return bf16_bits::from_bf16(x); });
  }
  return logits.to(at::kFloat).argmax(-1);
}

DraftToken draft_token(const at::Tensor& logits, const SamplingParams& sampling, bool greedy, const at::Tensor& uniforms) {
  if (greedy) return {greedy_token(logits), at::Tensor()};
  const at::Tensor l = logits.to(at::kFloat);
  ProcessedProbs q = process_logits(l, sampling);
  return {sample_from_probs(q.probs, uniforms), q.probs};
}

}  // namespace ears
