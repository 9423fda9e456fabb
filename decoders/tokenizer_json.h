// Reading tokenizer.json / tokenizer_config.json (internal to decoders/tokenizer*): JSON access
// whose errors name the file and the key, and a streaming reader that keeps the two big members
// (model.vocab, model.merges) out of the DOM.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/base/error.h"

namespace ears::tok {

using json = nlohmann::json;

// Every accessor throws ears::Error "<file>: key '<key>': <problem>" on a bad value.
struct JsonCtx {
  std::string file;

  [[noreturn]] void bad(std::string_view key, std::string_view problem) const {
    fail("{}: key '{}': {}", file, key, problem);
  }
  // obj[name], or nullptr when obj is no object or the member is missing or null.
  const json* opt(const json& obj, const char* name) const {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(name);
    return (it == obj.end() || it->is_null()) ? nullptr : &*it;
  }
  const json& req(const json& obj, const char* name, const std::string& key) const {
    const json* v = opt(obj, name);
    if (!v) bad(key, "is missing or null; this tokenizer.json is incomplete");
    return *v;
  }
  std::string str(const json& v, const std::string& key) const {
    if (!v.is_string()) bad(key, fmt::format("must be a string, found {}", v.type_name()));
    return v.get<std::string>();
  }
  bool flag(const json& obj, const char* name, const std::string& key, bool dflt) const {
    const json* v = opt(obj, name);
    if (!v) return dflt;
    if (!v->is_boolean()) bad(key, fmt::format("must be true or false, found {}", v->type_name()));
    return v->get<bool>();
  }
  int32_t id(const json& v, const std::string& key) const {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      bad(key, fmt::format("must be a non-negative integer id, found {}", v.dump()));
    return static_cast<int32_t>(v.get<int64_t>());
  }
};

// The whole file as a DOM; throws ears::Error naming the file when it is malformed.
json parse_json(const std::filesystem::path& p);

// tokenizer.json with model.vocab and model.merges collected into flat vectors (left empty in
// `root`). Malformed entries of those two are not thrown at once: the first is in bad_key /
// bad_what, for the loader to report after the structural checks.
struct TokenizerJson {
  struct MergeEntry { std::string a, b; bool joined; };  // joined: "a b" form, b empty

  json root;
  std::vector<std::pair<std::string, int64_t>> vocab;  // in file order
  std::vector<MergeEntry> merges;                      // in file order (= rank)
  std::string bad_key, bad_what;  // first malformed vocab/merges entry
  bool saw_vocab = false, saw_merges = false;
};

// Throws ears::Error naming the file when it cannot be read or is not JSON.
TokenizerJson read_tokenizer_json(const std::filesystem::path& path);

}  // namespace ears::tok
