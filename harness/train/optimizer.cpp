#include "harness/train/optimizer.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <cmath>

#include "decoders/aten_operators.h"
#include "harness/base/error.h"

namespace ears {

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

}  // namespace ears
