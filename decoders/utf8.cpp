#include "decoders/utf8.h"

namespace ears::utf8 {

int step(const unsigned char* s, std::size_t n, std::size_t i) {
  const unsigned b0 = s[i];
  if (b0 < 0x80) return 1;
  int need;
  unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong 3-byte forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;  // no overlong 4-byte forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return -1;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= n) return 0;
    const unsigned b = s[i + k];
    const unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) return -k;
  }
  return need + 1;
}

uint32_t code_point(const unsigned char* s, int len) {
  switch (len) {
    case 1: return s[0];
    case 2: return (uint32_t(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    case 3: return (uint32_t(s[0] & 0x0F) << 12) | (uint32_t(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    default:
      return (uint32_t(s[0] & 0x07) << 18) | (uint32_t(s[1] & 0x3F) << 12) | (uint32_t(s[2] & 0x3F) << 6) |
             (s[3] & 0x3F);
  }
}

std::size_t decode(std::string_view s, std::size_t i, char32_t& cp) {
  const int r = step(s, i);
  if (r <= 0) return 0;
  cp = code_point(reinterpret_cast<const unsigned char*>(s.data()) + i, r);
  return static_cast<std::size_t>(r);
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

std::size_t first_invalid(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0; i < s.size();) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const int r = step(p, s.size(), i);
    if (r <= 0) return i;
    i += static_cast<std::size_t>(r);
  }
  return std::string_view::npos;
}

std::size_t decode_into(std::string_view in, std::string& out, bool final) {
  const auto* s = reinterpret_cast<const unsigned char*>(in.data());
  const std::size_t n = in.size();
  std::size_t i = 0;
  while (i < n) {
    std::size_t run = i;  // copy valid runs in one append
    int r = 0;
    while (run < n && (r = step(s, n, run)) > 0) run += static_cast<std::size_t>(r);
    out.append(in.data() + i, run - i);
    i = run;
    if (i >= n) break;
    if (r == 0) {  // incomplete tail
      if (!final) return i;
      out.append(kReplacement);
      return n;
    }
    out.append(kReplacement);
    i += static_cast<std::size_t>(-r);
  }
  return n;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  decode_into(s, out, /*final=*/true);
  return out;
}

}  // namespace ears::utf8
