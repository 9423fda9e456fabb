#include "harness/base/rng.h"
#include "harness/train.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>

#include "datasets/dataset.h"
#include "datasets/open_stems.h"
#include "datasets/scoring.h"
#include "datasets/synth_gsm.h"
#include "decoders/eagle3.h"
#include "decoders/engine.h"
#include "decoders/layers.h"
#include "decoders/runtime.h"
#include "decoders/safetensors.h"
#include "decoders/tokenizer.h"
#include "harness/base/error.h"
#include "harness/run/decode_params.h"

namespace ears {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

double uniform01(uint64_t& state) { return unit_double(splitmix64_next(state)); }

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) fail("{}: cannot open for writing", file.string());
  out << text;
  if (!out) fail("{}: write failed", file.string());
}

void emit(const LogFn& log, const std::string& line) {
  if (log) log(line);
}

int32_t need_token(const Tokenizer& tok, const char* name) {
  auto id = tok.token_to_id(name);
  if (!id) fail("{}: the tokenizer has no '{}' token; train one with `ears-bench train tokenizer`", tok.file().string(), name);
  return *id;
}

std::vector<int64_t> to_i64(const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); }

// The synth-gsm user message as the benchmark builds it (zero-shot gsm8k prompt).
std::string synth_user_message(const std::string& question) { return gsm8k_prompt(question, {}); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// tensors -> safetensors

SafetensorsBlob safetensors_blob(const at::Tensor& t) {
  SafetensorsBlob b;
  switch (t.scalar_type()) {
    case at::kDouble: b.dtype = "F64"; break;
    case at::kFloat: b.dtype = "F32"; break;
    case at::kHalf: b.dtype = "F16"; break;
    case at::kBFloat16: b.dtype = "BF16"; break;
    case at::kLong: b.dtype = "I64"; break;
    case at::kInt: b.dtype = "I32"; break;
    case at::kShort: b.dtype = "I16"; break;
    case at::kChar: b.dtype = "I8"; break;
    case at::kByte: b.dtype = "U8"; break;
    case at::kBool: b.dtype = "BOOL"; break;
    default: fail("safetensors: tensor dtype {} cannot be saved", c10::toString(t.scalar_type()));
  }
  b.shape = t.sizes().vec();
  const at::Tensor c = t.detach().to(c10::Device(c10::kCPU)).contiguous();
  b.bytes.assign(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());  // little-endian host
  return b;
}

void save_safetensors(const fs::path& file, const ParamMap& tensors, std::optional<c10::ScalarType> float_dtype) {
  SafetensorsBlobs blobs;
  for (const auto& [name, t] : tensors) {
    at::Tensor x = t.detach();
    if (float_dtype && at::isFloatingType(x.scalar_type())) x = x.to(*float_dtype);
    blobs.emplace(name, safetensors_blob(x));
  }
  write_safetensors(file, blobs);
}

// ---------------------------------------------------------------------------------------------
// corpus

std::string find_gsm8k_train(const std::string& hint) {
  if (hint == "none") return "";
  std::vector<fs::path> tries;
  auto add_dir = [&](const fs::path& d) {
    tries.push_back(d / "train.jsonl");
    tries.push_back(d / "gsm8k" / "train.jsonl");
  };
  if (!hint.empty()) {
    if (fs::is_regular_file(hint)) return hint;
    add_dir(hint);
    for (const auto& p : tries)
      if (fs::is_regular_file(p)) return p.string();
    fail("--gsm8k '{}': no GSM8K train.jsonl there (give the file, its directory, or 'none')", hint);
  }
  if (const char* env = std::getenv("EARS_BENCH_DATA"); env && *env) add_dir(env);
  add_dir("data");
  add_dir("../shared/datasets");
  for (const auto& p : tries)
    if (fs::is_regular_file(p)) return p.string();
  return "";
}

std::vector<std::pair<std::string, std::string>> read_gsm8k_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  std::vector<std::pair<std::string, std::string>> rows;
  std::string line;
  for (std::size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line == "\r") continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("question") || !j.contains("answer") || !j["question"].is_string() ||
        !j["answer"].is_string())
      fail("{}:{}: expected a JSON object with string fields \"question\" and \"answer\"", path, n);
    rows.emplace_back(j["question"].get<std::string>(), j["answer"].get<std::string>());
  }
  return rows;
}

std::vector<std::string> tokenizer_corpus(const CorpusOptions& o) {
  std::vector<std::string> corpus;
  for (const auto& [q, a] : synth_gsm_pairs(o.synth_n, o.seed, "train")) corpus.push_back(synth_user_message(q) + "\n" + a);
  if (const std::string f = find_gsm8k_train(o.gsm8k_train); !f.empty())
    for (const auto& [q, a] : read_gsm8k_jsonl(f)) corpus.push_back(q + "\n" + a);
  for (const auto& s : open_stems()) corpus.push_back(s);
  return corpus;
}

TrainDoc chat_doc(const Tokenizer& tok, const std::string& question, const std::string& answer, float prompt_weight) {
  TrainDoc d;
  d.ids = tok.encode(qwen3_chat_prompt(synth_user_message(question), /*thinking=*/false));
  d.weight.assign(d.ids.size(), prompt_weight);
  std::vector<int32_t> a = tok.encode(answer);
  a.push_back(need_token(tok, "<|im_end|>"));
  d.ids.insert(d.ids.end(), a.begin(), a.end());
  d.weight.insert(d.weight.end(), a.size(), 1.0f);
  return d;
}

TrainDoc text_doc(const Tokenizer& tok, const std::string& text) {
  TrainDoc d;
  d.ids = tok.encode(text);
  d.ids.push_back(need_token(tok, "<|endoftext|>"));
  d.weight.assign(d.ids.size(), 1.0f);
  return d;
}

DocPools build_doc_pools(const Tokenizer& tok, const CorpusOptions& o, float prompt_weight) {
  DocPools pools;
  const auto synth = synth_gsm_pairs(o.synth_n, o.seed, "train");
  pools.chat.reserve(synth.size());
  for (const auto& [q, a] : synth) pools.chat.push_back(chat_doc(tok, q, a, prompt_weight));
  if (const std::string f = find_gsm8k_train(o.gsm8k_train); !f.empty()) {
    for (const auto& [q, a] : read_gsm8k_jsonl(f)) pools.natural.push_back(text_doc(tok, q + "\n" + a));
    pools.natural_source = f;
  } else {
    for (std::size_t i = 0; i < synth.size(); i += 4) pools.natural.push_back(text_doc(tok, synth[i].first + "\n" + synth[i].second));
    pools.natural_source = "synth-gsm raw";
  }
  if (pools.chat.empty()) fail("training corpus: synth_n is 0, so there are no chat documents");
  return pools;
}

DocSampler::DocSampler(const DocPools& pools, double natural_fraction, uint64_t seed)
    : natural_fraction_(pools.natural.empty() ? 0.0 : natural_fraction), state_(seed ^ 0x5DEECE66DULL) {
  chat_.docs = &pools.chat;
  natural_.docs = &pools.natural;
}

const TrainDoc& DocSampler::draw(Pool& p) {
  if (p.pos >= p.order.size()) {  // new epoch: Fisher-Yates with our own stream
    p.order.resize(p.docs->size());
    std::iota(p.order.begin(), p.order.end(), 0u);
    for (std::size_t i = p.order.size(); i > 1; --i) std::swap(p.order[i - 1], p.order[splitmix64_next(state_) % i]);
    p.pos = 0;
  }
  return (*p.docs)[p.order[p.pos++]];
}

const TrainDoc& DocSampler::next() {
  return uniform01(state_) < natural_fraction_ ? draw(natural_) : draw(chat_);
}

PackedBatch pack_batch(DocSampler& sampler, int64_t B, int64_t T, c10::Device device) {
  std::vector<int64_t> ids(B * T), targets(B * T, 0), pos(B * T), doc(B * T);
  std::vector<float> w(B * T, 0.0f);
  for (int64_t b = 0; b < B; ++b) {
    int64_t t = 0, d = 0;
    while (t < T) {
      const TrainDoc& x = sampler.next();
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(x.ids.size()), T - t);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t k = b * T + t + i;
        ids[k] = x.ids[i];
        pos[k] = i;
        doc[k] = d;
        if (i + 1 < n) {
          targets[k] = x.ids[i + 1];
          w[k] = x.weight[i + 1];
        }
      }
      t += n;
      ++d;
    }
  }
  const auto lopt = at::TensorOptions().dtype(at::kLong);
  PackedBatch pb;
  pb.ids = at::tensor(ids, lopt).view({B, T}).to(device);
  pb.targets = at::tensor(targets, lopt).view({B, T}).to(device);
  pb.positions = at::tensor(pos, lopt).view({B, T}).to(device);
  pb.weights = at::tensor(w, at::TensorOptions().dtype(at::kFloat)).view({B, T}).to(device);
  const at::Tensor dd = at::tensor(doc, lopt).view({B, T}).to(device);
  const at::Tensor ar = at::arange(T, lopt.device(device));
  pb.blocked = (ar.view({1, 1, T}) > ar.view({1, T, 1})).logical_or(dd.unsqueeze(1) != dd.unsqueeze(2));
  return pb;
}

PaddedBatch pad_batch(DocSampler& sampler, int64_t B, int64_t T, c10::Device device) {
  std::vector<const TrainDoc*> docs;
  int64_t N = 1;
  for (int64_t b = 0; b < B; ++b) {
    docs.push_back(&sampler.next());
    N = std::max<int64_t>(N, std::min<int64_t>(static_cast<int64_t>(docs.back()->ids.size()), T));
  }
  std::vector<int64_t> ids(B * N, 0);
  std::vector<float> mask(B * N, 0.0f);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(docs[b]->ids.size()), N);
    for (int64_t i = 0; i < n; ++i) {
      ids[b * N + i] = docs[b]->ids[i];
      mask[b * N + i] = docs[b]->weight[i] > 0 ? 1.0f : 0.0f;
    }
  }
  PaddedBatch pb;
  pb.ids = at::tensor(ids, at::TensorOptions().dtype(at::kLong)).view({B, N}).to(device);
  pb.loss_mask = at::tensor(mask, at::TensorOptions().dtype(at::kFloat)).view({B, N}).to(device);
  return pb;
}

// ---------------------------------------------------------------------------------------------
// Qwen3 target

ModelConfig qwen3_config(const TargetArch& a, int64_t vocab_size, int64_t eos_token_id) {
  ModelConfig c;
  c.architecture = "Qwen3ForCausalLM";
  c.arch = Arch::Qwen3;
  c.vocab_size = vocab_size;
  c.hidden_size = a.hidden;
  c.intermediate_size = a.intermediate;
  c.num_hidden_layers = a.layers;
  c.num_attention_heads = a.heads;
  c.num_key_value_heads = a.kv_heads;
  c.head_dim = a.head_dim;
  c.rms_norm_eps = a.rms_norm_eps;
  c.rope.theta = a.rope_theta;
  c.tie_word_embeddings = a.tie_word_embeddings;
  c.qk_norm = true;
  c.torch_dtype = at::kBFloat16;
  c.max_position_embeddings = a.max_position_embeddings;
  c.eos_token_ids = {eos_token_id};
  return c;
}

namespace {
// The keys every Llama-family config.json shares (Qwen3 target and EAGLE-3 head alike);
// ordered_json keeps this order in the file.
ojson llama_family_config(const ModelConfig& c, c10::ScalarType torch_dtype) {
  ojson j;
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = nullptr;
  j["eos_token_id"] = c.eos_token_ids.empty() ? ojson(nullptr) : ojson(c.eos_token_ids[0]);
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden_size;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = c.rope.theta;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["torch_dtype"] = dtype_name(torch_dtype);
  j["use_cache"] = true;
  j["vocab_size"] = c.vocab_size;
  return j;
}
}  // namespace

std::string qwen3_config_json(const ModelConfig& c, c10::ScalarType torch_dtype) {
  ojson j = {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}};
  j.update(llama_family_config(c, torch_dtype));
  j["max_window_layers"] = c.num_hidden_layers;
  j["sliding_window"] = nullptr;
  j["use_sliding_window"] = false;
  return j.dump(2) + "\n";
}

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

namespace {

// down(silu(gate(x)) * up(x)), out of place.
at::Tensor mlp(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up, const at::Tensor& down) {
  return layers::linear(at::silu(layers::linear(x, gate)) * layers::linear(x, up), down);
}

const at::Tensor& param(const ParamMap& p, const std::string& name) {
  auto it = p.find(name);
  if (it == p.end()) fail("training: parameter '{}' is missing", name);
  return it->second;
}

}  // namespace

TrainForwardOutput qwen3_train_forward(const ParamMap& p, const ModelConfig& c, const at::Tensor& ids,
                                       const at::Tensor& positions, const at::Tensor& blocked,
                                       const std::vector<int>& aux_layers) {
  const int64_t B = ids.size(0), T = ids.size(1);
  const int64_t H = c.num_attention_heads, K = c.num_key_value_heads, hd = c.head_dim, N = c.num_hidden_layers;
  const double eps = c.rms_norm_eps, scale = std::pow(static_cast<double>(hd), -0.5);
  const at::Tensor& embed = param(p, "model.embed_tokens.weight");
  const at::Tensor inv_freq = layers::rope_inv_freq(hd, c.rope, embed.device());
  const layers::RopeTables rope = layers::rope_tables(inv_freq, positions, embed.scalar_type());
  std::vector<at::Tensor> hs(static_cast<size_t>(N + 1));
  at::Tensor h = at::embedding(embed, ids);
  hs[0] = h;
  for (int64_t i = 0; i < N; ++i) {
    const std::string q = "model.layers." + std::to_string(i) + ".";
    const at::Tensor x = layers::rms_norm(h, param(p, q + "input_layernorm.weight"), eps);
    at::Tensor qh = layers::linear(x, param(p, q + "self_attn.q_proj.weight")).view({B, T, H, hd});
    at::Tensor kh = layers::linear(x, param(p, q + "self_attn.k_proj.weight")).view({B, T, K, hd});
    const at::Tensor vh = layers::linear(x, param(p, q + "self_attn.v_proj.weight")).view({B, T, K, hd});
    qh = layers::apply_rope(layers::rms_norm(qh, param(p, q + "self_attn.q_norm.weight"), eps), rope);
    kh = layers::apply_rope(layers::rms_norm(kh, param(p, q + "self_attn.k_norm.weight"), eps), rope);
    const at::Tensor attn = layers::attention(qh, kh.permute({0, 2, 1, 3}), vh.permute({0, 2, 1, 3}), blocked, scale);
    h = h + layers::linear(attn, param(p, q + "self_attn.o_proj.weight"));
    h = h + mlp(layers::rms_norm(h, param(p, q + "post_attention_layernorm.weight"), eps), param(p, q + "mlp.gate_proj.weight"),
                param(p, q + "mlp.up_proj.weight"), param(p, q + "mlp.down_proj.weight"));
    hs[static_cast<size_t>(i + 1)] = h;
  }
  const at::Tensor normed = layers::rms_norm(h, param(p, "model.norm.weight"), eps);
  TrainForwardOutput out;
  out.logits = layers::linear(normed, c.tie_word_embeddings ? embed : param(p, "lm_head.weight"));
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

void save_qwen3(const fs::path& dir, const ParamMap& p, const ModelConfig& c, c10::ScalarType save_dtype) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the output directory: {}", dir.string(), ec.message());
  save_safetensors(dir / "model.safetensors", p, save_dtype);
  write_text(dir / "config.json", qwen3_config_json(c, save_dtype));
}

// ---------------------------------------------------------------------------------------------
// optimisation

AdamW::AdamW(std::vector<at::Tensor> params, std::vector<bool> decay, AdamWOptions options)
    : params_(std::move(params)), decay_(std::move(decay)), o_(options) {
  if (decay_.size() != params_.size()) fail("AdamW: {} decay flags for {} parameters", decay_.size(), params_.size());
  for (const auto& p : params_) {
    m_.push_back(at::zeros_like(p, at::MemoryFormat::Contiguous).detach());
    v_.push_back(at::zeros_like(p, at::MemoryFormat::Contiguous).detach());
  }
}

void AdamW::step(double lr) {
  at::NoGradGuard no_grad;
  ++t_;
  const double bc1 = 1.0 - std::pow(o_.beta1, static_cast<double>(t_));
  const double bc2 = 1.0 - std::pow(o_.beta2, static_cast<double>(t_));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& p = params_[i];
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    m_[i].mul_(o_.beta1).add_(g, 1.0 - o_.beta1);
    v_[i].mul_(o_.beta2).addcmul_(g, g, 1.0 - o_.beta2);
    if (decay_[i] && o_.weight_decay > 0) p.mul_(1.0 - lr * o_.weight_decay);
    // p -= lr * (m / bc1) / (sqrt(v / bc2) + eps)
    const at::Tensor denom = (v_[i] / bc2).sqrt_().add_(o_.eps);
    p.addcdiv_(m_[i], denom, -lr / bc1);
  }
}

void AdamW::zero_grad() {
  for (auto& p : params_)
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
}

at::Tensor clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> sq;
  for (const auto& p : params)
    if (p.grad().defined()) sq.push_back(p.grad().to(at::kFloat).pow(2).sum());
  if (sq.empty()) return at::zeros({});
  const at::Tensor norm = at::stack(sq).sum().sqrt();
  const at::Tensor factor = (max_norm / (norm + 1e-6)).clamp_max(1.0);
  for (const auto& p : params)
    if (p.grad().defined()) p.grad().mul_(factor.to(p.grad().scalar_type()));
  return norm;
}

double cosine_lr(int64_t step, int64_t total, int64_t warmup, double peak, double min_ratio) {
  if (warmup > 0 && step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double span = static_cast<double>(std::max<int64_t>(1, total - warmup));
  const double progress = std::clamp(static_cast<double>(step - warmup) / span, 0.0, 1.0);
  return peak * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

// ---------------------------------------------------------------------------------------------
// EAGLE-3 head

ModelConfig eagle3_config(const Eagle3Arch& a, const ModelConfig& t) {
  ModelConfig c;
  c.architecture = "LlamaForCausalLMEagle3";
  c.arch = Arch::Llama;
  c.vocab_size = t.vocab_size;
  c.hidden_size = t.hidden_size;
  c.intermediate_size = a.intermediate;
  c.num_hidden_layers = 1;
  c.num_attention_heads = a.heads;
  c.num_key_value_heads = a.kv_heads;
  c.head_dim = a.head_dim;
  c.rms_norm_eps = t.rms_norm_eps;
  c.rope = t.rope;
  c.torch_dtype = at::kBFloat16;
  c.max_position_embeddings = t.max_position_embeddings;
  c.eos_token_ids = t.eos_token_ids;
  return c;
}

std::string eagle3_config_json(const ModelConfig& c, const ModelConfig& t, const std::vector<int>& aux, c10::ScalarType dt) {
  ojson j = {{"architectures", {"LlamaForCausalLMEagle3"}}, {"model_type", "llama"}};
  j.update(llama_family_config(c, dt));
  j["num_hidden_layers"] = 1;
  j["tie_word_embeddings"] = false;
  j["vocab_size"] = t.vocab_size;        // the target's vocabulary (ids the head reads and emits)
  j["draft_vocab_size"] = c.vocab_size;  // the head's lm_head rows (d2t maps them to target ids)
  j["target_hidden_size"] = t.hidden_size;
  j["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", aux}, {"use_aux_hidden_state", true}};
  j["mlp_bias"] = false;
  j["pretraining_tp"] = 1;
  return j.dump(2) + "\n";
}

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

}  // namespace

TttOutput eagle3_ttt_forward(const ParamMap& p, const ModelConfig& c, const at::Tensor& embed, const at::Tensor& features,
                             const at::Tensor& target_logits, const at::Tensor& ids, const at::Tensor& loss_mask,
                             int ttt_steps, bool keep_logits) {
  const int64_t B = ids.size(0), N = ids.size(1);
  const int64_t H = c.num_attention_heads, K = c.num_key_value_heads, hd = c.head_dim, G = H / K;
  const double eps = c.rms_norm_eps, scale = std::pow(static_cast<double>(hd), -0.5);
  const auto dev = ids.device();
  const at::Tensor inv_freq = layers::rope_inv_freq(hd, c.rope, dev);
  const at::Tensor ar = at::arange(N, at::TensorOptions().dtype(at::kLong).device(dev));
  // Block 0: key s visible to query t iff s <= t (padding sits at the end and is never a loss slot).
  const at::Tensor blocked0 = (ar.view({1, N}) > ar.view({N, 1})).view({1, 1, 1, N, N});
  const at::Tensor teacher_all = at::softmax(target_logits.to(at::kFloat), -1).detach();
  const at::Tensor teacher_arg_all = target_logits.argmax(-1);
  const c10::ScalarType dt = param(p, "fc.weight").scalar_type();  // compute dtype = the weights' dtype

  at::Tensor h = layers::linear(features.to(dt), param(p, "fc.weight"));
  std::vector<at::Tensor> keys, values;  // per step [B, K, 1, N, hd]
  TttOutput out;
  at::Tensor total;
  for (int k = 0; k < ttt_steps; ++k) {
    const at::Tensor tok = shift_left(ids, k + 1);
    const at::Tensor emb = at::embedding(embed, tok).to(dt).detach();
    const at::Tensor x = at::cat({layers::rms_norm(emb, param(p, "midlayer.input_layernorm.weight"), eps),
                                  layers::rms_norm(h, param(p, "midlayer.hidden_norm.weight"), eps)},
                                 -1);
    const layers::RopeTables rope = layers::rope_tables(inv_freq, (ar + k).view({1, N}).expand({B, N}), dt);
    const at::Tensor q = layers::apply_rope(layers::linear(x, param(p, "midlayer.self_attn.q_proj.weight")).view({B, N, H, hd}), rope);
    const at::Tensor kk = layers::apply_rope(layers::linear(x, param(p, "midlayer.self_attn.k_proj.weight")).view({B, N, K, hd}), rope);
    const at::Tensor vv = layers::linear(x, param(p, "midlayer.self_attn.v_proj.weight")).view({B, N, K, hd});
    keys.push_back(kk.permute({0, 2, 1, 3}).unsqueeze(2));    // [B, K, 1, N, hd]
    values.push_back(vv.permute({0, 2, 1, 3}).unsqueeze(2));
    // Query head h = kv * G + g uses KV head kv (HF repeat_kv).
    const at::Tensor qg = q.view({B, N, K, G, hd}).permute({0, 2, 3, 1, 4});  // [B, K, G, N, hd]
    std::vector<at::Tensor> scores = {
        at::matmul(qg, keys[0].transpose(-1, -2)).mul(scale).masked_fill(blocked0, -std::numeric_limits<double>::infinity())};
    for (int i = 1; i <= k; ++i) scores.push_back((qg * keys[i]).sum(-1, /*keepdim=*/true).mul(scale));  // [B,K,G,N,1]
    const at::Tensor probs = at::softmax(at::cat(scores, -1), -1, at::kFloat).to(dt);
    at::Tensor attn = at::matmul(probs.narrow(-1, 0, N), values[0]);
    for (int i = 1; i <= k; ++i) attn = attn + probs.narrow(-1, N + i - 1, 1) * values[i];
    attn = attn.permute({0, 3, 1, 2, 4}).reshape({B, N, H * hd});
    const at::Tensor r = h + layers::linear(attn, param(p, "midlayer.self_attn.o_proj.weight"));
    const at::Tensor h_out =
        r + mlp(layers::rms_norm(r, param(p, "midlayer.post_attention_layernorm.weight"), eps), param(p, "midlayer.mlp.gate_proj.weight"),
                param(p, "midlayer.mlp.up_proj.weight"), param(p, "midlayer.mlp.down_proj.weight"));
    const at::Tensor logits = layers::linear(layers::rms_norm(h_out, param(p, "norm.weight"), eps), param(p, "lm_head.weight"));
    if (k == 0) out.step0_logits = logits;
    if (keep_logits) out.logits.push_back(logits);

    const at::Tensor teacher = shift_left(teacher_all, k + 1);
    const at::Tensor mask = shift_left(loss_mask, k + 2);  // token t+k+2 exists and is a loss token
    const at::Tensor ce = -(teacher * at::log_softmax(logits, -1, at::kFloat)).sum(-1);  // [B, N]
    const at::Tensor count = mask.sum();
    const at::Tensor loss = (ce * mask).sum() / count.clamp_min(1.0);  // fp32
    const at::Tensor correct = ((logits.argmax(-1) == shift_left(teacher_arg_all, k + 1)).to(at::kFloat) * mask).sum();
    out.loss.push_back(loss);
    out.correct.push_back(correct.detach());
    out.count.push_back(count.detach());
    const at::Tensor weighted = loss * std::pow(0.8, k);
    total = total.defined() ? total + weighted : weighted;
    h = h_out;
  }
  out.total = total;
  return out;
}

void save_eagle3(const fs::path& dir, const ParamMap& p, const ModelConfig& c, const ModelConfig& t, const std::vector<int>& aux,
                 c10::ScalarType save_dtype) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the output directory: {}", dir.string(), ec.message());
  ParamMap all = p;
  all["d2t"] = at::zeros({c.vocab_size}, at::TensorOptions().dtype(at::kLong));
  all["t2d"] = at::ones({t.vocab_size}, at::TensorOptions().dtype(at::kBool));
  save_safetensors(dir / "model.safetensors", all, save_dtype);
  write_text(dir / "config.json", eagle3_config_json(c, t, aux, save_dtype));
}

// ---------------------------------------------------------------------------------------------
// end-to-end

namespace {

// Mixed precision: the fp32 master weights cast to the compute dtype (autograd-tracked casts).
ParamMap cast_params(const ParamMap& p, c10::ScalarType dt) {
  if (dt == at::kFloat) return p;
  ParamMap out;
  for (const auto& [n, t] : p) out.emplace(n, t.to(dt));
  return out;
}

std::vector<at::Tensor> values_of(const ParamMap& p) {
  std::vector<at::Tensor> v;
  for (const auto& [n, t] : p) v.push_back(t);
  return v;
}

// Decay 2-D weights only (not norms).
std::vector<bool> decay_flags(const ParamMap& p) {
  std::vector<bool> d;
  for (const auto& [n, t] : p) d.push_back(t.dim() >= 2);
  return d;
}

std::string json_curve(const std::vector<std::pair<int64_t, double>>& curve) {
  ojson a = ojson::array();
  for (const auto& [s, l] : curve) a.push_back({s, std::round(l * 10000) / 10000});
  return a.dump();
}

void write_train_log(const fs::path& file, const std::string& kind, const ojson& options, const TrainReport& r) {
  ojson j;
  j["kind"] = kind;
  j["options"] = options;
  j["steps_planned"] = r.steps_planned;
  j["steps_done"] = r.steps_done;
  j["seconds"] = std::round(r.seconds * 10) / 10;
  j["step_seconds"] = std::round(r.step_seconds * 10000) / 10000;
  j["metrics"] = r.metrics;
  j["loss_curve"] = ojson::parse(json_curve(r.loss_curve));
  j["torch_version"] = torch_version();
  write_text(file, j.dump(2) + "\n");
}

ojson schedule_json(const TrainSchedule& s) {
  return {{"steps", s.steps}, {"batch", s.batch}, {"seq_len", s.seq_len}, {"warmup", s.warmup},
          {"lr", s.lr}, {"min_lr_ratio", s.min_lr_ratio}, {"weight_decay", s.weight_decay}, {"clip", s.clip},
          {"minutes", s.minutes}, {"seed", s.seed}, {"threads", s.threads}, {"dtype", s.dtype}};
}

ojson corpus_json(const CorpusOptions& c, const std::string& natural_source) {
  return {{"synth_seed", c.seed}, {"synth_n", c.synth_n}, {"natural_source", natural_source}};
}

// The shared loop: warmup + cosine LR, clipping, AdamW, loss logging, wall-time budget.
template <class StepFn>
TrainReport run_loop(const TrainSchedule& s, std::vector<at::Tensor> params, std::vector<bool> decay, StepFn&& step_loss,
                     const LogFn& log, const std::function<std::string()>& extra_log = {}) {
  AdamWOptions ao;
  ao.weight_decay = s.weight_decay;
  AdamW opt(params, std::move(decay), ao);
  TrainReport r;
  r.steps_planned = s.steps;
  const double t0 = now_s();
  at::Tensor window_sum = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
  int64_t window_n = 0;
  for (int64_t step = 0; step < r.steps_planned; ++step) {
    const double lr = cosine_lr(step, r.steps_planned, s.warmup, s.lr, s.min_lr_ratio);
    at::Tensor loss = step_loss(step);
    loss.backward();
    clip_grad_norm(params, s.clip);
    opt.step(lr);
    opt.zero_grad();
    window_sum = window_sum + loss.detach().to(at::kFloat).cpu();
    ++window_n;
    r.steps_done = step + 1;
    const double elapsed = now_s() - t0;
    if (s.minutes > 0 && (r.steps_done == 5 || r.steps_done % 25 == 0) &&
        static_cast<double>(r.steps_done) < 0.8 * static_cast<double>(r.steps_planned)) {
      // Fit the schedule into the wall-time budget (3% margin) at the mean step time so far;
      // re-checked every 25 steps until 80% of the plan, never beyond --steps.
      const double per = elapsed / static_cast<double>(r.steps_done);
      const int64_t fit = std::clamp<int64_t>(
          r.steps_done + static_cast<int64_t>((s.minutes * 60.0 - elapsed) * 0.97 / per), r.steps_done + 1, s.steps);
      if (fit != r.steps_planned && std::abs(static_cast<double>(fit - r.steps_planned)) > 0.02 * r.steps_planned) {
        r.steps_planned = fit;
        emit(log, fmt::format("time budget {:.1f} min at {:.3f} s/step: planning {} steps", s.minutes, per, r.steps_planned));
      }
    }
    const bool last = r.steps_done == r.steps_planned;
    if (r.steps_done % s.log_every == 0 || last || r.steps_done == 1) {
      const double mean = window_sum.item<double>() / static_cast<double>(window_n);
      r.loss_curve.emplace_back(r.steps_done, mean);
      emit(log, fmt::format("step {:>6}/{}  loss {:.4f}  lr {:.2e}  {:.3f} s/step  {:.0f} s{}", r.steps_done,
                            r.steps_planned, mean, lr, elapsed / static_cast<double>(r.steps_done), elapsed,
                            extra_log ? extra_log() : std::string()));
      window_sum = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
      window_n = 0;
    }
    if (s.minutes > 0 && elapsed > s.minutes * 60.0 && !last) {
      emit(log, fmt::format("wall-time budget of {:.1f} min reached after {} steps; stopping", s.minutes, r.steps_done));
      break;
    }
  }
  r.seconds = now_s() - t0;
  r.step_seconds = r.steps_done ? r.seconds / static_cast<double>(r.steps_done) : 0;
  return r;
}

void copy_tokenizer(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (fs::exists(to) && fs::equivalent(from, to, ec)) return;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    if (!fs::exists(from / f)) continue;
    fs::copy_file(from / f, to / f, fs::copy_options::overwrite_existing, ec);
    if (ec) fail("{}: cannot copy {} from {}: {}", to.string(), f, from.string(), ec.message());
  }
}

}  // namespace

BpeTrainerResult train_tokenizer(const TokenizerTrainOptions& o, const LogFn& log) {
  const double t0 = now_s();
  const std::vector<std::string> corpus = tokenizer_corpus(o.corpus);
  BpeTrainerOptions bo;
  bo.vocab_size = o.vocab_size;
  BpeTrainerResult r = train_bpe_tokenizer(corpus, bo, o.out);
  emit(log, fmt::format("tokenizer: {} ids ({} merges) from {} documents, {:.1f} MB, {} distinct pre-tokens, {:.1f} s -> {}",
                        r.vocab_size, r.merges, corpus.size(), r.corpus_bytes / 1e6, r.unique_words, now_s() - t0,
                        (o.out / "tokenizer.json").string()));
  return r;
}

TrainReport train_target(const TargetTrainOptions& o, const LogFn& log) {
  const TrainSchedule& s = o.schedule;
  set_threads(s.threads);
  const c10::Device device = parse_device(s.device, "--device");
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) fail("{}: cannot create the output directory: {}", o.out.string(), ec.message());
  fs::path tok_dir = o.tokenizer.empty() ? o.out : o.tokenizer;
  if (!fs::exists(tok_dir / "tokenizer.json")) {
    if (!o.tokenizer.empty()) fail("--tokenizer {}: no tokenizer.json there", tok_dir.string());
    TokenizerTrainOptions to;
    to.out = o.out;
    to.vocab_size = o.vocab_size;
    to.corpus = o.corpus;
    train_tokenizer(to, log);
  }
  const Tokenizer tok = Tokenizer::load(tok_dir);
  copy_tokenizer(tok_dir, o.out);
  const ModelConfig cfg = qwen3_config(o.arch, tok.vocab_size(), need_token(tok, "<|im_end|>"));

  double t0 = now_s();
  const DocPools pools = build_doc_pools(tok, o.corpus, o.prompt_weight);
  std::size_t chat_tokens = 0;
  for (const auto& d : pools.chat) chat_tokens += d.ids.size();
  emit(log, fmt::format("data: {} chat documents (mean {:.0f} tokens), {} natural documents from {}; {:.1f} s",
                        pools.chat.size(), double(chat_tokens) / pools.chat.size(), pools.natural.size(),
                        pools.natural_source, now_s() - t0));
  DocSampler sampler(pools, o.natural_fraction, s.seed);
  const c10::ScalarType compute = parse_dtype(s.dtype, "--dtype");
  ParamMap params = init_qwen3_params(cfg, s.seed, device);
  if (!o.init.empty()) {
    const Checkpoint ck = Checkpoint::open(o.init);
    at::NoGradGuard no_grad;
    for (auto& [name, t] : params) t.copy_(ck.load(name, device, at::kFloat, t.sizes().vec()));
    emit(log, fmt::format("init: weights from {} (continued training)", o.init.string()));
  }
  int64_t n_params = 0;
  for (const auto& [n, t] : params) n_params += t.numel();
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
  if (o.eval_n > 0) {
    t0 = now_s();
    const EvalResult e = evaluate_pair(o.out, {}, o.eval_n, 0, o.eval_max_new_tokens);
    r.metrics["synth_gsm_test_accuracy"] = e.accuracy;
    r.metrics["eval_n"] = static_cast<double>(e.n);
    emit(log, fmt::format("eval: greedy accuracy {:.1f}% on {} synth-gsm test problems ({:.1f} tok/s, {:.0f} s)", 100 * e.accuracy,
                          e.n, e.tokens_per_s, now_s() - t0));
  }
  ojson opts = {{"arch", {{"hidden", o.arch.hidden}, {"layers", o.arch.layers}, {"heads", o.arch.heads},
                          {"kv_heads", o.arch.kv_heads}, {"head_dim", o.arch.head_dim}, {"intermediate", o.arch.intermediate}}},
                {"schedule", schedule_json(s)}, {"corpus", corpus_json(o.corpus, pools.natural_source)},
                {"natural_fraction", o.natural_fraction}, {"prompt_weight", o.prompt_weight}, {"parameters", n_params},
                {"init", o.init.string()}};
  write_train_log(o.out / "train_log.json", "target", opts, r);
  return r;
}

TrainReport train_eagle3(const Eagle3TrainOptions& o, const LogFn& log) {
  const TrainSchedule& s = o.schedule;
  set_threads(s.threads);
  const c10::Device device = parse_device(s.device, "--device");
  if (o.ttt_steps < 1) fail("--ttt must be at least 1");
  const c10::ScalarType compute = parse_dtype(s.dtype, "--dtype");
  const CausalLM target = CausalLM::load(o.target, device, compute);
  const ModelConfig& tc = target.config();
  const Tokenizer tok = Tokenizer::load(o.target);
  std::vector<int> aux = o.arch.aux_layers;
  const int L = static_cast<int>(tc.num_hidden_layers);
  if (aux.empty()) aux = {1, std::max(1, L / 2), std::max(1, L - 1)};
  for (int a : aux)
    if (a < 0 || a >= L) fail("--aux-layers: id {} is outside 0..{} (hidden state entering layer i; {} layers)", a, L - 1, L);
  const ModelConfig hc = eagle3_config(o.arch, tc);

  double t0 = now_s();
  const DocPools pools = build_doc_pools(tok, o.corpus, /*prompt_weight=*/0.0f);
  emit(log, fmt::format("data: {} chat documents, {} natural documents from {}; {:.1f} s", pools.chat.size(), pools.natural.size(),
                        pools.natural_source, now_s() - t0));
  DocSampler sampler(pools, o.natural_fraction, s.seed);
  at::Tensor final_norm;
  if (o.warm_start_lm_head)
    final_norm = Checkpoint::open(o.target).load("model.norm.weight", device, at::kFloat, std::vector<int64_t>{tc.hidden_size});
  ParamMap params = init_eagle3_params(hc, static_cast<int64_t>(aux.size()), s.seed,
                                       o.warm_start_lm_head ? target.lm_head_weight() : at::Tensor(), final_norm);
  int64_t n_params = 0;
  for (const auto& [n, t] : params) n_params += t.numel();
  emit(log, fmt::format("head: hidden {}, {} heads, intermediate {}, aux layers [{}], {:.2f} M trainable parameters, TTT {} steps",
                        hc.hidden_size, hc.num_attention_heads, hc.intermediate_size, fmt::join(aux, ", "), n_params / 1e6,
                        o.ttt_steps));

  std::vector<double> acc_sum(static_cast<size_t>(o.ttt_steps), 0.0), cnt_sum(static_cast<size_t>(o.ttt_steps), 0.0);
  std::vector<at::Tensor> acc_t(static_cast<size_t>(o.ttt_steps)), cnt_t(static_cast<size_t>(o.ttt_steps));
  auto acc_text = [&]() {
    std::string s2 = "  acc";
    double sim = 1.0, prod = 1.0;
    for (int k = 0; k < o.ttt_steps; ++k) {
      const double a = acc_t[k].defined() ? acc_t[k].item<double>() / std::max(1.0, cnt_t[k].item<double>()) : 0.0;
      s2 += fmt::format(" {:.3f}", a);
      prod *= a;
      sim += prod;
      acc_t[k] = at::Tensor();
      cnt_t[k] = at::Tensor();
    }
    return s2 + fmt::format("  (1 + sum prod acc = {:.2f})", sim);
  };
  const at::Tensor embed = target.embedding_weight();
  TrainReport r = run_loop(
      s, values_of(params), decay_flags(params),
      [&](int64_t) {
        const PaddedBatch b = pad_batch(sampler, s.batch, s.seq_len, device);
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
                                         o.ttt_steps);
        for (int k = 0; k < o.ttt_steps; ++k) {
          acc_t[k] = acc_t[k].defined() ? acc_t[k] + t.correct[k].cpu() : t.correct[k].cpu();
          cnt_t[k] = cnt_t[k].defined() ? cnt_t[k] + t.count[k].cpu() : t.count[k].cpu();
        }
        return t.total;
      },
      log, acc_text);
  save_eagle3(o.out, params, hc, tc, aux);
  emit(log, fmt::format("saved {} ({} steps, {:.1f} s, {:.3f} s/step)", o.out.string(), r.steps_done, r.seconds, r.step_seconds));
  if (o.eval_n > 0) {
    t0 = now_s();
    const EvalResult e = evaluate_pair(o.target, o.out, o.eval_n, o.eval_gamma, o.eval_max_new_tokens);
    r.metrics["tau"] = e.tau;
    r.metrics["gamma"] = o.eval_gamma;
    r.metrics["synth_gsm_test_accuracy"] = e.accuracy;
    r.metrics["eval_n"] = static_cast<double>(e.n);
    emit(log, fmt::format("eval: tau {:.2f} at gamma {} (greedy) on {} synth-gsm test problems, accuracy {:.1f}%, {:.1f} tok/s, {:.0f} s",
                          e.tau, o.eval_gamma, e.n, 100 * e.accuracy, e.tokens_per_s, now_s() - t0));
  }
  ojson opts = {{"target", o.target.string()},
                {"arch", {{"heads", o.arch.heads}, {"kv_heads", o.arch.kv_heads}, {"head_dim", o.arch.head_dim},
                          {"intermediate", o.arch.intermediate}, {"aux_layers", aux}}},
                {"schedule", schedule_json(s)}, {"corpus", corpus_json(o.corpus, pools.natural_source)},
                {"natural_fraction", o.natural_fraction}, {"ttt_steps", o.ttt_steps},
                {"warm_start_lm_head", o.warm_start_lm_head}, {"parameters", n_params}};
  write_train_log(o.out / "train_log.json", "eagle3", opts, r);
  return r;
}

EvalResult evaluate_pair(const fs::path& target_dir, const fs::path& draft_dir, int64_t n, int gamma, int64_t max_new_tokens,
                         const std::string& dtype) {
  std::optional<c10::ScalarType> dt;
  if (dtype != "auto") dt = parse_dtype(dtype, "eval dtype");
  const CausalLM target = CausalLM::load(target_dir, c10::Device(c10::kCPU), dt);
  const Tokenizer tok = Tokenizer::load(target_dir);
  std::unique_ptr<Eagle3Head> head;
  std::unique_ptr<Drafter> drafter;
  if (!draft_dir.empty()) {
    head = std::make_unique<Eagle3Head>(Eagle3Head::load(draft_dir, target));
    drafter = make_eagle3_drafter(*head);
  }
  const auto problems = synth_gsm_pairs(static_cast<std::size_t>(n), 0, "test");
  runner::DecodeSettings s;
  s.temperature = 0;
  s.gamma = drafter ? gamma : 0;
  s.max_new_tokens = max_new_tokens;
  s.draft_sampling = "greedy";
  s.verifier = "greedy";
  s.distortion = false;
  std::vector<int32_t> stop_ids = tok.stop_token_ids();
  for (int64_t e : target.config().eos_token_ids)
    if (std::find(stop_ids.begin(), stop_ids.end(), e) == stop_ids.end()) stop_ids.push_back(static_cast<int32_t>(e));
  const DecodeParams dp = runner::decode_params(s, std::move(stop_ids));
  Engine engine(target, drafter.get(), &tok);
  EvalResult res;
  int64_t correct = 0, steps = 0, emitted = 0, tokens = 0;
  double seconds = 0;
  const std::size_t batch = 16;
  for (std::size_t i = 0; i < problems.size(); i += batch) {
    std::vector<GenRequest> reqs;
    for (std::size_t j = i; j < std::min(problems.size(), i + batch); ++j) {
      GenRequest g;
      g.prompt = tok.encode(qwen3_chat_prompt(synth_user_message(problems[j].first), false));
      g.key = std::to_string(j);
      reqs.push_back(std::move(g));
    }
    const double t0 = now_s();
    const std::vector<GenResult> out = engine.generate(reqs, dp);
    seconds += now_s() - t0;
    for (std::size_t j = 0; j < out.size(); ++j) {
      const std::string gold = gsm8k_gold_from_answer(problems[i + j].second);
      if (score("gsm8k", out[j].text, {gold}).strict) ++correct;
      steps += out[j].stats.steps;
      emitted += out[j].stats.emitted();
      tokens += static_cast<int64_t>(out[j].ids.size());
    }
  }
  res.n = static_cast<int64_t>(problems.size());
  res.accuracy = res.n ? static_cast<double>(correct) / static_cast<double>(res.n) : 0;
  res.tau = steps ? static_cast<double>(emitted) / static_cast<double>(steps) : 0;
  res.tokens_per_s = seconds > 0 ? static_cast<double>(tokens) / seconds : 0;
  return res;
}

}  // namespace ears
