// The byte-level BPE merge loop and its word cache (bpe.h).
#include "decoders/bpe.h"

#include <mutex>

namespace ears::tok {

void BpeModel::encode(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1 && byte_id[static_cast<unsigned char>(word[0])] >= 0) {
    out.push_back(byte_id[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (ignore_merges) {
    if (auto f = vocab_bytes.find(word); f != vocab_bytes.end()) {
      out.push_back(f->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxWordLen;
  if (cacheable) {
    std::shared_lock lock(cache_mu_);
    if (auto f = cache_.find(word); f != cache_.end()) {
      out.insert(out.end(), f->second.begin(), f->second.end());
      return;
    }
  }
  std::size_t first = out.size();
  merge(word, out);
  if (cacheable) {
    std::unique_lock lock(cache_mu_);
    if (cache_.size() < kCacheMax)
      cache_.try_emplace(std::string(word), out.begin() + std::ptrdiff_t(first), out.end());
  }
}

// Symbols start as one per byte (bytes without a token become unk, fused when fuse_unk, or
// are dropped without unk); every adjacent pair with a merge is a candidate in a min-heap by
// (rank, position); a popped candidate whose symbols changed since it was pushed is stale.
void BpeModel::merge(std::string_view word, std::vector<int32_t>& out) const {
  struct Sym { int32_t id, prev, next; };
  std::vector<Sym> sym;
  sym.reserve(word.size());
  bool last_unk = false;
  for (unsigned char b : word) {
    int32_t id = byte_id[b];
    if (id < 0) {
      if (!unk_id) continue;  // HF drops characters that have no token and no unk
      if (last_unk && fuse_unk) continue;
      id = *unk_id;
      last_unk = true;
    } else {
      last_unk = false;
    }
    int32_t i = int32_t(sym.size());
    sym.push_back({id, i - 1, -1});
    if (i > 0) sym[i - 1].next = i;
  }

  struct Cand { int32_t rank, pos, left, right, merged; };
  auto later = [](const Cand& a, const Cand& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::vector<Cand> heap;
  auto consider = [&](int32_t pos) {
    int32_t nx = sym[pos].next;
    if (nx < 0) return;
    const PairMap::Entry* f = merges.find(PairMap::key(sym[pos].id, sym[nx].id));
    if (!f) return;
    heap.push_back({f->rank, pos, sym[pos].id, sym[nx].id, f->merged});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < int32_t(sym.size()); ++i) consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Cand cd = heap.back();
    heap.pop_back();
    Sym& s = sym[cd.pos];
    if (s.id != cd.left || s.next < 0 || sym[s.next].id != cd.right) continue;  // stale
    int32_t gone = s.next;
    s.id = cd.merged;
    s.next = sym[gone].next;
    if (s.next >= 0) sym[s.next].prev = cd.pos;
    sym[gone].id = -1;
    if (s.prev >= 0) consider(s.prev);
    consider(cd.pos);
  }
  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace ears::tok
