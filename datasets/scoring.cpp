// GSM8K and QA scoring; see scoring.h for the conventions followed.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "datasets/scoring.h"

#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>

#include "decoders/utf8.h"
#include "harness/error.h"

namespace ears {
namespace {

// A compiled PCRE2 pattern, immutable after construction (safe to share between threads;
// each match uses its own match data).
class Regex {
 public:
  explicit Regex(std::string_view pattern, uint32_t options = 0) {
    int code = 0;
    PCRE2_SIZE offset = 0;
    re_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                        &code, &offset, nullptr);
    if (!re_) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(code, buf, sizeof buf);
      fail("internal: bad regex '{}' at {}: {}", pattern, offset, reinterpret_cast<char*>(buf));
    }
  }
  ~Regex() { pcre2_code_free(re_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Python re.findall-like: every non-overlapping match, left to right, as its groups
  // (group 0 when the pattern has no groups; unset groups are empty strings).
  std::vector<std::vector<std::string>> findall(std::string_view s) const {
    std::vector<std::vector<std::string>> out;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(re_, nullptr), &pcre2_match_data_free);
    uint32_t groups = 0;
    pcre2_pattern_info(re_, PCRE2_INFO_CAPTURECOUNT, &groups);
    PCRE2_SIZE start = 0;
    while (start <= s.size()) {
      int rc = pcre2_match(re_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), start, 0,
                           md.get(), nullptr);
      if (rc < 0) break;  // no match (or a matching error: treat as no further match)
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      std::vector<std::string> m;
      uint32_t first = groups == 0 ? 0 : 1, last = groups == 0 ? 0 : groups;
      for (uint32_t g = first; g <= last; ++g) {
        if (static_cast<int>(g) < rc && ov[2 * g] != PCRE2_UNSET)
          m.emplace_back(s.substr(ov[2 * g], ov[2 * g + 1] - ov[2 * g]));
        else
          m.emplace_back();
      }
      out.push_back(std::move(m));
      start = ov[1] > ov[0] ? ov[1] : ov[1] + 1;  // our patterns never match empty; be safe
    }
    return out;
  }

  // Replace every match by `with`.
  std::string replace_all(std::string_view s, std::string_view with) const {
    std::string out;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(re_, nullptr), &pcre2_match_data_free);
    PCRE2_SIZE start = 0, copied = 0;
    while (start <= s.size()) {
      int rc = pcre2_match(re_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), start, 0,
                           md.get(), nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      out.append(s.substr(copied, ov[0] - copied));
      out.append(with);
      copied = ov[1];
      start = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
    }
    out.append(s.substr(std::min<std::size_t>(copied, s.size())));
    return out;
  }

 private:
  pcre2_code* re_ = nullptr;
};

const Regex& strict_regex() {
  static const Regex re(R"(#### (\-?[0-9\.\,]+))");
  return re;
}
const Regex& flexible_regex() {
  static const Regex re(R"((-?[$0-9.,]{2,})|(-?[0-9]+))");
  return re;
}
const Regex& articles_regex() {
  // Python's `\b` on str is Unicode-aware: UCP makes PCRE2's \b/\w agree.
  static const Regex re(R"(\b(a|an|the)\b)", PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF);
  return re;
}

std::string_view strip(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

// ---- minimal UTF-8 code point handling (lower-casing and white space) ----

// Simple lower-case mapping for the scripts that occur in our QA data.
char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0xC0) return c;
  if (c <= 0xDE) return c == 0xD7 ? c : c + 32;  // Latin-1 (× excluded)
  if (c >= 0x100 && c <= 0x137) return c | 1;    // Latin Extended-A, even = upper
  if (c >= 0x139 && c <= 0x148) return (c & 1) ? c + 1 : c;
  if (c >= 0x14A && c <= 0x177) return c | 1;
  if (c == 0x178) return 0xFF;
  if (c >= 0x179 && c <= 0x17E) return (c & 1) ? c + 1 : c;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;  // Greek
  if (c >= 0x400 && c <= 0x40F) return c + 80;                // Cyrillic
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  return c;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    std::size_t n = utf8::decode(s, i, cp);
    if (n == 0) {  // invalid byte: keep it
      out += s[i++];
      continue;
    }
    if (cp == 0x130) {  // İ -> i + combining dot, as Python does
      out += 'i';
      utf8::append(out, 0x307);
    } else {
      utf8::append(out, to_lower(cp));
    }
    i += n;
  }
  return out;
}

// Python str.isspace() white space.
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python " ".join(s.split()) as a token list.
std::vector<std::string> split_ws(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    std::size_t n = utf8::decode(s, i, cp);
    if (n != 0 && is_space(cp)) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.append(s.substr(i, n == 0 ? 1 : n));
    }
    i += n == 0 ? 1 : n;
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

bool is_ascii_punct(char c) {
  static constexpr std::string_view kPunct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  return kPunct.find(c) != std::string_view::npos;
}

}  // namespace

std::string gsm8k_gold_from_answer(std::string_view reference_answer) {
  auto pos = reference_answer.rfind("####");
  if (pos == std::string_view::npos) return {};
  return std::string(strip(reference_answer.substr(pos + 4)));
}

std::string gsm8k_strict_extract(std::string_view output) {
  auto matches = strict_regex().findall(output);
  if (matches.empty()) return std::string(kInvalidAnswer);
  return std::string(strip(matches.front()[0]));
}

std::string gsm8k_flexible_extract(std::string_view output) {
  auto matches = flexible_regex().findall(output);
  if (matches.empty()) return std::string(kInvalidAnswer);
  for (const auto& g : matches.back())
    if (!g.empty()) return std::string(strip(g));
  return std::string(kInvalidAnswer);
}

std::string gsm8k_normalize(std::string_view text) {
  std::string s;
  s.reserve(text.size());
  for (char c : text)
    if (c != ',' && c != '$') s += c;
  // "(?s).*#### ": greedy, so everything through the last "#### ".
  if (auto pos = s.rfind("#### "); pos != std::string::npos) s.erase(0, pos + 5);
  // "\.$": a final ".", or a "." right before a final "\n".
  if (!s.empty() && s.back() == '.')
    s.pop_back();
  else if (s.size() >= 2 && s[s.size() - 1] == '\n' && s[s.size() - 2] == '.')
    s.erase(s.size() - 2, 1);
  return lower(s);
}

std::string normalize_answer(std::string_view text) {
  // Invalid UTF-8 -> U+FFFD first (Python's errors="replace"): normalisation then works on text,
  // as SQuAD's does, and removing punctuation cannot join stray bytes into new characters (found
  // by fuzz_scoring: normalize_answer was not idempotent on such input).
  std::string s = lower(utf8::sanitize(text));
  s.erase(std::remove_if(s.begin(), s.end(), is_ascii_punct), s.end());
  s = articles_regex().replace_all(s, " ");
  std::string out;
  for (const auto& tok : split_ws(s)) {
    if (!out.empty()) out += ' ';
    out += tok;
  }
  return out;
}

std::vector<std::string> answer_tokens(std::string_view text) {
  return split_ws(normalize_answer(text));
}

double qa_exact_match(std::string_view prediction, std::string_view gold) {
  return normalize_answer(prediction) == normalize_answer(gold) ? 1.0 : 0.0;
}

double qa_f1(std::string_view prediction, std::string_view gold) {
  auto p = answer_tokens(prediction);
  auto g = answer_tokens(gold);
  if (p.empty() || g.empty()) return p.empty() && g.empty() ? 1.0 : 0.0;
  std::map<std::string, long> gold_counts;
  for (const auto& t : g) ++gold_counts[t];
  long same = 0;
  for (const auto& t : p) {
    auto it = gold_counts.find(t);
    if (it != gold_counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  double precision = static_cast<double>(same) / static_cast<double>(p.size());
  double recall = static_cast<double>(same) / static_cast<double>(g.size());
  return 2 * precision * recall / (precision + recall);
}

bool qa_contains(std::string_view prediction, std::string_view gold) {
  auto p = answer_tokens(prediction);
  auto g = answer_tokens(gold);
  if (g.empty() || g.size() > p.size()) return false;
  return std::search(p.begin(), p.end(), g.begin(), g.end()) != p.end();
}

Score score(const std::string& scorer, const std::string& output,
            const std::vector<std::string>& gold) {
  Score s;
  if (scorer == "none") return s;
  if (scorer == "gsm8k") {
    if (gold.empty()) return s;
    std::string strict = gsm8k_strict_extract(output);
    std::string flexible = gsm8k_flexible_extract(output);
    for (const auto& g : gold) {
      std::string want = gsm8k_normalize(g);
      if (strict != kInvalidAnswer && gsm8k_normalize(strict) == want) s.strict = true;
      if (flexible != kInvalidAnswer && gsm8k_normalize(flexible) == want) s.flexible = true;
    }
    s.em = s.f1 = s.strict ? 1.0 : 0.0;
    return s;
  }
  if (scorer == "qa") {
    for (const auto& g : gold) {
      s.em = std::max(s.em, qa_exact_match(output, g));
      s.f1 = std::max(s.f1, qa_f1(output, g));
      if (qa_contains(output, g)) s.flexible = true;
    }
    s.strict = s.em == 1.0;
    return s;
  }
  fail("unknown scorer '{}'; use one of: gsm8k, qa, none", scorer);
}

}  // namespace ears
