// Added-token matching (added_tokens.h): registration and the Unicode character classes that
// lstrip / rstrip / single_word look at.
#include "decoders/added_tokens.h"

#include <utf8proc.h>

#include "harness/base/utf8.h"

namespace ears::tok {
namespace {

// Code points of a UTF-8 string; an invalid sequence counts as one U+FFFD.
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

}  // namespace

void LiteralMatcher::add(const AddedToken* t) {
  if (t->content.empty()) return;
  auto& v = by_first_[static_cast<unsigned char>(t->content[0])];
  v.push_back(t);
  std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) {
    return a->content.size() > b->content.size();
  });
  empty_ = false;
}

bool LiteralMatcher::ends_with_word(std::string_view s) {
  auto cps = code_points(s);
  return !cps.empty() && is_word_char(cps.back());
}

bool LiteralMatcher::starts_with_word(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  int r = utf8::step(p, s.size(), 0);
  return r > 0 && is_word_char(utf8::code_point(p, r));
}

std::size_t LiteralMatcher::leading_space(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0;
  while (i < s.size()) {
    int r = utf8::step(p, s.size(), i);
    if (r <= 0 || !is_white_space(utf8::code_point(p + i, r))) break;
    i += r;
  }
  return i;
}

std::size_t LiteralMatcher::trailing_space(std::string_view s) {
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

}  // namespace ears::tok
