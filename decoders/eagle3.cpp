#include "decoders/eagle3.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "decoders/aten_operators.h"
#include "decoders/eagle3_config.h"
#include "decoders/layers.h"
#include "decoders/safetensors.h"
#include "decoders/sampling.h"
#include "harness/base/files.h"
#include "harness/base/error.h"

namespace ears {

namespace {

// The target hidden_states ids fc reads: options.aux_layers, else the config's
// (decoders/eagle3_config.h), else the target's EAGLE-3 default; configured ids +1 under the sglang
// convention, which only eagle_config ids follow. Checked against the target's layers 0..L-1:
// hidden_states[L] is the post-final-norm output, which no EAGLE-3 runtime captures.
std::vector<int> aux_layer_ids(const Eagle3Config& e, const Eagle3Options& options, const CausalLM& target,
                               const std::string& origin) {
  const bool sglang = options.convention == AuxLayerConvention::Sglang;
  std::vector<int> ids = options.aux_layers ? *options.aux_layers : e.aux_ids.value_or(target.default_eagle_aux_layers());
  if (sglang && !options.aux_layers && e.aux_ids && !e.aux_ids_in_eagle_config)
    fail("{}: the sglang aux-layer convention applies to eagle_config ids; this head's top-level "
         "eagle_aux_hidden_state_layer_ids are vLLM's (HF hidden_states ids): drop aux_layer_convention",
         origin);
  const std::vector<int> given = ids;
  if (sglang && (options.aux_layers || e.aux_ids))
    for (int& id : ids) id += 1;
  const int64_t n = target.config().num_hidden_layers;
  // Ids given with the options (the experiment's draft.aux_layers) are named as such, not the head's file.
  const std::string where = options.aux_layers ? "draft.aux_layers" : origin;
  const std::string convention =
      ids == given ? "hf convention" : fmt::format("sglang convention: [{}] + 1", fmt::join(given, ", "));
  for (int id : ids)
    if (id < 0 || id >= n)
      fail("{}: aux layer ids [{}] ({}) name layer {}, outside the target's 0..{} (num_hidden_layers {}); use ids "
           "from 0 to {} (hidden_states[{}] is the post-final-norm output, which EAGLE-3 runtimes never capture)",
           where, fmt::join(ids, ", "), convention, id, n - 1, n, n - 1, n);
  return ids;
}

}  // namespace

Eagle3Head Eagle3Head::load(const std::filesystem::path& dir, const CausalLM& target, const Eagle3Options& options) {
  Eagle3Head head;
  const std::string origin = (dir / "config.json").string();
  const Eagle3Config e = Eagle3Config::load(dir);
  head.cfg_ = e.layer;
  head.layout_ = e.layout;
  head.norm_before_residual_ = e.norm_before_residual;
  const ModelConfig& c = head.cfg_;
  const ModelConfig& tc = target.config();
  // EAGLE-3 configs carry the target's vocabulary as vocab_size (the head embeds target ids) and
  // their own as draft_vocab_size.
  if (c.vocab_size != tc.vocab_size)
    fail("{}: vocab_size {} does not match the target's vocab_size {} ({}); this draft was trained for another "
         "target",
         origin, c.vocab_size, tc.vocab_size, target.dir().string());
  head.draft_vocab_ = e.draft_vocab;
  if (e.target_hidden != tc.hidden_size)
    fail("{}: target_hidden_size {} does not match the target's hidden_size {} ({}); this draft was trained for "
         "another target",
         origin, e.target_hidden, tc.hidden_size, target.dir().string());
  head.target_vocab_ = tc.vocab_size;
  head.device_ = target.device();
  head.dtype_ = target.dtype();
  head.aux_layers_ = aux_layer_ids(e, options, target, origin);

  const Checkpoint ckpt = Checkpoint::open(dir);
  head.load_weights(ckpt, dir, target, e.norm_before_fc);
  head.load_vocab_map(ckpt, dir);
  head.inv_freq_ = layers::rope_inv_freq(c.head_dim, c.rope, head.device_);
  head.rope_ = layers::RopeCache::build(head.inv_freq_, c.max_position_embeddings, head.dtype_);
  return head;
}

int64_t Eagle3Head::parameter_count() const {
  int64_t n = own_embed_ ? embed_.numel() : 0;
  for (const layers::LinearWeight* w : {&fc_, &qkv_, &o_, &gate_up_, &down_, &lm_head_})
    n += w->out_features * w->in_features + (w->bias.defined() ? w->bias.numel() : 0);
  for (const at::Tensor* t : {&input_norm_, &hidden_norm_, &post_norm_, &norm_, &fc_norm_})
    n += t->defined() ? t->numel() : 0;
  return n;
}

void Eagle3Head::load_weights(const Checkpoint& ckpt, const std::filesystem::path& dir, const CausalLM& target,
                              bool norm_before_fc) {
  const ModelConfig& c = cfg_;
  const ModelConfig& tc = target.config();
  const int64_t d = c.hidden_size, H = c.num_attention_heads, K = c.num_key_value_heads, hd = c.head_dim;
  const int64_t I = c.intermediate_size;
  const std::string p = ckpt.contains("midlayer.input_layernorm.weight") ? "midlayer." : "layers.0.";
  auto w = [&](const std::string& name, std::vector<int64_t> shape) { return ckpt.load(name, device_, dtype_, shape); };

  const int64_t fc_in = static_cast<int64_t>(aux_layers_.size()) * tc.hidden_size;
  if (ckpt.contains("fc.weight") && ckpt.shape("fc.weight").size() == 2 && ckpt.shape("fc.weight")[1] != fc_in)
    fail("{}: fc.weight takes {} features but {} aux layers x target hidden {} = {}; set draft.aux_layers to the "
         "ids the head was trained with",
         dir.string(), ckpt.shape("fc.weight")[1], aux_layers_.size(), tc.hidden_size, fc_in);
  fc_ = layers::prepare_linear(w("fc.weight", {d, fc_in}), ckpt.contains("fc.bias") ? w("fc.bias", {d}) : at::Tensor());
  if (norm_before_fc) fc_norm_ = w("input_norm.weight", {fc_in});
  input_norm_ = w(p + "input_layernorm.weight", {d});
  hidden_norm_ = w(p + "hidden_norm.weight", {d});
  post_norm_ = w(p + "post_attention_layernorm.weight", {d});
  qkv_ = layers::prepare_linear(at::cat({w(p + "self_attn.q_proj.weight", {H * hd, 2 * d}),
                                         w(p + "self_attn.k_proj.weight", {K * hd, 2 * d}),
                                         w(p + "self_attn.v_proj.weight", {K * hd, 2 * d})},
                                        0));
  o_ = layers::prepare_linear(w(p + "self_attn.o_proj.weight", {d, H * hd}));
  gate_up_ = layers::prepare_linear(
      at::cat({w(p + "mlp.gate_proj.weight", {I, d}), w(p + "mlp.up_proj.weight", {I, d})}, 0));
  down_ = layers::prepare_linear(w(p + "mlp.down_proj.weight", {d, I}));
  norm_ = w("norm.weight", {d});
  lm_head_ = layers::prepare_linear(w("lm_head.weight", {draft_vocab_, d}));
  if (ckpt.contains("embed_tokens.weight")) {
    embed_ = w("embed_tokens.weight", {tc.vocab_size, d});
    own_embed_ = true;
  } else {
    if (tc.hidden_size != d)
      fail("{}: the head has no embed_tokens.weight and its hidden_size {} differs from the target's {}, so the "
           "target's embeddings cannot be shared",
           dir.string(), d, tc.hidden_size);
    embed_ = target.embedding_weight();
  }
}

void Eagle3Head::load_vocab_map(const Checkpoint& ckpt, const std::filesystem::path& dir) {
  if (ckpt.contains("d2t")) {
    at::Tensor d2t = ckpt.load("d2t", device_, at::kLong, std::vector<int64_t>{draft_vocab_});
    draft_to_target_ = at::arange(draft_vocab_, d2t.options()) + d2t;
  } else {
    if (draft_vocab_ != target_vocab_)
      fail("{}: draft_vocab_size {} != target vocab {} but the checkpoint has no d2t map", dir.string(), draft_vocab_,
           target_vocab_);
    draft_to_target_ = at::arange(draft_vocab_, at::TensorOptions().dtype(at::kLong).device(device_));
  }
  // One host check at load time: every mapped id must exist in the target vocabulary.
  const auto lo = draft_to_target_.min().item<int64_t>(), hi = draft_to_target_.max().item<int64_t>();
  if (lo < 0 || hi >= target_vocab_)
    fail("{}: d2t maps draft ids to target ids in [{}, {}] but the target vocabulary has {} ids", dir.string(), lo,
         hi, target_vocab_);
  // Two draft ids on one target id would scatter q into one slot (the last write wins): q(x) wrong,
  // and the exact verifier no longer lossless, without a word.
  const at::Tensor sorted = std::get<0>(draft_to_target_.to(at::kCPU).sort());
  const auto ids = sorted.accessor<int64_t, 1>();
  for (int64_t i = 1; i < sorted.size(0); ++i)
    if (ids[i] == ids[i - 1])
      fail("{}: d2t maps two draft ids to target id {}; a draft-vocabulary map is one-to-one: the checkpoint's d2t "
           "is corrupt (re-export it)",
           dir.string(), ids[i]);
}

KVCache Eagle3Head::new_cache(int64_t batch, int64_t max_len) const {
  return KVCache(1, batch, cfg_.num_key_value_heads, max_len, cfg_.head_dim, dtype_, device_);
}

Eagle3Head::Output Eagle3Head::forward(const at::Tensor& token_ids, const at::Tensor& hidden, bool from_target,
                                       KVCache& cache, const std::optional<at::Tensor>& rows) const {
  if (rows_path(token_ids, hidden, cache))
    return dtype_ == at::kFloat ? forward_rows<float>(token_ids, hidden, from_target, cache, rows)
                                : forward_rows<uint16_t>(token_ids, hidden, from_target, cache, rows);
  const ModelConfig& c = cfg_;
  const int64_t B = token_ids.size(0), T = token_ids.size(1);
  const int64_t H = c.num_attention_heads, K = c.num_key_value_heads, hd = c.head_dim;
  const double eps = c.rms_norm_eps;
  at::Tensor feats = hidden.to(dtype_);
  if (from_target && fc_norm_.defined()) feats = layers::rms_norm(feats, fc_norm_, eps);
  const at::Tensor g = from_target ? layers::linear(feats, fc_) : hidden;
  const at::Tensor emb = at::embedding(embed_, token_ids);
  const at::Tensor gn = layers::rms_norm(g, hidden_norm_, eps);
  const at::Tensor x = at::cat({layers::rms_norm(emb, input_norm_, eps), gn}, -1);

  const KVCache::Append plan = cache.prepare_append(T);
  const layers::RopeTables rope = rope_.lookup(plan.positions, plan.span, plan.uniform_start);
  const at::Tensor qkv = layers::linear(x, qkv_);
  at::Tensor q = layers::apply_rope(qkv.narrow(-1, 0, H * hd).view({B, T, H, hd}), rope);
  at::Tensor k = layers::apply_rope(qkv.narrow(-1, H * hd, K * hd).view({B, T, K, hd}), rope);
  const at::Tensor v = qkv.narrow(-1, (H + K) * hd, K * hd).view({B, T, K, hd});
  cache.write(0, plan, k, v);
  // Every row through the layer, then the rows read out: LibTorch's GEMMs round by row count, so
  // here (unlike forward_rows) the kept rows alone would not be the same bits.
  const at::Tensor attn = layers::attention(q, cache.keys(0, plan), cache.values(0, plan), plan.blocked,
                                            std::pow(static_cast<double>(hd), -0.5), plan.positions);
  at::Tensor h = (norm_before_residual_ ? gn : g) + layers::linear(attn, o_);
  h = h + layers::silu_mlp(layers::rms_norm(h, post_norm_, eps), gate_up_, down_);
  cache.commit(plan);

  Output out;
  out.prenorm = rows ? layers::take_rows(h, rows->to(at::kLong).to(device_)) : h;
  out.logits = layers::linear(layers::rms_norm(out.prenorm, norm_, eps), lm_head_);
  return out;
}

namespace {

// Alignment (../shared/fixtures/README.md): draft position t pairs the target feature f_t with
// token x_{t+1} and predicts x_{t+2}. The head's cache always ends where the target's does.
class Eagle3Drafter final : public Drafter {
 public:
  explicit Eagle3Drafter(const Eagle3Head& head) : head_(head) {}
  std::string kind() const override { return "eagle3"; }
  std::vector<int> aux_layers() const override { return head_.aux_layers(); }

  void begin(const at::Tensor& prompt_ids, const std::vector<int64_t>& lengths, const at::Tensor& first_tokens,
             const std::vector<at::Tensor>& aux, int64_t max_len) override {
    const int64_t B = prompt_ids.size(0), L = prompt_ids.size(1);
    cache_ = head_.new_cache(B, max_len);
    at::Tensor last = at::tensor(lengths, prompt_ids.options().device(c10::kCPU)).to(prompt_ids.device()).sub_(1);
    // tokens x_1 .. x_L: the prompt shifted left, with the sampled x_L at each sequence's last row.
    at::Tensor tokens = at::cat({prompt_ids.narrow(1, 1, L - 1), at::zeros({B, 1}, prompt_ids.options())}, 1);
    tokens = tokens.scatter(1, last.view({B, 1}), first_tokens.view({B, 1}));
    step(tokens, at::cat(aux, -1), last.view({B, 1}));
    cache_.set_lengths(lengths);
  }

  Proposal propose(int gamma, const SamplingParams& sampling, bool greedy, const at::Tensor& uniforms) override {
    const int64_t B = next_logits_.size(0);
    const at::Tensor& map = head_.draft_to_target();
    if (greedy && map.device().is_cpu() && host_argmax_reads(next_logits_.device(), next_logits_.scalar_type()) &&
        head_.host_step_ready({}, next_hidden_, 1, cache_))
      return propose_greedy_host(gamma);
    // The chain's tokens as target ids; on the CPU kept on the host ([B, 1] fed to the next step).
    const bool host = map.device().is_cpu();
    std::vector<at::Tensor> tokens, probs;
    std::vector<int64_t> host_tokens(static_cast<size_t>(host ? B * gamma : 0));
    at::Tensor logits = next_logits_, hidden = next_hidden_;
    for (int j = 0; j < gamma; ++j) {
      DraftToken t = draft_token(logits, sampling, greedy, greedy ? at::Tensor() : uniforms.select(1, j));
      // q over the draft vocabulary, scattered into the target's (ids outside the map: 0).
      if (!greedy) probs.push_back(at::zeros({B, head_.target_vocab()}, t.q.options()).index_copy_(1, map, t.q));
      at::Tensor tok;
      if (host) {
        tok = at::empty({B, 1}, map.options());
        for (int64_t b = 0; b < B; ++b) {
          const int64_t target_id = map.data_ptr<int64_t>()[t.id.data_ptr<int64_t>()[b]];
          tok.data_ptr<int64_t>()[b] = host_tokens[static_cast<size_t>(b * gamma + j)] = target_id;
        }
      } else {
        tok = map.index_select(0, t.id);
        tokens.push_back(tok);
      }
      if (j + 1 < gamma) {
        Eagle3Head::Output o = head_.forward(tok.view({B, 1}), hidden, /*from_target=*/false, cache_);
        logits = o.logits.select(1, 0);
        hidden = o.prenorm;
      }
    }
    Proposal out;
    out.tokens = host ? at::tensor(host_tokens, map.options()).view({B, gamma}) : at::stack(tokens, 1);
    if (!greedy) out.probs = at::stack(probs, 1);
    return out;
  }

  void accept(const at::Tensor& emitted, const std::vector<int64_t>& accepted, const std::vector<at::Tensor>& aux) override {
    const int64_t B = emitted.size(0), G1 = emitted.size(1);
    // Roll back the chain's speculative entries to the target's length before verification...
    std::vector<int64_t> base = cache_.lengths();
    for (auto& l : base) l -= G1 - 2;  // propose() appended gamma-1 = G1-2 chain positions
    cache_.set_lengths(base);
    // ...then refresh with the target's features of [x_last, d_1 .. d_gamma] paired with the
    // emitted tokens, up to the last row any sequence keeps (a causal layer: the rows before do not
    // depend on the rows after; rows past a sequence's accepted ones are cut off right after).
    const int64_t keep = *std::max_element(accepted.begin(), accepted.end()) + 1;
    if (emitted.device().is_cpu() && head_.host_step_ready(aux, at::Tensor(), keep, cache_)) {
      const at::Tensor e = emitted.to(at::kLong).contiguous();
      std::vector<int64_t> ids(static_cast<size_t>(B * keep));  // -1 past a sequence's tokens: read as 0
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(e.data_ptr<int64_t>() + b * G1, keep, ids.begin() + b * keep);
      keep_outputs(head_.forward_host(ids, keep, aux, at::Tensor(), accepted, cache_));
    } else {
      at::Tensor n = at::tensor(accepted, at::TensorOptions().dtype(at::kLong)).to(emitted.device()).view({B, 1});
      step(emitted.narrow(1, 0, keep).clamp_min(0), at::cat(aux, -1).narrow(1, 0, keep), n);
    }
    for (int64_t b = 0; b < B; ++b) base[b] += accepted[b] + 1;
    cache_.set_lengths(base);
  }

  void select(const std::vector<int64_t>& rows) override {
    cache_.select(rows);
    at::Tensor idx = at::tensor(rows, at::TensorOptions().dtype(at::kLong)).to(next_logits_.device());
    next_logits_ = next_logits_.index_select(0, idx);
    next_hidden_ = next_hidden_.index_select(0, idx);
  }

 private:
  // Runs the head over target features; keeps the logits / pre-norm state at `row` per sequence.
  void step(const at::Tensor& tokens, const at::Tensor& features, const at::Tensor& row) {
    keep_outputs(head_.forward(tokens, features, /*from_target=*/true, cache_, row));
  }
  void keep_outputs(const Eagle3Head::Output& o) {
    next_logits_ = o.logits.select(1, 0);
    next_hidden_ = o.prenorm;  // [B, 1, d]
  }

  // propose() at T = 0 on a CPU kernel path: each draft row's argmax on the host, the chain steps
  // through forward_host (the same kernels as forward()'s rows path, so the same drafts).
  Proposal propose_greedy_host(int gamma) {
    const int64_t B = next_logits_.size(0);
    const int64_t* map = head_.draft_to_target().data_ptr<int64_t>();
    std::vector<int64_t> drafts(static_cast<size_t>(B * gamma)), ids(static_cast<size_t>(B));
    const std::vector<int64_t> first_row(static_cast<size_t>(B), 0);
    at::Tensor logits = next_logits_, hidden = next_hidden_;
    for (int j = 0; j < gamma; ++j) {
      const HostArgmax top = host_argmax(logits);
      for (int64_t b = 0; b < B; ++b)
        ids[static_cast<size_t>(b)] = drafts[static_cast<size_t>(b * gamma + j)] = map[top.ids[static_cast<size_t>(b)]];
      if (j + 1 < gamma) {
        // Past the head's RoPE table (the chain runs gamma - 1 positions on, at a long context's end)
        // the step takes the tensor path, which rounds alike; forward_host refused it mid-chain.
        Eagle3Head::Output o =
            head_.host_step_ready({}, hidden, 1, cache_)
                ? head_.forward_host(ids, 1, {}, hidden, first_row, cache_)
                : head_.forward(at::tensor(ids, head_.draft_to_target().options()).view({B, 1}), hidden,
                                /*from_target=*/false, cache_);
        logits = o.logits.select(1, 0);
        hidden = o.prenorm;
      }
    }
    Proposal out;
    out.tokens = at::tensor(drafts, head_.draft_to_target().options()).view({B, gamma});
    return out;
  }

  const Eagle3Head& head_;
  KVCache cache_;
  at::Tensor next_logits_;  // [B, Vd] draft logits for the first token of the next proposal
  at::Tensor next_hidden_;  // [B, 1, d] its pre-norm state
};

}  // namespace

std::unique_ptr<Drafter> make_eagle3_drafter(const Eagle3Head& head) { return std::make_unique<Eagle3Drafter>(head); }

}  // namespace ears
