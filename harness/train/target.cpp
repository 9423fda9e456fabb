#include "harness/train/target.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/Reduction.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/silu.h>
#include <fmt/format.h>

#include <cmath>

#include "decoders/aten_operators.h"
#include "decoders/layers.h"
#include "decoders/runtime.h"
#include "decoders/tokenizer.h"
#include "harness/base/error.h"
#include "harness/base/files.h"
#include "harness/train/batch.h"
#include "harness/train/eval.h"

namespace ears {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

ParamMap init_qwen3_params(const ModelConfig& c, uint64_t seed, c10::Device device) {
  at::manual_seed(seed);
  const auto opt = at::TensorOptions().dtype(at::kFloat);
  const int64_t D = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  const int64_t H = c.num_attention_heads, K = c.num_key_value_heads, V = c.vocab_size;
  const double std = 0.02, out_std = 0.02 / std::sqrt(2.0 * c.num_hidden_layers);
  ParamMap p;
  auto normal = [&](const std::string& name, std::vector<int64_t> shape, double s) {
    p[name] = (at::randn(shape, opt) * s).to(device).requires_grad_(true);
  };
  auto ones = [&](const std::string& name, int64_t n) { p[name] = at::ones({n}, opt).to(device).requires_grad_(true); };
  normal("model.embed_tokens.weight", {V, D}, std);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string q = "model.layers." + std::to_string(i) + ".";
    ones(q + "input_layernorm.weight", D);
    ones(q + "post_attention_layernorm.weight", D);
    normal(q + "self_attn.q_proj.weight", {H * hd, D}, std);
    normal(q + "self_attn.k_proj.weight", {K * hd, D}, std);
    normal(q + "self_attn.v_proj.weight", {K * hd, D}, std);
    normal(q + "self_attn.o_proj.weight", {D, H * hd}, out_std);
    ones(q + "self_attn.q_norm.weight", hd);
    ones(q + "self_attn.k_norm.weight", hd);
    normal(q + "mlp.gate_proj.weight", {I, D}, std);
    normal(q + "mlp.up_proj.weight", {I, D}, std);
    normal(q + "mlp.down_proj.weight", {D, I}, out_std);
  }
  ones("model.norm.weight", D);
  if (!c.tie_word_embeddings) normal("lm_head.weight", {V, D}, std);
  return p;
}

at::Tensor swiglu_mlp(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up, const at::Tensor& down) {
  return layers::linear(at::silu(layers::linear(x, gate)) * layers::linear(x, up), down);
}

const at::Tensor& need_param(const ParamMap& p, const std::string& name) {
  auto it = p.find(name);
  if (it == p.end()) fail("training: parameter '{}' is missing", name);
  return it->second;
}

TrainForwardOutput qwen3_train_forward(const ParamMap& p, const ModelConfig& c, const at::Tensor& ids,
                                       const at::Tensor& positions, const at::Tensor& blocked,
                                       const std::vector<int>& aux_layers) {
  const int64_t B = ids.size(0), T = ids.size(1);
  const int64_t H = c.num_attention_heads, K = c.num_key_value_heads, hd = c.head_dim, N = c.num_hidden_layers;
  const double eps = c.rms_norm_eps, scale = std::pow(static_cast<double>(hd), -0.5);
  const at::Tensor& embed = need_param(p, "model.embed_tokens.weight");
  const at::Tensor inv_freq = layers::rope_inv_freq(hd, c.rope, embed.device());
  const layers::RopeTables rope = layers::rope_tables(inv_freq, positions, embed.scalar_type());
  std::vector<at::Tensor> hs(static_cast<size_t>(N + 1));
  at::Tensor h = at::embedding(embed, ids);
  hs[0] = h;
  for (int64_t i = 0; i < N; ++i) {
    const std::string q = "model.layers." + std::to_string(i) + ".";
    const at::Tensor x = layers::rms_norm(h, need_param(p, q + "input_layernorm.weight"), eps);
    at::Tensor qh = layers::linear(x, need_param(p, q + "self_attn.q_proj.weight")).view({B, T, H, hd});
    at::Tensor kh = layers::linear(x, need_param(p, q + "self_attn.k_proj.weight")).view({B, T, K, hd});
    const at::Tensor vh = layers::linear(x, need_param(p, q + "self_attn.v_proj.weight")).view({B, T, K, hd});
    qh = layers::apply_rope(layers::rms_norm(qh, need_param(p, q + "self_attn.q_norm.weight"), eps), rope);
    kh = layers::apply_rope(layers::rms_norm(kh, need_param(p, q + "self_attn.k_norm.weight"), eps), rope);
    const at::Tensor attn = layers::attention(qh, kh.permute({0, 2, 1, 3}), vh.permute({0, 2, 1, 3}), blocked, scale);
    h = h + layers::linear(attn, need_param(p, q + "self_attn.o_proj.weight"));
    h = h + swiglu_mlp(layers::rms_norm(h, need_param(p, q + "post_attention_layernorm.weight"), eps),
                       need_param(p, q + "mlp.gate_proj.weight"), need_param(p, q + "mlp.up_proj.weight"),
                       need_param(p, q + "mlp.down_proj.weight"));
    hs[static_cast<size_t>(i + 1)] = h;
  }
  const at::Tensor normed = layers::rms_norm(h, need_param(p, "model.norm.weight"), eps);
  TrainForwardOutput out;
  out.logits = layers::linear(normed, c.tie_word_embeddings ? embed : need_param(p, "lm_head.weight"));
  for (int a : aux_layers) {
    if (a < 0 || a > N) fail("aux layer id {} out of range 0..{}", a, N);
    out.aux_hidden.push_back(a == N ? normed : hs[static_cast<size_t>(a)]);
  }
  return out;
}

at::Tensor weighted_lm_loss(const at::Tensor& logits, const at::Tensor& targets, const at::Tensor& weights) {
  const int64_t V = logits.size(-1);
  const at::Tensor ce = at::cross_entropy_loss(logits.reshape({-1, V}).to(at::kFloat), targets.reshape({-1}), {},
                                               at::Reduction::None);
  return (ce * weights.reshape({-1})).sum() / weights.sum().clamp_min(1e-6);
}

// ---------------------------------------------------------------------------------------------
// end-to-end

namespace {

void copy_tokenizer(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (fs::exists(to) && fs::equivalent(from, to, ec)) return;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    if (!fs::exists(from / f)) continue;
    fs::copy_file(from / f, to / f, fs::copy_options::overwrite_existing, ec);
    if (ec) fail("{}: cannot copy {} from {}: {}", to.string(), f, from.string(), ec.message());
  }
}

// The tokenizer the target uses (trained into <out> when no --tokenizer is given and <out> has
// none yet), copied next to the weights.
Tokenizer target_tokenizer(const TargetTrainOptions& o, const LogFn& log) {
  const fs::path tok_dir = o.tokenizer.empty() ? o.out : o.tokenizer;
  if (!fs::exists(tok_dir / "tokenizer.json")) {
    if (!o.tokenizer.empty()) fail("--tokenizer {}: no tokenizer.json there", tok_dir.string());
    TokenizerTrainOptions to;
    to.out = o.out;
    to.vocab_size = o.vocab_size;
    to.corpus = o.corpus;
    train_tokenizer(to, log);
  }
  Tokenizer tok = Tokenizer::load(tok_dir);
  copy_tokenizer(tok_dir, o.out);
  return tok;
}

DocPools target_pools(const Tokenizer& tok, const TargetTrainOptions& o, const LogFn& log) {
  const double t0 = now_s();
  DocPools pools = build_doc_pools(tok, o.corpus, o.prompt_weight);
  std::size_t chat_tokens = 0;
  for (const auto& d : pools.chat) chat_tokens += d.ids.size();
  emit(log, fmt::format("data: {} chat documents (mean {:.0f} tokens), {} natural documents from {}; {:.1f} s",
                        pools.chat.size(), double(chat_tokens) / pools.chat.size(), pools.natural.size(),
                        pools.natural_source, now_s() - t0));
  return pools;
}

// A random init for the seed, then (continued training) the weights of o.init when given.
ParamMap target_params(const TargetTrainOptions& o, const ModelConfig& cfg, c10::Device device, const LogFn& log) {
  ParamMap params = init_qwen3_params(cfg, o.schedule.seed, device);
  if (!o.init.empty()) load_init_weights(params, o.init, device, log);
  return params;
}

void evaluate_target(const TargetTrainOptions& o, TrainReport& r, const LogFn& log) {
  const double t0 = now_s();
  const EvalResult e = evaluate_pair(o.out, {}, o.eval_n, 0, o.eval_max_new_tokens);
  r.metrics["synth_gsm_test_accuracy"] = e.accuracy;
  r.metrics["eval_n"] = static_cast<double>(e.n);
  emit(log, fmt::format("eval: greedy accuracy {:.1f}% on {} synth-gsm test problems ({:.1f} tok/s, {:.0f} s)", 100 * e.accuracy,
                        e.n, e.tokens_per_s, now_s() - t0));
}

ojson target_options_json(const TargetTrainOptions& o, const std::string& natural_source, int64_t n_params) {
  return {{"arch", {{"hidden", o.arch.hidden}, {"layers", o.arch.layers}, {"heads", o.arch.heads},
                    {"kv_heads", o.arch.kv_heads}, {"head_dim", o.arch.head_dim}, {"intermediate", o.arch.intermediate}}},
          {"schedule", schedule_json(o.schedule)}, {"corpus", corpus_json(o.corpus, natural_source)},
          {"natural_fraction", o.natural_fraction}, {"prompt_weight", o.prompt_weight}, {"parameters", n_params},
          {"init", o.init.string()}};
}

}  // namespace

TrainReport train_target(const TargetTrainOptions& o, const LogFn& log) {
  const TrainSchedule& s = o.schedule;
  set_threads(s.threads);
  const c10::Device device = parse_device(s.device, "--device");
  create_output_directory(o.out);
  const Tokenizer tok = target_tokenizer(o, log);
  const ModelConfig cfg = qwen3_config(o.arch, tok.vocab_size(), need_token(tok, "<|im_end|>"));
  const DocPools pools = target_pools(tok, o, log);
  DocSampler sampler(pools, o.natural_fraction, s.seed);
  const c10::ScalarType compute = parse_dtype(s.dtype, "--dtype");
  ParamMap params = target_params(o, cfg, device, log);
  const int64_t n_params = numel_total(params);
  emit(log, fmt::format("model: {} layers, hidden {}, vocab {}, {:.2f} M parameters; batch {} x {} tokens; {} compute, fp32 "
                        "master weights; {} threads",
                        cfg.num_hidden_layers, cfg.hidden_size, cfg.vocab_size, n_params / 1e6, s.batch, s.seq_len,
                        dtype_name(compute), at::get_num_threads()));

  TrainReport r = run_loop(
      s, values_of(params), decay_flags(params),
      [&](int64_t) {
        const PackedBatch b = pack_batch(sampler, s.batch, s.seq_len, device);
        const TrainForwardOutput f = qwen3_train_forward(cast_params(params, compute), cfg, b.ids, b.positions, b.blocked);
        return weighted_lm_loss(f.logits, b.targets, b.weights);
      },
      log);
  save_qwen3(o.out, params, cfg);
  emit(log, fmt::format("saved {} ({} steps, {:.1f} s, {:.3f} s/step)", o.out.string(), r.steps_done, r.seconds, r.step_seconds));
  if (o.eval_n > 0) evaluate_target(o, r, log);
  write_train_log(o.out / "train_log.json", "target", target_options_json(o, pools.natural_source, n_params), r,
                  o.init);
  return r;
}

}  // namespace ears
