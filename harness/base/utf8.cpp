#include "harness/base/utf8.h"

#include <utf8proc.h>

#include <cstdint>
#include <vector>

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

namespace {

// Unicode Case_Ignorable: general category Mn, Me, Cf, Lm or Sk, or Word_Break MidLetter,
// MidNumLet or Single_Quote (DerivedCoreProperties.txt; the Word_Break ones listed here).
bool case_ignorable(char32_t c) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      break;
  }
  switch (c) {
    case 0x27: case 0x2E: case 0x3A: case 0xB7: case 0x387: case 0x55F: case 0x5F4:
    case 0x2018: case 0x2019: case 0x2024: case 0x2027: case 0xFE13: case 0xFE52: case 0xFE55:
    case 0xFF07: case 0xFF0E: case 0xFF1A:
      return true;
    default:
      return false;
  }
}

// Unicode Cased: Lowercase, Uppercase or Lt. Lu, Ll, Lt, every character with a case mapping
// (Other_Lowercase / Other_Uppercase such as U+0345, Roman numerals, circled letters) and the
// Other_* characters without one that are not case-ignorable (the Lm ones are skipped anyway).
bool cased(char32_t c) {
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
  switch (p->category) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
      return true;
    default:
      break;
  }
  if (p->lowercase_seqindex != UINT16_MAX || p->uppercase_seqindex != UINT16_MAX ||
      p->titlecase_seqindex != UINT16_MAX)
    return true;
  return c == 0xAA || c == 0xBA || (c >= 0x1F130 && c <= 0x1F149) ||
         (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189);
}

}  // namespace

std::string lower(std::string_view s) {
  // Decode once: the Final_Sigma context looks both ways. kInvalid marks a byte copied as is.
  constexpr char32_t kInvalid = 0xFFFFFFFF;
  std::vector<char32_t> cps;
  cps.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = decode(s, i, cp);
    cps.push_back(n == 0 ? kInvalid : cp);
    i += n == 0 ? 1 : n;
  }
  auto ignorable = [&](std::size_t k) { return cps[k] != kInvalid && case_ignorable(cps[k]); };
  auto is_cased = [&](std::size_t k) { return cps[k] != kInvalid && cased(cps[k]); };
  std::string out;
  out.reserve(s.size() + 8);
  std::size_t byte = 0;  // position in s of cps[k]
  for (std::size_t k = 0; k < cps.size(); ++k) {
    const char32_t c = cps[k];
    if (c == kInvalid) {
      out += s[byte++];
      continue;
    }
    byte += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    if (c < 0x80) {
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    } else if (c == 0x130) {  // SpecialCasing.txt: the one unconditional multi-character lower
      out += 'i';
      append(out, 0x307);
    } else if (c == 0x3A3) {
      std::size_t j = k;
      while (j > 0 && ignorable(j - 1)) --j;
      bool final_sigma = j > 0 && is_cased(j - 1);
      if (final_sigma) {
        j = k + 1;
        while (j < cps.size() && ignorable(j)) ++j;
        final_sigma = j == cps.size() || !is_cased(j);
      }
      append(out, final_sigma ? 0x3C2 : 0x3C3);
    } else {
      append(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}

}  // namespace ears::utf8
