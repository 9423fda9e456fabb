// Base layer: JSON helpers shared by the run directory, merge and report code.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace ears {

// The leaves where `before` and `after` differ, as "key.path: BEFORE -> AFTER" (list entries by
// index, e.g. "arms.1.decoding.gamma: 5 -> 2"; a missing side prints as "(absent)"), in key
// order, at most `max` of them (then "... and N more").
std::vector<std::string> json_differences(const nlohmann::json& before, const nlohmann::json& after, size_t max = 8);

}  // namespace ears
