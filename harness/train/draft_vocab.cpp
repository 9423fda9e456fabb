#include "harness/train/draft_vocab.h"

#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <numeric>

#include "decoders/safetensors.h"
#include "harness/base/error.h"
#include "harness/train/corpus.h"

namespace ears {

at::Tensor DraftVocab::index() const { return at::tensor(ids, at::TensorOptions().dtype(at::kLong)); }

at::Tensor DraftVocab::d2t() const {
  std::vector<int64_t> d(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) d[i] = ids[i] - static_cast<int64_t>(i);
  return at::tensor(d, at::TensorOptions().dtype(at::kLong));
}

at::Tensor DraftVocab::t2d() const {
  at::Tensor m = at::zeros({target_vocab}, at::TensorOptions().dtype(at::kBool));
  bool* p = m.data_ptr<bool>();
  for (int64_t t : ids) p[t] = true;
  return m;
}

DraftVocab full_draft_vocab(int64_t target_vocab) {
  DraftVocab v;
  v.ids.resize(static_cast<size_t>(target_vocab));
  std::iota(v.ids.begin(), v.ids.end(), int64_t{0});
  v.target_vocab = target_vocab;
  v.source = "full";
  return v;
}

namespace {

// How often each target id is a loss-bearing token (weight > 0) of the documents.
std::vector<int64_t> loss_token_counts(const DocPools& pools, int64_t target_vocab) {
  std::vector<int64_t> count(static_cast<size_t>(target_vocab), 0);
  for (const auto* pool : {&pools.chat, &pools.natural})
    for (const TrainDoc& d : *pool)
      for (size_t i = 0; i < d.ids.size(); ++i)
        if (d.weight[i] > 0 && d.ids[i] >= 0 && d.ids[i] < target_vocab) ++count[static_cast<size_t>(d.ids[i])];
  return count;
}

// The share of the counted tokens whose id is in `ids` (1 when nothing was counted).
double share_inside(const std::vector<int64_t>& count, const std::vector<int64_t>& ids) {
  int64_t inside = 0, total = 0;
  for (int64_t c : count) total += c;
  for (int64_t t : ids) inside += count[static_cast<size_t>(t)];
  return total > 0 ? static_cast<double>(inside) / static_cast<double>(total) : 1.0;
}

}  // namespace

double loss_token_coverage(const DocPools& pools, const DraftVocab& vocab) {
  return share_inside(loss_token_counts(pools, vocab.target_vocab), vocab.ids);
}

DraftVocab frequent_draft_vocab(const DocPools& pools, int64_t n, int64_t target_vocab) {
  if (n < 1 || n > target_vocab)
    fail("--draft-vocab {}: give 1 to the target's {} ids (0 keeps the whole vocabulary)", n, target_vocab);
  const std::vector<int64_t> count = loss_token_counts(pools, target_vocab);
  std::vector<int64_t> order(static_cast<size_t>(target_vocab));
  std::iota(order.begin(), order.end(), int64_t{0});
  // Most frequent first, ties (and the ids that never occur) by the smaller id.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return count[a] > count[b]; });
  DraftVocab v;
  v.ids.assign(order.begin(), order.begin() + n);
  std::sort(v.ids.begin(), v.ids.end());
  v.target_vocab = target_vocab;
  v.source = "frequency";
  v.coverage = share_inside(count, v.ids);
  return v;
}

DraftVocab checkpoint_draft_vocab(const std::filesystem::path& dir, int64_t target_vocab) {
  const Checkpoint ck = Checkpoint::open(dir);
  const int64_t rows = ck.shape("lm_head.weight").at(0);
  DraftVocab v = full_draft_vocab(target_vocab);
  if (ck.contains("d2t")) {
    const at::Tensor d2t = ck.load("d2t", c10::Device(c10::kCPU), at::kLong, std::vector<int64_t>{rows});
    const int64_t* p = d2t.data_ptr<int64_t>();
    v.ids.resize(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) v.ids[static_cast<size_t>(i)] = i + p[i];
  } else if (rows != target_vocab) {
    fail("{}: lm_head has {} rows but the target {} ids and there is no d2t map", dir.string(), rows, target_vocab);
  }
  std::vector<bool> seen(static_cast<size_t>(target_vocab), false);
  for (size_t i = 0; i < v.ids.size(); ++i) {
    const int64_t t = v.ids[i];
    if (t < 0 || t >= target_vocab || seen[static_cast<size_t>(t)])
      fail("{}: d2t must map each draft id to its own target id in [0, {}); draft id {} maps to {}", dir.string(),
           target_vocab, i, t);
    seen[static_cast<size_t>(t)] = true;
  }
  v.source = v.full() ? "full" : "init";
  return v;
}

}  // namespace ears
