// One finished request of one arm: the unit of results.jsonl (one JSON object per line,
// flushed as each request finishes). Torch-free.
//
// Step accounting (the same as vLLM / Spec-Bench, see docs/report-schema.md):
//   - a *step* is one target verification forward (for the target-only arm: one decode step);
//     the token sampled from the prefill logits belongs to no step;
//   - every step emits  accepted draft tokens  +  one correction (a draft was rejected) or one
//     bonus token (all drafts passed; the target-only arm's token is a bonus);
//   - emitted() = accepted + corrections + bonus;  τ = Σ emitted / Σ steps ∈ [1, γ+1];
//   - output_tokens is what the user got (after stop-string / max-token truncation), so
//     output_tokens <= emitted() + 1 (the +1 is the prefill token).
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ears {

inline constexpr int kUncertaintyDeciles = 10;  // deciles of u = 1 - max p_target

struct RequestResult {
  // identity
  std::string run_id;
  std::string arm;
  std::string request_id;
  int repeat = 0;
  uint64_t seed = 0;
  std::string category;  // dataset category (Spec-Bench task, ...); may be empty

  // sizes and timings (seconds, device synchronised)
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double latency_s = 0;  // request start (before prefill) to last token
  double ttft_s = 0;     // request start to first token
  double prefill_s = 0, draft_s = 0, verify_s = 0, other_s = 0;

  // speculative step statistics
  int gamma = 0;  // draft length γ (0 for target-only)
  int64_t steps = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  int64_t corrections = 0;
  int64_t bonus = 0;
  int64_t pardoned = 0;  // accepted tokens the exact (baseline) rule would have rejected
  // [k] = number of steps in which draft position k (0-based) was accepted; size γ.
  std::vector<int64_t> accepted_per_position;
  // [n] = number of steps that emitted n tokens; size γ+2 (n = 0..γ+1).
  std::vector<int64_t> accept_length_hist;
  // per decile d of u = 1 - max p_target at the drafted position: floor(10u) clamped to 9.
  std::vector<int64_t> drafted_by_uncertainty = std::vector<int64_t>(kUncertaintyDeciles, 0);
  std::vector<int64_t> accepted_by_uncertainty = std::vector<int64_t>(kUncertaintyDeciles, 0);
  std::vector<int64_t> pardoned_by_uncertainty = std::vector<int64_t>(kUncertaintyDeciles, 0);
  // Σ over verified positions of TV(induced distribution, p_target), and how many positions.
  double distortion_tv_sum = 0;
  int64_t distortion_positions = 0;
  // Σ u over drafted positions, and how many (mean_uncertainty = sum / count).
  double uncertainty_sum = 0;
  int64_t uncertainty_count = 0;

  // output
  std::string text;
  std::vector<int64_t> output_ids;  // optional; omitted from JSON when empty

  // score (has_score = false: dataset without gold answers)
  bool has_score = false;
  bool correct = false;           // the primary metric chosen by the dataset's scorer
  bool strict_correct = false;    // GSM8K strict-match
  bool flexible_correct = false;  // GSM8K flexible-extract
  double em = 0, f1 = 0;          // QA exact match / token F1 (max over gold answers)

  std::string error;  // non-empty = the request failed (e.g. NaN logits); excluded from metrics

  int64_t emitted() const { return accepted + corrections + bonus; }
  bool ok() const { return error.empty(); }
  // Throws ears::Error naming `where` (e.g. "runs/x/results.jsonl:12") and the broken
  // invariant when the counters are inconsistent (emitted = accepted + corrections + bonus, ...).
  void validate(const std::string& where = "result") const;
};

void to_json(nlohmann::json& j, const RequestResult& r);
void from_json(const nlohmann::json& j, RequestResult& r);

// One results.jsonl line (compact JSON + '\n').
std::string result_to_jsonl_line(const RequestResult& r);

}  // namespace ears
