// Tensor helpers shared by the tensor tests: golden JSON values -> tensors, and error measures.
#pragma once
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <vector>

#include "decoders/aten_operators.h"

namespace ears::test {

// LibTorch intra-op threads set for a scope (at least 2 makes parallel_for split its range even
// on a 1-CPU runner), restored after.
class ThreadsGuard {
 public:
  explicit ThreadsGuard(int n) : saved_(at::get_num_threads()) { at::set_num_threads(n); }
  ~ThreadsGuard() { at::set_num_threads(saved_); }
  ThreadsGuard(const ThreadsGuard&) = delete;
  ThreadsGuard& operator=(const ThreadsGuard&) = delete;

 private:
  int saved_;
};

// Nested float lists -> fp32 tensor of the same shape.
inline at::Tensor to_tensor(const nlohmann::json& j) {
  std::vector<float> flat;
  std::vector<int64_t> shape;
  const nlohmann::json* cur = &j;
  while (cur->is_array()) {
    shape.push_back(static_cast<int64_t>(cur->size()));
    if (cur->empty()) break;
    cur = &(*cur)[0];
  }
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& x) {
    if (x.is_array())
      for (const auto& e : x) walk(e);
    else
      flat.push_back(x.get<float>());
  };
  walk(j);
  return at::tensor(flat, at::kFloat).view(shape);
}

// [1, T] int64 tensor of token ids.
inline at::Tensor row_tensor(const std::vector<int64_t>& ids) {
  return at::tensor(ids, at::kLong).view({1, static_cast<int64_t>(ids.size())});
}

inline double max_abs(const at::Tensor& a, const at::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  return (a.to(at::kFloat) - b.to(at::kFloat)).abs().max().item<double>();
}

inline double mean_abs(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kFloat) - b.to(at::kFloat)).abs().mean().item<double>();
}

}  // namespace ears::test
