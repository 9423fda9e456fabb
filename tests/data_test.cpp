// Tests for datasets/: loaders, prompts, scoring, synth-gsm, open-stems.
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "datasets/dataset.h"
#include "datasets/open_stems.h"
#include "datasets/scoring.h"
#include "datasets/synth_gsm.h"
#include "harness/base/utf8.h"
#include "harness/base/error.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace ears;

namespace {

fs::path shared_datasets() { return ears::test::shared_dir() / "datasets"; }

// A scratch directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("ears_data_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& content) const {
    fs::path p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
};

// Sets an environment variable for the scope, restoring the old value.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(std::string n, const std::optional<std::string>& value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
    if (value) ::setenv(name.c_str(), value->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
  ~ScopedEnv() {
    if (old) ::setenv(name.c_str(), old->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

std::string error_of(const DatasetSpec& spec) {
  try {
    load_dataset(spec);
  } catch (const ears::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Integer evaluator for calculator annotations: + - * / and parentheses, left to right with
// the usual precedence; nullopt on syntax errors or inexact division.
struct Calc {
  std::string_view s;
  std::size_t i = 0;
  std::optional<long long> number() {
    if (i < s.size() && s[i] == '(') {
      ++i;
      auto v = expr();
      if (!v || i >= s.size() || s[i] != ')') return std::nullopt;
      ++i;
      return v;
    }
    std::size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (start == i) return std::nullopt;
    return std::stoll(std::string(s.substr(start, i - start)));
  }
  std::optional<long long> term() {
    auto v = number();
    while (v && i < s.size() && (s[i] == '*' || s[i] == '/')) {
      char op = s[i++];
      auto r = number();
      if (!r) return std::nullopt;
      if (op == '*') v = *v * *r;
      else if (*r == 0 || *v % *r != 0) return std::nullopt;
      else v = *v / *r;
    }
    return v;
  }
  std::optional<long long> expr() {
    auto v = term();
    while (v && i < s.size() && (s[i] == '+' || s[i] == '-')) {
      char op = s[i++];
      auto r = term();
      if (!r) return std::nullopt;
      v = op == '+' ? *v + *r : *v - *r;
    }
    return v;
  }
  static std::optional<long long> eval(std::string_view text) {
    Calc c{text};
    auto v = c.expr();
    return c.i == text.size() ? v : std::nullopt;
  }
};

}  // namespace

// ---------------------------------------------------------------- GSM8K extraction / scoring

TEST(Gsm8kScoring, StrictExtractTakesFirstMatch) {
  EXPECT_EQ(gsm8k_strict_extract("so 4 + 5 = 9\n#### 9"), "9");
  EXPECT_EQ(gsm8k_strict_extract("#### 5\nmore text\n#### 6"), "5");
  EXPECT_EQ(gsm8k_strict_extract("#### 1,000"), "1,000");
  EXPECT_EQ(gsm8k_strict_extract("#### -12"), "-12");
  EXPECT_EQ(gsm8k_strict_extract("#### 18.50"), "18.50");
  EXPECT_EQ(gsm8k_strict_extract("#### 72."), "72.");
  EXPECT_EQ(gsm8k_strict_extract("#### 72 (because 8*9=72)"), "72");
  // The strict regex wants a digit, '-', '.' or ',' right after "#### ".
  EXPECT_EQ(gsm8k_strict_extract("#### $18"), "[invalid]");
  EXPECT_EQ(gsm8k_strict_extract("####18"), "[invalid]");
  EXPECT_EQ(gsm8k_strict_extract("The answer is 18."), "[invalid]");
  EXPECT_EQ(gsm8k_strict_extract(""), "[invalid]");
}

TEST(Gsm8kScoring, FlexibleExtractTakesLastMatch) {
  EXPECT_EQ(gsm8k_flexible_extract("First 3 apples, then 5 more: 8 in total"), "8");
  EXPECT_EQ(gsm8k_flexible_extract("I computed 12 and then 15"), "15");
  EXPECT_EQ(gsm8k_flexible_extract("The answer is $18."), "$18.");
  EXPECT_EQ(gsm8k_flexible_extract("Total: 1,234,567 dollars"), "1,234,567");
  EXPECT_EQ(gsm8k_flexible_extract("It dropped to -7 degrees"), "-7");
  EXPECT_EQ(gsm8k_flexible_extract("#### 42"), "42");
  EXPECT_EQ(gsm8k_flexible_extract("no digits here."), "[invalid]");
  // A lone "." is too short for the first alternative and not a digit for the second.
  EXPECT_EQ(gsm8k_flexible_extract("9 then ."), "9");
  // ".." is two characters of [$0-9.,]: lm-eval's regex really matches it.
  EXPECT_EQ(gsm8k_flexible_extract("5 and then.."), "..");
}

TEST(Gsm8kScoring, NormalizeFollowsLmEval) {
  EXPECT_EQ(gsm8k_normalize("1,000"), "1000");
  EXPECT_EQ(gsm8k_normalize("$18"), "18");
  EXPECT_EQ(gsm8k_normalize("$1,000."), "1000");
  EXPECT_EQ(gsm8k_normalize("72."), "72");
  EXPECT_EQ(gsm8k_normalize("18.50"), "18.50");
  EXPECT_EQ(gsm8k_normalize("7.."), "7.");  // only one trailing '.'
  EXPECT_EQ(gsm8k_normalize("18.\n"), "18\n");  // Python `\.$` also matches before a final \n
  EXPECT_EQ(gsm8k_normalize("She makes 9 * 2 = $<<9*2=18>>18.\n#### 18"), "18");
  EXPECT_EQ(gsm8k_normalize("#### 1 #### 2"), "2");  // up to the LAST "#### "
  EXPECT_EQ(gsm8k_normalize("ABC"), "abc");
  EXPECT_EQ(gsm8k_gold_from_answer("a\nb\n#### 1,000 \n"), "1,000");
  EXPECT_EQ(gsm8k_gold_from_answer("no final line"), "");
}

TEST(Gsm8kScoring, ScoreComparesNormalizedStrings) {
  auto s = score("gsm8k", "3 + 15 = 18\n#### 18", {"18"});
  EXPECT_TRUE(s.strict);
  EXPECT_TRUE(s.flexible);
  EXPECT_EQ(s.em, 1.0);
  EXPECT_EQ(s.f1, 1.0);
  s = score("gsm8k", "#### 72.", {"72"});
  EXPECT_TRUE(s.strict);
  s = score("gsm8k", "It costs #### 1,000 dollars", {"1,000"});
  EXPECT_TRUE(s.strict);
  EXPECT_TRUE(s.flexible);  // last match: "1,000" ("dollars" has no digits)
}

TEST(Gsm8kScoring, ScoreMatrix) {
  struct Case {
    const char* output;
    const char* gold;
    bool strict, flexible;
  };
  const Case cases[] = {
      {"#### 1,000", "1000", true, true},
      {"#### 1000", "1,000", true, true},
      {"The total is $18.", "18", false, true},
      {"#### $18", "18", false, true},
      {"#### -3", "-3", true, true},
      {"#### 3", "-3", false, false},
      {"#### 18.00", "18", false, false},  // lm-eval compares strings, not numbers
      {"#### 18.50", "18.5", false, false},
      {"#### 72.", "72", true, true},
      {"I am not sure.", "5", false, false},
      {"#### 5\n#### 6", "5", true, false},  // strict: first; flexible: last
      {"so 10 boxes, #### 40 and 7 spare", "40", true, false},
      {"first 40, finally 41", "41", false, true},
  };
  for (const auto& c : cases) {
    auto s = score("gsm8k", c.output, {c.gold});
    EXPECT_EQ(s.strict, c.strict) << c.output << " vs " << c.gold;
    EXPECT_EQ(s.flexible, c.flexible) << c.output << " vs " << c.gold;
    EXPECT_EQ(s.em, c.strict ? 1.0 : 0.0);
  }
  auto none = score("none", "#### 5", {"5"});
  EXPECT_FALSE(none.strict);
  EXPECT_FALSE(score("gsm8k", "#### 5", {}).strict);
  EXPECT_THROW(score("bleu", "x", {"x"}), ears::Error);
}

// ---------------------------------------------------------------- SQuAD normalisation / F1

TEST(QaScoring, NormalizeAnswer) {
  EXPECT_EQ(normalize_answer("The  Quick, brown fox!"), "quick brown fox");
  EXPECT_EQ(normalize_answer("an apple a day"), "apple day");
  EXPECT_EQ(normalize_answer("Anthem of the Seas"), "anthem of seas");  // articles whole-word
  EXPECT_EQ(normalize_answer("A.B."), "ab");        // punctuation goes before articles
  EXPECT_EQ(normalize_answer("the-the"), "thethe");
  EXPECT_EQ(normalize_answer("  \t\nx \n y  "), "x y");
  EXPECT_EQ(normalize_answer("THE ÉCOLE Normale"), "école normale");
  EXPECT_EQ(normalize_answer("Janet\u2019s"), "janet\u2019s");  // non-ASCII punctuation kept
  EXPECT_EQ(normalize_answer("ÀÉÎÕÜ ĀŁŽ ΣΩ ДЖ"), "àéîõü āłž σω дж");
  EXPECT_EQ(normalize_answer("ΟΔΥΣΣΕΥΣ ẞ ＡＢ Ǆ"), "οδυσσευς ß ａｂ ǆ");  // Python's str.lower
  EXPECT_EQ(normalize_answer("a\u00a0b"), "b");  // U+00A0 is white space, "a" an article
  EXPECT_EQ(normalize_answer("the"), "");
  // Invalid UTF-8 becomes U+FFFD first (Python decodes before normalising), so removing the
  // '_' cannot join the stray bytes CE / A3 into a new character: idempotent (fuzz_scoring).
  EXPECT_EQ(normalize_answer("\xce_\xa3"), "\ufffd\ufffd");
  EXPECT_EQ(normalize_answer(normalize_answer("\xce_\xa3")), normalize_answer("\xce_\xa3"));
}

TEST(QaScoring, ExactMatchAndF1HandComputed) {
  EXPECT_EQ(qa_exact_match("The Beatles.", "beatles"), 1.0);
  EXPECT_EQ(qa_exact_match("Beatles band", "beatles"), 0.0);
  // pred tokens {cat, sat, on, mat}, gold {cat, on, mat}: P = 3/4, R = 1, F1 = 6/7.
  EXPECT_NEAR(qa_f1("the cat sat on the mat", "a cat on a mat"), 6.0 / 7.0, 1e-12);
  // bag overlap: min(2,1) red + min(1,2) blue = 2; P = R = 2/3.
  EXPECT_NEAR(qa_f1("red red blue", "red blue blue"), 2.0 / 3.0, 1e-12);
  EXPECT_EQ(qa_f1("dog", "cat"), 0.0);
  EXPECT_EQ(qa_f1("the", "a"), 1.0);  // both empty after normalisation
  EXPECT_EQ(qa_f1("the", "cat"), 0.0);

  std::vector<std::string> gold = {"14 December 1972 UTC", "December 1972"};
  auto s = score("qa", "December 1972", gold);
  EXPECT_EQ(s.em, 1.0);
  EXPECT_EQ(s.f1, 1.0);
  EXPECT_TRUE(s.strict);
  EXPECT_TRUE(s.flexible);
  // "it was in december 1972": vs gold 2: P = 2/5, R = 1 -> 4/7; vs gold 1: P = 2/5, R = 1/2
  // -> 4/9. Max = 4/7.
  s = score("qa", "It was in December 1972", gold);
  EXPECT_EQ(s.em, 0.0);
  EXPECT_FALSE(s.strict);
  EXPECT_NEAR(s.f1, 4.0 / 7.0, 1e-12);
  EXPECT_TRUE(s.flexible);  // "december 1972" occurs in the output
  s = score("qa", "Sometime in 1972", gold);
  EXPECT_FALSE(s.flexible);
  EXPECT_TRUE(qa_contains("It was the Beatles, obviously", "The Beatles"));
  EXPECT_FALSE(qa_contains("Beatle", "The Beatles"));
}

// ---------------------------------------------------------------- Unicode lower-casing

// harness/base/utf8's lower() is Python's str.lower(), which both QA scorers use (SQuAD's
// normalize_answer, lm-eval's np.char.lower). Expected values are CPython 3.11's.
TEST(Utf8Lower, IsPythonStrLower) {
  using utf8::lower;
  EXPECT_EQ(lower("Hello, World! 123 _Ab_"), "hello, world! 123 _ab_");
  // Greek capital sigma: final sigma at the end of a word, else σ.
  EXPECT_EQ(lower("ΟΔΥΣΣΕΥΣ"), "οδυσσευς");
  EXPECT_EQ(lower("Σ"), "σ");    // no cased letter before it
  EXPECT_EQ(lower("ΣΣ"), "σς");
  EXPECT_EQ(lower("ΣΑΣ. ΣΑΣ"), "σας. σας");
  EXPECT_EQ(lower("ΑΣ'Σ"), "ασ'ς");  // "'" is case-ignorable: skipped on both sides
  EXPECT_EQ(lower("ΑΣ\u0301"), "ας\u0301");    // a combining accent after it is skipped
  EXPECT_EQ(lower("ΑΣ\u0301Β"), "ασ\u0301β");  // ... and a cased letter after that counts
  EXPECT_EQ(lower("\u03AA\u0301\u03A3"), "\u03CA\u0301\u03C2");  // Ϊ + combining acute + Σ
  EXPECT_EQ(lower("Aʰ\u03A3"), "aʰς");  // modifier letter: case-ignorable
  EXPECT_EQ(lower("ªΣ"), "ªς");         // U+00AA: cased (Other_Lowercase), no case mapping
  EXPECT_EQ(lower("🅰Σ"), "🅰ς");        // U+1F170: cased (Other_Uppercase), no case mapping
  EXPECT_EQ(lower("1Σ"), "1σ");
  // U+0130: the one unconditional multi-character lower-case mapping.
  EXPECT_EQ(lower("İstanbul"), "i\u0307stanbul");
  EXPECT_EQ(lower("ГАГАРИН Юрий"), "гагарин юрий");
  EXPECT_EQ(lower("STRAẞE"), "straße");  // U+1E9E -> U+00DF
  EXPECT_EQ(lower("ＡＢＣＤ"), "ａｂｃｄ");  // fullwidth
  // Code points the former hand table (Latin-1, Latin Extended-A, basic Greek and Cyrillic)
  // left unchanged: Cyrillic U+0460, U+0462, U+A640, Latin Extended-B U+01C4 and U+023B,
  // Latin Extended-D U+A7F5, Cherokee, Georgian, circled letters, Roman numerals, Deseret.
  EXPECT_EQ(lower("ѠѢꙀ ǄȻꟵ ᎠႠ Ⓐ Ⅻ 𐐀"), "ѡѣꙁ ǆȼꟶ ꭰⴀ ⓐ ⅻ 𐐨");
  EXPECT_EQ(lower("ß ǆ ΐ"), "ß ǆ ΐ");  // already lower case
  EXPECT_EQ(lower("A\xff" "B\xce"), "a\xff" "b\xce");  // invalid bytes copied as they are
  EXPECT_EQ(lower(""), "");
}

// ---------------------------------------------------------------- the two NQ-open scorers

// Each case's expected values come from running the reference code on it: SQuAD v1.1's
// evaluate-v1.1.py (normalize_answer, exact_match_score, f1_score) and lm-eval 0.4.9's
// nq_open.yaml v4.0 path (WhitespaceFilter's lstrip, then ConfigurableTask.process_results'
// multiple-target exact_match: exact_match_hf_evaluate(predictions=[pred] * len(gold),
// references=gold, regexes_to_ignore, ignore_case, ignore_punctuation) > 0) under CPython
// 3.11 and numpy 2.4.
struct QaCase {
  const char* prediction;
  std::vector<std::string> gold;
  double lm_eval;  // lm_eval_nq_open exact match
  double squad;    // squad exact match (max over gold)
};

const std::vector<QaCase>& qa_cases() {
  static const std::vector<QaCase> cases = {
      // articles: lm-eval removes "The |the |An |A |a |an " (with the space, case-sensitive,
      // before lower-casing); SQuAD removes whole words a/an/the after lower-casing.
      {"the Beatles", {"Beatles"}, 1, 1},
      {"THE Beatles", {"Beatles"}, 0, 1},
      {"Beatles the", {"Beatles"}, 0, 1},
      {"Beatles (the)", {"Beatles"}, 0, 1},
      {"Beatles", {"The Beatles"}, 1, 1},
      {"the the Beatles", {"Beatles"}, 1, 1},
      {"A Beatles", {"an Beatles"}, 1, 1},
      {"an apple", {"apple"}, 1, 1},
      {"Anthem of the Seas", {"Anthem of Seas"}, 1, 1},
      {"Theater", {"ater"}, 0, 0},         // \b: "The" inside a word is kept by both
      {"Bathe Spa", {"Bathe Spa"}, 1, 1},
      {"the", {"a"}, 0, 1},                // SQuAD: both normalise to ""
      {"a\u00a0b", {"b"}, 0, 1},           // the regex wants an ASCII space after "a"
      // punctuation: ASCII only, deleted by both
      {"U.S.", {"US"}, 1, 1},
      {"U. S.", {"US"}, 0, 0},
      {"Catch-22", {"Catch 22"}, 0, 0},
      {"Janet\u2019s", {"Janets"}, 0, 0},  // U+2019 is not in string.punctuation
      // white space: lm-eval strips only the prediction's leading white space, SQuAD collapses
      {"New  York", {"New York"}, 0, 1},
      {"New\tYork", {"New York"}, 0, 1},
      {" Paris", {"Paris"}, 1, 1},
      {"\u3000Paris", {"Paris"}, 1, 1},    // str.lstrip strips Unicode white space
      {"Paris ", {"Paris"}, 0, 1},
      // several gold answers: correct when any matches
      {"December 1972", {"14 December 1972 UTC", "December 1972"}, 1, 1},
      {"It was in December 1972", {"14 December 1972 UTC", "December 1972"}, 0, 0},
      // Unicode lower-casing (Python str.lower)
      {"ΟΔΥΣΣΕΥΣ", {"οδυσσευς"}, 1, 1},
      {"ΟΔΥΣΣΕΥΣ", {"οδυσσευσ"}, 0, 0},
      {"ＡＢＣ", {"ａｂｃ"}, 1, 1},
      {"ГАГАРИН", {"гагарин"}, 1, 1},
      {"Straẞe", {"straße"}, 1, 1},
      {"Ꭰ", {"ꭰ"}, 1, 1},
      {"Ǆ", {"ǆ"}, 1, 1},
      {"Ⅻ", {"ⅻ"}, 1, 1},
      {"𐐀", {"𐐨"}, 1, 1},
      // İ lower-cases to two code points; numpy's fixed-width arrays cut the result back to
      // the array's width (the prediction's own length, the longest gold's for the golds).
      {"İstanbul", {"istanbul"}, 0, 0},
      {"İstanbul", {"i\u0307stanbul"}, 0, 1},
      {"İstanbul", {"i\u0307stanbu"}, 1, 0},
      {"İstanbul", {"i\u0307stanbul", "a long other answer"}, 0, 1},
  };
  return cases;
}

TEST(QaScorers, ReferenceCases) {
  for (const auto& c : qa_cases()) {
    SCOPED_TRACE(::testing::Message() << "prediction '" << c.prediction << "', gold '" << c.gold[0] << "'");
    EXPECT_EQ(lm_eval_nq_open_exact_match(c.prediction, c.gold), c.lm_eval);
    Score lm = score("lm_eval_nq_open", c.prediction, c.gold);
    EXPECT_EQ(lm.em, c.lm_eval);
    EXPECT_EQ(lm.f1, c.lm_eval);  // lm-eval defines no F1 for nq_open
    EXPECT_EQ(lm.strict, c.lm_eval == 1.0);
    EXPECT_EQ(lm.flexible, lm.strict);
    Score sq = score("squad", c.prediction, c.gold);
    EXPECT_EQ(sq.em, c.squad);
    EXPECT_EQ(sq.strict, c.squad == 1.0);
  }
}

TEST(QaScorers, LmEvalNormalisation) {
  EXPECT_EQ(lm_eval_nq_open_normalize("The Beatles"), "beatles");
  EXPECT_EQ(lm_eval_nq_open_normalize("THE Beatles"), "the beatles");
  EXPECT_EQ(lm_eval_nq_open_normalize("in the end, a man"), "in end man");
  EXPECT_EQ(lm_eval_nq_open_normalize("New  York "), "new  york ");  // nothing collapsed
  EXPECT_EQ(lm_eval_nq_open_normalize(" Paris"), " paris");  // lstrip is the filter's job
  EXPECT_EQ(lm_eval_nq_open_normalize("U.S.A. (1776)"), "usa 1776");
  EXPECT_EQ(lm_eval_nq_open_normalize("İstanbul"), "i\u0307stanbul");
  EXPECT_EQ(lm_eval_nq_open_normalize("İstanbul", 8), "i\u0307stanbu");  // numpy's width
  EXPECT_EQ(lm_eval_nq_open_normalize("\xce_\xa3"), "\ufffd\ufffd");     // as SQuAD's
  // SQuAD's F1 on cases where the scorers differ: a token bag, so spacing does not matter.
  EXPECT_EQ(qa_f1("New  York", "New York"), 1.0);
  EXPECT_NEAR(score("squad", "It was in December 1972", {"14 December 1972 UTC", "December 1972"}).f1,
              4.0 / 7.0, 1e-12);
}

TEST(QaScorers, OneTable) {
  std::set<std::string_view> names;
  for (const auto& d : kScorerTable) {
    EXPECT_TRUE(names.insert(d.name).second) << d.name;
    EXPECT_EQ(find_scorer(d.name), &d);
    EXPECT_FALSE(d.what.empty());
  }
  EXPECT_EQ(scorer_list(), "gsm8k, squad, lm_eval_nq_open, qa, none");
  EXPECT_EQ(scorer_names()[2], "lm_eval_nq_open");
  EXPECT_EQ(find_scorer("rouge"), nullptr);
  // "qa" is the earlier name of "squad".
  const std::vector<std::string> gold = {"14 December 1972 UTC", "December 1972"};
  for (const char* out : {"December 1972", "in december, 1972", "1972"}) {
    Score a = score("qa", out, gold), b = score("squad", out, gold);
    EXPECT_EQ(a.em, b.em);
    EXPECT_EQ(a.f1, b.f1);
    EXPECT_EQ(a.flexible, b.flexible);
  }
  Score none = score("none", "December 1972", gold);
  EXPECT_FALSE(none.strict);
  EXPECT_EQ(none.em, 0.0);
  EXPECT_EQ(score("lm_eval_nq_open", "x", {}).em, 0.0);  // no gold: nothing to match
  try {
    score("bleu", "x", {"x"});
    ADD_FAILURE() << "no error for an unknown scorer";
  } catch (const ears::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown scorer 'bleu'; use one of: gsm8k, squad, lm_eval_nq_open, qa, none"),
              std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------- stop strings

TEST(StopStrings, DefaultsFollowLmEval) {
  EXPECT_EQ(default_stop_strings("gsm8k", 5),
            (std::vector<std::string>{"Question:", "</s>", "<|im_end|>"}));
  EXPECT_EQ(default_stop_strings("gsm8k", 0), (std::vector<std::string>{"</s>", "<|im_end|>"}));
  EXPECT_EQ(default_stop_strings("nq_open", 0), (std::vector<std::string>{"\n", ".", ","}));
  EXPECT_TRUE(default_stop_strings("spec_bench", 0).empty());
  EXPECT_EQ(apply_stop_strings(" Paris, France.\nQ:", default_stop_strings("nq_open", 0)),
            " Paris");
  EXPECT_EQ(apply_stop_strings("#### 5\n\nQuestion: next", default_stop_strings("gsm8k", 5)),
            "#### 5\n\n");
  EXPECT_EQ(apply_stop_strings("no stop", {"zzz", ""}), "no stop");
}

// ---------------------------------------------------------------- real shared files

TEST(SharedData, Gsm8kTest) {
  EARS_REQUIRE_SHARED("datasets/gsm8k/test.jsonl");
  DatasetSpec spec;
  spec.name = "gsm8k";
  spec.path = (shared_datasets() / "gsm8k" / "test.jsonl").string();
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 1319u);
  EXPECT_EQ(ds.scorer, "gsm8k");
  EXPECT_EQ(ds.skipped_lines, 0u);
  EXPECT_EQ(ds.resolved_path, spec.path);
  const Request& r0 = ds.requests[0];
  EXPECT_EQ(r0.id, "gsm8k/test/0");
  EXPECT_EQ(r0.source_line, 1u);
  EXPECT_EQ(r0.gold, std::vector<std::string>{"18"});
  EXPECT_EQ(r0.prompt.rfind("Janet\u2019s ducks lay 16 eggs per day.", 0), 0u);
  EXPECT_EQ(r0.prompt.substr(r0.prompt.size() - kGsm8kInstruction.size()), kGsm8kInstruction);
  EXPECT_EQ(ds.requests.back().id, "gsm8k/test/1318");
  EXPECT_EQ(ds.requests.back().source_line, 1319u);
  int with_commas = 0, negative = 0;
  for (const auto& r : ds.requests) {
    ASSERT_EQ(r.gold.size(), 1u);
    with_commas += r.gold[0].find(',') != std::string::npos;
    negative += r.gold[0][0] == '-';
  }
  EXPECT_EQ(with_commas, 14);  // as documented in shared/datasets/README.md
  EXPECT_EQ(negative, 2);
}

TEST(SharedData, Gsm8kReferenceAnswersScorePerfectly) {
  EARS_REQUIRE_SHARED("datasets/gsm8k/test.jsonl");
  fs::path file = shared_datasets() / "gsm8k" / "test.jsonl";
  DatasetSpec spec;
  spec.name = "gsm8k";
  spec.path = file.string();
  Dataset ds = load_dataset(spec);
  std::ifstream in(file);
  std::string line;
  std::size_t i = 0, strict = 0, flexible = 0, wrong_strict = 0;
  std::vector<std::string> answers;
  while (std::getline(in, line)) answers.push_back(nlohmann::json::parse(line)["answer"]);
  ASSERT_EQ(answers.size(), ds.requests.size());
  for (i = 0; i < answers.size(); ++i) {
    auto s = score(ds.scorer, answers[i], ds.requests[i].gold);
    strict += s.strict;
    flexible += s.flexible;
    // Someone else's solution is (almost always) wrong for this question.
    auto w = score(ds.scorer, answers[(i + 1) % answers.size()], ds.requests[i].gold);
    wrong_strict += w.strict;
  }
  EXPECT_EQ(strict, answers.size());
  EXPECT_EQ(flexible, answers.size());
  EXPECT_LT(wrong_strict, answers.size() / 20);
}

TEST(SharedData, NqOpen) {
  EARS_REQUIRE_SHARED("datasets/nq_open/NQ-open.dev.jsonl");
  DatasetSpec spec;
  spec.name = "nq_open";
  spec.path = (shared_datasets() / "nq_open").string();  // a directory works too
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 3610u);
  EXPECT_EQ(ds.scorer, "squad");
  EXPECT_EQ(ds.requests[0].prompt,
            "Answer these questions:\n\nQ: when was the last time anyone was on the moon?\nA:");
  EXPECT_EQ(ds.requests[0].gold,
            (std::vector<std::string>{"14 December 1972 UTC", "December 1972"}));
  EXPECT_EQ(ds.requests[0].id, "nq_open/dev/0");
  std::map<std::size_t, int> by_count;
  for (const auto& r : ds.requests) ++by_count[r.gold.size()];
  EXPECT_EQ(by_count[1], 2076);
  EXPECT_EQ(by_count[2], 953);
  EXPECT_EQ(by_count[3], 306);
  EXPECT_EQ(by_count[4], 118);
}

// The NQ-open prompt is lm-eval nq_open.yaml v4.0's zero-shot context, byte for byte:
// description "Answer these questions:\n\n" + doc_to_text "Q: {{question}}?\nA:".
TEST(NqOpen, PromptIsLmEvalsDescriptionPlusTemplate) {
  EXPECT_EQ(nq_open_prompt("who wrote hamlet"), "Answer these questions:\n\nQ: who wrote hamlet?\nA:");
  const std::string want =
      "\x41\x6e\x73\x77\x65\x72\x20\x74\x68\x65\x73\x65\x20\x71\x75\x65\x73\x74\x69\x6f\x6e\x73\x3a\x0a\x0a"
      "\x51\x3a\x20" "who wrote hamlet" "\x3f\x0a\x41\x3a";
  EXPECT_EQ(nq_open_prompt("who wrote hamlet"), want);
  TempDir tmp;
  tmp.write("nq_open/NQ-open.dev.jsonl",
            "{\"question\": \"where is the eiffel tower\", \"answer\": [\"Paris\", \"in Paris\"]}\n");
  DatasetSpec spec;
  spec.name = "nq_open";
  spec.path = tmp.path.string();
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 1u);
  EXPECT_EQ(ds.requests[0].prompt, "Answer these questions:\n\nQ: where is the eiffel tower?\nA:");
  EXPECT_EQ(ds.scorer, "squad");
  spec.scorer = "lm_eval_nq_open";
  EXPECT_EQ(load_dataset(spec).scorer, "lm_eval_nq_open");
  spec.scorer = "lm_eval";
  EXPECT_NE(error_of(spec).find("unknown scorer 'lm_eval'; use one of: gsm8k, squad, lm_eval_nq_open, qa, none"),
            std::string::npos);
}

TEST(SharedData, SpecBenchCategories) {
  EARS_REQUIRE_SHARED("datasets/spec_bench/question.jsonl");
  ScopedEnv env("EARS_BENCH_DATA", shared_datasets().string());  // default resolution
  DatasetSpec spec;
  spec.name = "spec_bench";
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 480u);
  EXPECT_EQ(ds.scorer, "none");
  EXPECT_EQ(ds.resolved_path, (shared_datasets() / "spec_bench" / "question.jsonl").string());
  std::map<std::string, int> cats;
  for (const auto& r : ds.requests) {
    ++cats[r.category];
    EXPECT_TRUE(r.gold.empty());
    EXPECT_FALSE(r.prompt.empty());
  }
  EXPECT_EQ(cats.size(), 13u);
  EXPECT_EQ(cats["writing"], 10);
  EXPECT_EQ(cats["translation"], 80);
  EXPECT_EQ(cats["math_reasoning"], 80);
  EXPECT_EQ(ds.requests[0].id, "spec_bench/81");
  EXPECT_EQ(ds.requests.back().id, "spec_bench/560");
  for (const auto& r : ds.requests)
    if (r.category == "translation") {
      EXPECT_EQ(r.prompt.rfind("Translate German to English: ", 0), 0u);
    }

  spec.categories = {"qa", "rag"};
  spec.offset = 70;
  spec.limit = 20;
  Dataset some = load_dataset(spec);
  ASSERT_EQ(some.requests.size(), 20u);
  EXPECT_EQ(some.requests[0].category, "qa");
  EXPECT_EQ(some.requests[0].id, "spec_bench/391");
  EXPECT_EQ(some.requests[10].category, "rag");
  spec.categories = {"poetry"};
  EXPECT_NE(error_of(spec).find("no requests in category 'poetry'"), std::string::npos);
}

TEST(SharedData, LimitAndOffset) {
  EARS_REQUIRE_SHARED("datasets/gsm8k/test.jsonl");
  DatasetSpec spec;
  spec.name = "gsm8k";
  spec.path = shared_datasets().string();  // data root: <dir>/gsm8k/test.jsonl
  spec.offset = 10;
  spec.limit = 5;
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 5u);
  EXPECT_EQ(ds.requests[0].id, "gsm8k/test/10");
  EXPECT_EQ(ds.requests[0].source_line, 11u);
  EXPECT_EQ(ds.requests[4].id, "gsm8k/test/14");
  spec.offset = 1317;
  spec.limit = 100;
  EXPECT_EQ(load_dataset(spec).requests.size(), 2u);
  spec.offset = 1319;
  EXPECT_NE(error_of(spec).find("offset 1319 is past the end (1319 requests)"),
            std::string::npos);
}

TEST(SharedData, Gsm8kFewShotUsesTrainDeterministically) {
  EARS_REQUIRE_SHARED("datasets/gsm8k/train.jsonl");
  DatasetSpec spec;
  spec.name = "gsm8k";
  spec.path = (shared_datasets() / "gsm8k" / "test.jsonl").string();
  spec.n_shot = 5;
  spec.limit = 30;
  Dataset a = load_dataset(spec);
  Dataset b = load_dataset(spec);
  ASSERT_EQ(a.requests.size(), 30u);

  std::set<std::string> train_questions;
  {
    std::ifstream in(shared_datasets() / "gsm8k" / "train.jsonl");
    std::string line;
    while (std::getline(in, line))
      train_questions.insert(nlohmann::json::parse(line)["question"].get<std::string>());
  }
  std::set<std::string> first_exemplars;
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    const std::string& p = a.requests[i].prompt;
    EXPECT_EQ(p, b.requests[i].prompt);
    // 5 exemplars + the question itself.
    std::size_t count = 0;
    for (std::size_t pos = p.find("Question: "); pos != std::string::npos;
         pos = p.find("Question: ", pos + 1))
      ++count;
    EXPECT_EQ(count, 6u);
    EXPECT_EQ(p.substr(p.size() - 8), "\nAnswer:");
    // Every exemplar question is a train question, each followed by its full solution.
    std::size_t pos = 0;
    for (int k = 0; k < 5; ++k) {
      std::size_t q = p.find("Question: ", pos) + 10;
      std::size_t e = p.find("\nAnswer: ", q);
      std::string question = p.substr(q, e - q);
      EXPECT_TRUE(train_questions.count(question)) << question;
      std::size_t end = p.find("\n\n", e);
      EXPECT_NE(p.substr(e, end - e).find("#### "), std::string::npos);
      if (k == 0) first_exemplars.insert(question);
      pos = end;
    }
  }
  EXPECT_GT(first_exemplars.size(), 20u);  // a seeded choice per request, not a fixed block

  // A request's prompt does not depend on offset/limit; it does depend on the seed.
  DatasetSpec shifted = spec;
  shifted.offset = 7;
  shifted.limit = 3;
  Dataset c = load_dataset(shifted);
  EXPECT_EQ(c.requests[0].id, "gsm8k/test/7");
  EXPECT_EQ(c.requests[0].prompt, a.requests[7].prompt);
  DatasetSpec reseeded = spec;
  reseeded.seed = 99;
  Dataset d = load_dataset(reseeded);
  int differ = 0;
  for (std::size_t i = 0; i < d.requests.size(); ++i)
    differ += d.requests[i].prompt != a.requests[i].prompt;
  EXPECT_GT(differ, 25);
}

// ---------------------------------------------------------------- errors

TEST(DatasetErrors, MissingFileNamesPathsAndFix) {
  TempDir tmp;
  ScopedEnv env("EARS_BENCH_DATA", tmp.path.string());
  DatasetSpec spec;
  spec.name = "gsm8k";
  std::string msg = error_of(spec);
  std::string expected_path = (tmp.path / "gsm8k" / "test.jsonl").string();
  EXPECT_EQ(msg.rfind("dataset 'gsm8k': file not found; looked in: " + expected_path, 0), 0u)
      << msg;
  EXPECT_NE(msg.find("Get it with: mkdir -p " + (tmp.path / "gsm8k").string() +
                     " && curl -L -o " + expected_path +
                     " https://raw.githubusercontent.com/openai/grade-school-math/master/"
                     "grade_school_math/data/test.jsonl"),
            std::string::npos)
      << msg;

  spec.name = "nq_open";
  spec.path = tmp.path.string();  // a directory: both <dir>/<file> and <dir>/<name>/<file>
  msg = error_of(spec);
  EXPECT_NE(msg.find((tmp.path / "NQ-open.dev.jsonl").string() + ", " +
                     (tmp.path / "nq_open" / "NQ-open.dev.jsonl").string()),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("google-research-datasets/natural-questions/master/nq_open/"
                     "NQ-open.dev.jsonl"),
            std::string::npos);

  spec.name = "spec_bench";
  spec.path = (tmp.path / "nope.jsonl").string();
  msg = error_of(spec);
  EXPECT_NE(msg.find("looked in: " + spec.path), std::string::npos) << msg;
  EXPECT_NE(msg.find("hemingkx/Spec-Bench/main/data/spec_bench/question.jsonl"),
            std::string::npos);
}

TEST(DatasetErrors, BadLinesReportedWithLineNumbers) {
  TempDir tmp;
  std::string good = R"({"question": "What is 2+2?", "answer": "2+2=<<2+2=4>>4\n#### 4"})";
  std::string file = tmp.write("bad.jsonl", good + "\n{\"question\": \"x\", \"answer\": \n" +
                                                R"({"question": "y"})" + "\n" + good + "\n");
  DatasetSpec spec;
  spec.name = "gsm8k";
  spec.path = file;
  std::string msg = error_of(spec);
  EXPECT_EQ(msg.rfind(file + ":2: invalid JSON (", 0), 0u) << msg;

  spec.on_error = "skip";
  Dataset ds = load_dataset(spec);
  EXPECT_EQ(ds.skipped_lines, 2u);
  ASSERT_EQ(ds.requests.size(), 2u);
  EXPECT_EQ(ds.requests[1].source_line, 4u);
  EXPECT_EQ(ds.requests[1].gold, std::vector<std::string>{"4"});

  std::string missing = tmp.write("missing.jsonl", good + "\n" + R"({"question": "y"})" + "\n");
  spec.on_error = "fail";
  spec.path = missing;
  EXPECT_EQ(error_of(spec), missing + ":2: missing field 'answer'");

  std::string no_final = tmp.write("nofinal.jsonl", R"({"question": "y", "answer": "7"})");
  spec.path = no_final;
  EXPECT_EQ(error_of(spec).rfind(no_final + ":1: field 'answer' has no final '#### <answer>'", 0),
            0u);

  std::string not_utf8 = tmp.write("latin1.jsonl", good + "\n" + good + "\n" +
                                                       "{\"question\": \"caf\xE9\", \"answer\": \"#### 1\"}\n");
  spec.path = not_utf8;
  msg = error_of(spec);
  EXPECT_EQ(msg.rfind(not_utf8 + ":3: invalid UTF-8 at byte 18", 0), 0u) << msg;

  std::string empty = tmp.write("empty.jsonl", "");
  spec.path = empty;
  EXPECT_EQ(error_of(spec), empty + ": empty file (expected one JSON object per line)");
  std::string blank = tmp.write("blank.jsonl", "\n  \n");
  spec.path = blank;
  EXPECT_NE(error_of(spec).find("empty file"), std::string::npos);

  std::string all_bad = tmp.write("allbad.jsonl", "[1]\nnull\n");
  spec.path = all_bad;
  spec.on_error = "skip";
  EXPECT_NE(error_of(spec).find("no usable records (2 bad lines skipped)"), std::string::npos);
  spec.on_error = "fail";
  EXPECT_EQ(error_of(spec), all_bad + ":1: expected a JSON object on each line");

  // CRLF line endings, a BOM and blank lines are tolerated.
  std::string crlf = tmp.write("crlf.jsonl", "\xEF\xBB\xBF" + good + "\r\n\r\n" + good + "\r\n");
  spec.path = crlf;
  Dataset ok = load_dataset(spec);
  ASSERT_EQ(ok.requests.size(), 2u);
  EXPECT_EQ(ok.requests[1].source_line, 3u);
}

TEST(DatasetErrors, BadSpecs) {
  DatasetSpec spec;
  spec.name = "gsm9k";
  EXPECT_NE(error_of(spec).find("unknown dataset 'gsm9k'; use one of: gsm8k, nq_open"),
            std::string::npos);
  spec.name = "open-stems";
  spec.on_error = "ignore";
  EXPECT_NE(error_of(spec).find("on_error must be 'fail' or 'skip'"), std::string::npos);
  spec.on_error = "fail";
  spec.n_shot = 2;
  EXPECT_NE(error_of(spec).find("n_shot is only supported for gsm8k and synth-gsm"),
            std::string::npos);
  spec.n_shot = 0;
  spec.prompt_template = "no placeholder";
  EXPECT_NE(error_of(spec).find("must contain '{question}'"), std::string::npos);
  spec.prompt_template = "";
  spec.scorer = "rouge";
  EXPECT_NE(error_of(spec).find("unknown scorer 'rouge'"), std::string::npos);
  spec.scorer = "";
  spec.name = "jsonl";
  EXPECT_NE(error_of(spec).find("needs a path"), std::string::npos);
  spec.name = "synth-gsm";
  spec.split = "dev";
  EXPECT_NE(error_of(spec).find("unknown split 'dev'"), std::string::npos);
}

// ---------------------------------------------------------------- generic jsonl

TEST(GenericJsonl, FieldMappingAndTemplate) {
  TempDir tmp;
  std::string file = tmp.write(
      "custom.jsonl",
      R"({"meta": {"text": "Capital of France", "tags": ["geo"]}, "answers": ["Paris", 75]})"
      "\n"
      R"({"meta": {"text": "Largest planet", "tags": [3]}, "answers": "Jupiter"})"
      "\n"
      R"({"meta": {"text": "Just text"}})"
      "\n");
  DatasetSpec spec;
  spec.name = "jsonl";
  spec.path = file;
  spec.prompt_field = "meta.text";
  spec.answer_field = "answers";
  spec.category_field = "meta.tags.0";
  spec.prompt_template = "Q: {question}?\nA ({question}):";
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 3u);
  EXPECT_EQ(ds.scorer, "squad");
  EXPECT_EQ(ds.requests[0].id, "jsonl/custom/0");
  EXPECT_EQ(ds.requests[0].prompt, "Q: Capital of France?\nA (Capital of France):");
  EXPECT_EQ(ds.requests[0].gold, (std::vector<std::string>{"Paris", "75"}));
  EXPECT_EQ(ds.requests[0].category, "geo");
  EXPECT_EQ(ds.requests[1].category, "3");
  EXPECT_EQ(ds.requests[1].gold, std::vector<std::string>{"Jupiter"});
  EXPECT_TRUE(ds.requests[2].gold.empty());
  EXPECT_EQ(ds.requests[2].category, "");

  spec.prompt_field = "meta.missing";
  EXPECT_EQ(error_of(spec), file + ":1: missing field 'meta.missing'");
  spec.prompt_field = "meta.tags";
  EXPECT_NE(error_of(spec).find(":1: field 'meta.tags' must be a string"), std::string::npos);
  spec.prompt_field = "meta.text";
  spec.scorer = "gsm8k";
  EXPECT_EQ(load_dataset(spec).scorer, "gsm8k");
}

// ---------------------------------------------------------------- synth-gsm

TEST(SynthGsm, DeterministicForASeed) {
  auto a = synth_gsm_pairs(200, 7, "test");
  auto b = synth_gsm_pairs(200, 7, "test");
  auto c = synth_gsm_pairs(200, 8, "test");
  ASSERT_EQ(a.size(), 200u);
  EXPECT_EQ(a, b);
  int same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == c[i];
  EXPECT_LT(same, 5);
  // Golden values pin the hash and the generator across platforms/compilers.
  EXPECT_EQ(synth_gsm_hash(""), 0xCBF29CE484222325ULL);
  EXPECT_EQ(synth_gsm_hash("a"), 0xAF63DC4C8601EC8CULL);
  EXPECT_EQ(a[0].first, "Marco buys 11 T-shirts for $19 each. How much does he spend?");
  EXPECT_EQ(a[0].second, "Marco spends 11 * 19 = $<<11*19=209>>209.\n#### 209");
  EXPECT_EQ(synth_gsm_hash(a[0].first), 0x04ED04A2B292531AULL);

  auto reqs = synth_gsm(50, 7, "test");
  ASSERT_EQ(reqs.size(), 50u);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].id, "synth-gsm/test/7/" + std::to_string(i));
    EXPECT_EQ(reqs[i].prompt, gsm8k_prompt(a[i].first, {}));
    EXPECT_EQ(reqs[i].gold, std::vector<std::string>{gsm8k_gold_from_answer(a[i].second)});
    // The reference solution scores as correct.
    EXPECT_TRUE(score("gsm8k", a[i].second, reqs[i].gold).strict);
  }
  EXPECT_THROW(synth_gsm_pairs(1, 7, "validation"), ears::Error);
}

TEST(SynthGsm, AnswersAreArithmeticallyCorrect) {
  auto pairs = synth_gsm_pairs(3000, 11, "train");
  auto reqs = synth_gsm(3000, 11, "train");
  std::map<std::string, int> steps;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& [q, a] = pairs[i];
    ASSERT_FALSE(q.empty());
    ASSERT_EQ(q.find('\n'), std::string::npos) << q;
    std::size_t n = 0;
    long long last = 0;
    for (std::size_t pos = a.find("<<"); pos != std::string::npos; pos = a.find("<<", pos + 2)) {
      std::size_t eq = a.find('=', pos), close = a.find(">>", pos);
      ASSERT_TRUE(eq != std::string::npos && close != std::string::npos && eq < close) << a;
      std::string expr = a.substr(pos + 2, eq - pos - 2);
      long long claimed = std::stoll(a.substr(eq + 1, close - eq - 1));
      auto value = Calc::eval(expr);
      ASSERT_TRUE(value.has_value()) << "bad or inexact expression '" << expr << "' in\n" << a;
      EXPECT_EQ(*value, claimed) << expr << " in\n" << a;
      EXPECT_GT(claimed, 0) << a;
      // The text after ">>" repeats the value.
      EXPECT_EQ(a.substr(close + 2, std::to_string(claimed).size()), std::to_string(claimed));
      // The expression is also shown before " = ".
      last = claimed;
      ++n;
    }
    ASSERT_GE(n, 1u) << a;
    ASSERT_LE(n, 4u) << a;
    EXPECT_EQ(gsm8k_gold_from_answer(a), std::to_string(last)) << a;
    EXPECT_EQ(a.substr(a.rfind('\n') + 1, 5), "#### ");
    EXPECT_EQ(reqs[i].category, "steps=" + std::to_string(n));
    ++steps[reqs[i].category];
  }
  for (int k = 1; k <= 4; ++k) EXPECT_GT(steps["steps=" + std::to_string(k)], 100) << k;
  EXPECT_EQ(steps.size(), 4u);
  // 2- and 3-digit numbers appear in the questions.
  int three_digit = 0;
  for (const auto& [q, a] : pairs) {
    for (std::size_t i = 0; i + 3 <= q.size(); ++i)
      if (std::isdigit(static_cast<unsigned char>(q[i])) &&
          std::isdigit(static_cast<unsigned char>(q[i + 1])) &&
          std::isdigit(static_cast<unsigned char>(q[i + 2]))) {
        ++three_digit;
        break;
      }
  }
  EXPECT_GT(three_digit, 300);
}

TEST(SynthGsm, TrainAndTestAreDisjoint) {
  auto train = synth_gsm_pairs(20000, 3, "train");
  auto test = synth_gsm_pairs(2000, 3, "test");
  auto other_seed_test = synth_gsm_pairs(2000, 4, "test");
  std::set<std::string> train_q;
  for (const auto& p : train) {
    EXPECT_EQ(synth_gsm_split_of(p.first), "train");
    train_q.insert(p.first);
  }
  EXPECT_EQ(train_q.size(), 20000u);  // no duplicates within a split
  std::set<std::string> test_q;
  for (const auto& v : {test, other_seed_test})
    for (const auto& p : v) {
      EXPECT_EQ(synth_gsm_split_of(p.first), "test");
      EXPECT_EQ(train_q.count(p.first), 0u) << p.first;
      test_q.insert(p.first);
    }
  EXPECT_GT(test_q.size(), 3900u);
}

TEST(SynthGsm, ThroughLoadDataset) {
  DatasetSpec spec;
  spec.name = "synth-gsm";
  spec.synth_n = 40;
  spec.seed = 5;
  spec.offset = 10;
  spec.limit = 10;
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 10u);
  EXPECT_EQ(ds.scorer, "gsm8k");
  EXPECT_EQ(ds.requests[0].id, "synth-gsm/test/5/10");
  EXPECT_TRUE(ds.resolved_path.empty());

  spec.n_shot = 3;
  Dataset few = load_dataset(spec);
  ASSERT_EQ(few.requests.size(), 10u);
  auto test_pairs = synth_gsm_pairs(40, 5, "test");
  for (std::size_t i = 0; i < few.requests.size(); ++i) {
    const std::string& p = few.requests[i].prompt;
    EXPECT_EQ(p.rfind("Question: ", 0), 0u);
    EXPECT_EQ(p.substr(p.size() - 8), "\nAnswer:");
    EXPECT_NE(p.find("Question: " + test_pairs[10 + i].first + "\nAnswer:"), std::string::npos);
    EXPECT_EQ(few.requests[i].gold, ds.requests[i].gold);
  }
  EXPECT_EQ(load_dataset(spec).requests[3].prompt, few.requests[3].prompt);
}

// ---------------------------------------------------------------- open-stems

TEST(OpenStems, ManyDistinctSingleLineStems) {
  const auto& stems = open_stems();
  EXPECT_GE(stems.size(), 120u);
  std::set<std::string> distinct(stems.begin(), stems.end());
  EXPECT_EQ(distinct.size(), stems.size());
  for (const auto& s : stems) {
    EXPECT_GE(s.size(), 10u) << s;
    EXPECT_EQ(s.find('\n'), std::string::npos);
    EXPECT_NE(s.back(), ' ');
  }
  DatasetSpec spec;
  spec.name = "open-stems";
  spec.limit = 7;
  Dataset ds = load_dataset(spec);
  ASSERT_EQ(ds.requests.size(), 7u);
  EXPECT_EQ(ds.scorer, "none");
  EXPECT_EQ(ds.requests[2].id, "open-stems/2");
  EXPECT_EQ(ds.requests[2].prompt, stems[2]);
  EXPECT_EQ(ds.requests[2].category, "stem");
  EXPECT_TRUE(ds.requests[2].gold.empty());
}
