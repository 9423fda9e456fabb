#include "harness/base/strings.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace ears {

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string closest(std::string_view word, const std::vector<std::string_view>& candidates) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  const std::string w = lower_ascii(word);
  for (std::string_view c : candidates) {
    const size_t d = edit_distance(w, lower_ascii(c));
    const size_t limit = std::max<size_t>(1, std::min<size_t>(3, c.size() / 3));
    if (d <= limit && d < best_d && d < c.size()) best = c, best_d = d;
  }
  return best;
}

bool valid_name(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
  });
}

std::string format_number(double v) { return fmt::format("{}", v); }

bool parse_double(std::string_view text, double& out) {
  std::string s = trim(text);
  if (s.empty()) return false;
  if (s[0] == '+') s.erase(0, 1);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(out);
}

bool parse_int(std::string_view text, std::int64_t& out, bool& overflow) {
  std::string s = trim(text);
  overflow = false;
  if (s.empty()) return false;
  if (s[0] == '+') s.erase(0, 1);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc::result_out_of_range && ptr == s.data() + s.size()) overflow = true;
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace ears
