// Answer scoring: GSM8K (lm-evaluation-harness gsm8k.yaml v3 conventions) and open-domain QA
// (SQuAD v1.1 evaluation script conventions). Torch-free.
//
// GSM8K, as lm-eval does it:
//   strict-match     regex `#### (\-?[0-9\.\,]+)`, FIRST match, group 1.
//   flexible-extract regex `(-?[$0-9.,]{2,})|(-?[0-9]+)`, LAST match, first non-empty group,
//                    whitespace-stripped.
//   No match -> "[invalid]" (always wrong).
//   Both the extracted text and the gold are normalised with gsm8k_normalize and compared as
//   strings (lm-eval's exact_match). Numbers are NOT compared numerically: "18.00" != "18",
//   "18.5" != "18.50" -- exactly like lm-eval, so our accuracies are comparable to theirs.
//
// QA (NQ-open): normalize_answer = lower-case -> drop ASCII punctuation (Python
// string.punctuation) -> replace whole-word a/an/the by a space -> collapse white space.
// Exact match and bag-of-tokens F1, each the max over the gold answers.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ears {

inline constexpr std::string_view kInvalidAnswer = "[invalid]";

// The GSM8K gold final answer: the text after the LAST "####" of a reference solution,
// white-space stripped ("... \n#### 1,000" -> "1,000"). Empty when there is no "####".
std::string gsm8k_gold_from_answer(std::string_view reference_answer);

// lm-eval strict-match: group 1 of the first `#### (\-?[0-9\.\,]+)` match, or "[invalid]".
std::string gsm8k_strict_extract(std::string_view output);
// lm-eval flexible-extract: last match of `(-?[$0-9.,]{2,})|(-?[0-9]+)`, first non-empty
// group, stripped; or "[invalid]".
std::string gsm8k_flexible_extract(std::string_view output);
// lm-eval exact_match normalisation, in lm-eval's order: remove every ",", every "$",
// everything up to and including the last "#### ", one trailing "." (Python `\.$`, which also
// matches before a final "\n"); then lower-case.
std::string gsm8k_normalize(std::string_view text);

// SQuAD normalize_answer (see top of file). Lower-casing covers ASCII, Latin-1, Latin
// Extended-A, Greek and Cyrillic (enough for NQ answers); invalid UTF-8 becomes U+FFFD first.
std::string normalize_answer(std::string_view text);
// Normalised tokens (normalize_answer split on spaces).
std::vector<std::string> answer_tokens(std::string_view text);
// 1.0 / 0.0: normalize_answer(prediction) == normalize_answer(gold).
double qa_exact_match(std::string_view prediction, std::string_view gold);
// Token F1 (SQuAD v1.1). When either side normalises to no tokens: 1.0 if both do, else 0.0
// (the SQuAD v2.0 rule; v1.1 would divide by zero).
double qa_f1(std::string_view prediction, std::string_view gold);
// True when the normalised tokens of `gold` occur as a contiguous run in the normalised
// tokens of `prediction` (lenient "answer contained" check for chatty models).
bool qa_contains(std::string_view prediction, std::string_view gold);

struct Score {
  bool strict = false;    // gsm8k: strict-match correct;     qa: exact match (em == 1)
  bool flexible = false;  // gsm8k: flexible-extract correct; qa: some gold contained (qa_contains)
  double em = 0;          // gsm8k: strict ? 1 : 0;           qa: max exact match over gold
  double f1 = 0;          // gsm8k: same as em;               qa: max token F1 over gold
};

// scorer: "gsm8k" | "qa" | "none" (Dataset::scorer). "none" or empty gold -> all false / 0.
// Unknown scorer -> ears::Error. `output` is scored as given: truncate it at the stop strings
// first if the generator did not (apply_stop_strings in datasets/dataset.h).
Score score(const std::string& scorer, const std::string& output,
            const std::vector<std::string>& gold);

}  // namespace ears
