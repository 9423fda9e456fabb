// The KV cache shared by the target model (decoders/model) and the EAGLE-3 head.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

namespace ears {

// Preallocated per-layer K/V storage for a batch of sequences with their own lengths (ragged).
// Layout per layer: K and V [B, kv_heads, max_len, head_dim], dtype/device of the owner model.
// Sequence lengths live on the host (plus a lazily refreshed device copy).
//
// One forward that appends T tokens to every sequence goes:
//   auto plan = cache.prepare_append(T);        // checks capacity, builds positions + mask
//   for each layer: cache.write(layer, plan, k, v); attention(q, cache.keys(layer, plan), ...)
//   cache.commit(plan);                          // lengths += T
// Sequence b's new tokens get positions len_b .. len_b+T-1 and token t sees keys < len_b + t + 1.
// Ragged prefill: right-pad the prompts to a common T, forward once, then set_lengths(real
// lengths); the padded slots are overwritten by the next append and are never attended to.
// Copying a KVCache shares the K/V buffers (tensors are handles); lengths are per copy.
class KVCache {
 public:
  KVCache() = default;
  KVCache(int64_t n_layers, int64_t batch, int64_t kv_heads, int64_t max_len, int64_t head_dim,
          c10::ScalarType dtype, c10::Device device);

  int64_t n_layers() const { return n_layers_; }
  int64_t batch() const { return batch_; }
  int64_t kv_heads() const { return kv_heads_; }
  int64_t max_len() const { return max_len_; }
  int64_t head_dim() const { return head_dim_; }
  bool defined() const { return storage_.defined(); }
  c10::ScalarType dtype() const;
  c10::Device device() const;

  const std::vector<int64_t>& lengths() const { return lengths_; }
  int64_t length(int64_t b) const { return lengths_.at(static_cast<size_t>(b)); }
  int64_t max_length() const;  // max over sequences (0 for an empty batch)

  // Roll back: sequence b keeps its first `len` tokens (len <= current length).
  void truncate(int64_t b, int64_t len);
  // All lengths at once (size == batch, each <= current length); e.g. after right-padded prefill.
  void set_lengths(const std::vector<int64_t>& lengths);
  void reset();  // every length to 0
  // Keep batch rows `rows` (in that order; repeats allowed): index_select on the batch dim of
  // every layer. Used to drop finished sequences or reorder the batch.
  void select(const std::vector<int64_t>& rows);

  // Full per-layer buffers [B, K, max_len, hd] (views into one allocation).
  at::Tensor k(int64_t layer) const;
  at::Tensor v(int64_t layer) const;

  struct Append {
    int64_t T = 0;
    int64_t span = 0;         // keys [0, span) are read: max_b(len_b) + T
    at::Tensor positions;     // [B, T] int64 on device: len_b + t
    at::Tensor blocked;       // [B, T, span] bool on device: key s > position
    int64_t uniform_start = -1;  // >= 0 when every sequence has this length (contiguous write)
    at::Tensor write_rows;    // ragged case: [B*K*T] int64 rows of k(layer).view({-1, hd})
    std::vector<int64_t> new_lengths;
  };
  // Throws ears::Error "... exceeds the cache size N" when some len_b + T > max_len.
  Append prepare_append(int64_t T) const;
  // The same plan without its device tensors (positions, blocked, write_rows undefined): for
  // host-driven CPU steps that write the cache through data() and index positions themselves.
  Append prepare_append_host(int64_t T) const;
  // CPU: layer `layer`'s K (kv = 0) or V (kv = 1) storage, contiguous [B, K, max_len, hd].
  void* data(int64_t layer, int kv) const;
  // k, v: [B, T, K, hd] (any strides, any float dtype; converted to the cache dtype).
  void write(int64_t layer, const Append& plan, const at::Tensor& k, const at::Tensor& v);
  // Views [B, K, span, hd] of the cache for attention after write().
  at::Tensor keys(int64_t layer, const Append& plan) const;
  at::Tensor values(int64_t layer, const Append& plan) const;
  void commit(const Append& plan);

  // Device copy of lengths() ([B] int64), refreshed only when the host lengths changed.
  const at::Tensor& device_lengths() const;

 private:
  // write() on a contiguous CPU cache from CPU rows of its dtype; false (nothing written) otherwise.
  bool write_host(int64_t layer, const Append& plan, const at::Tensor& k_new, const at::Tensor& v_new);
  int64_t n_layers_ = 0, batch_ = 0, kv_heads_ = 0, max_len_ = 0, head_dim_ = 0;
  at::Tensor storage_;  // [n_layers, 2, B, K, max_len, hd]
  std::vector<int64_t> lengths_;
  mutable at::Tensor lengths_dev_;
  mutable bool lengths_dev_valid_ = false;
};

}  // namespace ears
