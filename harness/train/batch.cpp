#include "harness/train/batch.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/tensor.h>

#include <algorithm>
#include <numeric>

#include "decoders/aten_operators.h"
#include "harness/base/rng.h"

namespace ears {

namespace {
double uniform01(uint64_t& state) { return unit_double(splitmix64_next(state)); }
}  // namespace

DocSampler::DocSampler(const DocPools& pools, double natural_fraction, uint64_t seed)
    : natural_fraction_(pools.natural.empty() ? 0.0 : natural_fraction), state_(seed ^ 0x5DEECE66DULL) {
  chat_.docs = &pools.chat;
  natural_.docs = &pools.natural;
}

const TrainDoc& DocSampler::draw(Pool& p) {
  if (p.pos >= p.order.size()) {  // new epoch: Fisher-Yates with our own stream
    p.order.resize(p.docs->size());
    std::iota(p.order.begin(), p.order.end(), 0u);
    for (std::size_t i = p.order.size(); i > 1; --i) std::swap(p.order[i - 1], p.order[splitmix64_next(state_) % i]);
    p.pos = 0;
  }
  return (*p.docs)[p.order[p.pos++]];
}

const TrainDoc& DocSampler::next() {
  return uniform01(state_) < natural_fraction_ ? draw(natural_) : draw(chat_);
}

PackedBatch pack_batch(DocSampler& sampler, int64_t B, int64_t T, c10::Device device) {
  std::vector<int64_t> ids(B * T), targets(B * T, 0), pos(B * T), doc(B * T);
  std::vector<float> w(B * T, 0.0f);
  for (int64_t b = 0; b < B; ++b) {
    int64_t t = 0, d = 0;
    while (t < T) {
      const TrainDoc& x = sampler.next();
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(x.ids.size()), T - t);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t k = b * T + t + i;
        ids[k] = x.ids[i];
        pos[k] = i;
        doc[k] = d;
        if (i + 1 < n) {
          targets[k] = x.ids[i + 1];
          w[k] = x.weight[i + 1];
        }
      }
      t += n;
      ++d;
    }
  }
  const auto lopt = at::TensorOptions().dtype(at::kLong);
  PackedBatch pb;
  pb.ids = at::tensor(ids, lopt).view({B, T}).to(device);
  pb.targets = at::tensor(targets, lopt).view({B, T}).to(device);
  pb.positions = at::tensor(pos, lopt).view({B, T}).to(device);
  pb.weights = at::tensor(w, at::TensorOptions().dtype(at::kFloat)).view({B, T}).to(device);
  const at::Tensor dd = at::tensor(doc, lopt).view({B, T}).to(device);
  const at::Tensor ar = at::arange(T, lopt.device(device));
  pb.blocked = (ar.view({1, 1, T}) > ar.view({1, T, 1})).logical_or(dd.unsqueeze(1) != dd.unsqueeze(2));
  return pb;
}

PaddedBatch pad_batch(DocSampler& sampler, int64_t B, int64_t T, c10::Device device) {
  std::vector<const TrainDoc*> docs;
  int64_t N = 1;
  for (int64_t b = 0; b < B; ++b) {
    docs.push_back(&sampler.next());
    N = std::max<int64_t>(N, std::min<int64_t>(static_cast<int64_t>(docs.back()->ids.size()), T));
  }
  std::vector<int64_t> ids(B * N, 0);
  std::vector<float> mask(B * N, 0.0f);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(docs[b]->ids.size()), N);
    for (int64_t i = 0; i < n; ++i) {
      ids[b * N + i] = docs[b]->ids[i];
      mask[b * N + i] = docs[b]->weight[i] > 0 ? 1.0f : 0.0f;
    }
  }
  PaddedBatch pb;
  pb.ids = at::tensor(ids, at::TensorOptions().dtype(at::kLong)).view({B, N}).to(device);
  pb.loss_mask = at::tensor(mask, at::TensorOptions().dtype(at::kFloat)).view({B, N}).to(device);
  return pb;
}

}  // namespace ears
