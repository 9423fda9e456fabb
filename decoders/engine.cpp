#include "decoders/engine.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "decoders/draft.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "decoders/tokenizer.h"
#include "decoders/trace.h"
#include "harness/error.h"

namespace ears {
namespace {

at::Tensor long_tensor(const std::vector<int64_t>& v, c10::Device device) {
  return at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(device);
}

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
  s.result.stats.host_syncs = host_sync_count() - syncs_start;
  if (s.decoder) {
    s.stops.push_text(s.decoder->flush());
    s.result.text = std::string(s.stops.kept());
  }
}

}  // namespace

Engine::Engine(const CausalLM& target, Drafter* drafter, const Tokenizer* tokenizer)
    : target_(target), drafter_(drafter), tokenizer_(tokenizer) {}

std::vector<GenResult> Engine::generate(const std::vector<GenRequest>& batch, const DecodeParams& p) {
  validate(p.sampling);
  validate(p.verifier);
  if (p.max_new_tokens < 1) fail("decoding.max_new_tokens must be >= 1 (got {})", p.max_new_tokens);
  if (drafter_ && p.gamma < 1) fail("decoding.gamma must be >= 1 with a draft (got {})", p.gamma);
  const int64_t B = static_cast<int64_t>(batch.size());
  if (B == 0) return {};
  const c10::Device dev = target_.device();
  const int64_t gamma = drafter_ ? p.gamma : 0;

  // A request that cannot fit the model's context fails alone (recorded in its result, not
  // thrown), so one over-long prompt in a dataset does not stop a long run.
  const int64_t context = target_.config().max_position_embeddings;
  if (context > 0) {
    std::vector<GenRequest> fit;
    std::vector<size_t> fit_index;
    for (size_t b = 0; b < batch.size(); ++b)
      if (static_cast<int64_t>(batch[b].prompt.size()) + p.max_new_tokens <= context) {
        fit.push_back(batch[b]);
        fit_index.push_back(b);
      }
    if (fit.size() != batch.size()) {
      std::vector<GenResult> results(batch.size());
      for (size_t b = 0; b < batch.size(); ++b) {
        GenResult& r = results[b];
        r.prompt_tokens = static_cast<int64_t>(batch[b].prompt.size());
        r.finish_reason = "error";
        r.error = fmt::format(
            "prompt ({} tokens) + max_new_tokens ({}) exceeds the model's context of {} tokens "
            "(max_position_embeddings); lower decoding.max_new_tokens or shorten the prompt",
            r.prompt_tokens, p.max_new_tokens, context);
        r.stats.accepted_per_position.assign(gamma, 0);
        r.stats.accept_length_hist.assign(gamma + 2, 0);
      }
      std::vector<GenResult> done = generate(fit, p);
      for (size_t k = 0; k < fit.size(); ++k) results[fit_index[k]] = std::move(done[k]);
      return results;
    }
  }
  const int64_t V = target_.config().vocab_size;
  const int64_t n_syncs_start = host_sync_count();

  std::vector<Sequence> seqs;
  seqs.reserve(B);
  std::vector<int64_t> lens(B);
  int64_t max_prompt = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto& r = batch[b];
    if (r.prompt.empty()) fail("request '{}': empty prompt", r.key);
    lens[b] = static_cast<int64_t>(r.prompt.size());
    max_prompt = std::max(max_prompt, lens[b]);
    seqs.emplace_back(r);
    auto& s = seqs.back();
    s.result.prompt_tokens = lens[b];
    s.result.stats.accepted_per_position.assign(gamma, 0);
    s.result.stats.accept_length_hist.assign(gamma + 2, 0);
    std::vector<int32_t> stop_ids = p.stop_ids;
    if (tokenizer_) s.decoder.emplace(*tokenizer_, /*skip_special=*/true);
    s.stops = StopMatcher(stop_ids, tokenizer_ ? p.stop_strings : std::vector<std::string>{});
  }

  // ---- prefill ------------------------------------------------------------------------------
  const double t_start = now_s();
  std::vector<int64_t> flat(B * max_prompt, 0);
  for (int64_t b = 0; b < B; ++b)
    std::copy(batch[b].prompt.begin(), batch[b].prompt.end(), flat.begin() + b * max_prompt);
  at::Tensor prompt_ids = long_tensor(flat, dev).view({B, max_prompt});
  std::vector<int64_t> last_rows(B);
  for (int64_t b = 0; b < B; ++b) last_rows[b] = lens[b] - 1;

  const int64_t cache_len = max_prompt + p.max_new_tokens + gamma + 2;
  KVCache cache = target_.new_cache(B, cache_len);
  std::optional<TraceRange> prefill_range(std::in_place, "ears.prefill");
  ForwardOptions fwd;
  if (drafter_) fwd.aux_layers = drafter_->aux_layers();
  ForwardOptions prefill_opts = fwd;
  prefill_opts.logits_rows = long_tensor(last_rows, dev).view({B, 1});
  ForwardOutput out = target_.forward(prompt_ids, cache, prefill_opts);
  cache.set_lengths(lens);

  std::vector<RequestRng*> rngs;
  for (auto& s : seqs) rngs.push_back(&s.rng);
  ProcessedProbs pp0 = process_logits(out.logits.select(1, 0), p.sampling);
  at::Tensor first = sample_from_probs(pp0.probs, batch_uniforms(rngs, 1, dev).squeeze(1));
  at::Tensor bad0 = at::logical_not(at::isfinite(pp0.max_prob));  // NaN / +inf logits
  at::Tensor host0 = to_host(at::stack({first.to(at::kFloat), bad0.to(at::kFloat)}, 1));
  if (drafter_) drafter_->begin(prompt_ids, lens, first, out.aux_hidden, cache_len);
  prefill_range.reset();
  const double t_prefill = now_s();

  auto h0 = host0.accessor<float, 2>();
  std::vector<int64_t> active;  // indices into seqs of the rows still decoding
  for (int64_t b = 0; b < B; ++b) {
    auto& s = seqs[b];
    s.result.ttft_s = t_prefill - t_start;
    s.result.stats.prefill_s = t_prefill - t_start;
    if (h0[b][1] != 0) {
      s.result.error = "non-finite logits in the prefill";
      s.result.finish_reason = "error";
      finish(s, t_start, n_syncs_start);
    } else if (push_token(s, static_cast<int32_t>(h0[b][0]), p)) {
      finish(s, t_start, n_syncs_start);
    } else {
      active.push_back(b);
    }
  }
  at::Tensor x_last = first.view({B, 1});
  auto keep_rows = [&](const std::vector<int64_t>& rows) {
    if (static_cast<int64_t>(rows.size()) == cache.batch()) return;
    cache.select(rows);
    if (drafter_) drafter_->select(rows);
    x_last = x_last.index_select(0, long_tensor(rows, dev));
  };
  {
    std::vector<int64_t> rows;
    for (size_t i = 0; i < static_cast<size_t>(B); ++i)
      if (!seqs[i].done) rows.push_back(static_cast<int64_t>(i));
    keep_rows(rows);
  }

  // ---- speculative steps --------------------------------------------------------------------
  while (!active.empty()) {
    const int64_t Bn = static_cast<int64_t>(active.size());
    std::vector<RequestRng*> step_rngs;
    for (int64_t i : active) step_rngs.push_back(&seqs[i].rng);
    const double t0 = now_s();
    at::Tensor u = batch_uniforms(step_rngs, 2 * gamma + 1, dev);
    at::Tensor u_draft = u.narrow(1, 0, gamma), u_accept = u.narrow(1, gamma, gamma);
    at::Tensor u_sample = u.select(1, 2 * gamma);

    Proposal prop;
    if (drafter_) {
      TraceRange range("ears.draft");
      prop = drafter_->propose(static_cast<int>(gamma), p.sampling, p.draft_greedy, u_draft);
    }
    if (p.sync_timing) synchronize(dev);
    const double t1 = now_s();

    std::optional<TraceRange> verify_range(std::in_place, "ears.verify");
    at::Tensor input = drafter_ ? at::cat({x_last, prop.tokens}, 1) : x_last;
    out = target_.forward(input, cache, fwd);
    ProcessedProbs pp = process_logits(out.logits, p.sampling);  // [Bn, gamma+1, V] float32
    at::Tensor emitted, accepted, path;
    std::vector<at::Tensor> pack;
    if (gamma == 0) {
      emitted = sample_from_probs(pp.probs.select(1, 0), u_sample).view({Bn, 1});
      accepted = at::zeros({Bn}, emitted.options());
      pack = {emitted.to(at::kFloat), accepted.to(at::kFloat).view({Bn, 1})};
    } else {
      VerifyInput in{prop.tokens, pp.probs, pp.max_prob, prop.probs, u_accept, u_sample};
      VerifyOutput vo = verify(p.verifier, in);
      emitted = vo.emitted;
      accepted = vo.accepted;
      at::Tensor p_draft_pos = pp.probs.narrow(1, 0, gamma);
      at::Tensor u_pos = 1 - pp.max_prob.narrow(1, 0, gamma);
      at::Tensor tv = at::zeros({Bn, gamma}, u_pos.options());
      // Computed for every verifier (baseline too, where it is 0 up to rounding), so the metric
      // costs every arm the same time and throughput comparisons stay fair.
      if (p.measure_distortion) {
        at::Tensor q = prop.probs.defined() ? prop.probs : at::one_hot(prop.tokens, V).to(at::kFloat);
        tv = tv_distance(p_draft_pos,
                         induced_distribution(p.verifier, p_draft_pos, q, pp.max_prob.narrow(1, 0, gamma)));
      }
      pack = {emitted.to(at::kFloat), accepted.to(at::kFloat).view({Bn, 1}), vo.path.to(at::kFloat), u_pos, tv};
    }
    // NaN / +inf logits make max_prob NaN (sampling.h): no extra pass over the vocabulary.
    pack.push_back(at::logical_not(at::isfinite(pp.max_prob).all(-1)).to(at::kFloat).view({Bn, 1}));
    at::Tensor host = to_host(at::cat(pack, 1));  // the step's one device->host sync
    verify_range.reset();
    const double t2 = now_s();

    auto h = host.accessor<float, 2>();
    const int64_t c_acc = gamma + 1, c_path = gamma + 2, c_u = 2 * gamma + 2, c_tv = 3 * gamma + 2;
    const int64_t c_bad = gamma == 0 ? 2 : 4 * gamma + 2;
    std::vector<int64_t> new_lens(Bn), accepted_host(Bn);
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < Bn; ++i) {
      auto& s = seqs[active[i]];
      auto& st = s.result.stats;
      const int64_t n = static_cast<int64_t>(h[i][c_acc]);
      accepted_host[i] = n;
      new_lens[i] = cache.length(i) - gamma + n;  // the cache grew by gamma+1; keep x_last + n drafts
      st.steps += 1;
      st.drafted += gamma;
      st.accepted += n;
      if (n == gamma) st.bonus += 1;
      else st.corrections += 1;
      st.accept_length_hist[n + 1] += 1;
      for (int64_t k = 0; k < n; ++k) st.accepted_per_position[k] += 1;
      for (int64_t k = 0; k < std::min(n + 1, gamma); ++k) {  // positions the verifier judged
        const double uk = h[i][c_u + k];
        const int bucket = std::clamp(static_cast<int>(uk * kUncertaintyBuckets), 0, kUncertaintyBuckets - 1);
        const bool pardon = h[i][c_path + k] == 2;
        st.drafted_by_u[bucket] += 1;
        if (k < n) st.accepted_by_u[bucket] += 1;
        if (pardon) st.pardoned_by_u[bucket] += 1, st.pardoned += 1;
        st.uncertainty_sum += uk;
        if (p.measure_distortion) st.distortion_sum += h[i][c_tv + k], st.distortion_n += 1;
      }
      st.verify_s += t2 - t1;
      st.draft_s += t1 - t0;
      if (h[i][c_bad] != 0) {
        s.result.error = fmt::format("non-finite logits at decode step {}", st.steps);
        s.result.finish_reason = "error";
        s.done = true;
        continue;
      }
      for (int64_t k = 0; k <= n && !s.done; ++k)
        if (push_token(s, static_cast<int32_t>(h[i][k]), p)) s.done = true;
      if (!s.done) rows.push_back(i);
    }
    cache.set_lengths(new_lens);
    const double t3 = now_s();
    if (drafter_) {
      TraceRange range("ears.accept");
      drafter_->accept(emitted, accepted_host, out.aux_hidden);
    }
    x_last = emitted.gather(1, accepted.view({Bn, 1}));
    if (p.sync_timing) synchronize(dev);
    const double t4 = now_s();

    std::vector<int64_t> still;
    for (int64_t i = 0; i < Bn; ++i) {
      auto& s = seqs[active[i]];
      s.result.stats.draft_s += t4 - t3;
      s.result.stats.other_s += t3 - t2;
      if (s.done) finish(s, t_start, n_syncs_start);
    }
    for (int64_t r : rows) still.push_back(active[r]);
    if (still.size() != active.size()) keep_rows(rows);
    active = std::move(still);
  }

  std::vector<GenResult> results;
  results.reserve(B);
  for (auto& s : seqs) results.push_back(std::move(s.result));
  return results;
}

}  // namespace ears
