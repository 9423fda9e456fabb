// Base layer: small string helpers (trim, join, "did you mean", strict number parsing).
// Includes nothing from the rest of the repository.
#pragma once
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace ears {

std::string trim(std::string_view s);
std::string lower_ascii(std::string_view s);

// Edit distance with adjacent transpositions counted as one edit ("eras" -> "ears" = 1).
size_t edit_distance(std::string_view a, std::string_view b);
// The candidate within a small edit distance of `word` (case-insensitive), or "" when none is close.
std::string closest(std::string_view word, const std::vector<std::string_view>& candidates);
template <class Range>
std::string closest(std::string_view word, const Range& candidates) {
  return closest(word, std::vector<std::string_view>(std::begin(candidates), std::end(candidates)));
}

template <class Range>
std::string join(const Range& items, std::string_view sep) {
  std::string out;
  for (std::string_view s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

template <class Range>
bool contains(const Range& items, std::string_view v) {
  return std::find(std::begin(items), std::end(items), v) != std::end(items);
}

// Names of experiments and arms: [A-Za-z0-9._-]+.
bool valid_name(std::string_view s);

// Shortest text that parses back to the same double.
std::string format_number(double v);
// The whole of `text` (trimmed, optional '+') as a finite double / an int64; false otherwise.
bool parse_double(std::string_view text, double& out);
bool parse_int(std::string_view text, std::int64_t& out, bool& overflow);

}  // namespace ears
