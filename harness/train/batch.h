// Training batches from the document pools of harness/train/corpus.h: a seeded document sampler,
// packed rows for the target (several documents per row, attention within a document only) and
// right-padded rows for the EAGLE-3 head (one document per row).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

#include "harness/train/corpus.h"

namespace ears {

// Draws documents: natural with probability natural_fraction, else chat; each pool is walked
// in a seeded shuffled order (reshuffled every epoch). Deterministic for a seed.
class DocSampler {
 public:
  DocSampler(const DocPools& pools, double natural_fraction, uint64_t seed);
  const TrainDoc& next();

 private:
  struct Pool {
    const std::vector<TrainDoc>* docs = nullptr;
    std::vector<uint32_t> order;
    std::size_t pos = 0;
  };
  const TrainDoc& draw(Pool& p);
  Pool chat_, natural_;
  double natural_fraction_;
  uint64_t state_;
};

// Rows of T tokens, each filled with whole documents from the sampler (the last one cut at the
// row end). Attention is causal within a document only, positions restart at 0 per document
// (like a fresh prompt at inference), and a document's last token predicts nothing.
struct PackedBatch {
  at::Tensor ids;        // [B, T] int64
  at::Tensor targets;    // [B, T] int64 (next token; 0 where weight is 0)
  at::Tensor weights;    // [B, T] float
  at::Tensor positions;  // [B, T] int64
  at::Tensor blocked;    // [B, T, T] bool: true where query t must not see key s
};
PackedBatch pack_batch(DocSampler& sampler, int64_t batch, int64_t seq_len, c10::Device device);

// One document per row, right-padded with id 0 to the longest (cut at seq_len). loss_mask[b, t]
// = 1 when token t of the row is a loss token (weight > 0), 0 on padding.
struct PaddedBatch {
  at::Tensor ids;        // [B, N] int64
  at::Tensor loss_mask;  // [B, N] float
};
PaddedBatch pad_batch(DocSampler& sampler, int64_t batch, int64_t seq_len, c10::Device device);

}  // namespace ears
