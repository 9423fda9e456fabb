// The training text: synth-gsm problems (datasets/synth_gsm.h) in the benchmark's zero-shot chat
// format, GSM8K train rows when found, the open stems (datasets/open_stems.h); the documents the
// target and the EAGLE-3 head train on (token ids with a loss weight each), and the BPE tokenizer
// trained on that text (harness/train/bpe_trainer.h).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "harness/train/bpe_trainer.h"

namespace ears {

class Tokenizer;
using LogFn = std::function<void(const std::string&)>;

struct CorpusOptions {
  uint64_t seed = 0;           // synth-gsm generation seed (train split)
  std::size_t synth_n = 40000; // synth-gsm train problems
  // GSM8K train.jsonl: a file or a directory holding it (or gsm8k/train.jsonl). "" = look in
  // $EARS_BENCH_DATA/gsm8k, data/gsm8k and ../shared/datasets/gsm8k; "none" = do not use it.
  std::string gsm8k_train;
};

// Resolved GSM8K train file, "" when not found (or disabled with "none").
std::string find_gsm8k_train(const std::string& hint);
// (question, solution) rows of a GSM8K train file, read as the benchmark reads it (load_solutions).
std::vector<std::pair<std::string, std::string>> read_gsm8k_train(const std::string& path);

// Text for the BPE trainer: synth-gsm problems in their zero-shot prompt format + worked answer,
// GSM8K train questions and solutions (when found), and the open stems.
std::vector<std::string> tokenizer_corpus(const CorpusOptions& options);

// The synth-gsm user message as the benchmark builds it (zero-shot gsm8k prompt).
std::string synth_user_message(const std::string& question);
// The id of a special token the training documents need; fails naming the tokenizer file.
int32_t need_token(const Tokenizer& tok, const char* name);

// ids with a loss weight per token: weight[i] scales the loss of predicting ids[i] from ids[<i].
struct TrainDoc {
  std::vector<int32_t> ids;
  std::vector<float> weight;
};
// Chat document: qwen3_chat_prompt(gsm8k zero-shot prompt(question), thinking off) + answer +
// "<|im_end|>" (exactly what the benchmark's chat prompt + a stop at eos looks like). Prompt
// tokens get prompt_weight, the answer and <|im_end|> weight 1.
TrainDoc chat_doc(const Tokenizer& tok, const std::string& question, const std::string& answer, float prompt_weight);
// Plain text followed by <|endoftext|>, every token weight 1.
TrainDoc text_doc(const Tokenizer& tok, const std::string& text);

struct DocPools {
  std::vector<TrainDoc> chat;     // synth-gsm chat documents
  std::vector<TrainDoc> natural;  // GSM8K train "question\nanswer" (or synth-gsm raw text)
  std::string natural_source;     // the GSM8K file used, or "synth-gsm raw"
};
DocPools build_doc_pools(const Tokenizer& tok, const CorpusOptions& options, float prompt_weight);

// ---- the tokenizer (ears-bench train tokenizer) ----------------------------------------------

struct TokenizerTrainOptions {
  std::filesystem::path out;
  int32_t vocab_size = 2048;
  CorpusOptions corpus;
};
// Trains the byte-level BPE tokenizer on tokenizer_corpus() into options.out; logs one line.
BpeTrainerResult train_tokenizer(const TokenizerTrainOptions& options, const LogFn& log = {});

}  // namespace ears
