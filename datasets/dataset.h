// Evaluation datasets -> Requests {id, prompt text, gold}. Torch-free.
//
// Datasets (DatasetSpec::name; the registry of their files, prompts, stops and scorers is
// datasets/tasks.h kTaskTable):
//   gsm8k       {"question","answer"} JSONL (openai/grade-school-math). gold = text after the
//               last "####". Zero-shot prompt: the question + kGsm8kInstruction (asks for a
//               final "#### <number>" line, so strict-match can score it). n-shot (lm-eval
//               gsm8k.yaml): n exemplars "Question: {q}\nAnswer: {a}\n\n" (a = full reference
//               solution incl. <<..>> annotations and "#### n") from the TRAIN file, then
//               "Question: {q}\nAnswer:". Exemplars are a seeded choice per request: n
//               distinct train rows drawn with splitmix64 from (spec.seed, the request's index
//               in its file), never the request's own question; so a request's prompt does not
//               depend on limit/offset. scorer "gsm8k".
//   nq_open     {"question","answer":[...]} (NQ-open dev). Prompt byte-equal to lm-eval
//               nq_open.yaml (version 4.0) zero-shot: description + doc_to_text =
//               "Answer these questions:\n\nQ: {question}?\nA:" (nq_open_prompt). gold = the
//               answer list. scorer "squad" (or dataset.scorer lm_eval_nq_open). No n-shot.
//   spec_bench  Spec-Bench question.jsonl: prompt = turns[0], category = "category", id =
//               "spec_bench/<question_id>". Throughput only (gold empty, scorer "none").
//   jsonl       any JSONL: prompt_field (default "prompt", required on every line),
//               answer_field (default "answer": string | number | list; absent = no gold),
//               category_field (default "category": string | number; absent = ""). Fields may
//               be dotted paths with array indices ("turns.0"). scorer: spec.scorer, else "squad"
//               when any line has gold, else "none".
//   synth-gsm   generated GSM8K-format problems (datasets/synth_gsm.h), spec.synth_n of them
//               for spec.seed and split train|test; prompts as gsm8k (n-shot exemplars come
//               from the synthetic train split). scorer "gsm8k".
//   open-stems  the built-in story / word-problem openings (datasets/open_stems.h); prompt =
//               the stem, category "stem", throughput only.
//
// File resolution (gsm8k, nq_open, spec_bench): spec.path if set (a file, or a directory
// holding <file> or <name>/<file>); else bench_data_root()/<name>/<file>, with <file> =
// test.jsonl | train.jsonl (gsm8k by split), NQ-open.dev.jsonl (nq_open; split train ->
// NQ-open.train.jsonl), question.jsonl (spec_bench). A missing file is an ears::Error that
// lists the paths tried and a one-line download command.
//
// JSONL reading: UTF-8 validated per line (a leading BOM and "\r\n" are accepted, blank lines
// ignored); bad lines (invalid UTF-8 or JSON, missing/ill-typed field) fail with
// "file:LINE: ..." or, with on_error = "skip", are counted in Dataset::skipped_lines. A file
// without records, or with none left after skipping, is an error.
//
// Order of operations: load all -> keep `categories` (if any) -> skip `offset` -> take `limit`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ears {

struct Request {
  std::string id;        // stable: "gsm8k/test/17" (0-based row), "nq_open/dev/3",
                         // "spec_bench/81" (question_id), "jsonl/<file stem>/5",
                         // "synth-gsm/test/<seed>/12", "open-stems/7"
  std::string prompt;    // user-message text, before any chat template
  std::vector<std::string> gold;  // GSM8K: one final answer (as written, e.g. "1,000");
                                  // NQ: list; empty = throughput only
  std::string category;  // spec_bench / jsonl category, "steps=K" (synth-gsm), "stem",
                         // else the dataset name
  std::size_t source_line = 0;  // 1-based line in the source file; 0 for generated data
};

struct DatasetSpec {
  std::string name;   // gsm8k | nq_open | spec_bench | jsonl | synth-gsm | open-stems
  std::string path;   // file or dir, may be empty
  std::string split = "test";  // gsm8k, synth-gsm: train | test; nq_open: test|dev|validation
                               // (all = dev) | train; spec_bench: test. Empty = "test".
  std::size_t limit = 0;       // 0 = all
  std::size_t offset = 0;
  int n_shot = 0;              // gsm8k / synth-gsm only
  uint64_t seed = 0;           // n-shot exemplar choice; synth-gsm generation
  std::size_t synth_n = 200;   // synth-gsm: number of problems generated (before offset/limit)
  std::string on_error = "fail";  // fail | skip
  std::string prompt_field, answer_field, category_field;  // jsonl mapping (empty = defaults)
  // Optional override of the per-question prompt format; must contain "{question}" (every
  // occurrence is replaced). With n_shot > 0 the exemplar block is still prepended.
  std::string prompt_template;
  std::string scorer;                   // override: a kScorerTable name (datasets/scoring.h):
                                        // gsm8k | squad | lm_eval_nq_open | qa (= squad) | none;
                                        // empty = the dataset's default
  std::vector<std::string> categories;  // keep only these categories (empty = all)
};

struct Dataset {
  std::vector<Request> requests;
  std::size_t skipped_lines = 0;
  std::string resolved_path;  // the file read ("" for generated datasets)
  std::string scorer;         // a kScorerTable name: "gsm8k" | "squad" | "none" by default
};

// Zero-shot GSM8K instruction appended to the question (after a "\n").
inline constexpr std::string_view kGsm8kInstruction =
    "Please reason step by step, and write the final answer as a number on the last line in "
    "the form \"#### <number>\".";

// lm-eval nq_open.yaml (version 4.0) `description`, the start of every zero-shot NQ-open
// prompt. (Earlier lm-eval versions had one "\n".)
inline constexpr std::string_view kNqOpenDescription = "Answer these questions:\n\n";
// The NQ-open prompt: kNqOpenDescription + doc_to_text "Q: {question}?\nA:". With
// prompt_format: chat the whole text is the user turn (lm-eval --apply_chat_template would put
// the description in a system turn instead).
std::string nq_open_prompt(const std::string& question);

Dataset load_dataset(const DatasetSpec& spec);

// The (question, full reference solution) pairs of spec's file (spec.name, path, split, on_error
// as load_dataset; no offset, limit or categories): the n-shot exemplars' source, and the
// trainer's GSM8K corpus (harness/train/corpus.cpp).
std::vector<std::pair<std::string, std::string>> load_solutions(const DatasetSpec& spec);

// Dataset names accepted by load_dataset.
const std::vector<std::string>& dataset_names();

// $EARS_BENCH_DATA when set and non-empty, else "data" (relative to the working directory).
std::string bench_data_root();

// Stop strings for a dataset (lm-eval generation_kwargs.until):
//   gsm8k / synth-gsm, n_shot > 0: "Question:", "</s>", "<|im_end|>"   (gsm8k.yaml)
//   gsm8k / synth-gsm, zero-shot:  "</s>", "<|im_end|>"   (the answer spans several lines)
//   nq_open: "\n", ".", ","   (nq_open.yaml)
//   others: none (generation ends at eos / max_new_tokens).
std::vector<std::string> default_stop_strings(const std::string& name, int n_shot);

// `text` cut at the earliest occurrence of any stop string (the stop string removed).
std::string apply_stop_strings(std::string_view text, const std::vector<std::string>& stops);

// Builds the gsm8k-style prompt (shared by gsm8k and synth-gsm): exemplars are
// (question, full answer) pairs; template as DatasetSpec::prompt_template.
std::string gsm8k_prompt(const std::string& question,
                         const std::vector<std::pair<std::string, std::string>>& exemplars,
                         const std::string& prompt_template = "");

}  // namespace ears
