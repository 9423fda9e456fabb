// Small parsers for command-line values shared by the subcommands.
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/base/error.h"
#include "harness/base/strings.h"
#include "harness/base/utf8.h"
#include "harness/config/config.h"

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

// ---- checks run while CLI11 parses, before any command starts ----
// Each throws ears::Error from the option's CLI11 validator, so that a bad value is one line naming
// the option, "--steps: 0 is out of range; --steps must be >= 1" (exit 2), however CLI11 prints its
// own errors. A value CLI11 cannot convert is left to CLI11's conversion error.

// A number CLI11 reads from the option, checked by ok(v); else "<flag>: <text> is out of range; <fix>".
template <class Ok>
CLI::Option* number_check(CLI::Option* opt, Ok ok, const std::string& fix) {
  const std::string flag = opt->get_name();
  return opt->check(CLI::Validator(
      [flag, ok, fix](std::string& text) {
        double v = 0;
        if (CLI::detail::lexical_cast(text, v) && !(std::isfinite(v) && ok(v)))
          fail("{}: {} is out of range; {}", flag, text, fix);
        return std::string();
      },
      ""));
}

// A finite number in [lo, hi] (hi = infinity: no upper bound).
inline CLI::Option* in_range(CLI::Option* opt, double lo, double hi = std::numeric_limits<double>::infinity()) {
  const std::string flag = opt->get_name();
  return number_check(opt, [lo, hi](double v) { return v >= lo && v <= hi; },
                      std::isinf(hi) ? fmt::format("{} must be >= {}", flag, lo)
                                     : fmt::format("{} must be >= {} and <= {}", flag, lo, hi));
}

// A finite number > 0 (learning rates, clipping norms).
inline CLI::Option* positive(CLI::Option* opt) {
  return number_check(opt, [](double v) { return v > 0; }, opt->get_name() + " must be > 0");
}

// A sampling / verifier parameter in its decoders/param_ranges.h range, as the config checks it.
inline CLI::Option* param_range(CLI::Option* opt, const ranges::Range& r) {
  return number_check(opt, r.ok, std::string(r.fix));
}

// A seed: a whole number from 0 to 2^64 - 1, as the config's seed keys (CLI11 itself wraps -1 and
// saturates past 2^64).
inline CLI::Option* seed_range(CLI::Option* opt) {
  const std::string flag = opt->get_name();
  return opt->check(CLI::Validator(
      [flag](std::string& text) {
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size())
          fail("{}: {} is out of range; {} must be a whole number from 0 to {}", flag, text, flag,
               std::numeric_limits<std::uint64_t>::max());
        return std::string();
      },
      ""));
}

// Text given on the command line (a prompt, a stop string): valid UTF-8, as every file ears-bench
// reads must be (invalid bytes became U+FFFD's ids without a word); with non_empty, not "".
inline CLI::Option* utf8_text(CLI::Option* opt, bool non_empty = false) {
  const std::string flag = opt->get_name();
  return opt->check(CLI::Validator(
      [flag, non_empty](std::string& text) {
        if (non_empty && text.empty()) fail("{}: an empty string; remove it or give the text", flag);
        if (const size_t at = utf8::first_invalid(text); at != std::string::npos)
          fail("{}: not valid UTF-8 (byte 0x{:02X} at offset {}); pass UTF-8 text", flag,
               static_cast<unsigned char>(text[at]), at);
        return std::string();
      },
      ""));
}

// One of `allowed`: a config list (config::kDraftSampling, ...) or a narrower list than the help
// of a shared option would suggest.
template <class Names>
CLI::Option* one_of(CLI::Option* opt, const Names& allowed) {
  const std::string flag = opt->get_name(), names = join(allowed, ", ");
  const std::vector<std::string> ok(std::begin(allowed), std::end(allowed));
  return opt->check(CLI::Validator(
      [flag, names, ok](std::string& text) {
        if (!contains(ok, text)) fail("{}: '{}' is not allowed here; use one of: {}", flag, text, names);
        return std::string();
      },
      ""));
}
inline CLI::Option* one_of(CLI::Option* opt, std::initializer_list<std::string_view> allowed) {
  return one_of<std::initializer_list<std::string_view>>(opt, allowed);
}

// --gamma (draft tokens per step) of every command: the range of a config's decoding.gamma.
inline CLI::Option* gamma_range(CLI::Option* opt) { return in_range(opt, 1, config::kMaxGamma); }

}  // namespace ears
