// Experiment configuration, internal: YAML node helpers shared by the schema tables
// (schema.h) and the section code (config.cpp). Not part of the public API (config.h).
//
// Locations: a node from the file carries a mark and is reported as file:line:col; a node that
// --set inserted carries none and is reported as "(from --set)". Every failure is an ears::Error
// of the one-line form documented in config.h.
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ears::config::detail {

using YAML::Node;

struct Ctx {
  std::string file;                 // error label of the YAML text
  std::filesystem::path base_dir;   // relative paths in the file resolve against it
};

bool from_override(const Node& n);
std::string where(const Ctx& c, const Node& n);  // "file:line:col" or "(from --set)"
[[noreturn]] void fail_at(const Ctx& c, const Node& n, std::string_view path, std::string_view problem,
                          std::string_view fix);
std::string describe(const Node& n);       // "a mapping", "'abc'", ... for "got ..." messages
std::string leaf_of(std::string_view path);  // "draft.aux_layers.1" -> "aux_layers"

// Rejects invalid UTF-8 and C0 controls other than tab / LF / CR at their line and column.
void check_yaml_text(const std::string& text, const std::string& label);
// Rejects a second YAML document (after '---' or '...') at its line and column: YAML::Load reads
// the first and drops the rest unseen. (Not YAML::LoadAll: it loops forever on the text ",".)
void check_single_document(const std::string& text, const std::string& label);

// ---- typed scalar readers: the value or a located error ----
using Aliases = std::span<const std::pair<std::string_view, std::string_view>>;  // lower-case alias -> value
std::string as_string(const Ctx& c, const Node& n, const std::string& path);
std::int64_t as_int(const Ctx& c, const Node& n, const std::string& path, std::int64_t example);
std::uint64_t as_u64(const Ctx& c, const Node& n, const std::string& path);
// An int in [lo, hi]; hi == INT_MAX reads as "no upper bound" in the message.
int as_int_in(const Ctx& c, const Node& n, const std::string& path, std::int64_t lo, std::int64_t hi,
              std::int64_t example);
std::int64_t as_count(const Ctx& c, const Node& n, const std::string& path, std::int64_t lo, std::int64_t example);
double as_double(const Ctx& c, const Node& n, const std::string& path, double example);
bool as_bool(const Ctx& c, const Node& n, const std::string& path);
std::string as_enum(const Ctx& c, const Node& n, const std::string& path, std::span<const std::string_view> allowed,
                    Aliases aliases = {});
std::string as_device(const Ctx& c, const Node& n, const std::string& path);
// ${VAR} and ${VAR:-default} expansion.
std::string expand_env(const Ctx& c, const Node& n, const std::string& path, const std::string& s);
// Env-expanded path; relative paths resolve against the YAML file's directory, or the working
// directory when the value came from --set.
std::string as_path(const Ctx& c, const Node& n, const std::string& path);
// A list of strings; with allow_scalar a lone scalar is a one-element list.
std::vector<std::string> as_string_list(const Ctx& c, const Node& n, const std::string& path, bool allow_scalar);

// A copy of `n` without source marks (what --set inserts).
Node strip_marks(const Node& n);
// Plain scalars that a YAML reader would take as something other than a string get quotes.
void emit_str(YAML::Emitter& e, const std::string& s);

}  // namespace ears::config::detail
