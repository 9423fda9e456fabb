// The work plan of a run: which requests (a shard of the dataset), under which generator keys,
// in which order (units of one arm over one group of requests). Torch-free, unit-tested
// (tests/runner_helpers_test.cpp). The order is described at the top of harness/run/runner.h.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

namespace ears::runner {

struct Shard {
  int index = 0;
  int count = 1;
  bool active() const { return count > 1; }
  bool contains(std::size_t request_index) const { return static_cast<int>(request_index % count) == index; }
  std::string str() const;  // "i/N"
};
// "i/N" with 0 <= i < N; anything else is an ears::Error naming --shard.
Shard parse_shard(const std::string& text);

// "<name>-YYYYmmdd-HHMMSS" (local time).
std::string timestamped_name(const std::string& name, std::time_t t);
// The per-request generator key shared by all arms: "<request id>#<repeat>".
std::string request_key(const std::string& request_id, int repeat);

// One unit of work: one arm over one group of requests (indices into the selected requests).
struct WorkUnit {
  std::size_t arm = 0;
  int repeat = 0;
  std::size_t group = 0;
  std::vector<std::size_t> requests;
  bool operator==(const WorkUnit&) const = default;
};
// The run order (see harness/run/runner.h). order: "interleaved" | "random".
std::vector<WorkUnit> plan_units(std::size_t n_arms, std::size_t n_requests, std::size_t group_size, int repeats,
                                 const std::string& order, uint64_t seed);

}  // namespace ears::runner
