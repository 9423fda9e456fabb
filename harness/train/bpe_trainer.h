// Byte-level BPE trainer that writes a Hugging Face tokenizer.json (+ tokenizer_config.json)
// in the Qwen3 layout, so ears::Tokenizer (and HF `tokenizers`) load it. Torch-free.
//
// Pre-tokenization is Qwen3's exactly (NFC, then the Qwen3 Split regex: every digit is its own
// pre-token, so numbers are always tokenized digit by digit), done by ears::Tokenizer itself on
// a merge-free skeleton of the output file, so training and encoding can never disagree.
// Ids: 0..255 are the single bytes in GPT-2 bytes_to_unicode order (as in Qwen3), then one id
// per merge in merge order, then the added tokens (special ones first, in the given order).
// Training: word (pre-token) counts, pair counts over unique words weighted by their counts,
// incremental pair-count updates touching only the words that contain the merged pair, and a
// lazy max-heap; ties go to the smaller (left id, right id). Deterministic.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ears {

struct BpeTrainerOptions {
  int32_t vocab_size = 2048;  // total ids: 256 bytes + merges + added tokens
  std::vector<std::string> special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<std::string> added_tokens = {"<think>", "</think>"};  // added, "special": false
  int64_t min_frequency = 2;   // a pair seen fewer times is never merged (vocab may come out smaller)
  std::string eos_token = "<|im_end|>";
  std::string pad_token = "<|endoftext|>";
  int64_t model_max_length = 1024;
};

struct BpeTrainerResult {
  int32_t vocab_size = 0;       // ids defined (== Tokenizer::vocab_size() of the output)
  std::size_t merges = 0;
  std::size_t unique_words = 0;
  uint64_t corpus_bytes = 0;
};

// Trains on `corpus` (any text; added tokens inside it are split off, never merged) and writes
// <out_dir>/tokenizer.json and tokenizer_config.json (creating out_dir). Throws ears::Error when
// vocab_size leaves no room (< 256 + number of added tokens) or out_dir is not writable.
BpeTrainerResult train_bpe_tokenizer(const std::vector<std::string>& corpus, const BpeTrainerOptions& options,
                                     const std::filesystem::path& out_dir);

}  // namespace ears
