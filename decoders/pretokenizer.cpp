// Pre-tokenization (pretokenizer.h): PCRE2 compile / match, pattern translation and the NFC
// normalizer (also the public ears::utf8_nfc of decoders/tokenizer.h).
#include "decoders/pretokenizer.h"

#include <utf8proc.h>

#include <cctype>
#include <cstdlib>

#include "decoders/tokenizer.h"
#include "harness/base/error.h"
#include "harness/base/utf8.h"

namespace ears {
namespace tok {
namespace {

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

}  // namespace

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

std::string Regex::compile(const std::string& pattern) {
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

int Regex::match(PCRE2_SPTR subject, std::size_t size, std::size_t pos, pcre2_match_data* md) const {
  int rc = pcre2_match(code, subject, size, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
    rc = pcre2_match(code, subject, size, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(rc, buf, sizeof buf);
    fail("tokenizer: pre-tokenizer regex failed on a {}-byte input: {}", size,
         reinterpret_cast<const char*>(buf));
  }
  return rc;
}

std::size_t Regex::char_length(std::string_view s, std::size_t i) {
  int r = utf8::step(reinterpret_cast<const unsigned char*>(s.data()), s.size(), i);
  return r > 0 ? std::size_t(r) : 1;
}

std::string_view normalize_piece(std::string_view piece, bool nfc, std::string& buf) {
  if (!utf8::is_valid(piece)) {
    buf = utf8::sanitize(piece);
    piece = buf;
  }
  if (nfc && !is_ascii(piece)) {
    buf = utf8_nfc(piece);
    piece = buf;
  }
  return piece;
}

}  // namespace tok

std::string utf8_nfc(std::string_view s) {
  if (tok::is_ascii(s)) return std::string(s);
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
