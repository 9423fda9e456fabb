#include "harness/train/eagle3.h"

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "decoders/aten_operators.h"
#include "decoders/layers.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "decoders/safetensors.h"
#include "decoders/tokenizer.h"
#include "harness/base/error.h"
#include "harness/train/batch.h"
#include "harness/train/draft_vocab.h"
#include "harness/train/eval.h"
#include "harness/train/target.h"

namespace ears {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

ParamMap init_eagle3_params(const ModelConfig& c, int64_t n_aux, uint64_t seed, const at::Tensor& lm_head,
                            const at::Tensor& final_norm) {
  at::manual_seed(seed);
  const auto opt = at::TensorOptions().dtype(at::kFloat);
  const int64_t d = c.hidden_size, H = c.num_attention_heads, K = c.num_key_value_heads, hd = c.head_dim;
  const int64_t I = c.intermediate_size, V = c.vocab_size;
  const c10::Device dev = lm_head.defined() ? lm_head.device() : c10::Device(c10::kCPU);
  ParamMap p;
  auto normal = [&](const std::string& name, std::vector<int64_t> shape, double s) {
    p[name] = (at::randn(shape, opt) * s).to(dev).requires_grad_(true);
  };
  auto ones = [&](const std::string& name) { p[name] = at::ones({d}, opt).to(dev).requires_grad_(true); };
  normal("fc.weight", {d, n_aux * d}, 0.02);
  ones("midlayer.input_layernorm.weight");
  ones("midlayer.hidden_norm.weight");
  ones("midlayer.post_attention_layernorm.weight");
  normal("midlayer.self_attn.q_proj.weight", {H * hd, 2 * d}, 0.02);
  normal("midlayer.self_attn.k_proj.weight", {K * hd, 2 * d}, 0.02);
  normal("midlayer.self_attn.v_proj.weight", {K * hd, 2 * d}, 0.02);
  normal("midlayer.self_attn.o_proj.weight", {d, H * hd}, 0.02);
  normal("midlayer.mlp.gate_proj.weight", {I, d}, 0.02);
  normal("midlayer.mlp.up_proj.weight", {I, d}, 0.02);
  normal("midlayer.mlp.down_proj.weight", {d, I}, 0.02);
  if (final_norm.defined()) p["norm.weight"] = final_norm.detach().to(at::kFloat).clone().requires_grad_(true);
  else ones("norm.weight");
  if (lm_head.defined()) p["lm_head.weight"] = lm_head.detach().to(at::kFloat).clone().requires_grad_(true);
  else normal("lm_head.weight", {V, d}, 0.02);
  return p;
}

namespace {

// x shifted left by n along dim 1, zero-filled at the end.
at::Tensor shift_left(const at::Tensor& x, int64_t n) {
  const int64_t N = x.size(1);
  if (n >= N) return at::zeros_like(x);
  std::vector<int64_t> pad_shape = x.sizes().vec();
  pad_shape[1] = n;
  return at::cat({x.narrow(1, n, N - n), at::zeros(pad_shape, x.options())}, 1);
}

// The TTT teacher at every slot: probs [B, N, Vd] (detached), argmax [B, N] in draft ids, inside
// [B, N] 1 where the target's own argmax is a draft id (undefined with the whole vocabulary).
struct DraftTeacher {
  at::Tensor probs, argmax, inside;
};

DraftTeacher draft_teacher(const at::Tensor& target_logits, const at::Tensor& draft_ids) {
  DraftTeacher t;
  const at::Tensor arg = target_logits.argmax(-1);
  if (!draft_ids.defined()) {
    t.probs = at::softmax(target_logits.to(at::kFloat), -1).detach();
    t.argmax = arg;
    return t;
  }
  const at::Tensor ids = draft_ids.to(target_logits.device());
  const int64_t V = target_logits.size(-1), Vd = ids.size(0);
  const at::Tensor to_draft = at::full({V}, -1, ids.options()).index_copy_(0, ids, at::arange(Vd, ids.options()));
  t.probs = at::softmax(target_logits.index_select(-1, ids).to(at::kFloat), -1).detach();
  t.argmax = to_draft.index_select(0, arg.flatten()).view_as(arg);
  t.inside = t.argmax.ge(0).to(at::kFloat);
  return t;
}

}  // namespace

namespace {

// The head's attention at unroll step k: each position sees step 0's keys causally and its own
// keys of steps 1..k (EAGLE-3's training-time test). Appends step k's keys and values
// ([B, K, 1, N, hd]) to keys / values; returns [B, N, H * hd].
at::Tensor ttt_attention(const ParamMap& p, const ModelConfig& c, const at::Tensor& x, const layers::RopeTables& rope,
                         const at::Tensor& blocked0, std::vector<at::Tensor>& keys, std::vector<at::Tensor>& values) {
  const int64_t B = x.size(0), N = x.size(1);
  const int64_t H = c.num_attention_heads, K = c.num_key_value_heads, hd = c.head_dim, G = H / K;
  const double scale = std::pow(static_cast<double>(hd), -0.5);
  const int k = static_cast<int>(keys.size());
  const at::Tensor q = layers::apply_rope(layers::linear(x, need_param(p, "midlayer.self_attn.q_proj.weight")).view({B, N, H, hd}), rope);
  const at::Tensor kk = layers::apply_rope(layers::linear(x, need_param(p, "midlayer.self_attn.k_proj.weight")).view({B, N, K, hd}), rope);
  const at::Tensor vv = layers::linear(x, need_param(p, "midlayer.self_attn.v_proj.weight")).view({B, N, K, hd});
  keys.push_back(kk.permute({0, 2, 1, 3}).unsqueeze(2));
  values.push_back(vv.permute({0, 2, 1, 3}).unsqueeze(2));
  // Query head h = kv * G + g uses KV head kv (HF repeat_kv).
  const at::Tensor qg = q.view({B, N, K, G, hd}).permute({0, 2, 3, 1, 4});  // [B, K, G, N, hd]
  std::vector<at::Tensor> scores = {
      at::matmul(qg, keys[0].transpose(-1, -2)).mul(scale).masked_fill(blocked0, -std::numeric_limits<double>::infinity())};
  for (int i = 1; i <= k; ++i) scores.push_back((qg * keys[i]).sum(-1, /*keepdim=*/true).mul(scale));  // [B,K,G,N,1]
  const at::Tensor probs = at::softmax(at::cat(scores, -1), -1, at::kFloat).to(x.scalar_type());
  at::Tensor attn = at::matmul(probs.narrow(-1, 0, N), values[0]);
  for (int i = 1; i <= k; ++i) attn = attn + probs.narrow(-1, N + i - 1, 1) * values[i];
  return attn.permute({0, 3, 1, 2, 4}).reshape({B, N, H * hd});
}

// Step k's cross-entropy against the teacher's distribution over the loss tokens t + k + 2 whose
// teacher argmax the draft vocabulary holds (fp32), and the argmax hits among them.
struct StepLoss {
  at::Tensor loss, correct, count;
};

StepLoss ttt_step_loss(const at::Tensor& logits, const DraftTeacher& teacher_all, const at::Tensor& loss_mask, int k) {
  const at::Tensor teacher = shift_left(teacher_all.probs, k + 1);
  at::Tensor mask = shift_left(loss_mask, k + 2);  // token t+k+2 exists and is a loss token
  if (teacher_all.inside.defined()) mask = mask * shift_left(teacher_all.inside, k + 1);
  const at::Tensor ce = -(teacher * at::log_softmax(logits, -1, at::kFloat)).sum(-1);  // [B, N]
  StepLoss s;
  s.count = mask.sum();
  s.loss = (ce * mask).sum() / s.count.clamp_min(1.0);
  s.correct = ((logits.argmax(-1) == shift_left(teacher_all.argmax, k + 1)).to(at::kFloat) * mask).sum();
  return s;
}

}  // namespace

TttOutput eagle3_ttt_forward(const ParamMap& p, const ModelConfig& c, const at::Tensor& embed, const at::Tensor& features,
                             const at::Tensor& target_logits, const at::Tensor& ids, const at::Tensor& loss_mask,
                             int ttt_steps, bool keep_logits, const at::Tensor& draft_ids) {
  const int64_t B = ids.size(0), N = ids.size(1);
  const double eps = c.rms_norm_eps;
  const auto dev = ids.device();
  const at::Tensor inv_freq = layers::rope_inv_freq(c.head_dim, c.rope, dev);
  const at::Tensor ar = at::arange(N, at::TensorOptions().dtype(at::kLong).device(dev));
  // Block 0: key s visible to query t iff s <= t (padding sits at the end and is never a loss slot).
  const at::Tensor blocked0 = (ar.view({1, N}) > ar.view({N, 1})).view({1, 1, 1, N, N});
  const DraftTeacher teacher = draft_teacher(target_logits, draft_ids);
  const c10::ScalarType dt = need_param(p, "fc.weight").scalar_type();  // compute dtype = the weights' dtype

  at::Tensor h = layers::linear(features.to(dt), need_param(p, "fc.weight"));
  std::vector<at::Tensor> keys, values;  // per step [B, K, 1, N, hd]
  TttOutput out;
  at::Tensor total;
  for (int k = 0; k < ttt_steps; ++k) {
    const at::Tensor emb = at::embedding(embed, shift_left(ids, k + 1)).to(dt).detach();
    const at::Tensor x = at::cat({layers::rms_norm(emb, need_param(p, "midlayer.input_layernorm.weight"), eps),
                                  layers::rms_norm(h, need_param(p, "midlayer.hidden_norm.weight"), eps)},
                                 -1);
    const layers::RopeTables rope = layers::rope_tables(inv_freq, (ar + k).view({1, N}).expand({B, N}), dt);
    const at::Tensor attn = ttt_attention(p, c, x, rope, blocked0, keys, values);
    const at::Tensor r = h + layers::linear(attn, need_param(p, "midlayer.self_attn.o_proj.weight"));
    const at::Tensor h_out =
        r + swiglu_mlp(layers::rms_norm(r, need_param(p, "midlayer.post_attention_layernorm.weight"), eps),
                       need_param(p, "midlayer.mlp.gate_proj.weight"), need_param(p, "midlayer.mlp.up_proj.weight"),
                       need_param(p, "midlayer.mlp.down_proj.weight"));
    const at::Tensor logits = layers::linear(layers::rms_norm(h_out, need_param(p, "norm.weight"), eps), need_param(p, "lm_head.weight"));
    if (k == 0) out.step0_logits = logits;
    if (keep_logits) out.logits.push_back(logits);
    const StepLoss s = ttt_step_loss(logits, teacher, loss_mask, k);
    out.loss.push_back(s.loss);
    out.correct.push_back(s.correct.detach());
    out.count.push_back(s.count.detach());
    const at::Tensor weighted = s.loss * std::pow(0.8, k);
    total = total.defined() ? total + weighted : weighted;
    h = h_out;
  }
  out.total = total;
  return out;
}

// ---------------------------------------------------------------------------------------------
// end-to-end

namespace {

// Three distinct ascending ids in 0..L-1.
bool distinct_in_range(const std::vector<int>& v, int L) { return v[0] >= 0 && v[0] < v[1] && v[1] < v[2] && v[2] < L; }

// The default ids for L target layers, and why (empty when no default has 3 distinct ids).
std::vector<int> default_aux_layers(int L, std::string& why) {
  const std::vector<int> upstream = {2, L / 2, L - 3}, small = {1, L / 2, L - 1};
  if (distinct_in_range(upstream, L)) {
    why = fmt::format("EAGLE's {{2, L/2, L-3}} for L = {} (SafeAILab/EAGLE captures these whatever eagle_config says)", L);
    return upstream;
  }
  if (!distinct_in_range(small, L)) return {};
  why = fmt::format("{{1, L/2, L-1}} for L = {} (EAGLE's {{2, L/2, L-3}} = [{}] repeats an id)", L, fmt::join(upstream, ", "));
  return small;
}

}  // namespace

std::vector<int> resolve_aux_layers(const std::vector<int>& given, int L, const LogFn& log) {
  std::string why;
  const std::vector<int> fallback = default_aux_layers(L, why);
  if (given.empty() && fallback.empty())
    fail("--aux-layers: the target has {} layers, too few for a default of 3 distinct aux ids in 1..{}; give 3 distinct "
         "ids in 0..{} (0 = the embeddings) with --aux-layers",
         L, L - 1, L - 1);
  if (given.empty()) {
    emit(log, fmt::format("aux layers [{}]: {}", fmt::join(fallback, ", "), why));
    return fallback;
  }
  std::vector<int> sorted = given;
  std::sort(sorted.begin(), sorted.end());
  if (given.size() != 3 || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    fail("--aux-layers [{}]: give 3 distinct ids (EAGLE-3's fc folds 3 target hidden states into one){}",
         fmt::join(given, ", "), fallback.empty() ? "" : fmt::format(", e.g. \"{}\"", fmt::join(fallback, ",")));
  for (int a : given)
    if (a < 0 || a >= L) fail("--aux-layers: id {} is outside 0..{} (hidden state entering layer i; {} layers)", a, L - 1, L);
  emit(log, fmt::format("aux layers [{}]: --aux-layers", fmt::join(given, ", ")));
  return given;
}

namespace {

// The least row length at which `d` gives the head a loss position: slot t is supervised through
// token t + 2 (step 0), so the first weighted token at index >= 2, plus one; 0 when it has none.
int64_t loss_reach(const TrainDoc& d) {
  for (std::size_t i = 2; i < d.ids.size(); ++i)
    if (d.weight[i] > 0) return static_cast<int64_t>(i) + 1;
  return 0;
}

}  // namespace

void check_loss_positions(const DocPools& pools, double natural_fraction, int64_t seq_len, const LogFn& log) {
  std::vector<const std::vector<TrainDoc>*> used;
  if (natural_fraction < 1.0 || pools.natural.empty()) used.push_back(&pools.chat);
  if (natural_fraction > 0.0) used.push_back(&pools.natural);
  int64_t n = 0, cut = 0, least = 0, all = 0;  // least / all: the --seq-len one document / every one needs
  for (const auto* docs : used)
    for (const TrainDoc& d : *docs) {
      const int64_t reach = loss_reach(d);
      if (reach == 0) continue;  // no loss token at all (an empty answer): no --seq-len helps
      ++n;
      if (reach > seq_len) ++cut;
      least = least == 0 ? reach : std::min(least, reach);
      all = std::max(all, reach);
    }
  if (n == 0)
    fail("train eagle3: no training document has a loss token (an answer) past its second token; check --synth-n, "
         "--gsm8k and --natural-fraction");
  if (cut == n)
    fail("--seq-len {}: no training document reaches a loss position within {} tokens (their prompts are longer), "
         "so every step would train nothing; give --seq-len {} or more ({} reaches one document)",
         seq_len, seq_len, all, least);
  if (cut > 0)
    emit(log, fmt::format("warning: --seq-len {}: {} of {} training documents reach no loss position within {} tokens "
                          "(their prompt is longer); their rows train nothing; --seq-len {} reaches every one",
                          seq_len, cut, n, seq_len, all));
}

namespace {

// Per-TTT-step argmax agreement with the target, summed on the device over a log window.
class TttAccuracy {
 public:
  explicit TttAccuracy(int steps) : correct_(static_cast<size_t>(steps)), count_(static_cast<size_t>(steps)) {}

  void add(const TttOutput& t) {
    if (t.count[0].item<double>() == 0) ++empty_steps_;
    for (std::size_t k = 0; k < correct_.size(); ++k) {
      correct_[k] = correct_[k].defined() ? correct_[k] + t.correct[k].cpu() : t.correct[k].cpu();
      count_[k] = count_[k].defined() ? count_[k] + t.count[k].cpu() : t.count[k].cpu();
    }
  }

  // "  acc a0 a1 ...  (1 + sum prod acc = x)" for the window so far; starts a new window.
  std::string take_text() {
    std::string s = "  acc";
    double sim = 1.0, prod = 1.0;
    for (std::size_t k = 0; k < correct_.size(); ++k) {
      const double a = correct_[k].defined() ? correct_[k].item<double>() / std::max(1.0, count_[k].item<double>()) : 0.0;
      s += fmt::format(" {:.3f}", a);
      prod *= a;
      sim += prod;
      correct_[k] = at::Tensor();
      count_[k] = at::Tensor();
    }
    return s + fmt::format("  (1 + sum prod acc = {:.2f})", sim);
  }

  // Steps whose batch held no loss position (they trained nothing).
  int64_t empty_steps() const { return empty_steps_; }

 private:
  std::vector<at::Tensor> correct_, count_;
  int64_t empty_steps_ = 0;
};

// --draft-vocab checked before any work: 0 to V ids, and an --init head with a reduced vocabulary
// keeps it (the option may only repeat its size). Returns that head's vocabulary, else nothing.
std::optional<DraftVocab> check_draft_vocab(const Eagle3TrainOptions& o, int64_t V) {
  if (o.draft_vocab < 0 || o.draft_vocab > V)
    fail("--draft-vocab {}: give 1 to the target's {} ids (0 = --init's, else every id)", o.draft_vocab, V);
  if (o.init.empty()) return std::nullopt;
  DraftVocab v = checkpoint_draft_vocab(o.init, V);
  if (v.full()) return std::nullopt;
  if (o.draft_vocab != 0 && o.draft_vocab != v.size())
    fail("--draft-vocab {}: --init {} already scores {} ids; leave --draft-vocab out to keep them", o.draft_vocab,
         o.init.string(), v.size());
  return v;
}

// The draft vocabulary: --init's reduced one, else the --draft-vocab most frequent loss-bearing ids
// of the training documents, else every id.
DraftVocab choose_draft_vocab(const Eagle3TrainOptions& o, const std::optional<DraftVocab>& init, const DocPools& pools,
                              int64_t V) {
  if (init) {
    DraftVocab v = *init;
    v.coverage = loss_token_coverage(pools, v);  // of this run's documents, as for a chosen vocabulary
    return v;
  }
  if (o.draft_vocab == 0 || o.draft_vocab == V) return full_draft_vocab(V);
  return frequent_draft_vocab(pools, o.draft_vocab, V);
}

// The head's parameters; with warm_start_lm_head its lm_head and norm start from the target's
// (the draft vocabulary's rows); then (continued training) the weights of o.init when given — a
// whole-vocabulary --init's lm_head cut to the draft vocabulary's rows.
ParamMap eagle3_params(const Eagle3TrainOptions& o, const CausalLM& target, const ModelConfig& hc, std::size_t n_aux,
                       const DraftVocab& vocab, c10::Device device, const LogFn& log) {
  at::Tensor final_norm, lm_head;
  const at::Tensor rows = vocab.index().to(device);
  if (o.warm_start_lm_head) {
    final_norm = Checkpoint::open(o.target).load("model.norm.weight", device, at::kFloat,
                                                 std::vector<int64_t>{target.config().hidden_size});
    lm_head = target.lm_head_weight().index_select(0, rows);
  }
  ParamMap params = init_eagle3_params(hc, static_cast<int64_t>(n_aux), o.schedule.seed, lm_head, final_norm);
  if (o.init.empty()) return params;
  ParamMap staged = params;  // the same tensors, but lm_head shaped as --init's
  const int64_t init_rows = Checkpoint::open(o.init).shape("lm_head.weight").at(0);
  if (init_rows != vocab.size()) staged["lm_head.weight"] = at::zeros({init_rows, hc.hidden_size}, rows.options().dtype(at::kFloat));
  load_init_weights(staged, o.init, device, log);
  if (init_rows != vocab.size()) {
    at::NoGradGuard no_grad;
    params["lm_head.weight"] = staged["lm_head.weight"].index_select(0, rows).requires_grad_(true);
  }
  return params;
}

// The step's loss: the frozen target's logits and aux features (no grad), then the TTT unroll
// on the master weights cast to the compute dtype.
at::Tensor eagle3_step_loss(const CausalLM& target, const ParamMap& params, c10::ScalarType compute, const ModelConfig& hc,
                            const at::Tensor& embed, const PaddedBatch& b, const std::vector<int>& aux, int ttt_steps,
                            const at::Tensor& draft_ids, TttAccuracy& acc) {
  at::Tensor logits;
  std::vector<at::Tensor> feats;
  {
    at::NoGradGuard no_grad;
    ForwardOptions fo;
    fo.aux_layers = aux;
    ForwardOutput f = target.forward(b.ids, fo);
    logits = f.logits;
    feats = std::move(f.aux_hidden);
  }
  TttOutput t = eagle3_ttt_forward(cast_params(params, compute), hc, embed, at::cat(feats, -1), logits, b.ids, b.loss_mask,
                                   ttt_steps, /*keep_logits=*/false, draft_ids);
  acc.add(t);
  return t.total;
}

void evaluate_eagle3(const Eagle3TrainOptions& o, TrainReport& r, const LogFn& log) {
  const double t0 = now_s();
  const EvalResult e = evaluate_pair(o.target, o.out, o.eval_n, o.eval_gamma, o.eval_max_new_tokens);
  r.metrics["tau"] = e.tau;
  r.metrics["gamma"] = o.eval_gamma;
  r.metrics["synth_gsm_test_accuracy"] = e.accuracy;
  r.metrics["eval_n"] = static_cast<double>(e.n);
  emit(log, fmt::format("eval: tau {:.2f} at gamma {} (greedy) on {} synth-gsm test problems, accuracy {:.1f}%, {:.1f} tok/s, {:.0f} s",
                        e.tau, o.eval_gamma, e.n, 100 * e.accuracy, e.tokens_per_s, now_s() - t0));
}

// The trained head into `out` with the frozen copy of the target's embedding it trained with, as
// EAGLE and SpecForge save it (EAGLE's loader takes the head's own embed_tokens.weight whenever
// config.json has target_hidden_size, and leaves a missing one random). Refuses a head no step
// trained (exit 2, nothing saved); warns about steps that trained nothing.
void save_trained_eagle3(const fs::path& out, const ParamMap& params, const at::Tensor& embed, const ModelConfig& hc,
                         const ModelConfig& tc, const std::vector<int>& aux, const DraftVocab& vocab, int64_t empty_steps,
                         int64_t steps, const LogFn& log) {
  if (empty_steps == steps)
    fail("train eagle3: none of the {} steps had a loss position (a slot whose token t+2 is an answer token), so "
         "nothing was trained and no head is saved; raise --seq-len or --batch",
         steps);
  if (empty_steps > 0)
    emit(log, fmt::format("warning: {} of {} steps had no loss position and trained nothing; raise --seq-len or --batch",
                          empty_steps, steps));
  ParamMap saved = params;
  saved["embed_tokens.weight"] = embed;
  save_eagle3(out, saved, hc, tc, aux, vocab);
}

ojson eagle3_options_json(const Eagle3TrainOptions& o, const std::vector<int>& aux, const std::string& natural_source,
                          const DraftVocab& vocab, int64_t n_params) {
  return {{"target", o.target.string()},
          {"arch", {{"heads", o.arch.heads}, {"kv_heads", o.arch.kv_heads}, {"head_dim", o.arch.head_dim},
                    {"intermediate", o.arch.intermediate}, {"aux_layers", aux}}},
          {"schedule", schedule_json(o.schedule)}, {"corpus", corpus_json(o.corpus, natural_source)},
          {"natural_fraction", o.natural_fraction}, {"ttt_steps", o.ttt_steps},
          {"regenerate", o.regenerate},
          {"draft_vocab", {{"size", vocab.size()}, {"source", vocab.source}, {"coverage", vocab.coverage}}},
          {"warm_start_lm_head", o.warm_start_lm_head}, {"init", o.init.string()}, {"parameters", n_params}};
}

}  // namespace

TrainReport train_eagle3(const Eagle3TrainOptions& o, const LogFn& log) {
  const TrainSchedule& s = o.schedule;
  set_threads(s.threads);
  const c10::Device device = parse_device(s.device, "--device");
  if (o.ttt_steps < 1) fail("--ttt must be at least 1");
  if (o.regenerate < 0) fail("--regenerate {}: give 0 (off) or a number of chat documents", o.regenerate);
  const c10::ScalarType compute = parse_dtype(s.dtype, "--dtype");
  const CausalLM target = CausalLM::load(o.target, device, compute);
  const ModelConfig& tc = target.config();
  const Tokenizer tok = Tokenizer::load(o.target);
  const std::optional<DraftVocab> init_vocab = check_draft_vocab(o, tc.vocab_size);
  const std::vector<int> aux = resolve_aux_layers(o.arch.aux_layers, static_cast<int>(tc.num_hidden_layers), log);
  ModelConfig hc = eagle3_config(o.arch, tc);

  const double t0 = now_s();
  DocPools pools = build_doc_pools(tok, o.corpus, /*prompt_weight=*/0.0f);
  emit(log, fmt::format("data: {} chat documents, {} natural documents from {}; {:.1f} s", pools.chat.size(), pools.natural.size(),
                        pools.natural_source, now_s() - t0));
  check_loss_positions(pools, o.natural_fraction, s.seq_len, log);
  if (o.regenerate > 0) regenerate_answers(o.target, pools.chat, o.regenerate, o.schedule.seq_len, log);
  const DraftVocab vocab = choose_draft_vocab(o, init_vocab, pools, tc.vocab_size);
  hc.vocab_size = vocab.size();
  if (!vocab.full())
    emit(log, fmt::format("draft vocabulary: {} of {} target ids ({}; {:.2f}% of the loss-bearing tokens)", vocab.size(),
                          vocab.target_vocab, vocab.source, 100 * vocab.coverage));
  const at::Tensor draft_ids = vocab.full() ? at::Tensor() : vocab.index().to(device);
  DocSampler sampler(pools, o.natural_fraction, s.seed);
  ParamMap params = eagle3_params(o, target, hc, aux.size(), vocab, device, log);
  const int64_t n_params = numel_total(params);
  emit(log, fmt::format("head: hidden {}, {} heads, intermediate {}, aux layers [{}], {:.2f} M trainable parameters, TTT {} steps",
                        hc.hidden_size, hc.num_attention_heads, hc.intermediate_size, fmt::join(aux, ", "), n_params / 1e6,
                        o.ttt_steps));

  TttAccuracy acc(o.ttt_steps);
  const at::Tensor embed = target.embedding_weight();
  TrainReport r = run_loop(
      s, values_of(params), decay_flags(params),
      [&](int64_t) {
        const PaddedBatch b = pad_batch(sampler, s.batch, s.seq_len, device);
        return eagle3_step_loss(target, params, compute, hc, embed, b, aux, o.ttt_steps, draft_ids, acc);
      },
      log, [&] { return acc.take_text(); });
  save_trained_eagle3(o.out, params, embed, hc, tc, aux, vocab, acc.empty_steps(), r.steps_done, log);
  emit(log, fmt::format("saved {} ({} steps, {:.1f} s, {:.3f} s/step)", o.out.string(), r.steps_done, r.seconds, r.step_seconds));
  if (o.eval_n > 0) evaluate_eagle3(o, r, log);
  write_train_log(o.out / "train_log.json", "eagle3", eagle3_options_json(o, aux, pools.natural_source, vocab, n_params), r,
                  o.init);
  return r;
}

}  // namespace ears
