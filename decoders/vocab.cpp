// Tokenizer vocabulary tables: byte-level mapping and the token string -> id index (vocab.h).
#include "decoders/vocab.h"

#include "harness/base/utf8.h"

namespace ears::tok {

ByteMap::ByteMap() {
  to_byte.fill(-1);
  uint32_t extra = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    to_cp[b] = printable ? uint32_t(b) : extra++;
    to_byte[to_cp[b]] = int16_t(b);
  }
}

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

std::optional<std::string> byte_level_to_bytes(std::string_view token) {
  const auto& bm = byte_map();
  std::string out;
  out.reserve(token.size());
  const auto* p = reinterpret_cast<const unsigned char*>(token.data());
  for (std::size_t i = 0; i < token.size();) {
    int r = utf8::step(p, token.size(), i);
    if (r <= 0) return std::nullopt;
    uint32_t cp = utf8::code_point(p + i, r);
    if (cp >= bm.to_byte.size() || bm.to_byte[cp] < 0) return std::nullopt;
    out.push_back(char(bm.to_byte[cp]));
    i += r;
  }
  return out;
}

void TokenIndex::build(const std::vector<std::string>* keys, const std::vector<int32_t>& ids) {
  keys_ = keys;
  std::size_t cap = 16;
  while (cap < 2 * ids.size()) cap *= 2;
  slots_.assign(cap, Slot{0, -1});
  mask_ = cap - 1;
  for (int32_t id : ids) {  // later duplicates win, like a JSON object read into a map
    const std::string& k = (*keys_)[id];
    uint32_t h = uint32_t(hash(k));
    std::size_t i = hash(k) & mask_;
    while (slots_[i].id >= 0 && !(slots_[i].h == h && (*keys_)[slots_[i].id] == k)) i = (i + 1) & mask_;
    slots_[i] = Slot{h, id};
  }
}

int32_t TokenIndex::find(std::string_view k) const {
  if (slots_.empty()) return -1;
  std::size_t hv = hash(k);
  uint32_t h = uint32_t(hv);
  for (std::size_t i = hv & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.id < 0) return -1;
    if (s.h == h && (*keys_)[s.id] == k) return s.id;
  }
}

}  // namespace ears::tok
