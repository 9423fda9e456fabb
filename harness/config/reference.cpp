// The key reference of docs/config.md, generated from the section tables (schema.h): one table
// per section, every key with its default and its one-line meaning. config_tests checks that the
// doc holds exactly this text (EARS_UPDATE_DOCS=1 rewrites it).
#include <nlohmann/json.hpp>

#include "harness/config/config.h"
#include "harness/config/schema.h"

namespace ears::config {
namespace detail {
namespace {

// A required key fails when absent: probed by running the field's absent() hook on an empty
// mapping of a default-constructed section.
template <class S>
bool required(const Field<S>& f) {
  if (!f.absent) return false;
  const Ctx c{"(reference)", {}};
  const MapReader empty(c, Node(YAML::NodeType::Null), "", kLeaf);
  S s{};
  try {
    f.absent(empty, s);
  } catch (const Error&) {
    return true;
  }
  return false;
}

// The default of a key as written in YAML; nested sections point to their own table.
template <class S>
std::string default_text(const Field<S>& f) {
  if (required(f)) return "*required*";
  if (f.schema->kind == Schema::Kind::Map) return fmt::format("section `{}`", f.schema->name);
  const nlohmann::json v = f.json(S{});
  if (v.is_string()) return v.get<std::string>().empty() ? "`\"\"`" : fmt::format("`{}`", v.get<std::string>());
  return fmt::format("`{}`", v.dump());
}

// Markdown table text: '|' would end the cell, '<' open an HTML tag.
std::string cell(std::string_view text) {
  std::string out;
  for (char ch : text) out += ch == '|' ? "\\|" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : std::string(1, ch);
  return out;
}

template <class S>
void table_markdown(std::string& out, const Table<S>& t) {
  const std::string_view name = t.schema.name;  // a key path, or "the top level"
  out += fmt::format("\n### {}\n\n| key | default | meaning |\n| --- | --- | --- |\n",
                     name.find(' ') == std::string_view::npos ? fmt::format("`{}`", name) : std::string(name));
  for (const Field<S>& f : t.fields)
    out += fmt::format("| `{}` | {} | {} |\n", f.key, default_text(f), cell(f.doc));
}

}  // namespace
}  // namespace detail

std::string config_reference_markdown() {
  using namespace detail;
  std::string out;
  table_markdown(out, root_table());
  table_markdown(out, target_table());
  table_markdown(out, draft_table());
  table_markdown(out, dataset_table());
  table_markdown(out, dataset_fields_table());
  table_markdown(out, decoding_table());
  table_markdown(out, arm_table());
  table_markdown(out, verifier_table());
  table_markdown(out, run_table());
  return out;
}

}  // namespace ears::config
