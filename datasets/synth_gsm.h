// synth-gsm: a seeded generator of GSM8K-format word problems. Torch-free.
//
// Each problem is a (question, answer) pair where the answer is a GSM8K-style worked solution:
// one line per arithmetic step with a calculator annotation "expr = <<expr=value>>value",
// then "#### <final>". 14 templates (shopping, change, time, speed/distance, sharing, baking,
// saving, animal legs, ages, machine rates, discounts, gardening, tickets, reading, unit
// prices) with 1-4 steps using + - * / (divisions are always exact), integers only.
//
// Determinism: a splitmix64 stream seeded with `seed` (no std:: distributions), so output is
// identical on every platform and compiler.
//
// Train/test split: a problem is "test" iff fnv1a64(question) % 10 == 0, otherwise "train".
// Both splits walk the same candidate stream for a seed and keep the candidates of their
// split (duplicates within a call are dropped), so train and test can never share a question
// -- for the same seed or any other.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/tasks.h"

namespace ears {

// FNV-1a 64-bit hash of the question text; synth_gsm_split_of() = "test" iff hash % 10 == 0.
uint64_t synth_gsm_hash(std::string_view question);
std::string synth_gsm_split_of(std::string_view question);

// n (question, answer) pairs of the given split ("train" | "test"; anything else throws
// ears::Error).
std::vector<std::pair<std::string, std::string>> synth_gsm_pairs(std::size_t n, uint64_t seed,
                                                                 const std::string& split);

// The same problems as task docs: key "<split>/<seed>/<i>", question, solution (= the answer),
// gold = {final answer}, category "steps=K" (K = number of annotated steps, 1..4).
std::vector<Doc> synth_gsm_problems(std::size_t n, uint64_t seed, const std::string& split);

// The same problems as Requests: id "synth-gsm/<split>/<seed>/<i>", zero-shot gsm8k prompt,
// gold and category as synth_gsm_problems.

std::vector<Request> synth_gsm(std::size_t n, uint64_t seed, const std::string& split);

}  // namespace ears
