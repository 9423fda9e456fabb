// Byte-level BPE tokenizer over a Hugging Face tokenizer.json (see tokenizer.h).
#include "decoders/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "harness/base/files.h"
#include "harness/base/utf8.h"
#include "harness/base/error.h"

namespace ears {
namespace {

using json = nlohmann::json;

// ------------------------------------------------------------------------------------------
// UTF-8

// Code points of a valid UTF-8 string.
std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> cps;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0; i < s.size();) {
    int r = utf8::step(p, s.size(), i);
    if (r <= 0) {
      cps.push_back(0xFFFD);
      i += r == 0 ? s.size() - i : std::size_t(-r);
      continue;
    }
    cps.push_back(utf8::code_point(p + i, r));
    i += r;
  }
  return cps;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

// Unicode White_Space (what Oniguruma / Rust `\s` match).
bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Approximates Rust regex `\w` (letters, marks, decimal/letter numbers, connector punctuation).
bool is_word_char(uint32_t c) {
  if (c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// ------------------------------------------------------------------------------------------
// GPT-2 byte <-> unicode mapping: printable bytes map to themselves, the rest to 256, 257, ...

struct ByteMap {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};
  ByteMap() {
    to_byte.fill(-1);
    uint32_t extra = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? uint32_t(b) : extra++;
      to_byte[to_cp[b]] = int16_t(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

// Raw bytes of a byte-level token string; nullopt when some character is outside the mapping.
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

// ------------------------------------------------------------------------------------------
// PCRE2 regex (compiled once, matched from many threads; match data is per call).

// `\s`/`\S` in PCRE2+UCP also match U+180E; Oniguruma (used by HF) follows White_Space.
std::string translate_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\' && i + 1 < p.size()) {
      char n = p[++i];
      if (n == 's') out += "\\p{White_Space}";
      else if (n == 'S') out += "\\P{White_Space}";
      else { out.push_back('\\'); out.push_back(n); }
    } else {
      out.push_back(p[i]);
    }
  }
  return out;
}

std::string escape_literal(std::string_view s) {
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

struct Regex {
  pcre2_code* code = nullptr;
  Regex() = default;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  Regex(Regex&& o) noexcept : code(std::exchange(o.code, nullptr)) {}
  ~Regex() { if (code) pcre2_code_free(code); }

  // Returns an error message, or "" on success.
  std::string compile(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE off = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                         PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
    if (!code) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(err, buf, sizeof buf);
      return fmt::format("{} at offset {}", reinterpret_cast<const char*>(buf), off);
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
    return "";
  }

  // Calls on_piece(begin, end) for every match and every gap between matches (Isolated).
  template <class F>
  void split(std::string_view s, pcre2_match_data* md, F&& on_piece) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    const auto* bytes = reinterpret_cast<const unsigned char*>(s.data());
    std::size_t pos = 0, last = 0;
    while (pos <= s.size()) {
      int rc = pcre2_match(code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                         nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(rc, buf, sizeof buf);
        fail("tokenizer: pre-tokenizer regex failed on a {}-byte input: {}", s.size(),
             reinterpret_cast<const char*>(buf));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      std::size_t ms = ov[0], me = ov[1];
      if (me <= ms) {  // empty match: skip one character
        if (ms >= s.size()) break;
        int r = utf8::step(bytes, s.size(), ms);
        pos = ms + (r > 0 ? std::size_t(r) : 1);
        continue;
      }
      if (ms > last) on_piece(last, ms);
      on_piece(ms, me);
      last = pos = me;
    }
    if (last < s.size()) on_piece(last, s.size());
  }
};

struct MatchData {
  pcre2_match_data* md;
  MatchData() : md(pcre2_match_data_create(1, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ------------------------------------------------------------------------------------------
// Added tokens: literal, leftmost-longest matching (aho-corasick semantics of HF).

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

class LiteralMatcher {
 public:
  void add(const AddedToken* t) {
    if (t->content.empty()) return;
    auto& v = by_first_[static_cast<unsigned char>(t->content[0])];
    v.push_back(t);
    std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) {
      return a->content.size() > b->content.size();
    });
    empty_ = false;
  }
  bool empty() const { return empty_; }

  template <class OnText, class OnToken>
  void split(std::string_view s, OnText&& on_text, OnToken&& on_token) const {
    if (empty_) {
      if (!s.empty()) on_text(s);
      return;
    }
    std::size_t start_offset = 0, i = 0;
    while (i < s.size()) {
      const AddedToken* tok = nullptr;
      std::size_t ms = 0;
      for (std::size_t j = i; j < s.size() && !tok; ++j) {
        for (const AddedToken* c : by_first_[static_cast<unsigned char>(s[j])]) {
          if (s.size() - j >= c->content.size() &&
              std::memcmp(s.data() + j, c->content.data(), c->content.size()) == 0) {
            tok = c;
            ms = j;
            break;
          }
        }
      }
      if (!tok) break;
      std::size_t me = ms + tok->content.size();
      i = me;  // the scan resumes after this match even when single_word discards it
      if (tok->single_word && ((ms > 0 && ends_with_word(s.substr(0, ms))) ||
                               (me < s.size() && starts_with_word(s.substr(me)))))
        continue;
      std::size_t start = ms, stop = me;
      if (tok->lstrip) start = std::max(start_offset, ms - trailing_space(s.substr(0, ms)));
      if (tok->rstrip) stop = me + leading_space(s.substr(me));
      if (start_offset < start) on_text(s.substr(start_offset, start - start_offset));
      on_token(tok->id);
      start_offset = stop;
      i = std::max(i, stop);
    }
    if (start_offset < s.size()) on_text(s.substr(start_offset));
  }

 private:
  static bool ends_with_word(std::string_view s) {
    auto cps = code_points(s);
    return !cps.empty() && is_word_char(cps.back());
  }
  static bool starts_with_word(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    int r = utf8::step(p, s.size(), 0);
    return r > 0 && is_word_char(utf8::code_point(p, r));
  }
  static std::size_t leading_space(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    std::size_t i = 0;
    while (i < s.size()) {
      int r = utf8::step(p, s.size(), i);
      if (r <= 0 || !is_white_space(utf8::code_point(p + i, r))) break;
      i += r;
    }
    return i;
  }
  static std::size_t trailing_space(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    std::size_t n = 0, i = 0;  // length of the whitespace run that ends the string
    while (i < s.size()) {
      int r = utf8::step(p, s.size(), i);
      std::size_t len = r > 0 ? std::size_t(r) : 1;
      n = (r > 0 && is_white_space(utf8::code_point(p + i, r))) ? n + len : 0;
      i += len;
    }
    return n;
  }

  std::array<std::vector<const AddedToken*>, 256> by_first_{};
  bool empty_ = true;
};

// Flat hash tables for the two hot lookups: token string -> id (load) and id pair -> merge
// (every BPE step). Open addressing, linear probing, power-of-two capacity.

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

class PairMap {
 public:
  struct Entry { uint64_t key; int32_t rank; int32_t merged; };
  static constexpr uint64_t kEmpty = ~uint64_t(0);

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

// token string -> id, where the strings live in an external vector indexed by id.
class TokenIndex {
 public:
  void build(const std::vector<std::string>* keys, const std::vector<int32_t>& ids) {
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
  int32_t find(std::string_view k) const {
    if (slots_.empty()) return -1;
    std::size_t hv = hash(k);
    uint32_t h = uint32_t(hv);
    for (std::size_t i = hv & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.h == h && (*keys_)[s.id] == k) return s.id;
    }
  }

 private:
  static std::size_t hash(std::string_view k) { return mix64(std::hash<std::string_view>{}(k)); }
  struct Slot { uint32_t h; int32_t id; };
  const std::vector<std::string>* keys_ = nullptr;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
};

// ------------------------------------------------------------------------------------------
// JSON access with error messages that name the file and key.

struct StrHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StrMap = std::unordered_map<std::string, V, StrHash, std::equal_to<>>;

struct Ctx {
  std::string file;

  [[noreturn]] void bad(std::string_view key, std::string_view problem) const {
    fail("{}: key '{}': {}", file, key, problem);
  }
  const json* opt(const json& obj, const char* name) const {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(name);
    return (it == obj.end() || it->is_null()) ? nullptr : &*it;
  }
  const json& req(const json& obj, const char* name, const std::string& key) const {
    const json* v = opt(obj, name);
    if (!v) bad(key, "is missing or null; this tokenizer.json is incomplete");
    return *v;
  }
  std::string str(const json& v, const std::string& key) const {
    if (!v.is_string()) bad(key, fmt::format("must be a string, found {}", v.type_name()));
    return v.get<std::string>();
  }
  bool flag(const json& obj, const char* name, const std::string& key, bool dflt) const {
    const json* v = opt(obj, name);
    if (!v) return dflt;
    if (!v->is_boolean()) bad(key, fmt::format("must be true or false, found {}", v->type_name()));
    return v->get<bool>();
  }
  int32_t id(const json& v, const std::string& key) const {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      bad(key, fmt::format("must be a non-negative integer id, found {}", v.dump()));
    return static_cast<int32_t>(v.get<int64_t>());
  }
};

json parse_json(const std::filesystem::path& p) {
  std::string text = read_file(p, "the tokenizer file");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: malformed JSON ({}); re-download or fix the file", p.string(), e.what());
  }
}

// SAX reader for tokenizer.json: builds the DOM for everything except the two big members,
// model.vocab and model.merges, which are left empty in the DOM and collected into flat vectors.
class TokenizerJsonReader {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  struct MergeEntry { std::string a, b; bool joined; };  // joined: "a b" form, b empty

  json root;
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<MergeEntry> merges;
  std::string bad_key, bad_what;  // first malformed vocab/merges entry
  bool saw_vocab = false, saw_merges = false;

  bool null() { return scalar([&] { return dom_.null(); }, "null"); }
  bool boolean(bool v) { return scalar([&] { return dom_.boolean(v); }, "a boolean"); }
  bool number_integer(number_integer_t v) {
    if (mode_ == kVocab && depth_ == mode_depth_) return vocab_id(v);
    return scalar([&] { return dom_.number_integer(v); }, "a number");
  }
  bool number_unsigned(number_unsigned_t v) {
    if (mode_ == kVocab && depth_ == mode_depth_)
      return vocab_id(v > uint64_t(INT64_MAX) ? int64_t(-1) : int64_t(v));
    return scalar([&] { return dom_.number_unsigned(v); }, "a number");
  }
  bool number_float(number_float_t v, const string_t& s) {
    return scalar([&] { return dom_.number_float(v, s); }, "a float");
  }
  bool binary(binary_t& v) { return scalar([&] { return dom_.binary(v); }, "binary"); }
  bool string(string_t& v) {
    if (mode_ == kMerges) {
      if (depth_ == mode_depth_) {
        merges.push_back({std::move(v), {}, true});
        ++entry_;
      } else if (depth_ == mode_depth_ + 1) {
        if (pair_n_ == 0) pair_.a = std::move(v);
        else if (pair_n_ == 1) pair_.b = std::move(v);
        ++pair_n_;
      }
      return true;
    }
    return scalar([&] { return dom_.string(v); }, "a string");
  }
  bool key(string_t& k) {
    if (mode_ == kVocab) {
      if (depth_ == mode_depth_) vocab_key_ = std::move(k);
      return true;
    }
    if (mode_ != kNormal) return true;
    if (depth_ == 1) {
      key1_ = k;
      key2_.clear();
    } else if (depth_ == 2) {
      key2_ = k;
    }
    return dom_.key(k);
  }
  bool start_object(std::size_t n) {
    if (mode_ != kNormal) return open("an object");
    ++depth_;
    if (depth_ == 3 && key1_ == "model" && key2_ == "vocab") {
      mode_ = kVocab;
      mode_depth_ = depth_;
      saw_vocab = true;
      return dom_.start_object(0);
    }
    return dom_.start_object(n);
  }
  bool start_array(std::size_t n) {
    if (mode_ == kMerges && depth_ == mode_depth_) {
      ++depth_;
      pair_ = {};
      pair_n_ = 0;
      return true;
    }
    if (mode_ != kNormal) return open("an array");
    ++depth_;
    if (depth_ == 3 && key1_ == "model" && key2_ == "merges") {
      mode_ = kMerges;
      mode_depth_ = depth_;
      saw_merges = true;
      return dom_.start_array(0);
    }
    return dom_.start_array(n);
  }
  bool end_object() { return close(true); }
  bool end_array() { return close(false); }
  bool parse_error(std::size_t pos, const std::string& last, const json::exception& ex) {
    return dom_.parse_error(pos, last, ex);
  }

 private:
  enum Mode { kNormal, kVocab, kMerges };

  template <class F>
  bool scalar(F&& forward, const char* what) {
    if (mode_ == kNormal) return forward();
    if (mode_ == kVocab && depth_ == mode_depth_)
      note(fmt::format("model.vocab[\"{}\"]", vocab_key_), fmt::format("must be an integer id, found {}", what));
    else if (mode_ == kMerges && depth_ == mode_depth_)
      note(fmt::format("model.merges[{}]", entry_++), fmt::format("must be a \"left right\" string or a [left, right] pair, found {}", what));
    else if (mode_ == kMerges && depth_ == mode_depth_ + 1)
      pair_n_ = 99;  // a non-string inside a pair
    return true;
  }
  bool vocab_id(int64_t v) {
    if (v < 0 || v > INT32_MAX)
      note(fmt::format("model.vocab[\"{}\"]", vocab_key_), fmt::format("id {} is out of range", v));
    else
      vocab.emplace_back(std::move(vocab_key_), v);
    return true;
  }
  bool open(const char* what) {
    if (depth_ == mode_depth_) {
      if (mode_ == kVocab) note(fmt::format("model.vocab[\"{}\"]", vocab_key_), fmt::format("must be an integer id, found {}", what));
      else note(fmt::format("model.merges[{}]", entry_++), fmt::format("must be a \"left right\" string or a [left, right] pair, found {}", what));
    } else if (mode_ == kMerges && depth_ == mode_depth_ + 1) {
      pair_n_ = 99;
    }
    ++depth_;
    return true;
  }
  bool close(bool object) {
    if (mode_ == kNormal) {
      --depth_;
      return object ? dom_.end_object() : dom_.end_array();
    }
    if (depth_ == mode_depth_) {  // end of model.vocab / model.merges
      mode_ = kNormal;
      --depth_;
      return object ? dom_.end_object() : dom_.end_array();
    }
    if (mode_ == kMerges && depth_ == mode_depth_ + 1 && !object) {
      std::string key = fmt::format("model.merges[{}]", entry_++);
      if (pair_n_ == 2) merges.push_back({std::move(pair_.a), std::move(pair_.b), false});
      else note(key, "must be a [left, right] pair of two strings");
    }
    --depth_;
    return true;
  }
  void note(std::string key, std::string what) {
    if (bad_key.empty()) {
      bad_key = std::move(key);
      bad_what = std::move(what);
    }
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_{root, true};
  Mode mode_ = kNormal;
  int depth_ = 0, mode_depth_ = 0;
  std::string key1_, key2_, vocab_key_;
  MergeEntry pair_;
  int pair_n_ = 0;
  std::size_t entry_ = 0;
};

}  // namespace

// ------------------------------------------------------------------------------------------

struct Tokenizer::Impl {
  std::filesystem::path file;
  bool nfc = false;
  std::vector<Regex> splits;  // applied in order, each on the pieces of the previous one
  bool ignore_merges = false;
  std::optional<int32_t> unk_id;
  bool fuse_unk = false;
  std::array<int32_t, 256> byte_id{};  // id of each single-byte token, -1 when absent
  PairMap merges;                      // (left id, right id) -> rank, merged id
  StrMap<int32_t> vocab_bytes;         // raw bytes -> id (only for ignore_merges)

  std::vector<std::string> model_token;  // model.vocab token (byte-level form) by id
  TokenIndex model_index;                // model_token -> id
  StrMap<int32_t> added_ids;             // added token content -> id
  std::unordered_map<int32_t, std::string> added_names;  // id -> added token content
  std::vector<std::string> id_bytes;     // what decode emits for each id
  enum : uint8_t { kDefined = 1, kAdded = 2, kSpecial = 4 };
  std::vector<uint8_t> id_flags;

  std::vector<AddedToken> added;
  LiteralMatcher raw_matcher, norm_matcher;
  std::optional<int32_t> eos;

  static constexpr std::size_t kCacheMax = 200000;
  static constexpr std::size_t kCacheMaxWordLen = 256;
  mutable std::shared_mutex cache_mu;
  mutable StrMap<std::vector<int32_t>> cache;

  static uint64_t pair_key(int32_t a, int32_t b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }
  int32_t find_token(std::string_view s) const {
    if (auto f = added_ids.find(s); f != added_ids.end()) return f->second;
    return model_index.find(s);
  }

  void load(const std::filesystem::path& tokenizer_json);
  void load_config(const std::filesystem::path& config_json);

  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  void encode_normalizable(std::string_view piece, std::vector<int32_t>& out,
                           std::vector<MatchData>& md) const;
  void pre_tokenize(std::string_view s, std::size_t level, std::vector<int32_t>& out,
                    std::vector<MatchData>& md) const;
  void bpe(std::string_view word, std::vector<int32_t>& out) const;
  void bpe_merge(std::string_view word, std::vector<int32_t>& out) const;
};

void Tokenizer::Impl::load(const std::filesystem::path& path) {
  file = path;
  Ctx c{path.string()};
  TokenizerJsonReader rd;
  {
    std::string text = read_file(path, "the tokenizer file");
    try {
      json::sax_parse(text, &rd);
    } catch (const json::exception& e) {
      fail("{}: malformed JSON ({}); re-download or fix the file", path.string(), e.what());
    }
  }
  const json& root = rd.root;
  if (!root.is_object()) c.bad("(root)", "must be a JSON object");

  // --- model -------------------------------------------------------------------------------
  const json& model = c.req(root, "model", "model");
  if (!model.is_object()) c.bad("model", "must be an object");
  if (const json* t = c.opt(model, "type")) {
    std::string type = c.str(*t, "model.type");
    if (type != "BPE")
      c.bad("model.type", fmt::format("is \"{}\"; only \"BPE\" (byte-level BPE) is supported", type));
  }
  if (const json* d = c.opt(model, "dropout")) {
    if (!d->is_number() || d->get<double>() != 0.0)
      c.bad("model.dropout", "BPE dropout is not supported; set it to null");
  }
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json* v = c.opt(model, k); v && !c.str(*v, std::string("model.") + k).empty())
      c.bad(std::string("model.") + k, "a non-empty value is not supported for byte-level BPE");
  }
  ignore_merges = c.flag(model, "ignore_merges", "model.ignore_merges", false);
  fuse_unk = c.flag(model, "fuse_unk", "model.fuse_unk", false);
  bool byte_fallback = c.flag(model, "byte_fallback", "model.byte_fallback", false);
  const json& vocab_dom = c.req(model, "vocab", "model.vocab");
  if (!rd.saw_vocab || !vocab_dom.is_object())
    c.bad("model.vocab", fmt::format("must be an object {{token: id}}, found {}", vocab_dom.type_name()));
  const json& merges_dom = c.req(model, "merges", "model.merges");
  if (!rd.saw_merges || !merges_dom.is_array())
    c.bad("model.merges", fmt::format("must be an array, found {}", merges_dom.type_name()));
  if (!rd.bad_key.empty()) c.bad(rd.bad_key, rd.bad_what);

  // --- added tokens (parsed before sizing the id tables) -----------------------------------
  if (const json* at = c.opt(root, "added_tokens")) {
    if (!at->is_array()) c.bad("added_tokens", "must be an array");
    added.reserve(at->size());  // stable addresses for the matchers
    for (std::size_t i = 0; i < at->size(); ++i) {
      const json& e = (*at)[i];
      std::string key = fmt::format("added_tokens[{}]", i);
      if (!e.is_object()) c.bad(key, "must be an object");
      AddedToken t;
      t.id = c.id(c.req(e, "id", key + ".id"), key + ".id");
      t.content = c.str(c.req(e, "content", key + ".content"), key + ".content");
      t.special = c.flag(e, "special", key + ".special", false);
      t.lstrip = c.flag(e, "lstrip", key + ".lstrip", false);
      t.rstrip = c.flag(e, "rstrip", key + ".rstrip", false);
      t.single_word = c.flag(e, "single_word", key + ".single_word", false);
      t.normalized = c.flag(e, "normalized", key + ".normalized", !t.special);
      added.push_back(std::move(t));
    }
  }

  // --- id tables ---------------------------------------------------------------------------
  int64_t max_id = -1;
  for (const auto& [tok, id] : rd.vocab) max_id = std::max(max_id, id);
  for (const auto& t : added) max_id = std::max<int64_t>(max_id, t.id);
  const std::size_t n_entries = rd.vocab.size() + added.size();
  if (max_id >= int64_t(4 * n_entries + 1000000))
    c.bad("model.vocab", fmt::format("ids are too sparse (max id {} for {} tokens)", max_id, n_entries));
  const std::size_t n_ids = std::size_t(max_id + 1);
  model_token.assign(n_ids, {});
  id_bytes.assign(n_ids, {});
  id_flags.assign(n_ids, 0);
  std::vector<int32_t> vocab_order;
  vocab_order.reserve(rd.vocab.size());
  for (auto& [tok, id64] : rd.vocab) {
    auto id = int32_t(id64);
    auto bytes = byte_level_to_bytes(tok);
    if (ignore_merges && bytes) vocab_bytes.insert_or_assign(*bytes, id);
    id_bytes[id] = bytes ? std::move(*bytes) : tok;
    id_flags[id] = kDefined;
    model_token[id] = std::move(tok);
    vocab_order.push_back(id);
  }
  rd.vocab = {};
  model_index.build(&model_token, vocab_order);

  byte_id.fill(-1);
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    utf8::append(ch, byte_map().to_cp[b]);
    byte_id[b] = model_index.find(ch);
    if (byte_id[b] < 0 && byte_fallback)
      c.bad("model.byte_fallback", "byte_fallback with an incomplete byte alphabet is not supported");
  }
  if (const json* u = c.opt(model, "unk_token")) {
    std::string unk = c.str(*u, "model.unk_token");
    int32_t id = model_index.find(unk);
    if (id < 0) c.bad("model.unk_token", fmt::format("\"{}\" is not in model.vocab", unk));
    unk_id = id;
  }

  merges.reserve(rd.merges.size());
  std::string merged;
  for (std::size_t r = 0; r < rd.merges.size(); ++r) {
    const auto& m = rd.merges[r];
    std::string_view a = m.a, b = m.b;
    if (m.joined) {
      auto sp = m.a.find(' ');
      if (sp == std::string::npos || m.a.find(' ', sp + 1) != std::string::npos)
        c.bad(fmt::format("model.merges[{}]", r), fmt::format("\"{}\" must be two tokens separated by one space", m.a));
      a = std::string_view(m.a).substr(0, sp);
      b = std::string_view(m.a).substr(sp + 1);
    }
    int32_t ia = model_index.find(a), ib = model_index.find(b);
    if (ia < 0 || ib < 0)
      c.bad(fmt::format("model.merges[{}]", r), fmt::format("token \"{}\" is not in model.vocab", ia < 0 ? a : b));
    merged.assign(a);
    merged.append(b);
    int32_t im = model_index.find(merged);
    if (im < 0)
      c.bad(fmt::format("model.merges[{}]", r), fmt::format("merged token \"{}\" is not in model.vocab", merged));
    merges.insert_or_assign(pair_key(ia, ib), int32_t(r), im);
  }
  rd.merges = {};

  // --- normalizer --------------------------------------------------------------------------
  if (const json* n = c.opt(root, "normalizer")) {
    std::function<void(const json&, const std::string&)> norm = [&](const json& node, const std::string& key) {
      std::string type = c.str(c.req(node, "type", key + ".type"), key + ".type");
      if (type == "NFC") {
        nfc = true;
      } else if (type == "Sequence") {
        const json& list = c.req(node, "normalizers", key + ".normalizers");
        if (!list.is_array()) c.bad(key + ".normalizers", "must be an array");
        for (std::size_t i = 0; i < list.size(); ++i) norm(list[i], fmt::format("{}.normalizers[{}]", key, i));
      } else {
        c.bad(key + ".type", fmt::format("normalizer \"{}\" is not supported; supported: NFC, Sequence of NFC, or null", type));
      }
    };
    norm(*n, "normalizer");
  }

  // --- pre_tokenizer -----------------------------------------------------------------------
  bool byte_level = false;
  std::function<void(const json&, const std::string&)> pre = [&](const json& node, const std::string& key) {
    std::string type = c.str(c.req(node, "type", key + ".type"), key + ".type");
    auto add_regex = [&](const std::string& pattern, const std::string& pkey) {
      Regex re;
      std::string err = re.compile(translate_pattern(pattern));
      if (!err.empty()) c.bad(pkey, fmt::format("regex does not compile with PCRE2: {}", err));
      splits.push_back(std::move(re));
    };
    if (type == "Sequence") {
      const json& list = c.req(node, "pretokenizers", key + ".pretokenizers");
      if (!list.is_array()) c.bad(key + ".pretokenizers", "must be an array");
      for (std::size_t i = 0; i < list.size(); ++i) pre(list[i], fmt::format("{}.pretokenizers[{}]", key, i));
    } else if (type == "Split") {
      if (byte_level) c.bad(key, "a Split after ByteLevel is not supported");
      std::string behavior = c.str(c.req(node, "behavior", key + ".behavior"), key + ".behavior");
      if (behavior != "Isolated")
        c.bad(key + ".behavior", fmt::format("\"{}\" is not supported; only \"Isolated\"", behavior));
      if (c.flag(node, "invert", key + ".invert", false)) c.bad(key + ".invert", "true is not supported");
      const json& pat = c.req(node, "pattern", key + ".pattern");
      if (const json* r = c.opt(pat, "Regex"))
        add_regex(c.str(*r, key + ".pattern.Regex"), key + ".pattern.Regex");
      else if (const json* s = c.opt(pat, "String"))
        add_regex(escape_literal(c.str(*s, key + ".pattern.String")), key + ".pattern.String");
      else
        c.bad(key + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
    } else if (type == "ByteLevel") {
      if (c.flag(node, "add_prefix_space", key + ".add_prefix_space", true))
        c.bad(key + ".add_prefix_space", "true is not supported; only false");
      if (c.flag(node, "use_regex", key + ".use_regex", true)) add_regex(kGpt2Pattern, key + ".use_regex");
      byte_level = true;
    } else {
      c.bad(key + ".type", fmt::format("pre-tokenizer \"{}\" is not supported; supported: Sequence, Split, ByteLevel", type));
    }
  };
  if (const json* pt = c.opt(root, "pre_tokenizer")) pre(*pt, "pre_tokenizer");
  if (!byte_level)
    c.bad("pre_tokenizer", "has no ByteLevel step; only byte-level BPE tokenizers are supported");

  // --- decoder -----------------------------------------------------------------------------
  const json& dec = c.req(root, "decoder", "decoder");
  if (std::string t = c.str(c.req(dec, "type", "decoder.type"), "decoder.type"); t != "ByteLevel")
    c.bad("decoder.type", fmt::format("decoder \"{}\" is not supported; only \"ByteLevel\"", t));

  // --- added tokens: id tables and matchers ------------------------------------------------
  for (AddedToken& t : added) {
    auto bytes = byte_level_to_bytes(t.content);
    id_bytes[t.id] = bytes ? std::move(*bytes) : t.content;
    id_flags[t.id] = uint8_t(kDefined | kAdded | (t.special ? kSpecial : 0));
    added_ids.insert_or_assign(t.content, t.id);
    added_names.insert_or_assign(t.id, t.content);
    if (t.normalized && nfc) t.content = utf8_nfc(t.content);
  }
  for (const AddedToken& t : added) (t.normalized ? norm_matcher : raw_matcher).add(&t);
}

void Tokenizer::Impl::load_config(const std::filesystem::path& path) {
  Ctx c{path.string()};
  json root = parse_json(path);
  if (!root.is_object()) c.bad("(root)", "must be a JSON object");
  const json* e = c.opt(root, "eos_token");
  if (!e) return;
  std::string name;
  if (e->is_string()) name = e->get<std::string>();
  else if (e->is_object() && e->contains("content")) name = c.str((*e)["content"], "eos_token.content");
  else c.bad("eos_token", "must be a string or an object with \"content\"");
  if (int32_t id = find_token(name); id >= 0) eos = id;
}

// --- encoding --------------------------------------------------------------------------------

void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<MatchData> md(splits.size());
  raw_matcher.split(
      text, [&](std::string_view piece) { encode_normalizable(piece, out, md); },
      [&](int32_t id) { out.push_back(id); });
}

void Tokenizer::Impl::encode_normalizable(std::string_view piece, std::vector<int32_t>& out,
                                          std::vector<MatchData>& md) const {
  std::string buf;
  if (!utf8::is_valid(piece)) {
    buf = utf8::sanitize(piece);
    piece = buf;
  }
  if (nfc && !is_ascii(piece)) {
    buf = utf8_nfc(piece);
    piece = buf;
  }
  norm_matcher.split(
      piece, [&](std::string_view s) { pre_tokenize(s, 0, out, md); },
      [&](int32_t id) { out.push_back(id); });
}

void Tokenizer::Impl::pre_tokenize(std::string_view s, std::size_t level, std::vector<int32_t>& out,
                                   std::vector<MatchData>& md) const {
  if (level == splits.size()) {
    bpe(s, out);
    return;
  }
  splits[level].split(s, md[level].md, [&](std::size_t b, std::size_t e) {
    pre_tokenize(s.substr(b, e - b), level + 1, out, md);
  });
}

void Tokenizer::Impl::bpe(std::string_view word, std::vector<int32_t>& out) const {
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
    std::shared_lock lock(cache_mu);
    if (auto f = cache.find(word); f != cache.end()) {
      out.insert(out.end(), f->second.begin(), f->second.end());
      return;
    }
  }
  std::size_t first = out.size();
  bpe_merge(word, out);
  if (cacheable) {
    std::unique_lock lock(cache_mu);
    if (cache.size() < kCacheMax)
      cache.try_emplace(std::string(word), out.begin() + std::ptrdiff_t(first), out.end());
  }
}

// Merges adjacent symbols by rank, lowest rank first and leftmost first on ties (HF Word::merge_all).
void Tokenizer::Impl::bpe_merge(std::string_view word, std::vector<int32_t>& out) const {
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
    const PairMap::Entry* f = merges.find(pair_key(sym[pos].id, sym[nx].id));
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

// ------------------------------------------------------------------------------------------
// Tokenizer

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec))
    fail("tokenizer: {} does not exist; pass a model directory containing tokenizer.json or the "
         "tokenizer.json file itself", path.string());
  fs::path file = path, config;
  if (fs::is_directory(path, ec)) {
    file = path / "tokenizer.json";
    if (!fs::exists(file, ec))
      fail("tokenizer: {} has no tokenizer.json; only the Hugging Face tokenizer.json format is "
           "supported (not vocab.json + merges.txt alone)", path.string());
  }
  config = file.parent_path() / "tokenizer_config.json";
  auto impl = std::make_shared<Impl>();
  impl->load(file);
  if (fs::exists(config, ec)) impl->load_config(config);
  Tokenizer t;
  t.impl_ = std::move(impl);
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  impl_->encode_text(text, out);
  return out;
}

std::vector<std::string> Tokenizer::pretokenize(std::string_view text) const {
  const Impl& im = *impl_;
  std::vector<std::string> out;
  std::vector<MatchData> md(im.splits.size());
  std::function<void(std::string_view, std::size_t)> split = [&](std::string_view s, std::size_t level) {
    if (level == im.splits.size()) {
      if (!s.empty()) out.emplace_back(s);
      return;
    }
    im.splits[level].split(s, md[level].md, [&](std::size_t b, std::size_t e) { split(s.substr(b, e - b), level + 1); });
  };
  auto normalizable = [&](std::string_view piece) {
    std::string buf;
    if (!utf8::is_valid(piece)) {
      buf = utf8::sanitize(piece);
      piece = buf;
    }
    if (im.nfc && !is_ascii(piece)) {
      buf = utf8_nfc(piece);
      piece = buf;
    }
    im.norm_matcher.split(piece, [&](std::string_view s) { split(s, 0); }, [](int32_t) {});
  };
  im.raw_matcher.split(text, normalizable, [](int32_t) {});
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || std::size_t(id) >= impl_->id_flags.size()) continue;
    uint8_t f = impl_->id_flags[id];
    if (!(f & Impl::kDefined) || (skip_special && (f & Impl::kSpecial))) continue;
    bytes += impl_->id_bytes[id];
  }
  if (utf8::is_valid(bytes)) return bytes;
  return utf8::sanitize(bytes);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  int32_t id = impl_->find_token(token);
  if (id < 0) return std::nullopt;
  return id;
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || std::size_t(id) >= impl_->id_flags.size()) return {};
  if (impl_->id_flags[id] & Impl::kAdded) return impl_->added_names.at(id);
  return impl_->model_token[id];
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || std::size_t(id) >= impl_->id_flags.size()) return {};
  return impl_->id_bytes[id];
}

int32_t Tokenizer::vocab_size() const { return int32_t(impl_->id_flags.size()); }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && std::size_t(id) < impl_->id_flags.size() && (impl_->id_flags[id] & Impl::kSpecial);
}

bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && std::size_t(id) < impl_->id_flags.size() && (impl_->id_flags[id] & Impl::kAdded);
}

std::vector<int32_t> Tokenizer::stop_token_ids() const {
  std::vector<int32_t> ids;
  auto add = [&](std::optional<int32_t> id) {
    if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  };
  add(token_to_id("<|im_end|>"));
  add(token_to_id("<|endoftext|>"));
  add(impl_->eos);
  return ids;
}

std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos; }

const std::filesystem::path& Tokenizer::file() const { return impl_->file; }

// ------------------------------------------------------------------------------------------
// IncrementalDecoder

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tok_(tokenizer), skip_special_(skip_special) {}

std::string IncrementalDecoder::push(int32_t id) {
  if (skip_special_ && tok_.is_special(id)) return {};
  pending_ += tok_.token_bytes(id);
  std::string out;
  std::size_t used = utf8::decode_into(pending_, out, /*final=*/false);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDecoder::push(std::span<const int32_t> ids) {
  std::string out;
  for (int32_t id : ids) out += push(id);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out;
  utf8::decode_into(pending_, out, /*final=*/true);
  pending_.clear();
  return out;
}

void IncrementalDecoder::reset() { pending_.clear(); }

// ------------------------------------------------------------------------------------------
// StopMatcher

StopMatcher::StopMatcher(std::vector<int32_t> stop_ids, std::vector<std::string> stop_strings)
    : stop_ids_(std::move(stop_ids)) {
  for (auto& s : stop_strings) {
    if (s.empty()) continue;
    max_len_ = std::max(max_len_, s.size());
    stop_strings_.push_back(std::move(s));
  }
}

bool StopMatcher::is_stop_id(int32_t id) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

std::optional<StopHit> StopMatcher::push(int32_t id, std::string_view text) {
  if (hit_) return hit_;
  if (is_stop_id(id)) {
    hit_ = StopHit{text_.size(), true, -1};
    return hit_;
  }
  return push_text(text);
}

std::optional<StopHit> StopMatcher::push_text(std::string_view text) {
  if (hit_ || text.empty()) return hit_;
  const std::size_t old = text_.size();
  text_ += text;
  std::size_t best = std::string::npos;
  int which = -1;
  for (std::size_t k = 0; k < stop_strings_.size(); ++k) {
    const std::string& s = stop_strings_[k];
    // Earlier text had no match, so a new match must end inside `text`.
    std::size_t from = old + 1 > s.size() ? old + 1 - s.size() : 0;
    std::size_t pos = text_.find(s, from);
    if (pos < best) {
      best = pos;
      which = int(k);
    }
  }
  if (which >= 0) hit_ = StopHit{best, false, which};
  return hit_;
}

std::string_view StopMatcher::kept() const {
  return std::string_view(text_).substr(0, hit_ ? hit_->cut : text_.size());
}

std::size_t StopMatcher::safe_length() const {
  if (hit_) return hit_->cut;
  std::size_t hold = 0;  // longest suffix of text_ that is a proper prefix of a stop string
  for (const std::string& s : stop_strings_) {
    for (std::size_t k = std::min(s.size() - 1, text_.size()); k > hold; --k) {
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  return text_.size() - hold;
}

void StopMatcher::reset() {
  text_.clear();
  hit_.reset();
}

// ------------------------------------------------------------------------------------------

std::string qwen3_chat_prompt(std::string_view user_message, bool thinking) {
  std::string p = "<|im_start|>user\n";
  p += user_message;
  p += "<|im_end|>\n<|im_start|>assistant\n";
  if (!thinking) p += "<think>\n\n</think>\n\n";
  return p;
}

std::string utf8_nfc(std::string_view s) {
  if (is_ascii(s)) return std::string(s);
  std::string clean;
  if (!utf8::is_valid(s)) {
    clean = utf8::sanitize(s);
    s = clean;
  }
  utf8proc_uint8_t* dst = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    utf8proc_ssize_t(s.size()), &dst,
                                    utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) fail("tokenizer: NFC normalization failed: {}", utf8proc_errmsg(n));
  std::string out(reinterpret_cast<const char*>(dst), std::size_t(n));
  std::free(dst);
  return out;
}

}  // namespace ears
