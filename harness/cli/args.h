// Small parsers for command-line values shared by the subcommands.
#pragma once
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/base/error.h"

namespace ears {

// "1 2 3", "1,2,3" or "[1, 2, 3]" -> integers in [lo, hi]; ears::Error naming `flag` otherwise.
inline std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag,
                                           int64_t lo = std::numeric_limits<int32_t>::min(),
                                           int64_t hi = std::numeric_limits<int32_t>::max()) {
  std::string s = text;
  for (char& c : s)
    if (c == ',' || c == '[' || c == ']') c = ' ';
  std::istringstream in(s);
  std::vector<int64_t> out;
  std::string tok;
  while (in >> tok) {
    try {
      size_t used = 0;
      const long long v = std::stoll(tok, &used);
      if (used != tok.size() || v < lo || v > hi) throw std::invalid_argument(tok);
      out.push_back(v);
    } catch (const std::exception&) {
      fail("{}: '{}' is not an integer in [{}, {}]; pass e.g. \"1 2 3\"", flag, tok, lo, hi);
    }
  }
  return out;
}

}  // namespace ears
