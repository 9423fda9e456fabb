// libFuzzer target: the answer extractors and QA metrics (datasets/scoring.h) on arbitrary text:
// GSM8K strict / flexible extraction and normalisation, SQuAD normalize_answer, exact match and
// token F1, lm-eval nq_open exact match. Invariants: F1 and EM in [0, 1]; EM(x, x) = 1 when x
// normalises to something; normalize_answer is idempotent; lm-eval EM(x, {x}) = 1 when x does
// not start with white space (only the prediction is lstripped). (lm-eval's GSM8K normalisation is not: it strips one trailing
// '.', so "5.." -> "5." -> "5"; we keep that behaviour and do not assert it.)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "datasets/scoring.h"
#include "harness/base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t cut = all.find('\t');
  const std::string_view a = all.substr(0, cut), b = cut == std::string_view::npos ? std::string_view() : all.substr(cut + 1);
  try {
    const std::string strict = ears::gsm8k_strict_extract(a), flexible = ears::gsm8k_flexible_extract(a);
    (void)ears::gsm8k_normalize(strict);
    (void)ears::gsm8k_gold_from_answer(b);
    (void)flexible;
    const double em = ears::qa_exact_match(a, b), f1 = ears::qa_f1(a, b);
    if (!(em >= 0 && em <= 1 && f1 >= 0 && f1 <= 1)) std::abort();
    if (!ears::normalize_answer(a).empty() && ears::qa_exact_match(a, a) != 1.0) std::abort();
    const std::string n = ears::normalize_answer(a);
    if (ears::normalize_answer(n) != n) std::abort();
    const double lm = ears::lm_eval_nq_open_exact_match(a, {std::string(b)});
    if (lm != 0.0 && lm != 1.0) std::abort();
    // With a second, longer gold the İ width cut can differ (numpy), so only {a} alone here.
    if ((a.empty() || (a[0] > ' ' && a[0] < 0x7F)) && ears::lm_eval_nq_open_exact_match(a, {std::string(a)}) != 1.0)
      std::abort();
  } catch (const ears::Error&) {
  }
  return 0;
}
