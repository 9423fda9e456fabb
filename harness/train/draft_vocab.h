// The reduced draft vocabulary of an EAGLE-3 head (Hugging Face config `draft_vocab_size`, tensors
// `d2t` [Vd] int64 = target id - draft id and `t2d` [V] bool): the head's lm_head scores only Vd
// target tokens, chosen as the ones most often trained on — as SpecForge and vLLM's speculators
// build it from the training data's loss-bearing tokens (published heads keep 32000 of 128256-151936
// ids, a fifth to a quarter). The head cannot propose any other token; the target still verifies
// every position, so greedy output is unchanged.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ears {

struct DocPools;  // harness/train/corpus.h

struct DraftVocab {
  std::vector<int64_t> ids;  // draft id i scores target id ids[i] (distinct; ascending when chosen here)
  int64_t target_vocab = 0;
  std::string source;        // "full", "frequency" or "init"
  double coverage = 1.0;     // share of the training documents' loss-bearing tokens inside

  int64_t size() const { return static_cast<int64_t>(ids.size()); }
  bool full() const { return size() == target_vocab; }
  at::Tensor index() const;  // [Vd] int64: the target ids (index_select on a [.., V] tensor)
  at::Tensor d2t() const;    // [Vd] int64: ids[i] - i
  at::Tensor t2d() const;    // [V] bool: target id inside
};

// Every target id (draft_vocab_size == vocab_size, d2t zeros, t2d ones).
DraftVocab full_draft_vocab(int64_t target_vocab);

// The n target ids that are most often a loss-bearing token (weight > 0) of the documents, ties to
// the smaller id; when fewer than n ids occur, the smallest ids that do not fill the rest.
DraftVocab frequent_draft_vocab(const DocPools& pools, int64_t n, int64_t target_vocab);

// A saved head's: its lm_head's rows mapped by its d2t (every id when it has no d2t and as many rows
// as the target has ids); coverage left at 1 (loss_token_coverage computes it for given documents).
DraftVocab checkpoint_draft_vocab(const std::filesystem::path& dir, int64_t target_vocab);

// The share of the documents' loss-bearing tokens (weight > 0) whose id the vocabulary scores.
double loss_token_coverage(const DocPools& pools, const DraftVocab& vocab);

}  // namespace ears
