#include "decoders/kv_cache.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "decoders/aten_operators.h"
#include "decoders/weight_memory.h"
#include "harness/base/error.h"

namespace ears {

namespace {
// Zeroed cache storage. On the CPU from 2 MiB up, a huge-page mapping (weight_memory): attention
// streams every sequence's K and V each step as the linears stream the weights, and on 4 KiB pages
// the cache's page walks also evicted the weights' TLB entries. A 502.9M Qwen3, 128 positions,
// Intel Xeon masked to avx2 (docs/performance-log.md, twentieth session): 16-sequence decode step
// 117.7 / 116.5 -> 112.5 / 111.6 ms (its attention 16.7 / 15.9 -> 14.3 / 13.8), 1-sequence
// 37.7 / 37.5 -> 35.8 / 34.7 ms.
constexpr int64_t kHugeStorageBytes = int64_t{2} << 20;
at::Tensor zeroed_storage(const std::vector<int64_t>& shape, c10::ScalarType dtype, c10::Device device) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (device.is_cpu() && numel * static_cast<int64_t>(c10::elementSize(dtype)) >= kHugeStorageBytes)
    return weight_memory::empty_like_weights(
               numel, dtype,
               fmt::format("a KV cache of {} sequences x {} positions (out of memory: lower the batch size or the "
                           "maximum length)",
                           shape[2], shape[4]))
        .view(shape);
  if (!device.is_cpu()) return at::zeros(shape, at::TensorOptions().dtype(dtype).device(device));
  // Smaller CPU caches are zeroed by one memset: at::zeros forks LibTorch's OpenMP team from 32768
  // elements, and waking its sleeping worker cost each request 0.08-0.15 ms per cache (the bundled
  // pair's target and head caches; Intel Xeon masked to avx2, docs/performance-log.md).
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype).device(device));
  std::memset(t.data_ptr(), 0, static_cast<size_t>(t.nbytes()));
  return t;
}
}  // namespace

KVCache::KVCache(int64_t n_layers, int64_t batch, int64_t kv_heads, int64_t max_len, int64_t head_dim,
                 c10::ScalarType dtype, c10::Device device)
    : n_layers_(n_layers), batch_(batch), kv_heads_(kv_heads), max_len_(max_len), head_dim_(head_dim),
      lengths_(static_cast<size_t>(batch), 0) {
  if (n_layers <= 0 || batch < 0 || kv_heads <= 0 || max_len <= 0 || head_dim <= 0)
    fail("KV cache: invalid shape (layers {}, batch {}, kv heads {}, max_len {}, head_dim {})", n_layers,
         batch, kv_heads, max_len, head_dim);
  storage_ = zeroed_storage({n_layers, 2, batch, kv_heads, max_len, head_dim}, dtype, device);
}

c10::ScalarType KVCache::dtype() const { return storage_.scalar_type(); }
c10::Device KVCache::device() const { return storage_.device(); }

int64_t KVCache::max_length() const {
  return lengths_.empty() ? 0 : *std::max_element(lengths_.begin(), lengths_.end());
}

void KVCache::truncate(int64_t b, int64_t len) {
  if (b < 0 || b >= batch_) fail("KV cache: sequence {} out of range (batch {})", b, batch_);
  auto& cur = lengths_[static_cast<size_t>(b)];
  if (len < 0 || len > cur)
    fail("KV cache: cannot truncate sequence {} to {} tokens (it holds {})", b, len, cur);
  if (len != cur) {
    cur = len;
    lengths_dev_valid_ = false;
  }
}

void KVCache::set_lengths(const std::vector<int64_t>& lengths) {
  if (static_cast<int64_t>(lengths.size()) != batch_)
    fail("KV cache: set_lengths got {} lengths for a batch of {}", lengths.size(), batch_);
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t len = lengths[static_cast<size_t>(b)];
    if (len < 0 || len > lengths_[static_cast<size_t>(b)])
      fail("KV cache: cannot set sequence {} to {} tokens (it holds {})", b, len, lengths_[static_cast<size_t>(b)]);
  }
  lengths_ = lengths;
  lengths_dev_valid_ = false;
}

void KVCache::reset() {
  std::fill(lengths_.begin(), lengths_.end(), 0);
  lengths_dev_valid_ = false;
}

void KVCache::select(const std::vector<int64_t>& rows) {
  std::vector<int64_t> new_lengths;
  new_lengths.reserve(rows.size());
  for (int64_t r : rows) {
    if (r < 0 || r >= batch_) fail("KV cache: select row {} out of range (batch {})", r, batch_);
    new_lengths.push_back(lengths_[static_cast<size_t>(r)]);
  }
  const at::Tensor index = at::tensor(rows, at::TensorOptions().dtype(at::kLong)).to(storage_.device());
  std::vector<int64_t> shape = storage_.sizes().vec();
  shape[2] = static_cast<int64_t>(rows.size());
  at::Tensor kept = zeroed_storage(shape, storage_.scalar_type(), storage_.device());
  at::index_select_out(kept, storage_, 2, index);
  storage_ = kept;
  batch_ = static_cast<int64_t>(rows.size());
  lengths_ = std::move(new_lengths);
  lengths_dev_valid_ = false;
}

at::Tensor KVCache::k(int64_t layer) const { return storage_.select(0, layer).select(0, 0); }
at::Tensor KVCache::v(int64_t layer) const { return storage_.select(0, layer).select(0, 1); }

const at::Tensor& KVCache::device_lengths() const {
  if (!lengths_dev_valid_) {
    lengths_dev_ = at::tensor(lengths_, at::TensorOptions().dtype(at::kLong)).to(storage_.device());
    lengths_dev_valid_ = true;
  }
  return lengths_dev_;
}

KVCache::Append KVCache::prepare_append_host(int64_t T) const {
  if (!defined()) fail("KV cache: not allocated");
  if (T <= 0) fail("KV cache: appending {} tokens (need at least 1)", T);
  Append plan;
  plan.T = T;
  plan.new_lengths = lengths_;
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t len = lengths_[static_cast<size_t>(b)];
    if (len + T > max_len_)
      fail("KV cache: sequence {} holds {} tokens and appending {} exceeds the cache size {} "
           "(prompt + max_new_tokens exceeds the cache size {}; raise the cache length or shorten "
           "the prompt / max_new_tokens)",
           b, len, T, max_len_, max_len_);
    plan.new_lengths[static_cast<size_t>(b)] = len + T;
  }
  const int64_t max_len_now = max_length();
  plan.span = max_len_now + T;
  const bool uniform =
      std::all_of(lengths_.begin(), lengths_.end(), [&](int64_t l) { return l == max_len_now; });
  if (uniform) plan.uniform_start = max_len_now;
  return plan;
}

void* KVCache::data(int64_t layer, int kv) const {
  if (!defined() || !storage_.device().is_cpu() || !storage_.is_contiguous())
    fail("KV cache: data() needs a contiguous CPU cache");
  const int64_t per_kv = batch_ * kv_heads_ * max_len_ * head_dim_;
  return static_cast<char*>(storage_.data_ptr()) + (layer * 2 + kv) * per_kv * storage_.element_size();
}

KVCache::Append KVCache::prepare_append(int64_t T) const {
  Append plan = prepare_append_host(T);
  const int64_t max_len_now = max_length();
  const auto long_opts = at::TensorOptions().dtype(at::kLong).device(storage_.device());
  const at::Tensor steps = at::arange(T, long_opts);
  if (plan.uniform_start >= 0) {
    plan.positions = steps.add(max_len_now).unsqueeze(0).expand({batch_, T});
  } else {
    plan.positions = device_lengths().unsqueeze(1) + steps.unsqueeze(0);  // [B, T]
    // Row of (b, k, pos) in k(layer).view({B*K*max_len, hd}).
    const at::Tensor base = (at::arange(batch_, long_opts).unsqueeze(1) * kv_heads_ +
                             at::arange(kv_heads_, long_opts).unsqueeze(0)) *
                            max_len_;  // [B, K]
    plan.write_rows = (base.unsqueeze(2) + plan.positions.unsqueeze(1)).reshape({-1});  // [B*K*T]
  }
  plan.blocked = at::arange(plan.span, long_opts).view({1, 1, plan.span}) > plan.positions.unsqueeze(2);
  return plan;
}

// A CPU cache takes its new rows by memcpy, one head_dim row per (b, KV head, t) at len_b + t: the
// ATen narrow + copy_ (index_copy_ when ragged) it replaces cost 12.7 us per layer of a 1-token
// decode, K and V (Intel Xeon, LibTorch 1.13), the longest serial stretch between two linears
// after attention; this takes ~1.
bool KVCache::write_host(int64_t layer, const Append& plan, const at::Tensor& k_new, const at::Tensor& v_new) {
  if (!storage_.device().is_cpu() || !storage_.is_contiguous()) return false;
  for (const at::Tensor* x : {&k_new, &v_new})
    if (!x->device().is_cpu() || x->scalar_type() != storage_.scalar_type() || x->dim() != 4 ||
        x->size(0) != batch_ || x->size(1) != plan.T || x->size(2) != kv_heads_ || x->size(3) != head_dim_ ||
        x->stride(3) != 1 || (at::GradMode::is_enabled() && x->requires_grad()))
      return false;
  const int64_t es = storage_.element_size();
  const size_t row_bytes = static_cast<size_t>(head_dim_ * es);
  for (int kv = 0; kv < 2; ++kv) {
    const at::Tensor& x = kv == 0 ? k_new : v_new;
    const char* src = static_cast<const char*>(x.data_ptr());
    char* dst = static_cast<char*>(data(layer, kv));
    for (int64_t b = 0; b < batch_; ++b) {
      const int64_t start = plan.new_lengths[static_cast<size_t>(b)] - plan.T;
      for (int64_t h = 0; h < kv_heads_; ++h)
        for (int64_t t = 0; t < plan.T; ++t)
          std::memcpy(dst + (((b * kv_heads_ + h) * max_len_) + start + t) * head_dim_ * es,
                      src + (b * x.stride(0) + t * x.stride(1) + h * x.stride(2)) * es, row_bytes);
    }
  }
  return true;
}

void KVCache::write(int64_t layer, const Append& plan, const at::Tensor& k_new, const at::Tensor& v_new) {
  if (write_host(layer, plan, k_new, v_new)) return;
  // k_new/v_new: [B, T, K, hd] -> [B, K, T, hd]
  const at::Tensor kt = k_new.permute({0, 2, 1, 3});
  const at::Tensor vt = v_new.permute({0, 2, 1, 3});
  if (plan.uniform_start >= 0) {
    k(layer).narrow(2, plan.uniform_start, plan.T).copy_(kt);
    v(layer).narrow(2, plan.uniform_start, plan.T).copy_(vt);
  } else {
    const auto dt = storage_.scalar_type();
    k(layer).view({-1, head_dim_}).index_copy_(0, plan.write_rows, kt.reshape({-1, head_dim_}).to(dt));
    v(layer).view({-1, head_dim_}).index_copy_(0, plan.write_rows, vt.reshape({-1, head_dim_}).to(dt));
  }
}

at::Tensor KVCache::keys(int64_t layer, const Append& plan) const { return k(layer).narrow(2, 0, plan.span); }
at::Tensor KVCache::values(int64_t layer, const Append& plan) const { return v(layer).narrow(2, 0, plan.span); }

void KVCache::commit(const Append& plan) {
  lengths_ = plan.new_lengths;
  if (lengths_dev_valid_) lengths_dev_.add_(plan.T);  // stays on device, no host round trip
}

}  // namespace ears
