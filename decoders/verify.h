// Verifiers for speculative decoding: pure functions on batched tensors (vLLM rejection-sampler
// style). A draft proposes γ tokens per sequence, the target scores γ+1 positions in one forward
// (the last one is the bonus position), and the verifier keeps a prefix of the drafts plus one
// token of its own (the correction at the first rejection, or the bonus when all γ pass).
//
// All inputs live on one device; nothing here synchronises with the host, loops over the
// vocabulary, or builds [B, γ, V] temporaries except where a rule needs a per-position reduction
// over V (typical's entropy, EARS's entropy uncertainty).
//
// Verifiers
//   baseline  exact speculative sampling (Leviathan et al. 2023, Chen et al. 2023): accept draft x_i
//             iff U_i <= p_t(x_i)/q(x_i) (q(x_i) = 0 rejects); first rejection at j -> correction
//             ~ norm(max(0, p_t[j] - q[j])) (p_t[j] itself if that residual is all zero); all γ
//             accepted -> bonus ~ p_t[γ]. The emitted tokens are distributed exactly as p_t.
//   ears      entropy/uncertainty-adaptive rejection sampling: accept iff
//             p_t(x)/q'(x) >= max(U - β·u, 0), u = 1 - max p_t (MaxProb) or H(p_t)/log V (Entropy),
//             q'(x) = q(x) if q(x) > 0 else 1e-10 (the floor only guards a zero division, so β = 0
//             reproduces baseline bit for bit). Correction/bonus as baseline. The acceptance
//             probability becomes min(1, p_t/q + β·u) > min(1, p_t/q), so
//             ****  EARS's output is NOT exactly p_t  ****: it is induced_distribution(), biased
//             toward the draft when the target is uncertain. tv_distance(p_t, induced) measures it.
//   typical   vLLM v0 / Medusa typical acceptance: accept iff p_t(x) > min(ε, δ·exp(-H(p_t))),
//             H = -Σ p log(p + 1e-5); q is ignored. Correction ~ p_t[j] (sampled; vLLM v0 takes the
//             argmax instead), bonus ~ p_t[γ].
//   greedy    accept iff x == argmax p_t; correction/bonus = argmax p_t (no randomness used).
//
// Temperature 0: p_t is one-hot at the target's argmax and greedy drafting's q one-hot at the draft,
// and the engine verifies greedily whatever the verifier (as vLLM and SGLang do for greedy requests). Each
// rule above gives exactly that at T = 0 (u = 1 - max p_t = 0: no pardon; typical's threshold is
// below 1) except in two degenerate corners the engine does not reproduce: EARS's threshold
// max(U - β·0, 0) is 0 when U = 0 exactly (2^-24 per position), which would accept a token of target
// probability 0, and typical with min(ε, δ·e^-H) >= 1 (H ≈ 0), which would reject the argmax too.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace ears {

struct VerifierSpec {
  enum Kind { Baseline, Ears, Typical, Greedy } kind = Baseline;
  double beta = 0.1;  // EARS pardon scale β >= 0
  enum Uncertainty { MaxProb, Entropy } uncertainty = MaxProb;
  double typical_eps = 0.09, typical_delta = 0.3;  // typical: ε (posterior threshold), δ (alpha)
};

// "baseline" | "ears" | "typical" | "greedy"; anything else throws ears::Error listing them.
VerifierSpec::Kind parse_verifier_kind(std::string_view name);
std::string to_string(VerifierSpec::Kind kind);
// "max_prob" | "entropy"
VerifierSpec::Uncertainty parse_uncertainty(std::string_view name);
std::string to_string(VerifierSpec::Uncertainty u);
// Rejects β < 0, ε <= 0, δ <= 0 with an ears::Error naming the key (`where` prefixes it).
void validate(const VerifierSpec& spec, std::string_view where = "verifier");

struct VerifyInput {
  at::Tensor draft_tokens;     // [B, γ] int64 ids in the target vocabulary
  at::Tensor target_probs;     // [B, γ+1, V] processed p_t (process_logits)
  at::Tensor target_max;       // [B, γ+1] max p_t (process_logits' max_prob); used by ears/MaxProb
  at::Tensor draft_probs;      // [B, γ, V] processed q the drafts were sampled from. For greedy
                               // drafting pass a one-hot, or leave undefined: an undefined tensor
                               // means one-hot q at draft_tokens (no [B, γ, V] allocation).
                               // Ignored by typical and greedy.
  at::Tensor uniforms_accept;  // [B, γ]  U_i in [0, 1)
  at::Tensor uniforms_sample;  // [B]     for the correction / bonus token
};

// The codes of VerifyOutput::path: how the verifier judged each draft position.
enum class TokenPath : int8_t {
  Rejected = 0,  // rejected, or not reached (after the first rejection)
  Primary = 1,   // accepted by the primary test
  Pardoned = 2,  // accepted only thanks to EARS's β·u pardon
};
constexpr int64_t path_code(TokenPath p) { return static_cast<int64_t>(p); }

struct VerifyOutput {
  at::Tensor accepted;  // [B] int64: number of draft tokens accepted (0..γ)
  at::Tensor emitted;   // [B, γ+1] int64: the accepted drafts, then the correction (or the bonus
                        // when all γ pass) at index `accepted`, then -1
  at::Tensor path;      // [B, γ] int8: a TokenPath code per position
};

VerifyOutput verify(const VerifierSpec& spec, const VerifyInput& in);

// The greedy verdict of one sequence on the host (the CPU's temperature-0 step): the target's
// argmax per position target_ids [γ+1] and the drafts [γ] -> n, the drafts accepted (the first
// mismatch); the emitted tokens are drafts[0, n) then target_ids[n]. verify()'s greedy rule.
int64_t greedy_accepted(const int64_t* target_ids, const int64_t* drafts, int64_t gamma);

// The exact single-position output distribution of a verifier when the draft token is drawn from
// q: P(y) = q(y)·a(y) + (1 - Σ_x q(x)·a(x))·r(y), with a the acceptance probability (baseline
// min(1, p/q); ears min(1, p/q + β·u); typical / greedy their indicators) and r the distribution
// the correction is drawn from. p_t, q: [..., V]; target_max: [...] (used by ears/MaxProb).
// Baseline returns p_t (up to rounding); the others differ from p_t in general.
at::Tensor induced_distribution(const VerifierSpec& spec, const at::Tensor& p_t, const at::Tensor& q,
                                const at::Tensor& target_max);

// Total-variation distance 0.5·Σ|p - r| over the last dim: [..., V] x [..., V] -> [...].
at::Tensor tv_distance(const at::Tensor& p, const at::Tensor& r);

}  // namespace ears
