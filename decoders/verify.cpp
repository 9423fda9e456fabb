#include "decoders/verify.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/where.h>
#include <ATen/ops/xlogy.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <fmt/ranges.h>

#include <cmath>

#include "decoders/aten_operators.h"
#include "decoders/param_ranges.h"
#include "decoders/sampling.h"
#include "harness/base/error.h"

namespace ears {

// ---- names ----

static_assert(ranges::kVerifierNames.size() == VerifierSpec::Greedy + 1, "a name for every VerifierSpec::Kind");
static_assert(ranges::kUncertaintyNames.size() == VerifierSpec::Entropy + 1, "a name for every Uncertainty");

namespace {
// The index of `name` in `names` (ranges::kVerifierNames, ...), or -1.
template <std::size_t N>
int index_of(const std::array<std::string_view, N>& names, std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<int>(i);
  return -1;
}
}  // namespace

VerifierSpec::Kind parse_verifier_kind(std::string_view name) {
  const int i = index_of(ranges::kVerifierNames, name);
  if (i < 0) fail("unknown verifier '{}'; use one of {}", name, fmt::join(ranges::kVerifierNames, ", "));
  return static_cast<VerifierSpec::Kind>(i);
}

std::string to_string(VerifierSpec::Kind kind) { return std::string(ranges::kVerifierNames.at(static_cast<std::size_t>(kind))); }

VerifierSpec::Uncertainty parse_uncertainty(std::string_view name) {
  const int i = index_of(ranges::kUncertaintyNames, name);
  if (i < 0) fail("unknown EARS uncertainty '{}'; use one of {}", name, fmt::join(ranges::kUncertaintyNames, ", "));
  return static_cast<VerifierSpec::Uncertainty>(i);
}

std::string to_string(VerifierSpec::Uncertainty u) {
  return std::string(ranges::kUncertaintyNames.at(static_cast<std::size_t>(u)));
}

void validate(const VerifierSpec& s, std::string_view where) {
  ranges::check(ranges::kBeta, where, "beta", s.beta);
  ranges::check(ranges::kEps, where, "typical_eps", s.typical_eps);
  ranges::check(ranges::kDelta, where, "typical_delta", s.typical_delta);
}

// ---- shared pieces ----
namespace {

std::string shape(const at::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

void expect(const at::Tensor& t, const char* name, std::vector<int64_t> want, const at::Tensor& ref) {
  if (!t.defined() || t.sizes() != at::IntArrayRef(want)) {
    std::string w = "[";
    for (size_t i = 0; i < want.size(); ++i) w += (i ? ", " : "") + std::to_string(want[i]);
    fail("verify: VerifyInput.{} must be {}], got {}; fix the caller", name, w, shape(t));
  }
  if (t.device() != ref.device())
    fail("verify: VerifyInput.{} is on {} but target_probs is on {}; move it", name,
         t.device().str(), ref.device().str());
}

// u in [0, 1] per position: 1 - max p (MaxProb) or H(p) / log V (Entropy, from p itself).
at::Tensor uncertainty(const VerifierSpec& spec, const at::Tensor& p, const at::Tensor& max_p) {
  if (spec.uncertainty == VerifierSpec::Entropy) {
    const int64_t V = p.size(-1);
    if (V < 2) return at::zeros(p.sizes().slice(0, p.dim() - 1), p.options());
    return at::xlogy(p, p).sum(-1).neg_().div_(std::log(static_cast<double>(V))).clamp_(0, 1);
  }
  if (!max_p.defined())
    fail("verify: ears with uncertainty max_prob needs target_max (process_logits' max_prob)");
  return (1 - max_p.to(at::kFloat)).clamp_(0, 1);
}

// Typical acceptance threshold min(ε, δ·exp(-H)), H = -Σ p log(p + 1e-5) (vLLM v0).
at::Tensor typical_threshold(const VerifierSpec& spec, const at::Tensor& p) {
  at::Tensor minus_h = (p * (p + 1e-5).log()).sum(-1);
  return minus_h.exp_().mul_(spec.typical_delta).clamp_max_(spec.typical_eps);
}

// The rejection rule of baseline and EARS, written once: verify() decides with it and
// induced_distribution() integrates it over U ~ Uniform[0, 1).
//   ratio = p(x) / (q(x) > 0 ? q(x) : 1e-10)           slack = β·u (EARS), none (baseline)
//   accept iff eligible and ratio >= max(U - slack, 0)  =>  P(accept) = eligible · min(1, ratio + slack)
//   eligible: baseline needs q(x) > 0 (and p(x) > 0, so that U = 0 cannot accept a token the target
//   never emits; ratio = 0 makes that factor a no-op in the probability); EARS: every token.
// Without slack the threshold is U itself (no subtraction, no clamp): baseline stays bit-exact.
struct AcceptanceRule {
  at::Tensor ratio;     // [...] float32
  at::Tensor slack;     // [...] float32, or undefined (baseline)
  at::Tensor eligible;  // [...] bool, or undefined (every token)
};

// Baseline and EARS decide by the rule below (uniforms per position, a residual after a rejection).
bool rejection_kind(VerifierSpec::Kind kind) { return kind == VerifierSpec::Baseline || kind == VerifierSpec::Ears; }

// p, q: p_t(x) and q(x), any matching shapes; u: EARS's uncertainty broadcastable to them.
AcceptanceRule acceptance_rule(const VerifierSpec& spec, const at::Tensor& p, const at::Tensor& q,
                               const at::Tensor& u) {
  const at::Tensor q_pos = q > 0;
  AcceptanceRule r;
  r.ratio = p / at::where(q_pos, q, at::full_like(q, 1e-10));
  if (spec.kind == VerifierSpec::Ears) {
    r.slack = spec.beta * u;
  } else {
    r.eligible = q_pos;
  }
  return r;
}

at::Tensor accepts(const AcceptanceRule& r, const at::Tensor& p, const at::Tensor& U) {
  if (r.slack.defined()) return r.ratio >= (U - r.slack).clamp_min_(0);
  return (r.ratio >= U).logical_and_(p > 0).logical_and_(r.eligible);
}

at::Tensor acceptance_probability(const AcceptanceRule& r) {
  if (r.slack.defined()) return (r.ratio + r.slack).clamp_max_(1);
  return r.ratio.clamp_max(1).mul_(r.eligible);
}

// Row `index[b]` of t[b] for t [B, L, V], index [B] int64 -> [B, V]: one row copy per sequence.
at::Tensor row_at(const at::Tensor& t, const at::Tensor& index) {
  const int64_t B = t.size(0), L = t.size(1), V = t.size(2);
  const at::Tensor flat = at::arange(B, index.options()).mul_(L).add_(index);
  return t.reshape({B * L, V}).index_select(0, flat);
}

}  // namespace

// ---- verify ----
namespace {

// Checks every field's shape against target_probs [B, γ+1, V]; returns B and G = γ.
struct VerifyDims {
  int64_t B, G;
};

VerifyDims check_input(const VerifierSpec& spec, const VerifyInput& in) {
  const at::Tensor& p_t = in.target_probs;
  if (!p_t.defined() || p_t.dim() != 3 || p_t.size(1) < 1)
    fail("verify: VerifyInput.target_probs must be [B, γ+1, V], got {}", shape(p_t));
  const int64_t B = p_t.size(0), G = p_t.size(1) - 1, V = p_t.size(2);
  const auto kind = spec.kind;
  const bool rejection = rejection_kind(kind);
  expect(in.draft_tokens, "draft_tokens", {B, G}, p_t);
  if (in.draft_tokens.scalar_type() != at::kLong)
    fail("verify: VerifyInput.draft_tokens must be int64, got {}", c10::toString(in.draft_tokens.scalar_type()));
  if (rejection) expect(in.uniforms_accept, "uniforms_accept", {B, G}, p_t);
  if (rejection && in.draft_probs.defined()) expect(in.draft_probs, "draft_probs", {B, G, V}, p_t);
  if (kind == VerifierSpec::Ears && spec.uncertainty == VerifierSpec::MaxProb)
    expect(in.target_max, "target_max", {B, G + 1}, p_t);
  if (kind != VerifierSpec::Greedy) expect(in.uniforms_sample, "uniforms_sample", {B}, p_t);
  return {B, G};
}

// Per-position decision: accept [B, G] bool; primary [B, G] bool (false = pardoned);
// top [B, G+1] int64, the target's argmax (greedy only).
struct Decision {
  at::Tensor accept, primary, top;
};

// p_draft_pos: p_t at the draft positions [B, G, V]; p_x: p_t(x) [B, G] float32.
Decision decide(const VerifierSpec& spec, const VerifyInput& in, const at::Tensor& p_draft_pos,
                const at::Tensor& p_x, int64_t G) {
  const at::Tensor& x = in.draft_tokens;
  Decision d;
  switch (spec.kind) {
    case VerifierSpec::Baseline:
    case VerifierSpec::Ears: {
      at::Tensor q_x = in.draft_probs.defined()
                           ? in.draft_probs.gather(2, x.unsqueeze(2)).squeeze(2).to(at::kFloat)
                           : at::ones_like(p_x);
      const at::Tensor u = spec.kind == VerifierSpec::Ears
                               ? uncertainty(spec, p_draft_pos,
                                             in.target_max.defined() ? in.target_max.narrow(1, 0, G) : at::Tensor())
                               : at::Tensor();
      const AcceptanceRule rule = acceptance_rule(spec, p_x, q_x, u);
      const at::Tensor u_acc = in.uniforms_accept.to(at::kFloat);
      d.accept = accepts(rule, p_x, u_acc);
      // What the exact rule alone would have accepted (q aside): EARS's other accepts are pardons.
      d.primary = (rule.ratio >= u_acc).logical_and_(p_x > 0);
      break;
    }
    case VerifierSpec::Typical:
      d.accept = p_x > typical_threshold(spec, p_draft_pos.to(at::kFloat));
      d.primary = d.accept;
      break;
    case VerifierSpec::Greedy:
      d.top = in.target_probs.argmax(2);
      d.accept = x == d.top.narrow(1, 0, G);
      d.primary = d.accept;
      break;
  }
  return d;
}

// The one token of the verifier's own at index accepted [B]: the argmax (greedy), a sample of
// norm(max(0, p_t - q)) after a rejection (baseline, EARS), of p_t otherwise. -> [B] int64
at::Tensor own_token(const VerifierSpec& spec, const VerifyInput& in, const Decision& d, const at::Tensor& accepted,
                     int64_t G) {
  if (spec.kind == VerifierSpec::Greedy) return d.top.gather(1, accepted.unsqueeze(1)).squeeze(1);
  const at::Tensor& x = in.draft_tokens;
  at::Tensor p_row = row_at(in.target_probs, accepted).to(at::kFloat);  // [B, V]
  at::Tensor dist = p_row;
  if (rejection_kind(spec.kind) && G > 0) {
    at::Tensor j = accepted.clamp_max(G - 1);
    at::Tensor resid = in.draft_probs.defined()
                           ? (p_row - row_at(in.draft_probs, j).to(at::kFloat)).clamp_min_(0)
                           : p_row.scatter(1, x.gather(1, j.unsqueeze(1)), 0.0);  // one-hot q
    at::Tensor use_resid = (accepted < G).logical_and_(resid.sum(1) > 0).unsqueeze(1);
    dist = at::where(use_resid, resid, p_row);  // unnormalised is fine for sample_from_probs
  }
  return sample_from_probs(dist, in.uniforms_sample);
}

}  // namespace

VerifyOutput verify(const VerifierSpec& spec, const VerifyInput& in) {
  validate(spec);
  const VerifyDims dims = check_input(spec, in);
  const int64_t B = dims.B, G = dims.G;
  const at::Tensor& x = in.draft_tokens;
  const at::Tensor p_draft_pos = in.target_probs.narrow(1, 0, G);                          // [B, G, V] (view)
  const at::Tensor p_x = p_draft_pos.gather(2, x.unsqueeze(2)).squeeze(2).to(at::kFloat);  // [B, G]
  const Decision d = decide(spec, in, p_draft_pos, p_x, G);
  at::Tensor accepted = d.accept.to(at::kLong).cumprod(1).sum(1);  // [B]
  const at::Tensor own = own_token(spec, in, d, accepted, G);      // [B]

  const auto long_opts = x.options();
  at::Tensor idx = at::arange(G + 1, long_opts).unsqueeze(0);  // [1, G+1]
  at::Tensor acc = accepted.unsqueeze(1);                       // [B, 1]
  at::Tensor drafts = at::cat({x, at::zeros({B, 1}, long_opts)}, 1);
  at::Tensor emitted = at::where(idx == acc, own.unsqueeze(1), drafts).masked_fill_(idx > acc, -1);

  at::Tensor reached = idx.narrow(1, 0, G) < acc;                        // accepted positions
  static_assert(path_code(TokenPath::Rejected) == 0, "unreached positions are the product's zeros");
  at::Tensor kind_code = at::where(d.primary, path_code(TokenPath::Primary), path_code(TokenPath::Pardoned));
  at::Tensor path = (kind_code * reached.to(at::kLong)).to(at::kChar);
  return {accepted, emitted, path};
}

int64_t greedy_accepted(const int64_t* target_ids, const int64_t* drafts, int64_t gamma) {
  int64_t n = 0;
  while (n < gamma && drafts[n] == target_ids[n]) ++n;
  return n;
}

// ---- distortion ----

at::Tensor induced_distribution(const VerifierSpec& spec, const at::Tensor& p_in, const at::Tensor& q_in,
                                const at::Tensor& target_max) {
  validate(spec);
  if (!p_in.defined() || p_in.dim() < 1 || !q_in.defined() || p_in.sizes() != q_in.sizes())
    fail("induced_distribution: p_t and q must both be [..., V], got {} and {}", shape(p_in), shape(q_in));
  at::Tensor p = p_in.to(at::kFloat), q = q_in.to(at::kFloat);
  at::Tensor a, r;
  switch (spec.kind) {
    case VerifierSpec::Greedy:
      // q(top)·1 + (1 - q(top))·onehot(top) = onehot(top), whatever q is.
      return at::zeros_like(p).scatter_(-1, p.argmax(-1, /*keepdim=*/true), 1.0);
    case VerifierSpec::Typical:
      a = (p > typical_threshold(spec, p).unsqueeze(-1)).to(at::kFloat);
      r = p;
      break;
    case VerifierSpec::Baseline:
    case VerifierSpec::Ears: {
      at::Tensor u;
      if (spec.kind == VerifierSpec::Ears) {
        if (spec.uncertainty == VerifierSpec::MaxProb && (!target_max.defined() ||
                                                          target_max.sizes() != p.sizes().slice(0, p.dim() - 1)))
          fail("induced_distribution: ears/max_prob needs target_max of shape {}, got {}",
               shape(p.select(-1, 0)), shape(target_max));
        u = uncertainty(spec, p, target_max).unsqueeze(-1);
      }
      a = acceptance_probability(acceptance_rule(spec, p, q, u));
      at::Tensor resid = (p - q).clamp_min_(0);
      at::Tensor mass = resid.sum(-1, /*keepdim=*/true);
      r = at::where(mass > 0, resid / mass.clamp_min(1e-30), p);
      break;
    }
  }
  at::Tensor qa = q * a;
  return qa + (1 - qa.sum(-1, /*keepdim=*/true)) * r;
}

at::Tensor tv_distance(const at::Tensor& p, const at::Tensor& r) {
  return (p.to(at::kFloat) - r.to(at::kFloat)).abs_().sum(-1).mul_(0.5);
}

}  // namespace ears
