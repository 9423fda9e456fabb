#include "decoders/sampling.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <cmath>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "decoders/aten_operators.h"
#include "decoders/bf16_bits.h"
#include "decoders/param_ranges.h"
#include "harness/base/error.h"

namespace ears {

void validate(const SamplingParams& p, std::string_view where) {
  ranges::check(ranges::kTemperature, where, "temperature", p.temperature);
  ranges::check(ranges::kTopK, where, "top_k", static_cast<double>(p.top_k));
  ranges::check(ranges::kTopP, where, "top_p", p.top_p);
}

ProcessedProbs process_logits(const at::Tensor& logits, const SamplingParams& params) {
  validate(params);
  if (logits.dim() < 1 || logits.size(-1) < 1)
    fail("process_logits: logits must be [..., V] with V >= 1, got {} dims", logits.dim());
  const int64_t V = logits.size(-1);
  const bool use_k = params.top_k > 0 && params.top_k < V;
  const bool use_p = params.top_p < 1;

  if (params.temperature > 0 && !use_k && !use_p) {
    // p = exp(s·l - s·max l) / Z with s = 1/T, Z = Σ exp(s·l - s·max l); the top token has
    // exp(0) = 1 (up to one float32 rounding), so max p = 1/Z: no pass of its own. The max is
    // exact in the logits' own dtype; add(-s·max, l, alpha = s) upcasts, scales and shifts in
    // one pass (float32 out because the max is float32), then exp, sum and divide in place:
    // five passes over [..., V], no temporary beyond the output.
    const double s = 1 / params.temperature;
    const at::Tensor l = logits.scalar_type() == at::kDouble ? logits.to(at::kFloat) : logits;
    const at::Tensor top = l.amax(-1, /*keepdim=*/true).to(at::kFloat);
    at::Tensor e = at::add(top.mul(-s), l, s).exp_();
    const at::Tensor z = e.sum(-1, /*keepdim=*/true);
    return {e.div_(z), z.squeeze(-1).reciprocal()};
  }

  at::Tensor l = logits.to(at::kFloat);  // no copy when already float32 (then never written)
  if (params.temperature == 0) {
    auto [top, best] = l.max(-1, /*keepdim=*/true);
    at::Tensor probs = at::zeros_like(l).scatter_(-1, best, 1.0);
    // (top - top) + 1: 1, or NaN for a row holding NaN or +inf (max propagates NaN, inf - inf is
    // NaN), as the softmax gives; the engine's finiteness check reads it.
    return {probs, top.sub(top).add_(1).squeeze(-1)};
  }
  if (params.temperature != 1) l = l / params.temperature;

  // Work in descending order; scatter the result back to vocabulary order at the end.
  auto [sorted, order] = l.sort(-1, /*descending=*/true);
  at::Tensor keep = at::ones_like(sorted, sorted.options().dtype(at::kBool));
  if (use_k) {
    // HF semantics: drop tokens strictly below the k-th largest logit (ties with it survive).
    at::Tensor kth = sorted.narrow(-1, params.top_k - 1, 1);
    keep = sorted >= kth;
  }
  at::Tensor e = (sorted - sorted.narrow(-1, 0, 1)).exp_().mul_(keep);
  if (use_p) {
    at::Tensor p = e / e.sum(-1, /*keepdim=*/true);
    // Probability mass strictly before each token; keep while it is still below top_p. The top
    // token has 0 before it, so it is always kept.
    at::Tensor before = p.cumsum(-1) - p;
    keep = keep.logical_and(before < params.top_p);
    e.mul_(keep);
  }
  at::Tensor z = e.sum(-1, /*keepdim=*/true);
  at::Tensor probs = at::zeros_like(l).scatter_(-1, order, e.div_(z));
  return {probs, z.squeeze(-1).reciprocal()};
}

namespace {
// The first maximum of row[0, V) (the first NaN, if any) and its value: the scalar definition.
template <class E, class Widen>
int64_t argmax_scalar(const E* row, int64_t V, Widen widen, float& best_v) {
  int64_t best = 0;
  best_v = widen(row[0]);
  for (int64_t v = 1; v < V && !std::isnan(best_v); ++v) {
    const float x = widen(row[v]);
    if (x > best_v || std::isnan(x)) best = v, best_v = x;
  }
  return best;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EARS_ARGMAX_AVX2 1
// 8 logits from p as fp32 (bf16: widened exactly).
__attribute__((target("avx2"))) inline __m256 load8_logits(const float* p) { return _mm256_loadu_ps(p); }
__attribute__((target("avx2"))) inline __m256 load8_logits(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
// argmax_scalar's answer in two passes of 8 lanes: the maximum (and whether a NaN occurs), then the
// first element equal to it (or the first NaN). Comparisons only, so exactly the scalar loop's.
// (The scalar loop took ~2.1 us a row of 2048 bf16 logits on an AMD Zen 4: 11 rows a speculative step.)
template <class E, class Widen>
__attribute__((target("avx2"))) int64_t argmax_avx2(const E* row, int64_t V, Widen widen, float& best_v) {
  const int64_t V8 = V / 8 * 8;
  if (V8 == 0) return argmax_scalar(row, V, widen, best_v);
  __m256 vmax = load8_logits(row), nan = _mm256_cmp_ps(vmax, vmax, _CMP_UNORD_Q);
  for (int64_t v = 8; v < V8; v += 8) {
    const __m256 x = load8_logits(row + v);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    vmax = _mm256_max_ps(vmax, x);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float m = lanes[0];
  for (int i = 1; i < 8; ++i) m = std::max(m, lanes[i]);
  bool any_nan = _mm256_movemask_ps(nan) != 0;
  for (int64_t v = V8; v < V; ++v) {
    const float x = widen(row[v]);
    any_nan = any_nan || std::isnan(x);
    m = std::max(m, x);
  }
  // The first element that is the maximum (== m), or NaN when one occurs.
  const __m256 target = _mm256_set1_ps(m);
  for (int64_t v = 0; v < V8; v += 8) {
    const __m256 x = load8_logits(row + v);
    const __m256 is = any_nan ? _mm256_cmp_ps(x, x, _CMP_UNORD_Q) : _mm256_cmp_ps(x, target, _CMP_EQ_OQ);
    const int hit = _mm256_movemask_ps(is);
    if (hit != 0) {
      const int64_t at = v + __builtin_ctz(static_cast<unsigned>(hit));
      best_v = widen(row[at]);
      return at;
    }
  }
  for (int64_t v = V8; v < V; ++v) {
    const float x = widen(row[v]);
    if (any_nan ? std::isnan(x) : x == m) {
      best_v = x;
      return v;
    }
  }
  return argmax_scalar(row, V, widen, best_v);  // unreachable: m is one of the row's values
}
#endif

template <class E, class Widen>
void argmax_rows(const E* base, int64_t N, int64_t V, Widen widen, HostArgmax& out) {
#ifdef EARS_ARGMAX_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
#endif
  for (int64_t n = 0; n < N; ++n) {
    float best_v = 0;
#ifdef EARS_ARGMAX_AVX2
    out.ids[n] = avx2 ? argmax_avx2(base + n * V, V, widen, best_v) : argmax_scalar(base + n * V, V, widen, best_v);
#else
    out.ids[n] = argmax_scalar(base + n * V, V, widen, best_v);
#endif
    out.finite[n] = std::isfinite(best_v);
  }
}
}  // namespace

bool host_argmax_reads(c10::Device device, at::ScalarType dtype) {
  return device.is_cpu() && (dtype == at::kFloat || dtype == at::kBFloat16);
}

HostArgmax host_argmax(const at::Tensor& logits) {
  if (!host_argmax_reads(logits.device(), logits.scalar_type()) || logits.dim() != 2 || logits.size(1) < 1)
    fail("host_argmax: want CPU bfloat16 / float32 logits [N, V >= 1], got {} dims of {} on {}", logits.dim(),
         c10::toString(logits.scalar_type()), logits.device().str());
  const at::Tensor l = logits.contiguous();
  const int64_t N = l.size(0), V = l.size(1);
  HostArgmax out{std::vector<int64_t>(N), std::vector<uint8_t>(N)};
  if (l.scalar_type() == at::kFloat)
    argmax_rows(l.data_ptr<float>(), N, V, [](float x) { return x; }, out);
  else
    argmax_rows(reinterpret_cast<const uint16_t*>(l.data_ptr()), N, V,
                [](uint16_t x) { return bf16_bits::from_bf16(x); }, out);
  return out;
}

at::Tensor sample_from_probs(const at::Tensor& probs, const at::Tensor& uniforms) {
  if (probs.dim() != 2 || uniforms.dim() != 1 || uniforms.size(0) != probs.size(0))
    fail("sample_from_probs: want probs [N, V] and uniforms [N], got {} and {} dims (N = {} vs {})",
         probs.dim(), uniforms.dim(), probs.dim() ? probs.size(0) : -1,
         uniforms.dim() ? uniforms.size(0) : -1);
  const int64_t V = probs.size(1);
  // Adding an exact 0 leaves a running sum unchanged, so a zero-probability id owns an empty
  // interval of the CDF and the right-sided search never returns it.
  const at::Tensor cdf = probs.to(at::kFloat).cumsum(-1);  // CPU: accumulated in double, stored float32
  const at::Tensor total = cdf.narrow(1, V - 1, 1).contiguous();  // [N, 1] (searchsorted warns on a view)
  const at::Tensor t = uniforms.to(cdf.device(), at::kFloat).unsqueeze(1) * total;
  const at::Tensor ids = at::searchsorted(cdf, t, /*out_int32=*/false, /*right=*/true);
  // Should u * total round up to total (u within 2^-24 of 1), the search runs off the end: take
  // the last id with positive probability (the first whose CDF reaches the total) instead.
  const at::Tensor last = at::searchsorted(cdf, total, /*out_int32=*/false, /*right=*/false);
  // (A NaN row finds nothing: clamped to a valid id; the engine flags the row through max_prob.)
  return at::minimum(ids, last).clamp_max_(V - 1).squeeze(1);
}

uint64_t request_seed(uint64_t run_seed, uint64_t request_id) {
  return splitmix64(splitmix64(run_seed) ^ request_id);
}

RequestRng::RequestRng(uint64_t run_seed, uint64_t request_id)
    : seed_(request_seed(run_seed, request_id)), gen_(at::detail::createCPUGenerator(seed_)) {}

RequestRng::RequestRng(uint64_t run_seed, std::string_view request_key)
    : RequestRng(run_seed, fnv1a64(request_key)) {}

at::Tensor RequestRng::uniforms(int64_t n) {
  // The CPU uniform kernel is serial and takes the generator's lock: thread-count independent.
  return at::rand({n}, gen_, at::TensorOptions().dtype(at::kFloat));
}

at::Tensor batch_uniforms(const std::vector<RequestRng*>& rngs, int64_t n, c10::Device device) {
  const auto B = static_cast<int64_t>(rngs.size());
  at::Tensor host = at::empty({B, n}, at::TensorOptions().dtype(at::kFloat)
                                          .pinned_memory(!device.is_cpu()));
  for (int64_t b = 0; b < B; ++b) host.select(0, b).copy_(rngs[b]->uniforms(n));
  if (device.is_cpu()) return host;
  return host.to(device, /*non_blocking=*/true);
}

}  // namespace ears
