// Hugging Face `tokenizer.json` byte-level BPE tokenizer (Qwen3, Qwen2, Llama-3, GPT-2 style).
//
// Reproduces the `tokenizers` library: added tokens split first (leftmost-longest, literal),
// NFC normalizer, Split(regex, Isolated) pre-tokenizers, ByteLevel byte mapping, BPE merges by
// rank (lowest first, leftmost on ties), ByteLevel decoder with U+FFFD for invalid UTF-8.
// `encode` never adds BOS/EOS (the post-processor is ignored: add_special_tokens=false).
// Torch-free. All const methods are thread-safe (the BPE cache is guarded by a mutex).
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ears {

class Tokenizer {
 public:
  Tokenizer() = default;  // empty placeholder (calls are invalid); use load()
  // `path` is a directory holding tokenizer.json (and optionally tokenizer_config.json), or the
  // tokenizer.json file itself. Throws ears::Error (exit code 2) naming the file and json key.
  static Tokenizer load(const std::filesystem::path& path);

  std::vector<int32_t> encode(std::string_view text) const;
  // The pre-tokens BPE would see, as raw bytes: added tokens are split off and dropped, the
  // rest is normalized and split by the pre-tokenizer regexes (used by the BPE trainer).
  std::vector<std::string> pretokenize(std::string_view text) const;
  // Concatenates the tokens' bytes and decodes as UTF-8 (invalid bytes -> U+FFFD, like HF
  // errors="replace"). Ids without a token are ignored. skip_special drops special added tokens.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;  // byte-level form ("Ġworld")
  std::string id_to_token(int32_t id) const;                         // "" when the id is undefined
  // The raw bytes an id decodes to (may be a partial UTF-8 character); empty when undefined.
  std::string_view token_bytes(int32_t id) const;
  int32_t vocab_size() const;  // max defined id + 1 (151669 for Qwen3; the model may pad further)
  bool is_special(int32_t id) const;  // added token with "special": true
  bool is_added(int32_t id) const;    // any entry of added_tokens
  // <|im_end|>, <|endoftext|> and tokenizer_config.json's eos_token, when present in the vocab.
  std::vector<int32_t> stop_token_ids() const;
  std::optional<int32_t> eos_token_id() const;  // tokenizer_config.json eos_token, if any
  const std::filesystem::path& file() const;    // the tokenizer.json that was loaded

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// Streams decoded text token by token. push() returns only complete UTF-8 characters (an
// incomplete trailing sequence is held back); invalid bytes become U+FFFD as in decode().
// Concatenating every push() plus flush() equals tokenizer.decode(all ids).
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  std::string push(int32_t id);
  std::string push(std::span<const int32_t> ids);
  std::string flush();  // emits held-back bytes (an incomplete sequence becomes U+FFFD)
  void reset();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::string pending_;
};

// Stop conditions for generated text: stop token ids and stop strings. Feed each generated
// token with its newly decoded text; once a stop is found, `cut` is the number of bytes of
// text() to keep (the text before the stop string / stop token, the stop itself excluded).
struct StopHit {
  std::size_t cut = 0;
  bool by_token = false;
  int which = -1;  // index into stop_strings when !by_token
};

class StopMatcher {
 public:
  StopMatcher() = default;
  StopMatcher(std::vector<int32_t> stop_ids, std::vector<std::string> stop_strings);

  // A stop id stops before its own text (which is not appended). Returns the hit once stopped
  // (and the same hit on every later call; nothing more is appended after a stop).
  std::optional<StopHit> push(int32_t id, std::string_view text);
  std::optional<StopHit> push_text(std::string_view text);

  bool is_stop_id(int32_t id) const;
  bool stopped() const { return hit_.has_value(); }
  const std::optional<StopHit>& hit() const { return hit_; }
  const std::string& text() const { return text_; }  // everything fed so far
  std::string_view kept() const;  // text before the stop (all of text() when not stopped)
  // Bytes of text() that can be shown now: no stop string can start inside this prefix later.
  std::size_t safe_length() const;
  void reset();

 private:
  std::vector<int32_t> stop_ids_;
  std::vector<std::string> stop_strings_;
  std::size_t max_len_ = 0;
  std::string text_;
  std::optional<StopHit> hit_;
};

// `<|im_start|>user\n{msg}<|im_end|>\n<|im_start|>assistant\n`, plus `<think>\n\n</think>\n\n`
// when thinking is false (the Qwen3 template with enable_thinking=false).
std::string qwen3_chat_prompt(std::string_view user_message, bool thinking);

// Unicode NFC (utf8proc); invalid UTF-8 is first sanitized (harness/base/utf8.h has the rest).
std::string utf8_nfc(std::string_view s);

}  // namespace ears
