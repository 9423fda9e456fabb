// Answer scoring: GSM8K (lm-evaluation-harness gsm8k.yaml v3 conventions) and open-domain QA
// (two conventions: the SQuAD v1.1 evaluation script, and lm-eval's nq_open.yaml v4.0).
// Torch-free. The scorers are one table, kScorerTable below; Dataset::scorer and the config's
// dataset.scorer name a row of it.
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
// QA, scorer "squad" (SQuAD v1.1 evaluate-v1.1.py): normalize_answer = lower-case (Python
// str.lower) -> drop ASCII punctuation (string.punctuation) -> replace whole-word a/an/the by
// a space -> collapse white space. Exact match and bag-of-tokens F1, each the max over the
// gold answers.
//
// QA, scorer "lm_eval_nq_open" (lm-eval nq_open.yaml, metadata version 4.0): the output's
// leading white space is removed (filter remove_whitespace = str.lstrip), then prediction and
// each gold go through exact_match_hf_evaluate with regexes_to_ignore = the one regex
// `\b(?:The |the |An |A |The |a |an )`, ignore_case and ignore_punctuation, in that order:
// re.sub(regex, "") -> numpy np.char.lower -> delete string.punctuation -> compare the strings
// exactly (no strip, no white-space collapsing). Correct when any gold matches. lm-eval defines
// no F1 for this task: f1 = em.
#pragma once
#include <array>
#include <cstddef>
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

// SQuAD normalize_answer (see top of file). Lower-casing is utf8::lower (Python's str.lower,
// incl. the final sigma); invalid UTF-8 becomes U+FFFD first.
std::string normalize_answer(std::string_view text);
// Normalised tokens (normalize_answer split on spaces).
std::vector<std::string> answer_tokens(std::string_view text);
// 1.0 / 0.0: normalize_answer(prediction) == normalize_answer(gold).
double qa_exact_match(std::string_view prediction, std::string_view gold);
// Token F1 (SQuAD v1.1 f1_score): with num_same = the size of the multiset intersection of the
// tokens, 0.0 when num_same == 0, else 2PR/(P+R). So v1.1 never divides by zero: an empty side
// has num_same == 0 and scores 0.0 -- except that we score 1.0 when BOTH sides normalise to no
// tokens (the SQuAD v2.0 rule; v1.1 gives 0.0 there, e.g. prediction "the" vs gold "a").
// NQ-open gold answers never normalise to nothing, so this only matters for hand-made data.
double qa_f1(std::string_view prediction, std::string_view gold);
// True when the normalised tokens of `gold` occur as a contiguous run in the normalised
// tokens of `prediction` (lenient "answer contained" check for chatty models).
bool qa_contains(std::string_view prediction, std::string_view gold);

struct Score {
  bool strict = false;    // gsm8k: strict-match correct;     qa: exact match (em == 1)
  bool flexible = false;  // gsm8k: flexible-extract correct; squad: some gold contained
                          // (qa_contains); lm_eval_nq_open: = strict
  double em = 0;          // gsm8k: strict ? 1 : 0;           qa: max exact match over gold
  double f1 = 0;          // gsm8k: same as em;               squad: max token F1 over gold;
                          // lm_eval_nq_open: same as em
};

// lm-eval nq_open's normalisation of one string (regexes_to_ignore, lower-case, punctuation;
// see the top of the file). `width` reproduces numpy: np.char.lower keeps the array's
// fixed-width dtype, so a string that grows when lower-cased (only U+0130 does: İ -> i +
// U+0307) is cut to `width` code points. lm-eval passes the prediction repeated once per gold
// and the gold list as two arrays, so width = the prediction's own length, for each gold the
// longest gold's (both counted after the regex). 0 = no cut.
std::string lm_eval_nq_open_normalize(std::string_view text, std::size_t width = 0);
// lm-eval's exact_match for nq_open: 1.0 when the lstripped prediction equals any gold after
// the normalisation above (with numpy's widths), else 0.0.
double lm_eval_nq_open_exact_match(std::string_view prediction,
                                   const std::vector<std::string>& gold);

// The scorers. `output` is scored as given: truncate it at the stop strings first if the
// generator did not (apply_stop_strings in datasets/dataset.h). Empty gold -> all false / 0.
Score score_gsm8k(std::string_view output, const std::vector<std::string>& gold);
Score score_squad(std::string_view output, const std::vector<std::string>& gold);
Score score_lm_eval_nq_open(std::string_view output, const std::vector<std::string>& gold);
Score score_none(std::string_view output, const std::vector<std::string>& gold);

struct ScorerDef {
  std::string_view name;  // the value of dataset.scorer / Dataset::scorer
  std::string_view what;  // one line for docs and messages
  Score (*fn)(std::string_view output, const std::vector<std::string>& gold);
};
// The one table of scorers. "qa" is the earlier name of "squad", kept so that existing configs
// and reports still read.
inline constexpr std::array<ScorerDef, 5> kScorerTable = {{
    {"gsm8k", "lm-eval gsm8k strict-match / flexible-extract", &score_gsm8k},
    {"squad", "SQuAD v1.1 normalize_answer: exact match and token F1", &score_squad},
    {"lm_eval_nq_open", "lm-eval nq_open v4.0 exact_match", &score_lm_eval_nq_open},
    {"qa", "= squad (earlier name)", &score_squad},
    {"none", "no scoring (throughput only)", &score_none},
}};
// The scorer names, in table order (for enum validation).
constexpr std::array<std::string_view, kScorerTable.size()> scorer_names() {
  std::array<std::string_view, kScorerTable.size()> out{};
  for (std::size_t i = 0; i < kScorerTable.size(); ++i) out[i] = kScorerTable[i].name;
  return out;
}
// The row named `name`, or nullptr.
const ScorerDef* find_scorer(std::string_view name);
// "gsm8k, squad, lm_eval_nq_open, qa, none" (for messages).
std::string scorer_list(std::string_view sep = ", ");

// Scores with the scorer named `scorer` (a kScorerTable row); unknown -> ears::Error.
Score score(const std::string& scorer, const std::string& output,
            const std::vector<std::string>& gold);

}  // namespace ears
