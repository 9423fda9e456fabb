// Tests for datasets/ scoring: GSM8K extraction, SQuAD / lm-eval QA scorers, Unicode lower-casing,
// stop strings.
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
