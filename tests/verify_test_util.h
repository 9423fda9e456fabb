// Helpers shared by the decoders/ sampling and verify tests (verify_sampling_test.cpp,
// verify_kinds_test.cpp): chi-square p-values, tensor -> vector, random distributions.
#pragma once
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>

#include <cmath>
#include <utility>
#include <vector>

#include "decoders/aten_operators.h"
#include "tests/chi2.h"

namespace ears::test::verify_test {

// p-value of observed counts against probabilities. Bins with expected count < 5 are pooled;
// an observation in a zero-probability bin gives 0.
inline double chi2_pvalue(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  double n = 0, psum = 0;
  for (size_t i = 0; i < counts.size(); ++i) n += counts[i], psum += probs[i];
  std::vector<std::pair<double, double>> bins;  // (observed, expected)
  double pool_o = 0, pool_e = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = n * probs[i] / psum;
    if (e <= 0 && counts[i] > 0) return 0.0;
    if (e < 5) pool_o += counts[i], pool_e += e;
    else bins.emplace_back(counts[i], e);
  }
  if (pool_e >= 5 || bins.empty()) bins.emplace_back(pool_o, pool_e);
  else if (pool_e > 0 || pool_o > 0) bins.back().first += pool_o, bins.back().second += pool_e;
  if (bins.size() < 2) return 1.0;
  double stat = 0;
  for (auto [o, e] : bins) stat += (o - e) * (o - e) / e;
  return chi2_sf(stat, static_cast<double>(bins.size() - 1));
}

inline std::vector<double> to_vec(const at::Tensor& t) {
  at::Tensor c = t.to(at::kDouble).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}
inline std::vector<int64_t> to_lvec(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

inline at::Generator gen(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

// [rows, V] random distributions with some exact zeros (about `zero_frac`, never the whole row).
inline at::Tensor random_dist(at::Generator& g, int64_t rows, int64_t V, double scale, double zero_frac) {
  at::Tensor logits = at::randn({rows, V}, g) * scale;
  at::Tensor drop = at::rand({rows, V}, g) < zero_frac;
  drop.select(1, 0).fill_(false);
  at::Tensor perm = at::rand({rows, V}, g).argsort(1, false);  // move the kept column around
  drop = drop.gather(1, perm.argsort(1, false));
  return at::softmax(logits.masked_fill(drop, -INFINITY), -1);
}

}  // namespace ears::test::verify_test
