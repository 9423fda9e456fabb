// UTF-8: validation, decoding, U+FFFD replacement and Python-compatible lower-casing, shared by
// the tokenizer, the dataset loaders and scorers, and the config reader. Base layer (library
// ears_base; character properties from utf8proc).
//
// "Valid" is RFC 3629 / Unicode: no overlong forms, no surrogates, nothing above U+10FFFF.
// Replacement follows the Unicode "maximal subpart" practice (as Python's errors="replace" and
// Hugging Face's decoders do): each maximal invalid subpart becomes one U+FFFD.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ears::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
inline constexpr std::string_view kBom = "\xEF\xBB\xBF";          // U+FEFF, a byte order mark

// s without a leading byte order mark (some Windows editors start every file with one).
inline std::string_view strip_bom(std::string_view s) {
  return s.substr(0, kBom.size()) == kBom ? s.substr(kBom.size()) : s;
}

// At s[i] (i < n): the length (1-4) of the valid character there; 0 when s[i..n) is a valid but
// incomplete prefix of a character; -k when the maximal invalid subpart starting at i has k bytes.
int step(const unsigned char* s, std::size_t n, std::size_t i);
inline int step(std::string_view s, std::size_t i) {
  return step(reinterpret_cast<const unsigned char*>(s.data()), s.size(), i);
}

// The code point of a valid character of `len` bytes (len from step() > 0).
uint32_t code_point(const unsigned char* s, int len);
// Decodes the character at s[i]: returns its length and sets cp, or returns 0 (cp untouched)
// when the bytes at i are not a complete valid character.
std::size_t decode(std::string_view s, std::size_t i, char32_t& cp);
// Appends the encoding of cp (<= U+10FFFF).
void append(std::string& out, uint32_t cp);

// Byte offset of the first invalid (or truncated) sequence, or std::string_view::npos.
std::size_t first_invalid(std::string_view s);
inline bool is_valid(std::string_view s) { return first_invalid(s) == std::string_view::npos; }

// Appends the decodable prefix of `in` to `out`, each maximal invalid subpart as U+FFFD. When
// !final an incomplete trailing character is left unconsumed (streaming); returns the number of
// bytes consumed.
std::size_t decode_into(std::string_view in, std::string& out, bool final);
// Every maximal invalid subpart -> U+FFFD; valid input is returned unchanged.
std::string sanitize(std::string_view s);

// Python's str.lower(): the Unicode full lower-case mapping, i.e. utf8proc's simple mapping per
// code point, except U+0130 (İ) -> "i\u0307" and U+03A3 (Σ) -> U+03C2 (ς) in the Final_Sigma
// context (a cased letter before it, case-ignorable characters skipped, and no cased letter
// after it, case-ignorable characters skipped), else U+03C3 (σ). Cased / case-ignorable are
// the Unicode derived properties, built from utf8proc's categories and case mappings. Bytes
// that are not valid UTF-8 are copied unchanged (and count as neither). Unicode version:
// utf8proc's (2.8: Unicode 15; CPython 3.11 uses 14, so only characters new in 15 can differ).
std::string lower(std::string_view s);

}  // namespace ears::utf8
