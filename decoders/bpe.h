// The byte-level BPE model (internal to decoders/tokenizer*): one pre-token's bytes -> ids by
// merging adjacent symbols in rank order (Hugging Face `tokenizers` Word::merge_all), with a
// shared cache of encoded words. Filled by the loader (tokenizer_load.cpp); const methods are
// thread-safe (the cache is guarded by a mutex).
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "decoders/vocab.h"

namespace ears::tok {

// (left id, right id) -> merge rank and merged id: the lookup of every BPE step.
// Open addressing, linear probing, power-of-two capacity.
class PairMap {
 public:
  struct Entry { uint64_t key; int32_t rank; int32_t merged; };
  static constexpr uint64_t kEmpty = ~uint64_t(0);

  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, Entry{kEmpty, 0, 0});
    mask_ = cap - 1;
  }
  void insert_or_assign(uint64_t key, int32_t rank, int32_t merged) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    std::size_t i = mix64(key) & mask_;
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    if (slots_[i].key == kEmpty) ++size_;
    slots_[i] = Entry{key, rank, merged};
  }
  const Entry* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i];
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  void grow() {
    std::vector<Entry> old = std::move(slots_);
    reserve(std::max<std::size_t>(16, old.size()));
    size_ = 0;
    for (const Entry& e : old)
      if (e.key != kEmpty) insert_or_assign(e.key, e.rank, e.merged);
  }
  std::vector<Entry> slots_;
  std::size_t mask_ = 0, size_ = 0;
};

struct BpeModel {
  bool ignore_merges = false;  // a word that is a vocab token is taken whole
  std::optional<int32_t> unk_id;
  bool fuse_unk = false;
  std::array<int32_t, 256> byte_id{};  // id of each single-byte token, -1 when absent
  PairMap merges;                      // (left id, right id) -> rank, merged id
  StrMap<int32_t> vocab_bytes;         // raw bytes -> id (only for ignore_merges)

  // Appends the ids of one pre-token (raw bytes; nothing for an empty word). Words up to
  // kCacheMaxWordLen bytes are cached, up to kCacheMax of them.
  void encode(std::string_view word, std::vector<int32_t>& out) const;

 private:
  static constexpr std::size_t kCacheMax = 200000;
  static constexpr std::size_t kCacheMaxWordLen = 256;
  mutable std::shared_mutex cache_mu_;
  mutable StrMap<std::vector<int32_t>> cache_;

  // The merge loop itself (uncached): lowest rank first, leftmost first on ties.
  void merge(std::string_view word, std::vector<int32_t>& out) const;
};

}  // namespace ears::tok
