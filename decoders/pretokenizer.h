// Pre-tokenization (internal to decoders/tokenizer*): what turns text into the words BPE sees.
// Added tokens are split off first (raw ones before normalization, `normalized` ones after),
// the rest is made valid UTF-8, NFC-normalized when the tokenizer says so, and split by the
// Split(regex, Isolated) / ByteLevel(use_regex) patterns in order, each on the pieces of the
// previous one. PCRE2 regexes are compiled once and matched from many threads (match data is
// per call).
#pragma once
#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "decoders/added_tokens.h"

namespace ears::tok {

// The GPT-2 pattern ByteLevel(use_regex=true) splits with.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// An HF (Oniguruma) pattern in PCRE2 syntax: `\s`/`\S` in PCRE2+UCP also match U+180E;
// Oniguruma follows White_Space.
std::string translate_pattern(std::string_view p);
// A regex matching `s` literally (Split with a String pattern).
std::string escape_literal(std::string_view s);

// Per-call PCRE2 match data (one per regex level).
struct MatchData {
  pcre2_match_data* md;
  MatchData() : md(pcre2_match_data_create(1, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

struct Regex {
  pcre2_code* code = nullptr;
  Regex() = default;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  Regex(Regex&& o) noexcept : code(std::exchange(o.code, nullptr)) {}
  ~Regex() { if (code) pcre2_code_free(code); }

  // UTF + UCP, JIT when available. Returns an error message, or "" on success.
  std::string compile(const std::string& pattern);

  // Calls on_piece(begin, end) for every match and every gap between matches (Isolated);
  // empty matches are skipped. `s` must be valid UTF-8. Throws ears::Error if PCRE2 fails.
  template <class F>
  void split(std::string_view s, pcre2_match_data* md, F&& on_piece) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    std::size_t pos = 0, last = 0;
    while (pos <= s.size()) {
      int rc = match(subject, s.size(), pos, md);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      std::size_t ms = ov[0], me = ov[1];
      if (me <= ms) {  // empty match: skip one character
        if (ms >= s.size()) break;
        pos = ms + char_length(s, ms);
        continue;
      }
      if (ms > last) on_piece(last, ms);
      on_piece(ms, me);
      last = pos = me;
    }
    if (last < s.size()) on_piece(last, s.size());
  }

 private:
  // pcre2_match from `pos` (interpreter retry when the JIT stack is too small); returns the
  // match count or PCRE2_ERROR_NOMATCH, throws on any other error.
  int match(PCRE2_SPTR subject, std::size_t size, std::size_t pos, pcre2_match_data* md) const;
  static std::size_t char_length(std::string_view s, std::size_t i);  // 1 when invalid
};

// Unicode NFC for the normalizer: `piece` unchanged when it is valid and NFC is off or it is
// ASCII, else the normalized text stored in `buf`.
std::string_view normalize_piece(std::string_view piece, bool nfc, std::string& buf);

struct PreTokenizer {
  bool nfc = false;           // normalizer: NFC (or a Sequence of NFC)
  std::vector<Regex> splits;  // applied in order, each on the pieces of the previous one
  LiteralMatcher raw_matcher, norm_matcher;  // added tokens with normalized false / true

  // Calls on_word(bytes) for every pre-token and on_added(id) for every added token of
  // `text`, in text order.
  template <class OnWord, class OnAdded>
  void run(std::string_view text, OnWord&& on_word, OnAdded&& on_added) const {
    std::vector<MatchData> md(splits.size());
    raw_matcher.split(
        text,
        [&](std::string_view piece) {
          std::string buf;
          piece = normalize_piece(piece, nfc, buf);
          norm_matcher.split(
              piece, [&](std::string_view s) { split_from(s, 0, md, on_word); }, on_added);
        },
        on_added);
  }

 private:
  template <class OnWord>
  void split_from(std::string_view s, std::size_t level, std::vector<MatchData>& md,
                  OnWord& on_word) const {
    if (level == splits.size()) {
      on_word(s);
      return;
    }
    splits[level].split(s, md[level].md, [&](std::size_t b, std::size_t e) {
      split_from(s.substr(b, e - b), level + 1, md, on_word);
    });
  }
};

}  // namespace ears::tok
