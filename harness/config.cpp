// Experiment configuration: YAML -> validated ExperimentSpec. See config.h for the contract.
//
// Flow: YAML::Load -> apply --set overrides to the node tree (checked against the schema, the
// values they insert carry no source mark, which is how errors know to say "(from --set)") ->
// decode section by section with strict checks (unknown keys, duplicates, types, ranges).
#include "harness/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "harness/base/files.h"
#include "harness/base/utf8.h"
#include "harness/base/strings.h"
#include "harness/base/error.h"

namespace ears::config {
namespace fs = std::filesystem;
using YAML::Node;

namespace {

// ---------------------------------------------------------------- schema (for --set and keys)

struct Schema {
  enum class Kind { Leaf, Map, List } kind = Kind::Leaf;
  std::vector<std::pair<std::string_view, const Schema*>> fields;  // Map
  const Schema* item = nullptr;                                    // List
  std::string_view name;  // section name, for "belongs under" hints

  const Schema* field(std::string_view key) const {
    for (auto& [k, s] : fields)
      if (k == key) return s;
    return nullptr;
  }
  std::vector<std::string_view> keys() const {
    std::vector<std::string_view> out;
    for (auto& f : fields) out.push_back(f.first);
    return out;
  }
};

using K = Schema::Kind;
const Schema kLeaf{};
const Schema kTargetSchema{K::Map, {{"path", &kLeaf}, {"dtype", &kLeaf}, {"device", &kLeaf}}, nullptr, "target"};
const Schema kDraftSchema{K::Map,
                          {{"kind", &kLeaf},
                           {"path", &kLeaf},
                           {"sampling", &kLeaf},
                           {"dtype", &kLeaf},
                           {"aux_layers", &kLeaf},
                           {"aux_layer_convention", &kLeaf}},
                          nullptr,
                          "draft"};
const Schema kFieldsSchema{
    K::Map, {{"prompt", &kLeaf}, {"answer", &kLeaf}, {"category", &kLeaf}}, nullptr, "dataset.fields"};
const Schema kDatasetSchema{K::Map,
                            {{"name", &kLeaf},
                             {"path", &kLeaf},
                             {"split", &kLeaf},
                             {"limit", &kLeaf},
                             {"offset", &kLeaf},
                             {"n_shot", &kLeaf},
                             {"prompt_format", &kLeaf},
                             {"thinking", &kLeaf},
                             {"seed", &kLeaf},
                             {"n", &kLeaf},
                             {"on_error", &kLeaf},
                             {"prompt_template", &kLeaf},
                             {"scorer", &kLeaf},
                             {"fields", &kFieldsSchema},
                             {"categories", &kLeaf}},
                            nullptr,
                            "dataset"};
const Schema kDecodingSchema{K::Map,
                             {{"gamma", &kLeaf},
                              {"temperature", &kLeaf},
                              {"top_p", &kLeaf},
                              {"top_k", &kLeaf},
                              {"max_new_tokens", &kLeaf},
                              {"stop", &kLeaf},
                              {"batch_size", &kLeaf},
                              {"seed", &kLeaf},
                              {"distortion", &kLeaf}},
                             nullptr,
                             "decoding"};
const Schema kVerifierSchema{K::Map,
                             {{"type", &kLeaf}, {"beta", &kLeaf}, {"uncertainty", &kLeaf}, {"eps", &kLeaf}, {"delta", &kLeaf}},
                             nullptr,
                             "arms.N.verifier"};
const Schema kArmSchema{K::Map,
                        {{"name", &kLeaf},
                         {"baseline", &kLeaf},
                         {"verifier", &kVerifierSchema},
                         {"decoding", &kDecodingSchema},
                         {"draft", &kDraftSchema}},
                        nullptr,
                        "arms.N"};
const Schema kArmsSchema{K::List, {}, &kArmSchema, "arms"};
const Schema kRunSchema{K::Map,
                        {{"warmup", &kLeaf}, {"repeats", &kLeaf}, {"output_dir", &kLeaf}, {"order", &kLeaf}, {"threads", &kLeaf}},
                        nullptr,
                        "run"};
const Schema kGateSchema{K::Map, {{"metric", &kLeaf}, {"arm", &kLeaf}, {"op", &kLeaf}, {"value", &kLeaf}}, nullptr, "gates.N"};
const Schema kGatesSchema{K::List, {}, &kLeaf, "gates"};
const Schema kRootSchema{K::Map,
                         {{"name", &kLeaf},
                          {"description", &kLeaf},
                          {"target", &kTargetSchema},
                          {"draft", &kDraftSchema},
                          {"dataset", &kDatasetSchema},
                          {"decoding", &kDecodingSchema},
                          {"arms", &kArmsSchema},
                          {"run", &kRunSchema},
                          {"gates", &kGatesSchema}},
                         nullptr,
                         "the top level"};

// Where else a misplaced key would be valid ("gamma" under target -> decoding).
std::string belongs_under(std::string_view key) {
  for (const Schema* s : {&kRootSchema, &kTargetSchema, &kDraftSchema, &kDatasetSchema, &kDecodingSchema,
                          &kVerifierSchema, &kArmSchema, &kRunSchema})
    if (s->field(key)) return std::string(s->name);
  return "";
}

std::string unknown_key_fix(std::string_view key, const Schema& schema) {
  std::string guess = closest(key, schema.keys());
  if (!guess.empty()) return fmt::format("did you mean '{}'?", guess);
  std::string home = belongs_under(key);
  if (!home.empty() && home != schema.name)
    return fmt::format("'{}' belongs under {}; allowed here: {}", key, home, join(schema.keys(), ", "));
  return fmt::format("allowed keys: {}", join(schema.keys(), ", "));
}

// ---------------------------------------------------------------- locations and errors

struct Ctx {
  std::string file;
  fs::path base_dir;
};

bool from_override(const Node& n) { return !n.IsDefined() || n.Mark().is_null(); }

std::string where(const Ctx& c, const Node& n) {
  if (from_override(n)) return "(from --set)";
  return fmt::format("{}:{}:{}", c.file, n.Mark().line + 1, n.Mark().column + 1);
}

[[noreturn]] void fail_at(const Ctx& c, const Node& n, std::string_view path, std::string_view problem,
                          std::string_view fix) {
  throw Error(fmt::format("{}: {}: {}; {}", where(c, n), path, problem, fix));
}

std::string describe(const Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing (null)";
    case YAML::NodeType::Scalar: return fmt::format("'{}'", n.Scalar());
    default: return "nothing";
  }
}

// The last key of a path, skipping list indices: "draft.aux_layers.1" -> "aux_layers".
std::string leaf_of(std::string_view path) {
  while (true) {
    auto dot = path.rfind('.');
    std::string_view last = dot == std::string_view::npos ? path : path.substr(dot + 1);
    bool index = !last.empty() && std::all_of(last.begin(), last.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
    if (!index || dot == std::string_view::npos) return std::string(last);
    path = path.substr(0, dot);
  }
}

// ---------------------------------------------------------------- typed scalar readers

bool is_control(unsigned char b) { return (b < 0x20 && b != '\t' && b != '\n' && b != '\r') || b == 0x7F; }

std::string as_string(const Ctx& c, const Node& n, const std::string& path) {
  if (!n.IsScalar())
    fail_at(c, n, path, fmt::format("expected a string, got {}", describe(n)),
            fmt::format("write a plain value, e.g. '{}: text'", leaf_of(path)));
  for (unsigned char b : n.Scalar())  // e.g. from a "\x18" escape
    if (is_control(b))
      fail_at(c, n, path, fmt::format("the value contains the control character U+{:04X}", b), "remove it");
  return n.Scalar();
}

// A YAML stream is printable Unicode: invalid UTF-8 or a C0 control character other than tab /
// LF / CR is an error at its line and column (yaml-cpp accepts some of them and then emits YAML
// it cannot read back; found by fuzz_config).
void check_yaml_text(const std::string& text, const std::string& label) {
  int line = 1, col = 1;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int len = utf8::step(text, i);
    if (len <= 0)
      throw Error(fmt::format("{}:{}:{}: (yaml): invalid UTF-8 (byte 0x{:02X}); save the file as UTF-8 text", label, line,
                              col, b));
    if (len == 1 && is_control(b))
      throw Error(fmt::format("{}:{}:{}: (yaml): control character U+{:04X} is not allowed in YAML; remove it", label,
                              line, col, b));
    if (b == '\n') ++line, col = 1;
    else ++col;
    i += static_cast<size_t>(len);
  }
}

std::int64_t as_int(const Ctx& c, const Node& n, const std::string& path, std::int64_t example) {
  std::int64_t v = 0;
  bool overflow = false;
  if (!n.IsScalar() || !parse_int(n.Scalar(), v, overflow)) {
    if (overflow) fail_at(c, n, path, fmt::format("{} is too large", n.Scalar()), "use a smaller number");
    fail_at(c, n, path, fmt::format("expected an integer, got {}", describe(n)),
            fmt::format("write a whole number, e.g. '{}: {}'", leaf_of(path), example));
  }
  return v;
}

std::uint64_t as_u64(const Ctx& c, const Node& n, const std::string& path) {
  std::string s = n.IsScalar() ? trim(n.Scalar()) : std::string();
  if (!s.empty() && s[0] == '-') {
    std::int64_t v = 0;
    bool overflow = false;
    if (parse_int(s, v, overflow))
      fail_at(c, n, path, fmt::format("{} is out of range", s), fmt::format("{} must be >= 0", leaf_of(path)));
  }
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
    fail_at(c, n, path, fmt::format("expected a non-negative integer, got {}", describe(n)),
            fmt::format("write a whole number, e.g. '{}: 0'", leaf_of(path)));
  return v;
}

int as_int_in(const Ctx& c, const Node& n, const std::string& path, std::int64_t lo, std::int64_t hi,
              std::int64_t example) {
  std::int64_t v = as_int(c, n, path, example);
  if (v < lo || v > hi) {
    std::string range = hi == std::numeric_limits<int>::max() ? fmt::format("{} must be >= {}", leaf_of(path), lo)
                                                               : fmt::format("{} must be >= {} and <= {}", leaf_of(path), lo, hi);
    fail_at(c, n, path, fmt::format("{} is out of range", v), range);
  }
  return static_cast<int>(v);
}

std::int64_t as_count(const Ctx& c, const Node& n, const std::string& path, std::int64_t lo, std::int64_t example) {
  std::int64_t v = as_int(c, n, path, example);
  if (v < lo) fail_at(c, n, path, fmt::format("{} is out of range", v), fmt::format("{} must be >= {}", leaf_of(path), lo));
  return v;
}

double as_double(const Ctx& c, const Node& n, const std::string& path, double example) {
  double v = 0;
  if (!n.IsScalar() || !parse_double(n.Scalar(), v))
    fail_at(c, n, path, fmt::format("expected a number, got {}", describe(n)),
            fmt::format("write a number, e.g. '{}: {}'", leaf_of(path), format_number(example)));
  return v;
}

bool as_bool(const Ctx& c, const Node& n, const std::string& path) {
  if (n.IsScalar()) {
    std::string s = lower_ascii(trim(n.Scalar()));
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
  }
  fail_at(c, n, path, fmt::format("expected true or false, got {}", describe(n)),
          fmt::format("write '{}: true' or '{}: false'", leaf_of(path), leaf_of(path)));
}

template <size_t N>
std::string as_enum(const Ctx& c, const Node& n, const std::string& path, const std::array<std::string_view, N>& allowed,
                    std::initializer_list<std::pair<std::string_view, std::string_view>> aliases = {}) {
  std::string v = as_string(c, n, path);
  if (contains(allowed, v)) return v;
  std::string guess;
  for (auto& [alias, real] : aliases)
    if (lower_ascii(v) == alias) guess = real;
  if (guess.empty()) guess = closest(v, allowed);
  std::string fix = guess.empty() ? fmt::format("use one of {}", join(allowed, "|"))
                                  : fmt::format("did you mean '{}'? (allowed: {})", guess, join(allowed, "|"));
  fail_at(c, n, path, fmt::format("'{}' is not allowed", v), fix);
}

std::string as_dtype(const Ctx& c, const Node& n, const std::string& path) {
  return as_enum(c, n, path, kDtypes,
                 {{"fp16", "float16"}, {"half", "float16"}, {"bf16", "bfloat16"}, {"fp32", "float32"}, {"float", "float32"}});
}

std::string as_device(const Ctx& c, const Node& n, const std::string& path) {
  std::string v = as_string(c, n, path);
  if (v == "cpu" || v == "cuda") return v;
  if (v.rfind("cuda:", 0) == 0 && v.size() > 5 &&
      std::all_of(v.begin() + 5, v.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }))
    return v;
  fail_at(c, n, path, fmt::format("'{}' is not a valid device", v), "use cpu, cuda or cuda:N (e.g. cuda:0)");
}

// ${VAR} and ${VAR:-default} expansion for paths.
std::string expand_env(const Ctx& c, const Node& n, const std::string& path, const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '$' || i + 1 >= s.size() || s[i + 1] != '{') {
      out += s[i++];
      continue;
    }
    size_t close = s.find('}', i + 2);
    if (close == std::string::npos)
      fail_at(c, n, path, fmt::format("unterminated '${{' in '{}'", s), "close it: ${NAME} or ${NAME:-default}");
    std::string inner = s.substr(i + 2, close - i - 2);
    std::string var = inner, fallback;
    bool has_fallback = false;
    if (auto sep = inner.find(":-"); sep != std::string::npos) {
      var = inner.substr(0, sep), fallback = inner.substr(sep + 2), has_fallback = true;
    }
    bool ok_name = !var.empty() && !std::isdigit(static_cast<unsigned char>(var[0])) &&
                   std::all_of(var.begin(), var.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; });
    if (!ok_name) fail_at(c, n, path, fmt::format("'${{{}}}' is not a valid variable reference", inner), "write ${NAME} or ${NAME:-default}");
    const char* value = std::getenv(var.c_str());
    if (value && *value)
      out += value;
    else if (has_fallback)
      out += fallback;
    else
      fail_at(c, n, path, fmt::format("environment variable {} is not set", var),
              fmt::format("export {}=... or write the path directly (or ${{{}:-default}})", var, var));
    i = close + 1;
  }
  return out;
}

// Env-expanded path; relative paths resolve against the YAML file's directory, or the working
// directory when the value came from --set.
std::string as_path(const Ctx& c, const Node& n, const std::string& path) {
  std::string s = expand_env(c, n, path, as_string(c, n, path));
  if (s.empty()) return s;
  fs::path p(s);
  if (p.is_relative()) {
    if (from_override(n))
      p = fs::current_path() / p;
    else if (!c.base_dir.empty())
      p = c.base_dir / p;
  }
  return p.lexically_normal().string();
}

std::vector<std::string> as_string_list(const Ctx& c, const Node& n, const std::string& path, bool allow_scalar) {
  std::vector<std::string> out;
  if (allow_scalar && n.IsScalar()) return {n.Scalar()};
  if (!n.IsSequence())
    fail_at(c, n, path, fmt::format("expected a list of strings, got {}", describe(n)),
            fmt::format("write e.g. '{}: [a, b]'", leaf_of(path)));
  for (size_t i = 0; i < n.size(); ++i) out.push_back(as_string(c, n[i], fmt::format("{}.{}", path, i)));
  return out;
}

// ---------------------------------------------------------------- mapping reader

// Checks a mapping's keys (type, duplicates, unknown keys with suggestions) and hands out values.
// Null values count as absent (so "dtype:" means "use the default").
class MapReader {
 public:
  MapReader(const Ctx& c, const Node& node, std::string path, const Schema& schema)
      : c_(c), node_(node), path_(std::move(path)) {
    if (!node.IsDefined() || node.IsNull()) return;
    if (!node.IsMap())
      fail_at(c, node, path_.empty() ? "(document)" : path_, fmt::format("expected a mapping, got {}", describe(node)),
              fmt::format("write 'key: value' lines (allowed keys: {})", join(schema.keys(), ", ")));
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const Node key = it->first;  // a copy: it->first lives in a temporary proxy
      std::string k = key.IsScalar() ? key.Scalar() : std::string();
      std::string kp = sub(k);
      if (!key.IsScalar()) fail_at(c, key, path_.empty() ? "(document)" : path_, "a key must be a plain name", "remove the complex key");
      if (!schema.field(k)) fail_at(c, key, kp, "unknown key", unknown_key_fix(k, schema));
      if (!seen.insert(k).second) fail_at(c, key, kp, "duplicate key", "keep only one of them");
      entries_.push_back({k, key, it->second});
    }
  }
  // The value of a present, non-null key; a null node otherwise (check has() first).
  Node get(std::string_view key) const {
    for (auto& e : entries_)
      if (e.key == key && !e.value.IsNull()) return e.value;
    return Node(YAML::NodeType::Null);
  }
  bool has(std::string_view key) const {
    for (auto& e : entries_)
      if (e.key == key && !e.value.IsNull()) return true;
    return false;
  }
  std::string sub(std::string_view key) const { return path_.empty() ? std::string(key) : path_ + "." + std::string(key); }
  const Node& node() const { return node_; }
  const std::string& path() const { return path_; }
  // Location for "missing key" errors: the mapping itself.
  [[noreturn]] void missing(std::string_view key, std::string_view fix) const {
    fail_at(c_, node_, sub(key), "missing required key", fix);
  }

 private:
  struct Entry {
    std::string key;
    Node key_node, value;
  };
  const Ctx& c_;
  Node node_;
  std::string path_;
  std::vector<Entry> entries_;
};

// ---------------------------------------------------------------- --set overrides

Node strip_marks(const Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar: return Node(n.Scalar());
    case YAML::NodeType::Sequence: {
      Node out(YAML::NodeType::Sequence);
      for (const auto& e : n) out.push_back(strip_marks(e));
      return out;
    }
    case YAML::NodeType::Map: {
      Node out(YAML::NodeType::Map);
      for (auto it = n.begin(); it != n.end(); ++it) out[strip_marks(it->first)] = strip_marks(it->second);
      return out;
    }
    default: return Node(YAML::NodeType::Null);
  }
}

[[noreturn]] void fail_set(std::string_view path, std::string_view problem, std::string_view fix) {
  throw Error(fmt::format("(from --set): {}: {}; {}", path, problem, fix));
}

void apply_override(const Ctx& c, Node root, const std::string& text) {
  auto eq = text.find('=');
  std::string key = trim(text.substr(0, eq == std::string::npos ? text.size() : eq));
  if (eq == std::string::npos || key.empty())
    fail_set(text, "expected key.path=value", "e.g. --set decoding.gamma=3 or --set arms.1.verifier.beta=0.2");
  std::string value_text = text.substr(eq + 1);
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

  std::vector<std::string> segs;
  for (size_t start = 0;;) {
    size_t dot = key.find('.', start);
    segs.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }

  const Schema* schema = &kRootSchema;
  Node cur = root;
  std::string path;
  for (size_t i = 0; i < segs.size(); ++i) {
    const std::string& seg = segs[i];
    const bool last = i + 1 == segs.size();
    std::string here = path.empty() ? seg : path + "." + seg;
    if (seg.empty()) fail_set(key, "empty key segment", "write dotted keys like decoding.gamma");
    if (schema->kind == K::Leaf)
      fail_set(here, fmt::format("{} is a single value, not a section", path),
               fmt::format("set it whole, e.g. --set {}=[...]", path));
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
        if (child->kind == K::List)
          fail_set(here, fmt::format("the file has no {} list to index into", here), "add the list to the file");
        cur[seg] = Node(YAML::NodeType::Map);
        next.reset(cur[seg]);
      }
      cur.reset(next);
      schema = child;
    } else {  // list: numeric 0-based index, or an arm's name
      if (!cur.IsSequence()) fail_at(c, cur, path, fmt::format("expected a list, got {}", describe(cur)), "fix the file");
      size_t index = cur.size();
      bool numeric = std::all_of(seg.begin(), seg.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
      if (numeric) {
        index = std::strtoull(seg.c_str(), nullptr, 10);
        if (index >= cur.size())
          fail_set(here, "index out of range",
                   cur.size() == 0 ? fmt::format("{} is empty", path)
                                   : fmt::format("{} has {} entries (indices 0..{}, 0-based)", path, cur.size(), cur.size() - 1));
      } else {
        std::vector<std::string> names;
        for (size_t k = 0; k < cur.size(); ++k) {
          Node el = cur[k];
          if (el.IsMap() && el["name"].IsScalar()) {
            names.push_back(el["name"].Scalar());
            if (el["name"].Scalar() == seg && index == cur.size()) index = k;
          }
        }
        if (index == cur.size()) {
          std::string guess = closest(seg, names);
          fail_set(here, fmt::format("no entry named '{}' in {}", seg, path),
                   guess.empty() ? fmt::format("use a 0-based index or one of: {}", join(names, ", "))
                                 : fmt::format("did you mean '{}'?", guess));
        }
      }
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

// ---------------------------------------------------------------- section decoders

void read_draft_fields(const Ctx& c, const MapReader& m, DraftSpec& d) {
  if (m.has("kind")) d.kind = as_enum(c, m.get("kind"), m.sub("kind"), kDraftKinds);
  if (m.has("path")) d.path = as_path(c, m.get("path"), m.sub("path"));
  if (m.has("sampling")) d.sampling = as_enum(c, m.get("sampling"), m.sub("sampling"), kDraftSampling);
  if (m.has("dtype")) d.dtype = as_dtype(c, m.get("dtype"), m.sub("dtype"));
  if (m.has("aux_layers")) {
    Node n = m.get("aux_layers");
    std::string p = m.sub("aux_layers");
    if (!n.IsSequence())
      fail_at(c, n, p, fmt::format("expected a list of layer ids, got {}", describe(n)), "write e.g. 'aux_layers: [1, 3, 5]'");
    d.aux_layers.clear();
    for (size_t i = 0; i < n.size(); ++i)
      d.aux_layers.push_back(as_int_in(c, n[i], fmt::format("{}.{}", p, i), 0, std::numeric_limits<int>::max(), 2));
  }
  if (m.has("aux_layer_convention"))
    d.aux_layer_convention = as_enum(c, m.get("aux_layer_convention"), m.sub("aux_layer_convention"), kAuxLayerConventions);
}

void read_decoding_fields(const Ctx& c, const MapReader& m, DecodingSpec& d) {
  constexpr auto kIntMax = std::numeric_limits<int>::max();
  if (m.has("gamma")) d.gamma = as_int_in(c, m.get("gamma"), m.sub("gamma"), 1, kMaxGamma, 5);
  if (m.has("temperature")) {
    d.temperature = as_double(c, m.get("temperature"), m.sub("temperature"), 0.9);
    if (d.temperature < 0)
      fail_at(c, m.get("temperature"), m.sub("temperature"), fmt::format("{} is out of range", format_number(d.temperature)),
              "temperature must be >= 0 (0 = greedy)");
  }
  if (m.has("top_p")) {
    d.top_p = as_double(c, m.get("top_p"), m.sub("top_p"), 1.0);
    if (!(d.top_p > 0 && d.top_p <= 1))
      fail_at(c, m.get("top_p"), m.sub("top_p"), fmt::format("{} is out of range", format_number(d.top_p)),
              "top_p must be > 0 and <= 1 (1 = off)");
  }
  if (m.has("top_k")) d.top_k = as_int_in(c, m.get("top_k"), m.sub("top_k"), 0, kIntMax, 0);
  if (m.has("max_new_tokens")) d.max_new_tokens = as_int_in(c, m.get("max_new_tokens"), m.sub("max_new_tokens"), 1, kIntMax, 256);
  if (m.has("stop")) {
    d.stop = as_string_list(c, m.get("stop"), m.sub("stop"), true);
    for (size_t i = 0; i < d.stop.size(); ++i)
      if (d.stop[i].empty())
        fail_at(c, m.get("stop"), fmt::format("{}.{}", m.sub("stop"), i), "empty stop string", "remove it");
  }
  if (m.has("batch_size")) d.batch_size = as_int_in(c, m.get("batch_size"), m.sub("batch_size"), 1, kIntMax, 1);
  if (m.has("seed")) d.seed = as_u64(c, m.get("seed"), m.sub("seed"));
  if (m.has("distortion")) d.distortion = as_bool(c, m.get("distortion"), m.sub("distortion"));
}

// Reads verifier keys except a beta list (sweeps are handled by the caller).
void read_verifier_fields(const Ctx& c, const MapReader& m, VerifierSpec& v) {
  if (m.has("type")) v.type = as_enum(c, m.get("type"), m.sub("type"), kVerifierTypes);
  if (m.has("beta") && !m.get("beta").IsSequence()) {
    v.beta = as_double(c, m.get("beta"), m.sub("beta"), 0.1);
    if (v.beta < 0) fail_at(c, m.get("beta"), m.sub("beta"), fmt::format("{} is out of range", format_number(v.beta)), "beta must be >= 0");
  }
  if (m.has("uncertainty")) v.uncertainty = as_enum(c, m.get("uncertainty"), m.sub("uncertainty"), kUncertainty);
  if (m.has("eps")) {
    v.eps = as_double(c, m.get("eps"), m.sub("eps"), 0.09);
    // The same ranges decoders/verify.cpp's validate() enforces at run time (typical acceptance
    // divides by neither, but eps = 0 or delta = 0 accepts nothing and is refused there).
    if (!(v.eps > 0) || v.eps > 1)
      fail_at(c, m.get("eps"), m.sub("eps"), fmt::format("{} is out of range", format_number(v.eps)), "eps must be > 0 and <= 1");
  }
  if (m.has("delta")) {
    v.delta = as_double(c, m.get("delta"), m.sub("delta"), 0.3);
    if (!(v.delta > 0))
      fail_at(c, m.get("delta"), m.sub("delta"), fmt::format("{} is out of range", format_number(v.delta)), "delta must be > 0");
  }
}

TargetSpec read_target(const Ctx& c, const MapReader& root) {
  MapReader m(c, root.get("target"), "target", kTargetSchema);
  TargetSpec t;
  if (!root.has("target"))
    fail_at(c, root.node(), "target", "missing required section", "add 'target: {path: <directory of the HF checkpoint>}'");
  if (!m.has("path")) m.missing("path", "add 'path: <directory of the HF checkpoint>' under target");
  t.path = as_path(c, m.get("path"), m.sub("path"));
  if (t.path.empty()) fail_at(c, m.get("path"), m.sub("path"), "empty path", "write the checkpoint directory");
  if (m.has("dtype")) t.dtype = as_dtype(c, m.get("dtype"), m.sub("dtype"));
  if (m.has("device")) t.device = as_device(c, m.get("device"), m.sub("device"));
  return t;
}

DatasetSection read_dataset(const Ctx& c, const MapReader& root) {
  if (!root.has("dataset"))
    fail_at(c, root.node(), "dataset", "missing required section",
            fmt::format("add 'dataset: {{name: gsm8k, path: ...}}' (names: {})", join(kDatasetNames, "|")));
  MapReader m(c, root.get("dataset"), "dataset", kDatasetSchema);
  DatasetSection d;
  if (!m.has("name")) m.missing("name", fmt::format("add 'name: <{}>' under dataset", join(kDatasetNames, "|")));
  d.name = as_enum(c, m.get("name"), m.sub("name"), kDatasetNames,
                   {{"nq", "nq_open"}, {"nq-open", "nq_open"}, {"spec-bench", "spec_bench"}, {"synth_gsm", "synth-gsm"},
                    {"open_stems", "open-stems"}});
  const bool synthetic = d.name == "synth-gsm" || d.name == "open-stems";
  if (m.has("path")) {
    if (synthetic)
      fail_at(c, m.get("path"), m.sub("path"), fmt::format("{} is generated, it reads no file", d.name), "remove dataset.path");
    d.path = as_path(c, m.get("path"), m.sub("path"));
  }
  if (d.name == "jsonl" && d.path.empty()) m.missing("path", "add 'path: <file.jsonl>' under dataset (required for jsonl)");
  if (m.has("split")) d.split = as_string(c, m.get("split"), m.sub("split"));
  if (m.has("limit")) d.limit = as_count(c, m.get("limit"), m.sub("limit"), 0, 50);
  if (m.has("offset")) d.offset = as_count(c, m.get("offset"), m.sub("offset"), 0, 0);
  if (m.has("n_shot")) {
    d.n_shot = as_int_in(c, m.get("n_shot"), m.sub("n_shot"), 0, 64, 0);
    if (d.n_shot > 0 && d.name != "gsm8k" && d.name != "synth-gsm")
      fail_at(c, m.get("n_shot"), m.sub("n_shot"), fmt::format("n_shot only applies to gsm8k and synth-gsm, not {}", d.name),
              "remove it (or set n_shot: 0)");
  }
  if (m.has("prompt_format")) d.prompt_format = as_enum(c, m.get("prompt_format"), m.sub("prompt_format"), kPromptFormats);
  if (m.has("thinking")) {
    d.thinking = as_bool(c, m.get("thinking"), m.sub("thinking"));
    if (d.thinking && d.prompt_format == "raw")
      fail_at(c, m.get("thinking"), m.sub("thinking"), "thinking only applies to prompt_format: chat",
              "remove it or set prompt_format: chat");
  }
  if (m.has("seed")) d.seed = as_u64(c, m.get("seed"), m.sub("seed"));
  if (m.has("n")) {
    if (d.name != "synth-gsm")
      fail_at(c, m.get("n"), m.sub("n"), fmt::format("n only applies to synth-gsm, not {}", d.name),
              "use dataset.limit to cap the number of requests");
    // synth-gsm generates its problems in memory: 10^5 take ~3 s; 2*10^9 died of bad_alloc.
    d.n = as_int_in(c, m.get("n"), m.sub("n"), 1, 100000, 200);
  }
  if (m.has("on_error")) d.on_error = as_enum(c, m.get("on_error"), m.sub("on_error"), kOnError);
  if (m.has("prompt_template")) {
    d.prompt_template = as_string(c, m.get("prompt_template"), m.sub("prompt_template"));
    if (!d.prompt_template.empty() && d.prompt_template.find("{question}") == std::string::npos)
      fail_at(c, m.get("prompt_template"), m.sub("prompt_template"), "the template has no {question} placeholder",
              "write e.g. 'prompt_template: \"Question: {question}\\nAnswer:\"'");
  }
  if (m.has("scorer") && !(m.get("scorer").IsScalar() && m.get("scorer").Scalar().empty()))  // "" = default
    d.scorer = as_enum(c, m.get("scorer"), m.sub("scorer"), kScorers);
  if (m.has("fields")) {
    if (d.name != "jsonl")
      fail_at(c, m.get("fields"), m.sub("fields"), fmt::format("fields only applies to name: jsonl, not {}", d.name),
              "remove dataset.fields");
    MapReader f(c, m.get("fields"), m.sub("fields"), kFieldsSchema);
    if (f.has("prompt")) d.fields.prompt = as_string(c, f.get("prompt"), f.sub("prompt"));
    if (f.has("answer")) d.fields.answer = as_string(c, f.get("answer"), f.sub("answer"));
    if (f.has("category")) d.fields.category = as_string(c, f.get("category"), f.sub("category"));
  }
  if (m.has("categories")) {
    Node n = m.get("categories");
    if (d.name != "spec_bench" && d.name != "jsonl")
      fail_at(c, n, m.sub("categories"), fmt::format("categories only applies to spec_bench and jsonl, not {}", d.name),
              "remove dataset.categories");
    d.categories = as_string_list(c, n, m.sub("categories"), true);
    if (d.name == "spec_bench")
      for (size_t i = 0; i < d.categories.size(); ++i)
        if (!contains(kSpecBenchCategories, d.categories[i])) {
          std::string guess = closest(d.categories[i], kSpecBenchCategories);
          fail_at(c, n.IsSequence() ? n[i] : n, fmt::format("{}.{}", m.sub("categories"), i),
                  fmt::format("'{}' is not a Spec-Bench category", d.categories[i]),
                  guess.empty() ? fmt::format("use some of {}", join(kSpecBenchCategories, "|"))
                                : fmt::format("did you mean '{}'? (allowed: {})", guess, join(kSpecBenchCategories, "|")));
        }
  }
  return d;
}

RunSpec read_run(const Ctx& c, const MapReader& root) {
  MapReader m(c, root.get("run"), "run", kRunSchema);
  RunSpec r;
  constexpr auto kIntMax = std::numeric_limits<int>::max();
  if (m.has("warmup")) r.warmup = as_int_in(c, m.get("warmup"), m.sub("warmup"), 0, kIntMax, 1);
  if (m.has("repeats")) r.repeats = as_int_in(c, m.get("repeats"), m.sub("repeats"), 1, kIntMax, 1);
  if (m.has("output_dir")) r.output_dir = expand_env(c, m.get("output_dir"), m.sub("output_dir"), as_string(c, m.get("output_dir"), m.sub("output_dir")));
  if (m.has("order")) r.order = as_enum(c, m.get("order"), m.sub("order"), kRunOrders);
  if (m.has("threads")) r.threads = as_int_in(c, m.get("threads"), m.sub("threads"), 0, kIntMax, 0);
  return r;
}

// The draft an arm actually uses must name a checkpoint unless it is "none".
void check_draft_path(const Ctx& c, const DraftSpec& d, const Node& at, const std::string& path) {
  if (d.kind != "none" && d.path.empty())
    fail_at(c, at, path + ".path", fmt::format("missing required key (draft kind {})", d.kind),
            fmt::format("add 'path: <draft checkpoint directory>' under {} or set kind: none", path));
}

std::vector<ArmSpec> read_arms(const Ctx& c, const MapReader& root, const DraftSpec& draft, const DecodingSpec& decoding,
                               std::vector<Node>& arm_nodes) {
  Node list = root.get("arms");
  if (!root.has("arms"))
    fail_at(c, root.node(), "arms", "missing required section",
            "add 'arms:' with at least one arm, e.g. '- {name: ears, verifier: {type: ears, beta: 0.1}}'");
  if (!list.IsSequence())
    fail_at(c, list, "arms", fmt::format("expected a list of arms, got {}", describe(list)), "write '- name: ...' entries");
  if (list.size() == 0) fail_at(c, list, "arms", "no arms", "add at least one arm");

  std::vector<ArmSpec> arms;
  Node draft_node = root.has("draft") ? root.get("draft") : root.node();
  for (size_t i = 0; i < list.size(); ++i) {
    Node el = list[i];
    std::string path = fmt::format("arms.{}", i);
    ArmSpec arm;
    arm.decoding = decoding;
    arm.draft = draft;
    std::vector<double> sweep;
    if (el.IsScalar()) {  // shorthand: "- ears" = {name: ears, verifier: {type: ears}}
      arm.verifier.type = as_enum(c, el, path, kVerifierTypes);
      arm.name = arm.verifier.type;
    } else {
      MapReader m(c, el, path, kArmSchema);
      if (!el.IsMap()) fail_at(c, el, path, fmt::format("expected an arm mapping, got {}", describe(el)), "write '- {name: ..., verifier: {...}}'");
      if (m.has("verifier")) {
        MapReader v(c, m.get("verifier"), m.sub("verifier"), kVerifierSchema);
        read_verifier_fields(c, v, arm.verifier);
        if (v.has("beta") && v.get("beta").IsSequence()) {
          Node betas = v.get("beta");
          if (betas.size() == 0) fail_at(c, betas, v.sub("beta"), "empty beta sweep", "list at least one value, e.g. [0.05, 0.1, 0.2]");
          for (size_t k = 0; k < betas.size(); ++k) {
            std::string bp = fmt::format("{}.{}", v.sub("beta"), k);
            double b = as_double(c, betas[k], bp, 0.1);
            if (b < 0) fail_at(c, betas[k], bp, fmt::format("{} is out of range", format_number(b)), "beta must be >= 0");
            sweep.push_back(b);
          }
        }
      }
      arm.name = m.has("name") ? as_string(c, m.get("name"), m.sub("name")) : arm.verifier.type;
      if (!valid_name(arm.name))
        fail_at(c, m.has("name") ? m.get("name") : el, m.sub("name"), fmt::format("'{}' is not a valid arm name", arm.name),
                "use letters, digits, '.', '_' and '-' only");
      if (m.has("baseline")) arm.baseline = as_bool(c, m.get("baseline"), m.sub("baseline"));
      if (m.has("decoding")) read_decoding_fields(c, MapReader(c, m.get("decoding"), m.sub("decoding"), kDecodingSchema), arm.decoding);
      bool own_draft = false;
      if (m.has("draft")) {
        MapReader d(c, m.get("draft"), m.sub("draft"), kDraftSchema);
        read_draft_fields(c, d, arm.draft);
        own_draft = d.has("kind") || d.has("path");
      }
      if (own_draft)
        check_draft_path(c, arm.draft, m.get("draft"), m.sub("draft"));
      else
        check_draft_path(c, arm.draft, draft_node, "draft");
      if (sweep.size() > 1 && arm.baseline)
        fail_at(c, m.get("baseline"), m.sub("baseline"), "a beta sweep expands into several arms, which one is the baseline?",
                "mark a separate arm as baseline");
    }
    if (el.IsScalar()) check_draft_path(c, arm.draft, draft_node, "draft");
    if (sweep.empty()) {
      arms.push_back(arm);
      arm_nodes.push_back(el);
    } else {
      for (double b : sweep) {
        ArmSpec a = arm;
        a.verifier.beta = b;
        a.name = fmt::format("{}-b{}", arm.name, format_number(b));
        arms.push_back(a);
        arm_nodes.push_back(el);
      }
    }
  }

  // Unique names, exactly one baseline.
  for (size_t i = 0; i < arms.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (arms[i].name == arms[j].name) {
        Node at = arm_nodes[i].IsMap() && arm_nodes[i]["name"].IsDefined() ? arm_nodes[i]["name"] : arm_nodes[i];
        fail_at(c, at, "arms", fmt::format("duplicate arm name '{}'", arms[i].name), "give each arm a unique name");
      }
  std::optional<size_t> base;
  for (size_t i = 0; i < arms.size(); ++i)
    if (arms[i].baseline) {
      if (base)
        fail_at(c, arm_nodes[i], "arms", fmt::format("more than one baseline arm ('{}' and '{}')", arms[*base].name, arms[i].name),
                "mark exactly one arm with baseline: true (default: the first arm)");
      base = i;
    }
  if (!base) arms[0].baseline = true;
  return arms;
}

GateRule read_gate_map(const Ctx& c, const Node& n, const std::string& path) {
  MapReader m(c, n, path, kGateSchema);
  GateRule g;
  std::string prefix = fmt::format("{}: {}", where(c, n), path);
  if (!m.has("metric")) m.missing("metric", "add 'metric: <name>', e.g. accuracy_delta_pp");
  if (!m.has("op")) m.missing("op", "add 'op: \">=\"' (one of >= <= > < ==)");
  if (!m.has("value")) m.missing("value", "add 'value: <number>'");
  std::string text = fmt::format("{}: {} {} {}", m.has("arm") ? as_string(c, m.get("arm"), m.sub("arm")) : "*",
                                 as_string(c, m.get("metric"), m.sub("metric")), as_string(c, m.get("op"), m.sub("op")),
                                 as_string(c, m.get("value"), m.sub("value")));
  return parse_gate_rule(text, prefix);
}

// Each rule as text or as a map; "*" expanded per arm, arm names checked (reports/gate.h).
std::vector<GateRule> read_gates(const Ctx& c, const Node& gates, const std::vector<ArmSpec>& arms) {
  if (!gates.IsSequence())
    fail_at(c, gates, "gates", fmt::format("expected a list of rules, got {}", describe(gates)),
            "write '- \"ears: accuracy_delta_pp >= -1\"' entries");
  std::vector<std::string> names;
  std::string baseline;
  for (const ArmSpec& a : arms) {
    names.push_back(a.name);
    if (a.baseline) baseline = a.name;
  }
  std::vector<GateRule> out;
  for (size_t i = 0; i < gates.size(); ++i) {
    const Node g = gates[i];
    const std::string path = fmt::format("gates.{}", i), at = fmt::format("{}: {}", where(c, g), path);
    const GateRule rule = g.IsMap() ? read_gate_map(c, g, path) : parse_gate_rule(as_string(c, g, path), at);
    for (GateRule& r : expand_gate_rules({rule}, names, baseline, at)) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

// ================================================================ public

std::vector<int> DraftSpec::hf_aux_layers() const {
  std::vector<int> out = aux_layers;
  if (aux_layer_convention == "sglang")
    for (int& id : out) ++id;
  return out;
}

std::size_t ExperimentSpec::baseline_index() const {
  for (size_t i = 0; i < arms.size(); ++i)
    if (arms[i].baseline) return i;
  return 0;
}

ExperimentSpec parse_experiment(const std::string& yaml_text, const std::string& file_label, const fs::path& base_dir,
                                const std::vector<std::string>& overrides) {
  Ctx c{file_label, base_dir};
  Node doc;
  check_yaml_text(yaml_text, file_label);
  try {
    doc = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}:{}: (yaml): syntax error: {}; fix the YAML here (indentation, ':' after keys, closing brackets and quotes)",
                            file_label, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (!doc.IsDefined() || doc.IsNull())
    throw Error(fmt::format("{}:1:1: (document): the file is empty; it needs at least target, dataset and arms", file_label));
  if (!doc.IsMap())
    fail_at(c, doc, "(document)", fmt::format("expected a mapping of sections, got {}", describe(doc)),
            fmt::format("write sections as 'key: value' ({})", join(kRootSchema.keys(), ", ")));
  for (const auto& ov : overrides) apply_override(c, doc, ov);

  MapReader root(c, doc, "", kRootSchema);
  ExperimentSpec s;
  if (root.has("name")) {
    s.name = as_string(c, root.get("name"), "name");
    if (!valid_name(s.name))
      fail_at(c, root.get("name"), "name", fmt::format("'{}' is not a valid experiment name", s.name),
              "use letters, digits, '.', '_' and '-' only (it names the output directory)");
  } else {
    s.name = fs::path(file_label).stem().string();
    for (char& ch : s.name)
      if (!valid_name(std::string_view(&ch, 1))) ch = '-';
    if (s.name.empty()) s.name = "experiment";
  }
  if (root.has("description")) s.description = as_string(c, root.get("description"), "description");

  s.target = read_target(c, root);
  read_draft_fields(c, MapReader(c, root.get("draft"), "draft", kDraftSchema), s.draft);
  s.dataset = read_dataset(c, root);
  read_decoding_fields(c, MapReader(c, root.get("decoding"), "decoding", kDecodingSchema), s.decoding);
  std::vector<Node> arm_nodes;
  s.arms = read_arms(c, root, s.draft, s.decoding, arm_nodes);
  s.run = read_run(c, root);

  if (root.has("gates")) s.gates = read_gates(c, root.get("gates"), s.arms);
  return s;
}

ExperimentSpec load_experiment(const fs::path& file, const std::vector<std::string>& overrides) {
  const std::string text = read_file(file, "the experiment file", "check the path");
  return parse_experiment(text, file.string(), fs::absolute(file).parent_path(), overrides);
}

// ---------------------------------------------------------------- output

namespace {

// Plain scalars that a YAML reader would take as something other than a string get quotes.
void emit_str(YAML::Emitter& e, const std::string& s) {
  double d;
  std::string l = lower_ascii(s);
  bool ambiguous = s.empty() || parse_double(s, d) || l == "true" || l == "false" || l == "yes" || l == "no" || l == "on" ||
                   l == "off" || l == "null" || l == "~" || s != trim(s);
  if (ambiguous) e << YAML::DoubleQuoted;
  e << s;
}

void emit_kv(YAML::Emitter& e, const char* key, const std::string& s) {
  e << YAML::Key << key << YAML::Value;
  emit_str(e, s);
}
void emit_kv(YAML::Emitter& e, const char* key, double v) { e << YAML::Key << key << YAML::Value << format_number(v); }
void emit_kv(YAML::Emitter& e, const char* key, std::int64_t v) { e << YAML::Key << key << YAML::Value << v; }
void emit_kv(YAML::Emitter& e, const char* key, int v) { e << YAML::Key << key << YAML::Value << v; }
void emit_kv(YAML::Emitter& e, const char* key, std::uint64_t v) { e << YAML::Key << key << YAML::Value << v; }
void emit_kv(YAML::Emitter& e, const char* key, bool v) { e << YAML::Key << key << YAML::Value << (v ? "true" : "false"); }
void emit_kv(YAML::Emitter& e, const char* key, const std::vector<std::string>& v) {
  e << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (auto& s : v) emit_str(e, s);
  e << YAML::EndSeq;
}
void emit_kv(YAML::Emitter& e, const char* key, const std::vector<int>& v) {
  e << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (int x : v) e << x;
  e << YAML::EndSeq;
}

// Emits the fields of `d` that differ from `ref` (all of them when ref is null).
void emit_draft(YAML::Emitter& e, const DraftSpec& d, const DraftSpec* ref) {
  if (!ref || d.kind != ref->kind) emit_kv(e, "kind", d.kind);
  if (!ref || d.path != ref->path) emit_kv(e, "path", d.path);
  if (!ref || d.sampling != ref->sampling) emit_kv(e, "sampling", d.sampling);
  if (!ref || d.dtype != ref->dtype) emit_kv(e, "dtype", d.dtype);
  if (!ref || d.aux_layers != ref->aux_layers) {
    emit_kv(e, "aux_layers", d.aux_layers);
    if (d.aux_layers.empty()) e << YAML::Comment("empty = the checkpoint's eagle_aux_hidden_state_layer_ids");
  }
  if (!ref || d.aux_layer_convention != ref->aux_layer_convention) emit_kv(e, "aux_layer_convention", d.aux_layer_convention);
}

void emit_decoding(YAML::Emitter& e, const DecodingSpec& d, const DecodingSpec* ref) {
  if (!ref || d.gamma != ref->gamma) emit_kv(e, "gamma", d.gamma);
  if (!ref || d.temperature != ref->temperature) emit_kv(e, "temperature", d.temperature);
  if (!ref || d.top_p != ref->top_p) emit_kv(e, "top_p", d.top_p);
  if (!ref || d.top_k != ref->top_k) emit_kv(e, "top_k", d.top_k);
  if (!ref || d.max_new_tokens != ref->max_new_tokens) emit_kv(e, "max_new_tokens", d.max_new_tokens);
  if (!ref || d.stop != ref->stop) emit_kv(e, "stop", d.stop);
  if (!ref || d.batch_size != ref->batch_size) emit_kv(e, "batch_size", d.batch_size);
  if (!ref || d.seed != ref->seed) emit_kv(e, "seed", d.seed);
  if (!ref || d.distortion != ref->distortion) emit_kv(e, "distortion", d.distortion);
}

nlohmann::json draft_json(const DraftSpec& d) {
  return {{"kind", d.kind},       {"path", d.path},
          {"sampling", d.sampling}, {"dtype", d.dtype},
          {"aux_layers", d.aux_layers}, {"aux_layer_convention", d.aux_layer_convention}};
}

nlohmann::json decoding_json(const DecodingSpec& d) {
  return {{"gamma", d.gamma},
          {"temperature", d.temperature},
          {"top_p", d.top_p},
          {"top_k", d.top_k},
          {"max_new_tokens", d.max_new_tokens},
          {"stop", d.stop},
          {"batch_size", d.batch_size},
          {"seed", d.seed},
          {"distortion", d.distortion}};
}

}  // namespace

std::string to_yaml(const ExperimentSpec& s) {
  YAML::Emitter e;
  e << YAML::Comment("ears-bench experiment, fully resolved (every default filled in)");
  e << YAML::BeginMap;
  emit_kv(e, "name", s.name);
  emit_kv(e, "description", s.description);

  e << YAML::Key << "target" << YAML::Value << YAML::BeginMap;
  emit_kv(e, "path", s.target.path);
  emit_kv(e, "dtype", s.target.dtype);
  emit_kv(e, "device", s.target.device);
  e << YAML::EndMap;

  e << YAML::Key << "draft" << YAML::Value << YAML::BeginMap;
  emit_draft(e, s.draft, nullptr);
  e << YAML::EndMap;

  const DatasetSection& d = s.dataset;
  e << YAML::Key << "dataset" << YAML::Value << YAML::BeginMap;
  emit_kv(e, "name", d.name);
  const bool synthetic = d.name == "synth-gsm" || d.name == "open-stems";
  if (!synthetic) {
    emit_kv(e, "path", d.path);
    if (d.path.empty()) e << YAML::Comment("empty = the loader's default location");
  }
  emit_kv(e, "split", d.split);
  if (d.split.empty()) e << YAML::Comment("empty = the dataset's standard split");
  emit_kv(e, "limit", d.limit);
  e << YAML::Comment("0 = all");
  emit_kv(e, "offset", d.offset);
  emit_kv(e, "n_shot", d.n_shot);
  emit_kv(e, "prompt_format", d.prompt_format);
  emit_kv(e, "thinking", d.thinking);
  emit_kv(e, "seed", d.seed);
  if (d.name == "synth-gsm") emit_kv(e, "n", d.n);
  emit_kv(e, "on_error", d.on_error);
  emit_kv(e, "prompt_template", d.prompt_template);
  if (d.prompt_template.empty()) e << YAML::Comment("empty = the dataset's standard prompt");
  emit_kv(e, "scorer", d.scorer);
  if (d.scorer.empty()) e << YAML::Comment("empty = the dataset's scorer");
  if (d.name == "jsonl") {
    e << YAML::Key << "fields" << YAML::Value << YAML::BeginMap;
    emit_kv(e, "prompt", d.fields.prompt);
    emit_kv(e, "answer", d.fields.answer);
    emit_kv(e, "category", d.fields.category);
    e << YAML::EndMap;
  }
  if (d.name == "jsonl" || d.name == "spec_bench") emit_kv(e, "categories", d.categories);
  e << YAML::EndMap;

  e << YAML::Key << "decoding" << YAML::Value << YAML::BeginMap;
  emit_decoding(e, s.decoding, nullptr);
  e << YAML::EndMap;

  e << YAML::Key << "arms" << YAML::Value << YAML::BeginSeq;
  for (const ArmSpec& a : s.arms) {
    e << YAML::BeginMap;
    emit_kv(e, "name", a.name);
    emit_kv(e, "baseline", a.baseline);
    e << YAML::Key << "verifier" << YAML::Value << YAML::BeginMap;
    emit_kv(e, "type", a.verifier.type);
    emit_kv(e, "beta", a.verifier.beta);
    emit_kv(e, "uncertainty", a.verifier.uncertainty);
    emit_kv(e, "eps", a.verifier.eps);
    emit_kv(e, "delta", a.verifier.delta);
    e << YAML::EndMap;
    if (a.decoding != s.decoding) {
      e << YAML::Key << "decoding" << YAML::Value << YAML::BeginMap;
      emit_decoding(e, a.decoding, &s.decoding);
      e << YAML::EndMap;
    }
    if (a.draft != s.draft) {
      e << YAML::Key << "draft" << YAML::Value << YAML::BeginMap;
      emit_draft(e, a.draft, &s.draft);
      e << YAML::EndMap;
    }
    e << YAML::EndMap;
  }
  e << YAML::EndSeq;

  e << YAML::Key << "run" << YAML::Value << YAML::BeginMap;
  emit_kv(e, "warmup", s.run.warmup);
  emit_kv(e, "repeats", s.run.repeats);
  emit_kv(e, "output_dir", s.run.output_dir);
  e << YAML::Comment("empty = runs/<name>-<timestamp>");
  emit_kv(e, "order", s.run.order);
  emit_kv(e, "threads", s.run.threads);
  e << YAML::Comment("0 = all cores");
  e << YAML::EndMap;

  e << YAML::Key << "gates" << YAML::Value << YAML::BeginSeq;
  for (const GateRule& g : s.gates) e << YAML::DoubleQuoted << to_string(g);
  e << YAML::EndSeq;
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

nlohmann::json to_json(const ExperimentSpec& s) {
  nlohmann::json arms = nlohmann::json::array();
  for (const ArmSpec& a : s.arms)
    arms.push_back({{"name", a.name},
                    {"baseline", a.baseline},
                    {"verifier",
                     {{"type", a.verifier.type},
                      {"beta", a.verifier.beta},
                      {"uncertainty", a.verifier.uncertainty},
                      {"eps", a.verifier.eps},
                      {"delta", a.verifier.delta}}},
                    {"decoding", decoding_json(a.decoding)},
                    {"draft", draft_json(a.draft)}});
  nlohmann::json gates = nlohmann::json::array();
  for (const GateRule& g : s.gates)
    gates.push_back({{"arm", g.arm}, {"metric", g.metric}, {"op", g.op}, {"value", g.value}, {"text", to_string(g)}});
  const DatasetSection& d = s.dataset;
  return {{"name", s.name},
          {"description", s.description},
          {"target", {{"path", s.target.path}, {"dtype", s.target.dtype}, {"device", s.target.device}}},
          {"draft", draft_json(s.draft)},
          {"dataset",
           {{"name", d.name},
            {"path", d.path},
            {"split", d.split},
            {"limit", d.limit},
            {"offset", d.offset},
            {"n_shot", d.n_shot},
            {"prompt_format", d.prompt_format},
            {"thinking", d.thinking},
            {"seed", d.seed},
            {"n", d.n},
            {"on_error", d.on_error},
            {"prompt_template", d.prompt_template},
            {"scorer", d.scorer},
            {"fields", {{"prompt", d.fields.prompt}, {"answer", d.fields.answer}, {"category", d.fields.category}}},
            {"categories", d.categories}}},
          {"decoding", decoding_json(s.decoding)},
          {"arms", arms},
          {"baseline_arm", s.arms.empty() ? std::string() : s.baseline_arm().name},
          {"run",
           {{"warmup", s.run.warmup},
            {"repeats", s.run.repeats},
            {"output_dir", s.run.output_dir},
            {"order", s.run.order},
            {"threads", s.run.threads}}},
          {"gates", gates}};
}

}  // namespace ears::config
