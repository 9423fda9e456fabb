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

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "reports/fields.h"

namespace ears {

inline constexpr int kUncertaintyDeciles = 10;  // deciles of u = 1 - max p_target

// A result's identity: one arm's generation for one request, one repeat. At most one result per
// key in a run (--resume skips the keys done) and in a merge of shards.
struct ResultKey {
  std::string arm;
  std::string request_id;
  int repeat = 0;
  friend auto operator<=>(const ResultKey&, const ResultKey&) = default;
};

struct RequestResult {
  // identity (key(): arm, request_id, repeat)
  std::string run_id;
  std::string arm;
  std::string request_id;
  int repeat = 0;
  uint64_t seed = 0;
  std::string category;
  ResultKey key() const { return {arm, request_id, repeat}; }

  // sizes and timings (seconds, device synchronised)
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double latency_s = 0;
  double start_s = 0;  // the batch's start, s since the Unix epoch; 0 = not recorded
  double ttft_s = 0;
  double prefill_s = 0, draft_s = 0, verify_s = 0, other_s = 0;

  // speculative step statistics
  int gamma = 0;
  int64_t steps = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  int64_t corrections = 0;
  int64_t bonus = 0;
  int64_t pardoned = 0;
  std::vector<int64_t> accepted_per_position;
  std::vector<int64_t> accept_length_hist;
  // per decile d of u = 1 - max p_target at a judged draft position (up to a step's first
  // rejection): floor(10u) clamped to 9.
  std::vector<int64_t> drafted_by_uncertainty = std::vector<int64_t>(kUncertaintyDeciles, 0);
  std::vector<int64_t> accepted_by_uncertainty = std::vector<int64_t>(kUncertaintyDeciles, 0);
  std::vector<int64_t> pardoned_by_uncertainty = std::vector<int64_t>(kUncertaintyDeciles, 0);
  double distortion_tv_sum = 0;
  int64_t distortion_positions = 0;
  double uncertainty_sum = 0;
  int64_t uncertainty_count = 0;

  // output
  std::string text;
  std::vector<int64_t> output_ids;

  // score (has_score = false: dataset without gold answers)
  bool has_score = false;
  bool correct = false;
  bool strict_correct = false;
  bool flexible_correct = false;
  double em = 0, f1 = 0;

  std::string error;

  // The field list (reports/fields.h): results.jsonl keys in order. Absent keys read as the
  // defaults above; a wrong type is an ears::Error naming the key.
  using FieldListTag = void;
  template <class S, class V>
  static void fields(S& r, V& v) {
    constexpr unsigned req = kFieldRequired, nonneg = kFieldNonNegative, varies = kFieldVaries;
    v("run_id", r.run_id, "the run that produced the result", varies);
    v("arm", r.arm, "arm name", req);
    v("request_id", r.request_id, "dataset request id", req);
    v("repeat", r.repeat, "repeat index (0-based)", 0);
    v("seed", r.seed, "sampling seed of this request", 0);
    v("category", r.category, "dataset category (Spec-Bench task, ...); may be empty", 0);
    v("prompt_tokens", r.prompt_tokens, "prompt length in tokens", nonneg);
    v("output_tokens", r.output_tokens, "tokens the user got (after stop-string / max-token truncation)", req | nonneg);
    v("latency_s", r.latency_s, "request start (before prefill) to last token, s; null = NaN",
      req | nonneg | kFieldNullIsNaN | varies);
    v("start_s", r.start_s,
      "when the request's batch started, s since the Unix epoch: the requests decoded together share it "
      "(0 = not recorded)", nonneg | varies);
    v("ttft_s", r.ttft_s, "request start to first token, s", nonneg | varies);
    v("prefill_s", r.prefill_s, "time in the prefill, s", nonneg | varies);
    v("draft_s", r.draft_s, "time in the drafter, s (0 without one: target-only)", nonneg | varies);
    v("verify_s", r.verify_s, "time in target verification, s", nonneg | varies);
    v("other_s", r.other_s, "the rest of the latency, s", nonneg | varies);
    v("gamma", r.gamma, "draft length γ (0 for target-only)", 0);
    v("steps", r.steps, "target verification forwards (decode steps for target-only)", nonneg);
    v("drafted", r.drafted, "draft tokens proposed", nonneg);
    v("accepted", r.accepted, "draft tokens accepted", nonneg);
    v("corrections", r.corrections, "steps that ended with a rejected draft (one replacement token)", nonneg);
    v("bonus", r.bonus, "steps where all drafts passed (one bonus token; every target-only token)", nonneg);
    v("pardoned", r.pardoned, "accepted tokens the exact (baseline) rule would have rejected", nonneg);
    v("accepted_per_position", r.accepted_per_position,
      "[k] = steps in which draft position k (0-based) was accepted; size γ", 0);
    v("accept_length_hist", r.accept_length_hist, "[n] = steps that emitted n tokens; size γ+2 (n = 0..γ+1)", 0);
    v("drafted_by_uncertainty", r.drafted_by_uncertainty, "judged draft positions per decile of u", kFieldDeciles);
    v("accepted_by_uncertainty", r.accepted_by_uncertainty, "accepted draft tokens per decile of u", kFieldDeciles);
    v("pardoned_by_uncertainty", r.pardoned_by_uncertainty, "pardoned draft tokens per decile of u", kFieldDeciles);
    v("distortion_tv_sum", r.distortion_tv_sum, "Σ over verified positions of TV(induced distribution, p_target)",
      nonneg);
    v("distortion_positions", r.distortion_positions, "positions in distortion_tv_sum", nonneg);
    v("uncertainty_sum", r.uncertainty_sum, "Σ u over judged draft positions", nonneg);
    v("uncertainty_count", r.uncertainty_count, "positions in uncertainty_sum", nonneg);
    v("text", r.text, "the output text", 0);
    v("output_ids", r.output_ids, "the output token ids; optional, omitted when empty", kFieldOmitEmpty);
    v("has_score", r.has_score, "the dataset has gold answers for this request", 0);
    v("correct", r.correct, "the primary metric chosen by the dataset's scorer", 0);
    v("strict_correct", r.strict_correct, "GSM8K strict-match", 0);
    v("flexible_correct", r.flexible_correct, "GSM8K flexible-extract", 0);
    v("em", r.em, "QA exact match (max over gold answers)", 0);
    v("f1", r.f1, "QA token F1 (max over gold answers)", 0);
    v("error", r.error, "non-empty = the request failed (e.g. NaN logits); excluded from metrics", 0);
  }

  int64_t emitted() const { return accepted + corrections + bonus; }
  // The decoding: the tokens after the first (which the prefill gives) and the time they took.
  int64_t decoded_tokens() const { return output_tokens > 1 ? output_tokens - 1 : 0; }
  double decode_s() const { return draft_s + verify_s + other_s; }
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
