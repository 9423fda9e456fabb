// Added tokens of a tokenizer.json (internal to decoders/tokenizer*): the entries and the
// literal matcher that splits them off the text before the model sees it, with the leftmost-
// longest (aho-corasick) semantics of Hugging Face `tokenizers` and its lstrip / rstrip /
// single_word options.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace ears::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

class LiteralMatcher {
 public:
  // `t` must outlive the matcher (the Tokenizer keeps its added tokens in a reserved vector).
  void add(const AddedToken* t);
  bool empty() const { return empty_; }

  // Splits `s` into text pieces (never empty) and added tokens, in order: on_text(piece) for
  // the text between matches, on_token(id) for each match. Whitespace taken by lstrip/rstrip
  // belongs to the token and reaches neither callback.
  template <class OnText, class OnToken>
  void split(std::string_view s, OnText&& on_text, OnToken&& on_token) const {
    if (empty_) {
      if (!s.empty()) on_text(s);
      return;
    }
    std::size_t start_offset = 0, i = 0;
    while (i < s.size()) {
      std::size_t ms = 0;
      const AddedToken* hit = find_from(s, i, ms);
      if (!hit) break;
      std::size_t me = ms + hit->content.size();
      i = me;  // the scan resumes after this match even when single_word discards it
      if (hit->single_word && ((ms > 0 && ends_with_word(s.substr(0, ms))) ||
                               (me < s.size() && starts_with_word(s.substr(me)))))
        continue;
      std::size_t start = ms, stop = me;
      if (hit->lstrip) start = std::max(start_offset, ms - trailing_space(s.substr(0, ms)));
      if (hit->rstrip) stop = me + leading_space(s.substr(me));
      if (start_offset < start) on_text(s.substr(start_offset, start - start_offset));
      on_token(hit->id);
      start_offset = stop;
      i = std::max(i, stop);
    }
    if (start_offset < s.size()) on_text(s.substr(start_offset));
  }

 private:
  // The leftmost match at or after byte i (longest first at one position); sets `ms` to its start.
  const AddedToken* find_from(std::string_view s, std::size_t i, std::size_t& ms) const {
    for (std::size_t j = i; j < s.size(); ++j) {
      for (const AddedToken* c : by_first_[static_cast<unsigned char>(s[j])]) {
        if (s.size() - j >= c->content.size() &&
            std::memcmp(s.data() + j, c->content.data(), c->content.size()) == 0) {
          ms = j;
          return c;
        }
      }
    }
    return nullptr;
  }
  static bool ends_with_word(std::string_view s);
  static bool starts_with_word(std::string_view s);
  static std::size_t leading_space(std::string_view s);   // bytes of the leading whitespace run
  static std::size_t trailing_space(std::string_view s);  // bytes of the trailing whitespace run

  std::array<std::vector<const AddedToken*>, 256> by_first_{};  // by first byte, longest first
  bool empty_ = true;
};

}  // namespace ears::tok
