// Tokenizer vocabulary tables (internal to decoders/tokenizer*): the GPT-2 byte <-> unicode
// mapping of byte-level tokens, the flat token string -> id index, and the per-id tables the
// Tokenizer facade answers from (token strings, decoded bytes, added/special flags).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ears::tok {

// Hash finalizer for the open-addressing tables (TokenIndex here, PairMap in decoders/bpe.h).
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

// std::unordered_map keyed by std::string that can be searched with a std::string_view.
struct StrHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StrMap = std::unordered_map<std::string, V, StrHash, std::equal_to<>>;

// GPT-2 byte <-> unicode mapping: printable bytes map to themselves, the rest to 256, 257, ...
struct ByteMap {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // -1 for code points that are no byte's
  ByteMap();
};
const ByteMap& byte_map();

// Raw bytes of a byte-level token string; nullopt when some character is outside the mapping.
std::optional<std::string> byte_level_to_bytes(std::string_view token);

// token string -> id, where the strings live in an external vector indexed by id.
// Open addressing, linear probing, power-of-two capacity.
class TokenIndex {
 public:
  // `keys` must outlive the index; `ids` index into it. Later duplicates win.
  void build(const std::vector<std::string>* keys, const std::vector<int32_t>& ids);
  int32_t find(std::string_view k) const;  // -1 when absent

 private:
  static std::size_t hash(std::string_view k) { return mix64(std::hash<std::string_view>{}(k)); }
  struct Slot { uint32_t h; int32_t id; };
  const std::vector<std::string>* keys_ = nullptr;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
};

// Everything known per id. All vectors have vocab size entries (max defined id + 1).
struct Vocab {
  std::vector<std::string> model_token;  // model.vocab token (byte-level form) by id
  TokenIndex model_index;                // model_token -> id
  StrMap<int32_t> added_ids;             // added token content -> id
  std::unordered_map<int32_t, std::string> added_names;  // id -> added token content
  std::vector<std::string> id_bytes;     // what decode emits for each id
  enum : uint8_t { kDefined = 1, kAdded = 2, kSpecial = 4 };
  std::vector<uint8_t> id_flags;

  // Added tokens first, then model.vocab; -1 when neither has `s`.
  int32_t find_token(std::string_view s) const {
    if (auto f = added_ids.find(s); f != added_ids.end()) return f->second;
    return model_index.find(s);
  }
  // The id's flags, 0 for ids outside the table (negative or too large).
  uint8_t flags(int32_t id) const {
    return id >= 0 && std::size_t(id) < id_flags.size() ? id_flags[id] : uint8_t(0);
  }
};

}  // namespace ears::tok
