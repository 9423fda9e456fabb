#include "decoders/engine.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/one_hot.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "decoders/aten_operators.h"
#include "decoders/draft.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "decoders/tokenizer.h"
#include "decoders/trace.h"
#include "harness/base/error.h"

namespace ears {

void GenStats::reset(int64_t gamma) {
  accepted_per_position.assign(gamma, 0);
  accept_length_hist.assign(gamma + 2, 0);
}

void GenStats::record_step(int64_t gamma, int64_t n, const float* path, const float* u, const float* tv) {
  steps += 1;
  drafted += gamma;
  accepted += n;
  if (n == gamma) bonus += 1;
  else corrections += 1;
  accept_length_hist[n + 1] += 1;
  for (int64_t k = 0; k < n; ++k) accepted_per_position[k] += 1;
  for (int64_t k = 0; k < std::min(n + 1, gamma); ++k) {  // positions the verifier judged
    const double uk = u[k];
    const int bucket = std::clamp(static_cast<int>(uk * kUncertaintyBuckets), 0, kUncertaintyBuckets - 1);
    drafted_by_u[bucket] += 1;
    if (k < n) accepted_by_u[bucket] += 1;
    if (path[k] == path_code(TokenPath::Pardoned)) pardoned_by_u[bucket] += 1, pardoned += 1;
    uncertainty_sum += uk;
    if (tv) distortion_sum += tv[k], distortion_n += 1;
  }
}

namespace {

at::Tensor long_tensor(const std::vector<int64_t>& v, c10::Device device) {
  return at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(device);
}

// The step's one device->host copy: one float32 row per active sequence (G = gamma):
//   [0, G]            emitted tokens: the accepted drafts, then the correction or the bonus
//   G + 1             n, the number of accepted drafts
//   G + 2 .. 2G + 1   the verifier's path per draft position (decoders/verify.h)      } G > 0
//   2G + 2 .. 3G + 1  u = 1 - max p_t per draft position                              } only
//   3G + 2 .. 4G + 1  TV distortion per draft position (0 when not measured)          }
//   last              1 when the step's target logits were non-finite
struct StepPacket {
  int64_t gamma;

  int64_t width() const { return gamma == 0 ? 3 : 4 * gamma + 3; }
  int64_t accepted_col() const { return gamma + 1; }
  int64_t path_col() const { return gamma + 2; }
  int64_t u_col() const { return 2 * gamma + 2; }
  int64_t tv_col() const { return 3 * gamma + 2; }
  int64_t bad_col() const { return width() - 1; }
  // Device side: the columns above ([B, G+1] emitted, [B] accepted, [B, G] path / u / tv, [B] bad).
  at::Tensor pack(const at::Tensor& emitted, const at::Tensor& accepted, const at::Tensor& path, const at::Tensor& u,
                  const at::Tensor& tv, const at::Tensor& bad) const {
    const int64_t B = emitted.size(0);
    std::vector<at::Tensor> cols{emitted.to(at::kFloat), accepted.to(at::kFloat).view({B, 1})};
    if (gamma > 0) cols.insert(cols.end(), {path.to(at::kFloat), u, tv});
    cols.push_back(bad.to(at::kFloat).view({B, 1}));
    return at::cat(cols, 1);
  }
  // Host side, the CPU's temperature-0 step: a greedy verdict written into a zeroed row (u and TV
  // are 0 at T = 0; path 1 for the n accepted drafts).
  void write_greedy(float* row, const int64_t* emitted /*[G+1]*/, int64_t n, bool bad) const {
    for (int64_t k = 0; k <= gamma; ++k) row[k] = static_cast<float>(emitted[k]);
    row[accepted_col()] = static_cast<float>(n);
    for (int64_t k = 0; k < n; ++k) row[path_col() + k] = path_code(TokenPath::Primary);
    row[bad_col()] = bad ? 1 : 0;
  }
  // Host side: row i of the copied packet.
  struct Row {
    const float* v;
    const StepPacket& p;
    int32_t emitted(int64_t k) const { return static_cast<int32_t>(v[k]); }
    int64_t accepted() const { return static_cast<int64_t>(v[p.accepted_col()]); }
    const float* path() const { return v + p.path_col(); }
    const float* u() const { return v + p.u_col(); }
    const float* tv() const { return v + p.tv_col(); }
    bool bad() const { return v[p.bad_col()] != 0; }
  };
  Row row(const at::Tensor& host, int64_t i) const { return Row{host.data_ptr<float>() + i * width(), *this}; }
};

// Host-side state of one request while it decodes.
struct Sequence {
  GenResult result;
  std::optional<IncrementalDecoder> decoder;
  StopMatcher stops;
  RequestRng rng;
  bool done = false;
  Sequence(const GenRequest& r) : rng(r.run_seed, r.key) {}
};

// Appends one generated token; returns true when the request is finished.
bool push_token(Sequence& s, int32_t id, const DecodeParams& p) {
  s.result.ids.push_back(id);
  std::string piece = s.decoder ? s.decoder->push(id) : std::string();
  auto hit = s.stops.push(id, piece);
  if (hit) s.result.finish_reason = hit->by_token ? "eos" : "stop";
  else if (static_cast<int64_t>(s.result.ids.size()) >= p.max_new_tokens) s.result.finish_reason = "length";
  return !s.result.finish_reason.empty();
}

// syncs_start: host_sync_count() when generate() began (the request was active since then).
void finish(Sequence& s, double t_start, int64_t syncs_start) {
  s.done = true;
  s.result.latency_s = now_s() - t_start;
  // other = the rest of the latency (the absorb, loop overhead, a preemption between the timed
  // stretches): the split sums to the latency by definition (it fell 17 % short on one request).
  GenStats& st = s.result.stats;
  st.other_s = std::max(0.0, s.result.latency_s - st.prefill_s - st.draft_s - st.verify_s);
  st.host_syncs = host_sync_count() - syncs_start;
  if (s.decoder) {
    s.stops.push_text(s.decoder->flush());
    s.result.text = std::string(s.stops.kept());
  }
}

void fail_request(Sequence& s, std::string error) {
  s.result.error = std::move(error);
  s.result.finish_reason = "error";
}

// Requests whose prompt + max_new_tokens exceed the model's context fail alone (recorded in
// their result, not thrown), so one over-long prompt does not stop a long run. Returns the
// indices of the requests that fit; the others' results are filled in `results`.
std::vector<size_t> screen_context(const std::vector<GenRequest>& batch, const DecodeParams& p, int64_t context,
                                   int64_t gamma, std::vector<GenResult>& results) {
  results.assign(batch.size(), GenResult{});
  std::vector<size_t> fit;
  for (size_t b = 0; b < batch.size(); ++b) {
    const int64_t prompt = static_cast<int64_t>(batch[b].prompt.size());
    if (context <= 0 || prompt + p.max_new_tokens <= context) {
      fit.push_back(b);
      continue;
    }
    GenResult& r = results[b];
    r.prompt_tokens = prompt;
    r.finish_reason = "error";
    r.error = fmt::format(
        "prompt ({} tokens) + max_new_tokens ({}) exceeds the model's context of {} tokens "
        "(max_position_embeddings); lower max_new_tokens (decoding.max_new_tokens, --max-new-tokens) or shorten "
        "the prompt",
        prompt, p.max_new_tokens, context);
    r.stats.reset(gamma);
  }
  return fit;
}

}  // namespace

// One generate() call: the sequences, the target's cache and the rows still decoding.
struct DecodeRun {
  int64_t gamma = 0;
  c10::Device dev = c10::kCPU;
  std::vector<Sequence> seqs;
  std::vector<int64_t> active;  // indices into seqs of the rows still decoding, in cache row order
  KVCache cache;
  ForwardOptions fwd;           // the target forward's options at every step (aux layers)
  at::Tensor x_last;            // [active, 1] each row's last emitted token
  double t_start = 0;
  int64_t syncs_start = 0;

  // Keeps cache rows `rows` (indices into the current rows) in the target's and draft's state.
  void keep_rows(const std::vector<int64_t>& rows, Drafter* drafter) {
    if (static_cast<int64_t>(rows.size()) == cache.batch()) return;
    cache.select(rows);
    if (drafter) drafter->select(rows);
    x_last = x_last.index_select(0, long_tensor(rows, dev));
  }
};

Engine::Engine(const CausalLM& target, Drafter* drafter, const Tokenizer* tokenizer)
    : target_(target), drafter_(drafter), tokenizer_(tokenizer) {}

std::vector<GenResult> Engine::generate(const std::vector<GenRequest>& batch, const DecodeParams& p) {
  validate(p.sampling);
  validate(p.verifier);
  if (p.max_new_tokens < 1) fail("decoding.max_new_tokens must be >= 1 (got {})", p.max_new_tokens);
  if (drafter_ && p.gamma < 1) fail("decoding.gamma must be >= 1 with a draft (got {})", p.gamma);
  if (batch.empty()) return {};
  std::vector<GenResult> results;
  const std::vector<size_t> fit =
      screen_context(batch, p, target_.config().max_position_embeddings, drafter_ ? p.gamma : 0, results);
  if (fit.size() != batch.size()) {
    std::vector<GenRequest> fitting;
    for (size_t b : fit) fitting.push_back(batch[b]);
    std::vector<GenResult> done = generate(fitting, p);
    for (size_t k = 0; k < fit.size(); ++k) results[fit[k]] = std::move(done[k]);
    return results;
  }
  const DecodeScope scope;
  DecodeRun run = prefill(batch, p);
  while (!run.active.empty()) step(run, p);
  for (size_t b = 0; b < batch.size(); ++b) results[b] = std::move(run.seqs[b].result);
  return results;
}

namespace {

// One Sequence per request, its stats reset for the run's gamma; returns the prompt lengths.
std::vector<int64_t> start_sequences(const std::vector<GenRequest>& batch, const DecodeParams& p,
                                     const Tokenizer* tokenizer, DecodeRun& run) {
  std::vector<int64_t> lens;
  run.seqs.reserve(batch.size());
  for (const GenRequest& r : batch) {
    if (r.prompt.empty()) fail("request '{}': empty prompt", r.key);
    lens.push_back(static_cast<int64_t>(r.prompt.size()));
    Sequence& s = run.seqs.emplace_back(r);
    s.result.prompt_tokens = lens.back();
    s.result.stats.reset(run.gamma);
    if (tokenizer) s.decoder.emplace(*tokenizer, /*skip_special=*/true);
    s.stops = StopMatcher(p.stop_ids, tokenizer ? p.stop_strings : std::vector<std::string>{});
  }
  return lens;
}

// The prompts right-padded with id 0 to the longest: [B, max_prompt] int64 on dev.
at::Tensor padded_prompts(const std::vector<GenRequest>& batch, int64_t max_prompt, c10::Device dev) {
  const int64_t B = static_cast<int64_t>(batch.size());
  std::vector<int64_t> flat(B * max_prompt, 0);
  for (int64_t b = 0; b < B; ++b)
    std::copy(batch[b].prompt.begin(), batch[b].prompt.end(), flat.begin() + b * max_prompt);
  return long_tensor(flat, dev).view({B, max_prompt});
}

// Each row's first token from the prefill's host copy ([B, 2]: token, 1 if its logits were
// non-finite); finished rows leave the run's active set.
void settle_first_tokens(DecodeRun& run, const at::Tensor& host, double t_prefill, const DecodeParams& p,
                         Drafter* drafter) {
  const auto h = host.accessor<float, 2>();
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < static_cast<int64_t>(run.seqs.size()); ++b) {
    Sequence& s = run.seqs[b];
    s.result.ttft_s = s.result.stats.prefill_s = t_prefill - run.t_start;
    if (h[b][1] != 0) fail_request(s, "non-finite logits in the prefill");
    if (h[b][1] != 0 || push_token(s, static_cast<int32_t>(h[b][0]), p)) {
      finish(s, run.t_start, run.syncs_start);
    } else {
      rows.push_back(b);
    }
  }
  run.active = rows;
  run.keep_rows(rows, drafter);
}

}  // namespace

// Prefill: the prompts in one target forward, the first token sampled, the drafter begun.
DecodeRun Engine::prefill(const std::vector<GenRequest>& batch, const DecodeParams& p) {
  const int64_t B = static_cast<int64_t>(batch.size());
  DecodeRun run;
  run.gamma = drafter_ ? p.gamma : 0;
  run.dev = target_.device();
  run.syncs_start = host_sync_count();
  const std::vector<int64_t> lens = start_sequences(batch, p, tokenizer_, run);
  const int64_t max_prompt = *std::max_element(lens.begin(), lens.end());

  run.t_start = now_s();
  std::vector<int64_t> last_rows(B);
  for (int64_t b = 0; b < B; ++b) last_rows[b] = lens[b] - 1;
  const at::Tensor prompt_ids = padded_prompts(batch, max_prompt, run.dev);
  const int64_t cache_len = max_prompt + p.max_new_tokens + run.gamma + 2;
  run.cache = target_.new_cache(B, cache_len);
  std::optional<TraceRange> range(std::in_place, "ears.prefill");
  if (drafter_) run.fwd.aux_layers = drafter_->aux_layers();
  ForwardOptions opts = run.fwd;
  opts.logits_rows = long_tensor(last_rows, run.dev).view({B, 1});
  const ForwardOutput out = target_.forward(prompt_ids, run.cache, opts);
  run.cache.set_lengths(lens);

  std::vector<RequestRng*> rngs;
  for (auto& s : run.seqs) rngs.push_back(&s.rng);
  const ProcessedProbs pp = process_logits(out.logits.select(1, 0), p.sampling);
  const at::Tensor first = sample_from_probs(pp.probs, batch_uniforms(rngs, 1, run.dev).squeeze(1));
  const at::Tensor bad = at::logical_not(at::isfinite(pp.max_prob));  // NaN / +inf logits
  // The prefill's one device->host copy: per row [first token, 1 if non-finite].
  const at::Tensor host = to_host(at::stack({first.to(at::kFloat), bad.to(at::kFloat)}, 1));
  if (drafter_) drafter_->begin(prompt_ids, lens, first, out.aux_hidden, cache_len);
  range.reset();
  run.x_last = first.view({B, 1});
  settle_first_tokens(run, host, now_s(), p, drafter_);
  return run;
}

namespace {

// The target's verdict on one step's drafts: the emitted tokens and each row's last one on the
// device, the step's packet (accepted counts included) on the host.
struct Verdict {
  at::Tensor emitted;            // [B, G+1] int64 (device): accepted drafts, then the correction / bonus, -1 after
  at::Tensor last;               // [B, 1] int64 (device): each row's last emitted token (the next step's x_last)
  at::Tensor host;               // StepPacket rows (float32, host)
  std::vector<at::Tensor> aux;   // the target's hidden states the drafter asked for
};

// True when a step's verdict is taken on the host: temperature 0 on the CPU, logits in bf16 / float32.
bool host_verdict(const DecodeParams& p, const CausalLM& target) {
  return p.host_greedy && p.sampling.temperature == 0 && host_argmax_reads(target.device(), target.dtype());
}

// Temperature 0 on the CPU (verify.h, "Temperature 0"): the target's argmax per position on the
// host, each sequence's greedy verdict and its packet row written on the host: no tensor op over the
// vocabulary (the tensor path's ~55 ops took 0.5 ms a step after the bundled pair's 0.86 ms forward,
// 0.03 ms here; docs/performance-log.md, thirty-sixth session).
Verdict host_greedy_verdict(const at::Tensor& logits /*[B, G+1, V]*/, const at::Tensor& drafts /*[B, G]*/,
                            int64_t gamma) {
  const int64_t B = logits.size(0), T = gamma + 1;
  const HostArgmax top = host_argmax(to_host(logits.reshape({B * T, logits.size(2)})));  // the step's one read
  const at::Tensor x = gamma > 0 ? drafts.contiguous() : at::Tensor();
  const int64_t* xb = gamma > 0 ? x.data_ptr<int64_t>() : nullptr;
  const StepPacket packet{gamma};
  Verdict v;
  v.host = at::zeros({B, packet.width()}, at::TensorOptions().dtype(at::kFloat));
  std::vector<int64_t> emitted(static_cast<size_t>(B * T), -1), last(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* ids = top.ids.data() + b * T;
    int64_t* e = emitted.data() + b * T;
    const int64_t n = gamma > 0 ? greedy_accepted(ids, xb + b * gamma, gamma) : 0;
    if (n > 0) std::copy_n(xb + b * gamma, n, e);
    last[static_cast<size_t>(b)] = e[n] = ids[n];
    const bool bad = std::count(top.finite.begin() + b * T, top.finite.begin() + (b + 1) * T, uint8_t{0}) > 0;
    packet.write_greedy(v.host.data_ptr<float>() + b * packet.width(), e, n, bad);
  }
  v.emitted = at::tensor(emitted, at::TensorOptions().dtype(at::kLong)).view({B, T});
  v.last = at::tensor(last, at::TensorOptions().dtype(at::kLong)).view({B, 1});  // no gather: ~10 us a step
  return v;
}

// The verifier on the device's tensors (at temperature 0 the greedy one) and the step's one
// device->host copy.
Verdict tensor_verdict(const at::Tensor& logits, const Proposal& prop, int64_t gamma, const DecodeParams& p,
                       const at::Tensor& u_accept, const at::Tensor& u_sample) {
  const int64_t B = logits.size(0);
  const ProcessedProbs pp = process_logits(logits, p.sampling);  // [B, G+1, V] float32
  Verdict v;
  at::Tensor accepted, path, u_pos, tv;
  if (gamma == 0) {
    v.emitted = sample_from_probs(pp.probs.select(1, 0), u_sample).view({B, 1});
    accepted = at::zeros({B}, v.emitted.options());
  } else {
    VerifierSpec spec = p.verifier;
    if (p.sampling.temperature == 0) spec.kind = VerifierSpec::Greedy;
    const VerifyOutput vo =
        verify(spec, VerifyInput{prop.tokens, pp.probs, pp.max_prob, prop.probs, u_accept, u_sample});
    v.emitted = vo.emitted;
    accepted = vo.accepted;
    path = vo.path;
    const at::Tensor p_draft_pos = pp.probs.narrow(1, 0, gamma), max_pos = pp.max_prob.narrow(1, 0, gamma);
    u_pos = 1 - max_pos;
    tv = at::zeros({B, gamma}, u_pos.options());
    // Computed for every verifier (baseline too, where it is 0 up to rounding), so the metric
    // costs every arm the same time and throughput comparisons stay fair.
    if (p.measure_distortion) {
      const at::Tensor q =
          prop.probs.defined() ? prop.probs : at::one_hot(prop.tokens, pp.probs.size(-1)).to(at::kFloat);
      tv = tv_distance(p_draft_pos, induced_distribution(spec, p_draft_pos, q, max_pos));
    }
  }
  // NaN / +inf logits make max_prob NaN (sampling.h): no extra pass over the vocabulary.
  const at::Tensor bad = at::logical_not(at::isfinite(pp.max_prob).all(-1));
  v.host = to_host(StepPacket{gamma}.pack(v.emitted, accepted, path, u_pos, tv, bad)).contiguous();
  v.last = v.emitted.gather(1, accepted.view({B, 1}));
  return v;
}

// One target forward over [x_last, drafts] and its verdict: on the host (host_verdict), or from the
// tensors with the step's uniforms.
Verdict judge(const CausalLM& target, DecodeRun& run, const Proposal& prop, bool drafted, const DecodeParams& p,
              bool on_host, const at::Tensor& u_accept, const at::Tensor& u_sample) {
  const at::Tensor input = drafted ? at::cat({run.x_last, prop.tokens}, 1) : run.x_last;
  ForwardOutput out = target.forward(input, run.cache, run.fwd);
  Verdict v = on_host ? host_greedy_verdict(out.logits, prop.tokens, run.gamma)
                      : tensor_verdict(out.logits, prop, run.gamma, p, u_accept, u_sample);
  v.aux = std::move(out.aux_hidden);
  return v;
}

// The host side of one step for active row i: stats, emitted tokens, stop conditions. Returns
// the drafts accepted; marks the sequence done when it finished or failed.
int64_t absorb(DecodeRun& run, int64_t i, const at::Tensor& host, const DecodeParams& p, double verify_s) {
  const StepPacket packet{run.gamma};
  Sequence& s = run.seqs[run.active[i]];
  GenStats& st = s.result.stats;
  const StepPacket::Row r = packet.row(host, i);
  const int64_t n = r.accepted();
  st.record_step(run.gamma, n, r.path(), r.u(), p.measure_distortion ? r.tv() : nullptr);
  st.verify_s += verify_s;
  if (r.bad()) {
    fail_request(s, fmt::format("non-finite logits at decode step {}", st.steps));
    s.done = true;
    return n;
  }
  for (int64_t k = 0; k <= n && !s.done; ++k)
    if (push_token(s, r.emitted(k), p)) s.done = true;
  return n;
}

}  // namespace

// One speculative step over the active rows: propose, judge in one target forward (one
// device->host copy), absorb on the host, roll both caches back, drop finished rows.
void Engine::step(DecodeRun& run, const DecodeParams& p) {
  const int64_t Bn = static_cast<int64_t>(run.active.size()), gamma = run.gamma;
  std::vector<RequestRng*> rngs;
  for (int64_t i : run.active) rngs.push_back(&run.seqs[i].rng);
  const double t0 = now_s();
  // [Bn, 2G+1]: draft | accept | sample. The host's greedy verdict (T = 0) uses none, so none are drawn.
  const bool on_host = host_verdict(p, target_);
  const at::Tensor u = on_host ? at::Tensor() : batch_uniforms(rngs, 2 * gamma + 1, run.dev);
  const auto cols = [&u](int64_t from, int64_t n) { return u.defined() ? u.narrow(1, from, n) : at::Tensor(); };
  Proposal prop;
  if (drafter_) {
    TraceRange range("ears.draft");
    // At temperature 0 a sampled draft is the argmax with a one-hot q, exactly greedy drafting's
    // (undefined q = one-hot, verify.h): skip process_logits, the sample and the [B, V] q per token.
    const bool greedy = p.draft_greedy || p.sampling.temperature == 0;
    prop = drafter_->propose(static_cast<int>(gamma), p.sampling, greedy, cols(0, gamma));
  }
  if (p.sync_timing) synchronize(run.dev);
  const double t1 = now_s();
  std::optional<TraceRange> verify_range(std::in_place, "ears.verify");
  const at::Tensor u_sample = u.defined() ? u.select(1, 2 * gamma) : at::Tensor();
  Verdict v = judge(target_, run, prop, drafter_ != nullptr, p, on_host, cols(gamma, gamma), u_sample);
  verify_range.reset();
  const double t2 = now_s();

  std::vector<int64_t> new_lens(Bn), accepted(Bn), rows;
  for (int64_t i = 0; i < Bn; ++i) {
    accepted[i] = absorb(run, i, v.host, p, t2 - t1);
    new_lens[i] = run.cache.length(i) - gamma + accepted[i];  // the cache grew by G+1: keep x_last + n drafts
    if (!run.seqs[run.active[i]].done) rows.push_back(i);
  }
  run.cache.set_lengths(new_lens);
  const double t3 = now_s();
  if (drafter_) {
    TraceRange range("ears.accept");
    drafter_->accept(v.emitted, accepted, v.aux);
  }
  run.x_last = v.last;
  if (p.sync_timing) synchronize(run.dev);
  const double t4 = now_s();

  // The drafter's time: propose and accept. The target alone has none: there the same stretches
  // (the step's uniforms, the next x_last) are other time, like the absorb (finish() takes other
  // as the rest of the latency).
  const double draft_s = (t1 - t0) + (t4 - t3);
  std::vector<int64_t> still;
  for (int64_t i = 0; i < Bn; ++i) {
    Sequence& s = run.seqs[run.active[i]];
    if (drafter_) s.result.stats.draft_s += draft_s;
    if (s.done) finish(s, run.t_start, run.syncs_start);
  }
  for (int64_t r : rows) still.push_back(run.active[r]);
  if (still.size() != run.active.size()) run.keep_rows(rows, drafter_);
  run.active = std::move(still);
}

}  // namespace ears
