// Training the EAGLE-3 head on the frozen target (`ears-bench train eagle3`): its parameters,
// the training-time-test (TTT) unroll with its soft cross-entropy loss
// (../shared/notes/eagle3-training.md section 3), and the end-to-end command.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "decoders/model_config.h"
#include "harness/train/checkpoint_writer.h"
#include "harness/train/corpus.h"
#include "harness/train/loop.h"

namespace ears {

// fc.weight, midlayer.*, norm.weight, lm_head.weight (fp32, requires_grad). lm_head/norm start
// as copies of the target's lm_head / final norm when given (a warm start), else random / ones.
ParamMap init_eagle3_params(const ModelConfig& head, int64_t n_aux, uint64_t seed, const at::Tensor& target_lm_head = {},
                            const at::Tensor& target_final_norm = {});

struct TttOutput {
  at::Tensor total;                 // sum_k 0.8^k * loss_k (0-dim, differentiable)
  std::vector<at::Tensor> loss;     // per step: masked soft cross-entropy per loss slot
  std::vector<at::Tensor> correct;  // per step: masked count of argmax(draft) == argmax(target)
  std::vector<at::Tensor> count;    // per step: loss slots
  at::Tensor step0_logits;          // [B, N, Vd] (tests compare with Eagle3Head::forward)
  std::vector<at::Tensor> logits;   // every step's logits (kept only when keep_logits)
};
// Training-time test unroll (../shared/notes/eagle3-training.md section 3) over K steps.
// Slot t at step k: hidden = fc(f_t) (k = 0) or the step k-1 pre-norm output at t; token
// x_{t+k+1}; RoPE position t+k; attention: causal over the step-0 keys plus the slot's own keys
// of steps 1..k; teacher softmax(target_logits[t+k+1]); loss only where token t+k+2 exists and
// is a loss token (loss_mask). embed: the target's (frozen) embedding [V, d]. With a reduced draft
// vocabulary (draft_ids: [Vd] target ids, the head's lm_head rows) the teacher is the softmax of the
// target's logits over those ids, and a slot whose target argmax lies outside is no loss slot (as
// SpecForge trains it); correct counts draft ids.
TttOutput eagle3_ttt_forward(const ParamMap& p, const ModelConfig& head, const at::Tensor& embed,
                             const at::Tensor& features, const at::Tensor& target_logits, const at::Tensor& ids,
                             const at::Tensor& loss_mask, int ttt_steps, bool keep_logits = false,
                             const at::Tensor& draft_ids = {});

// The target hidden_states ids the head reads (entering layer i), for a target of L layers: `given`
// (--aux-layers: 3 distinct ids in 0..L-1, the fc EAGLE, vLLM and sglang build is 3 x hidden -> hidden),
// else EAGLE's {2, L/2, L-3} when those are distinct (L >= 7: SafeAILab/EAGLE captures them whatever
// eagle_config says), else {1, L/2, L-1} (L = 4..6, e.g. the bundled 6-layer pair's [1, 3, 5]). Logs
// the choice and why; fails when L is too small for a default.
std::vector<int> resolve_aux_layers(const std::vector<int>& given, int L, const LogFn& log = {});

// Before training: the documents the sampler draws (chat, and natural when natural_fraction > 0)
// must reach a loss position within seq_len tokens (slot t is supervised through token t + 2, and a
// chat prompt carries no loss). None does: fails naming --seq-len and the length needed; some do
// not: logs a warning with the share whose rows train nothing.
void check_loss_positions(const DocPools& pools, double natural_fraction, int64_t seq_len, const LogFn& log = {});

struct Eagle3TrainOptions {
  std::filesystem::path target, out;
  Eagle3Arch arch;
  TrainSchedule schedule;
  CorpusOptions corpus;
  double natural_fraction = 0.2;
  int ttt_steps = 3;
  bool warm_start_lm_head = true;
  std::filesystem::path init;       // non-empty: start from this head's weights (continued training;
                                    // same architecture), not from a random init
  int64_t draft_vocab = 0;          // > 0: the head scores only the N most frequent loss-bearing target
                                    // ids (harness/train/draft_vocab.h); 0: --init's, else every id
  int64_t regenerate = 0;           // > 0: the first N chat documents answered by the target itself
                                    // (greedy, harness/train/eval.h regenerate_answers)
  int64_t eval_n = 0;               // > 0: tau at gamma 5 (greedy) on that many synth-gsm test problems
  int eval_gamma = 5;
  int64_t eval_max_new_tokens = 200;
};
// Trains the head on the target's features, saves it (save_eagle3, with the frozen copy of the
// target's embedding as embed_tokens.weight) with train_log.json into <out>; evaluates the pair when
// eval_n > 0. A run none of whose steps had a loss position fails and saves nothing.
TrainReport train_eagle3(const Eagle3TrainOptions& options, const LogFn& log = {});

}  // namespace ears
