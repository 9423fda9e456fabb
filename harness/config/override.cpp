// Experiment configuration, internal: --set key.path=value overrides, applied to the YAML tree
// before it is read. Keys are checked against the tables' schema (schema.h); the values
// they insert carry no source mark, which is how errors know to say "(from --set)".
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "harness/config/schema.h"

namespace ears::config::detail {
namespace {

using K = Schema::Kind;

[[noreturn]] void fail_set(std::string_view path, std::string_view problem, std::string_view fix) {
  throw Error(fmt::format("(from --set): {}: {}; {}", path, problem, fix));
}

// The value text parsed as YAML (marks stripped); never null.
Node override_value(const std::string& key, const std::string& value_text) {
  check_yaml_text(value_text, "(from --set " + key + ")");
  Node value;
  try {
    value = strip_marks(YAML::Load(value_text));
  } catch (const YAML::Exception& e) {
    fail_set(key, fmt::format("value '{}' is not valid YAML ({})", value_text, e.msg), "quote it or fix the brackets");
  }
  if (value.IsNull())  // "", "~", "null": silently keeping the default would hide a typo
    fail_set(key, fmt::format("no value ('{}' is empty or null)", value_text),
             fmt::format("give one, e.g. --set {}=VALUE, or leave the --set out to keep the file's value", key));
  return value;
}

std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> segs;
  for (size_t start = 0;;) {
    size_t dot = key.find('.', start);
    segs.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return segs;
}

// The list index `seg` names in `list` (at `path`): a 0-based number or an entry's name.
size_t list_index(const Node& list, const std::string& seg, const std::string& path, const std::string& here) {
  size_t index = list.size();
  bool numeric = std::all_of(seg.begin(), seg.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
  if (numeric) {
    index = std::strtoull(seg.c_str(), nullptr, 10);
    if (index >= list.size())
      fail_set(here, "index out of range",
               list.size() == 0 ? fmt::format("{} is empty", path)
                                : fmt::format("{} has {} entries (indices 0..{}, 0-based)", path, list.size(), list.size() - 1));
    return index;
  }
  std::vector<std::string> names;
  for (size_t k = 0; k < list.size(); ++k) {
    Node el = list[k];
    if (el.IsMap() && el["name"].IsScalar()) {
      names.push_back(el["name"].Scalar());
      if (el["name"].Scalar() == seg && index == list.size()) index = k;
    }
  }
  if (index == list.size()) {
    std::string guess = closest(seg, names);
    fail_set(here, fmt::format("no entry named '{}' in {}", seg, path),
             guess.empty() ? fmt::format("use a 0-based index or one of: {}", join(names, ", ")) : fmt::format("did you mean '{}'?", guess));
  }
  return index;
}

}  // namespace

void apply_override(const Ctx& c, Node root, const std::string& text) {
  auto eq = text.find('=');
  std::string key = trim(text.substr(0, eq == std::string::npos ? text.size() : eq));
  if (eq == std::string::npos || key.empty())
    fail_set(text, "expected key.path=value", "e.g. --set decoding.gamma=3 or --set arms.1.verifier.beta=0.2");
  const Node value = override_value(key, text.substr(eq + 1));
  const std::vector<std::string> segs = split_key(key);

  const Schema* schema = &root_table().schema;
  Node cur = root;
  std::string path;
  for (size_t i = 0; i < segs.size(); ++i) {
    const std::string& seg = segs[i];
    const bool last = i + 1 == segs.size();
    std::string here = path.empty() ? seg : path + "." + seg;
    if (seg.empty()) fail_set(key, "empty key segment", "write dotted keys like decoding.gamma");
    if (schema->kind == K::Leaf)
      fail_set(here, fmt::format("{} is a single value, not a section", path), fmt::format("set it whole, e.g. --set {}=[...]", path));
    if (schema->kind == K::Map) {
      const Schema* child = schema->field(seg);
      if (!child) fail_set(here, "unknown key", unknown_key_fix(seg, *schema));
      if (cur.IsDefined() && !cur.IsNull() && !cur.IsMap())
        fail_at(c, cur, path, fmt::format("expected a mapping, got {}", describe(cur)), "fix the file or set the whole section");
      if (last) {
        cur[seg] = value;
        return;
      }
      Node next = cur[seg];
      if (!next.IsDefined() || next.IsNull()) {
        if (child->kind == K::List) fail_set(here, fmt::format("the file has no {} list to index into", here), "add the list to the file");
        cur[seg] = Node(YAML::NodeType::Map);
        next.reset(cur[seg]);
      }
      cur.reset(next);
      schema = child;
    } else {  // list: numeric 0-based index, or an arm's name
      if (!cur.IsSequence()) fail_at(c, cur, path, fmt::format("expected a list, got {}", describe(cur)), "fix the file");
      const size_t index = list_index(cur, seg, path, here);
      if (last) {
        cur[index] = value;
        return;
      }
      Node next = cur[index];
      cur.reset(next);
      schema = schema->item;
    }
    path = here;
  }
}

}  // namespace ears::config::detail
