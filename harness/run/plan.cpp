#include "harness/run/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string_view>

#include "harness/base/error.h"
#include "harness/base/rng.h"
#include "harness/base/strings.h"
#include "harness/config/config.h"

namespace ears::runner {

namespace {

// A shard index or count: an unsigned integer (no sign) that fits in an int, spaces around it allowed.
bool parse_shard_number(std::string_view text, int& out) {
  const std::string s = trim(text);
  std::int64_t v = 0;
  bool overflow = false;
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0])) || !parse_int(s, v, overflow) ||
      v > std::numeric_limits<int>::max())
    return false;
  out = static_cast<int>(v);
  return true;
}

}  // namespace

std::string Shard::str() const { return fmt::format("{}/{}", index, count); }

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  Shard s;
  if (slash == std::string::npos || !parse_shard_number(text.substr(0, slash), s.index) ||
      !parse_shard_number(text.substr(slash + 1), s.count) || s.count < 1 || s.index >= s.count)
    fail("--shard '{}': expected i/N with 0 <= i < N, e.g. --shard 0/4 (the first of four shards)", text);
  return s;
}

std::string timestamped_name(const std::string& name, std::time_t t) {
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("{}-{}", name, buf);
}

std::string request_key(const std::string& request_id, int repeat) { return fmt::format("{}#{}", request_id, repeat); }

std::vector<WorkUnit> plan_units(std::size_t n_arms, std::size_t n_requests, std::size_t group_size, int repeats,
                                 const std::string& order, uint64_t seed) {
  if (!contains(config::kRunOrders, order))
    fail("run.order '{}' is not one of: {}", order, join(config::kRunOrders, ", "));
  if (group_size == 0) group_size = 1;
  const std::size_t n_groups = (n_requests + group_size - 1) / group_size;
  std::vector<WorkUnit> all;
  for (int r = 0; r < repeats; ++r) {
    std::vector<WorkUnit> units;
    for (std::size_t g = 0; g < n_groups; ++g) {
      std::vector<std::size_t> reqs;
      for (std::size_t i = g * group_size; i < std::min(n_requests, (g + 1) * group_size); ++i) reqs.push_back(i);
      // Rotate the arm order by one every group (continuing across repeats).
      const std::size_t shift = n_arms ? (g + static_cast<std::size_t>(r) * n_groups) % n_arms : 0;
      for (std::size_t k = 0; k < n_arms; ++k) units.push_back(WorkUnit{(k + shift) % n_arms, r, g, reqs});
    }
    if (order == "random") {
      Rng rng(seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(r + 1)));
      for (std::size_t i = units.size(); i > 1; --i) std::swap(units[i - 1], units[rng.below(i)]);
    }
    all.insert(all.end(), std::make_move_iterator(units.begin()), std::make_move_iterator(units.end()));
  }
  return all;
}

}  // namespace ears::runner
