// Tokenizer::Impl (internal to decoders/tokenizer*): what a loaded tokenizer is made of. Filled
// once by load() / load_config() (tokenizer_load.cpp), then only read (tokenizer.cpp), so it
// is shared between copies of a Tokenizer and between threads.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "decoders/added_tokens.h"
#include "decoders/bpe.h"
#include "decoders/pretokenizer.h"
#include "decoders/tokenizer.h"
#include "decoders/vocab.h"

namespace ears {

struct Tokenizer::Impl {
  std::filesystem::path file;  // the tokenizer.json
  tok::PreTokenizer pre;       // normalizer, added-token split, pre-tokenizer regexes
  tok::BpeModel bpe;           // model: byte tokens, merges, word cache
  tok::Vocab vocab;            // per-id tables and token string -> id
  std::vector<tok::AddedToken> added;  // reserved once: pre's matchers point into it
  std::optional<int32_t> eos;  // tokenizer_config.json eos_token

  // Reads tokenizer.json; throws ears::Error naming the file and key of the first problem.
  void load(const std::filesystem::path& tokenizer_json);
  // Reads eos_token from tokenizer_config.json (after load()).
  void load_config(const std::filesystem::path& config_json);
};

}  // namespace ears
