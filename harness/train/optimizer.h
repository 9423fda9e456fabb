// The optimisation pieces, written out on plain ATen ops (no torch::optim): AdamW, global-norm
// gradient clipping and the warmup + cosine learning-rate schedule.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ears {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};
// AdamW (Loshchilov & Hutter): decoupled weight decay p -= lr * wd * p (only where decay[i]),
// bias-corrected moments. State lives on the parameters' device.
class AdamW {
 public:
  AdamW(std::vector<at::Tensor> params, std::vector<bool> decay, AdamWOptions options);
  void step(double lr);
  void zero_grad();
  int64_t steps() const { return t_; }

 private:
  std::vector<at::Tensor> params_, m_, v_;
  std::vector<bool> decay_;
  AdamWOptions o_;
  int64_t t_ = 0;
};
// Scales every gradient by min(1, max_norm / global_norm) on the device (no host sync);
// returns the global norm before clipping as a 0-dim tensor.
at::Tensor clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);
// Linear warmup to `peak` over `warmup` steps, then cosine decay to peak * min_ratio at `total`.
double cosine_lr(int64_t step, int64_t total, int64_t warmup, double peak, double min_ratio);

}  // namespace ears
