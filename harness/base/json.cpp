#include "harness/base/json.h"

#include <fmt/format.h>

namespace ears {

namespace {

std::string show(const nlohmann::json* v) {
  if (!v) return "(absent)";
  std::string s = v->dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

void walk(const nlohmann::json* a, const nlohmann::json* b, const std::string& path, std::vector<std::string>& out) {
  if (a && b && *a == *b) return;
  const auto key = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  if (a && b && a->is_object() && b->is_object()) {
    for (const auto& [k, v] : a->items()) walk(&v, b->contains(k) ? &(*b)[k] : nullptr, key(k), out);
    for (const auto& [k, v] : b->items())
      if (!a->contains(k)) walk(nullptr, &v, key(k), out);
    return;
  }
  if (a && b && a->is_array() && b->is_array() && a->size() == b->size()) {
    for (size_t i = 0; i < a->size(); ++i) walk(&(*a)[i], &(*b)[i], key(std::to_string(i)), out);
    return;
  }
  out.push_back(fmt::format("{}: {} -> {}", path.empty() ? "(document)" : path, show(a), show(b)));
}

}  // namespace

std::vector<std::string> json_differences(const nlohmann::json& before, const nlohmann::json& after, size_t max) {
  std::vector<std::string> all;
  walk(&before, &after, "", all);
  if (all.size() > max) {
    const size_t more = all.size() - max;
    all.resize(max);
    all.push_back(fmt::format("... and {} more", more));
  }
  return all;
}

}  // namespace ears
