// Stop conditions for generated text (StopMatcher of decoders/tokenizer.h): stop token ids and
// stop strings, found in the text as it grows; safe_length() says how much can be shown.
#include <algorithm>
#include <string>
#include <utility>

#include "decoders/tokenizer.h"

namespace ears {

StopMatcher::StopMatcher(std::vector<int32_t> stop_ids, std::vector<std::string> stop_strings)
    : stop_ids_(std::move(stop_ids)) {
  for (auto& s : stop_strings) {
    if (s.empty()) continue;
    max_len_ = std::max(max_len_, s.size());
    stop_strings_.push_back(std::move(s));
  }
}

bool StopMatcher::is_stop_id(int32_t id) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

std::optional<StopHit> StopMatcher::push(int32_t id, std::string_view text) {
  if (hit_) return hit_;
  if (is_stop_id(id)) {
    hit_ = StopHit{text_.size(), true, -1};
    return hit_;
  }
  return push_text(text);
}

std::optional<StopHit> StopMatcher::push_text(std::string_view text) {
  if (hit_ || text.empty()) return hit_;
  const std::size_t old = text_.size();
  text_ += text;
  std::size_t best = std::string::npos;
  int which = -1;
  for (std::size_t k = 0; k < stop_strings_.size(); ++k) {
    const std::string& s = stop_strings_[k];
    // Earlier text had no match, so a new match must end inside `text`.
    std::size_t from = old + 1 > s.size() ? old + 1 - s.size() : 0;
    std::size_t pos = text_.find(s, from);
    if (pos < best) {
      best = pos;
      which = int(k);
    }
  }
  if (which >= 0) hit_ = StopHit{best, false, which};
  return hit_;
}

std::string_view StopMatcher::kept() const {
  return std::string_view(text_).substr(0, hit_ ? hit_->cut : text_.size());
}

std::size_t StopMatcher::safe_length() const {
  if (hit_) return hit_->cut;
  std::size_t hold = 0;  // longest suffix of text_ that is a proper prefix of a stop string
  for (const std::string& s : stop_strings_) {
    for (std::size_t k = std::min(s.size() - 1, text_.size()); k > hold; --k) {
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  return text_.size() - hold;
}

void StopMatcher::reset() {
  text_.clear();
  hit_.reset();
}

}  // namespace ears
