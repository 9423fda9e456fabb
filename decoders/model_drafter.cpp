// Draft kind `model`: a smaller causal LM sharing the tokenizer drafts token by token.
//
// Its cache mirrors the target's token sequence. At each propose() it is fed two tokens, the one
// before x_last and x_last itself (fixed shape for every sequence, whatever was accepted: the
// first of the two re-writes an entry that may already be cached), then gamma-1 single tokens.
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>

#include <algorithm>

#include "decoders/draft.h"
#include "decoders/model.h"
#include "harness/base/error.h"

namespace ears {
namespace {

class ModelDrafter final : public Drafter {
 public:
  ModelDrafter(const CausalLM& model, int64_t target_vocab) : model_(model), target_vocab_(target_vocab) {}

  std::string kind() const override { return "model"; }

  void begin(const at::Tensor& prompt_ids, const std::vector<int64_t>& lengths, const at::Tensor& first_tokens,
             const std::vector<at::Tensor>&, int64_t max_len) override {
    const int64_t B = prompt_ids.size(0);
    last_drafts_ = at::Tensor();  // nothing proposed yet in this batch (select() may come first)
    cache_ = model_.new_cache(B, max_len);
    ForwardOptions opt;
    opt.skip_logits = true;
    model_.forward(prompt_ids, cache_, opt);
    std::vector<int64_t> keep(lengths);
    for (auto& l : keep) l -= 1;  // the last prompt token is re-fed together with x_last
    cache_.set_lengths(keep);
    at::Tensor last_rows = at::tensor(keep, at::TensorOptions().dtype(at::kLong)).to(prompt_ids.device());
    pending_ = at::stack({prompt_ids.gather(1, last_rows.view({B, 1})).view({B}), first_tokens}, 1);
  }

  Proposal propose(int gamma, const SamplingParams& sampling, bool greedy, const at::Tensor& uniforms) override {
    const int64_t B = pending_.size(0);
    ForwardOptions opt;
    opt.logits_rows = at::ones({B, 1}, pending_.options());
    at::Tensor logits = model_.forward(pending_, cache_, opt).logits.select(1, 0);
    std::vector<at::Tensor> tokens, probs;
    for (int j = 0; j < gamma; ++j) {
      if (logits.size(-1) > target_vocab_) logits = logits.narrow(-1, 0, target_vocab_);
      DraftToken t = draft_token(logits, sampling, greedy, greedy ? at::Tensor() : uniforms.select(1, j));
      if (!greedy) probs.push_back(t.q);
      tokens.push_back(t.id);
      if (j + 1 < gamma) logits = model_.forward(t.id.view({B, 1}), cache_).logits.select(1, 0);
    }
    Proposal out;
    out.tokens = at::stack(tokens, 1);
    if (!greedy) {
      out.probs = at::stack(probs, 1);
      const int64_t pad = target_vocab_ - out.probs.size(-1);
      if (pad > 0) out.probs = at::constant_pad_nd(out.probs, {0, pad});
    }
    last_drafts_ = out.tokens;
    return out;
  }

  void accept(const at::Tensor& emitted, const std::vector<int64_t>& accepted, const std::vector<at::Tensor>&) override {
    const int64_t B = emitted.size(0);
    const int64_t gamma = last_drafts_.size(1);
    // The cache holds [.., x_prev, x_last, d_1 .. d_{gamma-1}]; keep through d_n's predecessor
    // so that next time [token at x_last+n, correction] is fed.
    std::vector<int64_t> lens = cache_.lengths();
    for (int64_t b = 0; b < B; ++b) lens[b] = lens[b] - gamma + accepted[b];
    cache_.set_lengths(lens);
    at::Tensor n = at::tensor(accepted, at::TensorOptions().dtype(at::kLong)).to(emitted.device()).view({B, 1});
    at::Tensor seq = at::cat({pending_.narrow(1, 1, 1), last_drafts_}, 1);  // x_last, d_1..d_gamma
    pending_ = at::cat({seq.gather(1, n), emitted.gather(1, n)}, 1);
  }

  void select(const std::vector<int64_t>& rows) override {
    cache_.select(rows);
    at::Tensor idx = at::tensor(rows, at::TensorOptions().dtype(at::kLong)).to(pending_.device());
    pending_ = pending_.index_select(0, idx);
    if (last_drafts_.defined()) last_drafts_ = last_drafts_.index_select(0, idx);
  }

 private:
  const CausalLM& model_;
  int64_t target_vocab_;
  KVCache cache_;
  at::Tensor pending_;      // [B, 2] tokens fed first at the next propose()
  at::Tensor last_drafts_;  // [B, gamma]
};

}  // namespace

std::unique_ptr<Drafter> make_model_drafter(const CausalLM& model, int64_t target_vocab) {
  return std::make_unique<ModelDrafter>(model, target_vocab);
}

}  // namespace ears
