// GSM8K and QA scoring; see scoring.h for the conventions followed.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "datasets/scoring.h"

#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>

#include "harness/base/utf8.h"
#include "harness/base/error.h"

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
// lm-eval nq_open.yaml regexes_to_ignore (re.sub(regex, "", x); "The " is listed twice there).
const Regex& lm_eval_nq_open_regex() {
  static const Regex re(R"(\b(?:The |the |An |A |The |a |an ))",
                        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF);
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

// Python str.lstrip(): leading str.isspace() characters removed.
std::string_view lstrip_unicode(std::string_view s) {
  std::size_t i = 0;
  for (char32_t cp = 0; i < s.size();) {
    const std::size_t n = utf8::decode(s, i, cp);
    if (n == 0 || !is_space(cp)) break;
    i += n;
  }
  return s.substr(i);
}

// Code points of valid UTF-8 text.
std::size_t code_points(std::string_view s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// lm-eval nq_open, first stage: text (after U+FFFD replacement) -> re.sub(regex, "", text), as
// numpy then stores it (np.array drops trailing U+0000 characters).
std::string lm_eval_regex_stage(std::string_view text) {
  std::string s = lm_eval_nq_open_regex().replace_all(utf8::sanitize(text), "");
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

// Second stage: np.char.lower at a fixed width (0 = none) -> delete string.punctuation.
std::string lm_eval_case_punct_stage(const std::string& s, std::size_t width) {
  std::string low = utf8::lower(s);
  if (width > 0) {  // numpy keeps the array's <U{width} dtype: longer results are cut
    std::size_t cps = 0, i = 0;
    for (; i < low.size(); ++i)
      if ((static_cast<unsigned char>(low[i]) & 0xC0) != 0x80 && cps++ == width) break;
    low.resize(i);
  }
  low.erase(std::remove_if(low.begin(), low.end(), is_ascii_punct), low.end());
  return low;
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
  return utf8::lower(s);
}

std::string normalize_answer(std::string_view text) {
  // Invalid UTF-8 -> U+FFFD first (Python's errors="replace"): normalisation then works on text,
  // as SQuAD's does, and removing punctuation cannot join stray bytes into new characters (found
  // by fuzz_scoring: normalize_answer was not idempotent on such input).
  std::string s = utf8::lower(utf8::sanitize(text));
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

std::string lm_eval_nq_open_normalize(std::string_view text, std::size_t width) {
  return lm_eval_case_punct_stage(lm_eval_regex_stage(text), width);
}

double lm_eval_nq_open_exact_match(std::string_view prediction,
                                   const std::vector<std::string>& gold) {
  // exact_match_hf_evaluate(predictions=[pred] * len(gold), references=gold): two numpy arrays,
  // each as wide as its longest string.
  const std::string pred = lm_eval_regex_stage(lstrip_unicode(utf8::sanitize(prediction)));
  std::vector<std::string> refs;
  std::size_t ref_width = 0;
  for (const auto& g : gold) {
    refs.push_back(lm_eval_regex_stage(g));
    ref_width = std::max(ref_width, code_points(refs.back()));
  }
  const std::string p = lm_eval_case_punct_stage(pred, code_points(pred));
  for (const auto& r : refs)
    if (lm_eval_case_punct_stage(r, ref_width) == p) return 1.0;
  return 0.0;
}

Score score_gsm8k(std::string_view output, const std::vector<std::string>& gold) {
  Score s;
  if (gold.empty()) return s;
  const std::string strict = gsm8k_strict_extract(output);
  const std::string flexible = gsm8k_flexible_extract(output);
  for (const auto& g : gold) {
    const std::string want = gsm8k_normalize(g);
    if (strict != kInvalidAnswer && gsm8k_normalize(strict) == want) s.strict = true;
    if (flexible != kInvalidAnswer && gsm8k_normalize(flexible) == want) s.flexible = true;
  }
  s.em = s.f1 = s.strict ? 1.0 : 0.0;
  return s;
}

Score score_squad(std::string_view output, const std::vector<std::string>& gold) {
  Score s;
  for (const auto& g : gold) {
    s.em = std::max(s.em, qa_exact_match(output, g));
    s.f1 = std::max(s.f1, qa_f1(output, g));
    if (qa_contains(output, g)) s.flexible = true;
  }
  s.strict = s.em == 1.0;
  return s;
}

Score score_lm_eval_nq_open(std::string_view output, const std::vector<std::string>& gold) {
  Score s;
  if (gold.empty()) return s;
  s.em = s.f1 = lm_eval_nq_open_exact_match(output, gold);
  s.strict = s.flexible = s.em == 1.0;
  return s;
}

Score score_none(std::string_view, const std::vector<std::string>&) { return {}; }

const ScorerDef* find_scorer(std::string_view name) {
  for (const auto& d : kScorerTable)
    if (d.name == name) return &d;
  return nullptr;
}

std::string scorer_list(std::string_view sep) {
  std::string out;
  for (const auto& d : kScorerTable) {
    if (!out.empty()) out += sep;
    out += d.name;
  }
  return out;
}

Score score(const std::string& scorer, const std::string& output,
            const std::vector<std::string>& gold) {
  const ScorerDef* d = find_scorer(scorer);
  if (!d) fail("unknown scorer '{}'; use one of: {}", scorer, scorer_list());
  return d->fn(output, gold);
}

}  // namespace ears
