// Experiment configuration, internal: each section's keys declared once, as a Table of Fields
// (key, member, reader with its range, rules, one-line doc). Everything else is derived from the
// tables: the Schema (allowed keys, "did you mean", --set navigation), reading, to_yaml, to_json.
//
// A Field's reader runs only when the key is present and not null. Hooks, in this order:
//   absent(m, s)  key missing or null (required keys, defaults from elsewhere);
//   skip(node)    a present value the table leaves to the section's code (e.g. a beta sweep);
//   pre(at, s)    rules on other fields, before the value is read ("n only applies to ...");
//   read(at, s)   the typed value and its range, into s;
//   post(at, s)   rules on the value just read together with earlier fields.
// Fields are read in table order, which is also the key order of to_yaml and of error messages.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "decoders/param_ranges.h"
#include "harness/base/error.h"
#include "harness/base/strings.h"
#include "harness/config/config.h"
#include "harness/config/yaml.h"

namespace ears::config::detail {

// ---------------------------------------------------------------- layout

// The shape of the YAML tree: which keys a mapping allows and what a list holds. Used for the
// unknown-key check, --set navigation and "belongs under" hints.
struct Schema {
  enum class Kind { Leaf, Map, List } kind = Kind::Leaf;
  std::vector<std::pair<std::string_view, const Schema*>> fields;  // Map
  const Schema* item = nullptr;                                    // List
  std::string_view name;  // section name, for "belongs under" hints

  const Schema* field(std::string_view key) const;
  std::vector<std::string_view> keys() const;
};
extern const Schema kLeaf;

// "did you mean 'x'?", "'k' belongs under S; allowed here: ...", or "allowed keys: ...".
std::string unknown_key_fix(std::string_view key, const Schema& schema);

// Checks a mapping's keys (type, duplicates, unknown keys with suggestions) and hands out values.
// Null values count as absent (so "dtype:" means "use the default").
class MapReader {
 public:
  MapReader(const Ctx& c, const Node& node, std::string path, const Schema& schema);
  // The value of a present, non-null key; a null node otherwise (check has() first).
  Node get(std::string_view key) const;
  bool has(std::string_view key) const;
  std::string sub(std::string_view key) const { return path_.empty() ? std::string(key) : path_ + "." + std::string(key); }
  const Node& node() const { return node_; }
  const std::string& path() const { return path_; }
  const Ctx& ctx() const { return c_; }
  // Location for "missing key" errors: the mapping itself.
  [[noreturn]] void missing(std::string_view key, std::string_view fix) const;

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

// A present value being read: its mapping, node and key path.
struct At {
  const Ctx& c;
  const MapReader& m;
  Node node;
  std::string path;
  [[noreturn]] void fail(std::string_view problem, std::string_view fix) const { fail_at(c, node, path, problem, fix); }
};

// ---------------------------------------------------------------- fields and tables

void emit_value(YAML::Emitter& e, const std::string& v);
void emit_value(YAML::Emitter& e, double v);
void emit_value(YAML::Emitter& e, std::int64_t v);
void emit_value(YAML::Emitter& e, int v);
void emit_value(YAML::Emitter& e, std::uint64_t v);
void emit_value(YAML::Emitter& e, bool v);
void emit_value(YAML::Emitter& e, const std::vector<std::string>& v);
void emit_value(YAML::Emitter& e, const std::vector<int>& v);

template <class S>
struct Field {
  using Rule = std::function<void(const At&, const S&)>;
  std::string_view key;
  std::string_view doc;  // one line: what the key means (its range lives in the reader)
  const Schema* schema = &kLeaf;
  // reading (read == null: the section's own code reads the key)
  std::function<void(const MapReader&, S&)> absent;
  std::function<bool(const Node&)> skip;
  Rule pre, post;
  std::function<void(const At&, S&)> read;
  // output
  std::function<void(YAML::Emitter&, const S&, const S* ref)> yaml;  // the value, after its key
  std::function<nlohmann::json(const S&)> json;
  std::function<bool(const S&, const S&)> same;
  std::function<bool(const S&)> emit_if;  // to_yaml emits the key only when true (null: always)
  std::function<bool(const S&)> note_if;  // to_yaml comments the value with `note` when true
  std::string_view note;
  bool always = false;  // emitted in full even where it equals the reference (see Table::emit)

  // Builder steps, so a table row reads as one expression.
  Field&& when_absent(std::function<void(const MapReader&, S&)> f) && { absent = std::move(f); return std::move(*this); }
  Field&& skip_if(std::function<bool(const Node&)> f) && { skip = std::move(f); return std::move(*this); }
  Field&& before(Rule r) && { pre = std::move(r); return std::move(*this); }
  Field&& after(Rule r) && { post = std::move(r); return std::move(*this); }
  Field&& yaml_if(std::function<bool(const S&)> f) && { emit_if = std::move(f); return std::move(*this); }
  Field&& comment(std::string_view text, std::function<bool(const S&)> f) && {
    note = text, note_if = std::move(f);
    return std::move(*this);
  }
  Field&& in_full() && { always = true; return std::move(*this); }
};

template <class S>
struct Table {
  std::vector<Field<S>> fields;
  Schema schema;  // derived from `fields`; Tables live in function statics, so pointers stay valid

  Table(std::string_view name, std::vector<Field<S>> f) : fields(std::move(f)) {
    schema.kind = Schema::Kind::Map;
    schema.name = name;
    for (const Field<S>& x : fields) schema.fields.emplace_back(x.key, x.schema);
  }
  const Field<S>& at(std::string_view key) const {
    for (const Field<S>& x : fields)
      if (x.key == key) return x;
    throw std::logic_error("config table has no key " + std::string(key));
  }

  // Reads every key of `m` that has a reader, in table order (see the hooks at the top).
  void read(const MapReader& m, S& s) const {
    for (const Field<S>& f : fields)
      if (f.read) read_key(m, f, s);
  }
  // Reads one key of `m` (for sections that read their keys in an order of their own).
  void read_key(const MapReader& m, std::string_view key, S& s) const { read_key(m, at(key), s); }
  void read_key(const MapReader& m, const Field<S>& f, S& s) const {
    if (!m.has(f.key)) {
      if (f.absent) f.absent(m, s);
      return;
    }
    const At a{m.ctx(), m, m.get(f.key), m.sub(f.key)};
    if (f.skip && f.skip(a.node)) return;
    if (f.pre) f.pre(a, s);
    f.read(a, s);
    if (f.post) f.post(a, s);
  }
  // Key/value pairs into an open YAML map. With `ref`, keys equal to ref's are left out (except
  // in_full ones), and nested sections show only their differing keys.
  void emit(YAML::Emitter& e, const S& s, const S* ref = nullptr) const {
    for (const Field<S>& f : fields) {
      if (f.emit_if && !f.emit_if(s)) continue;
      if (ref && !f.always && f.same(s, *ref)) continue;
      e << YAML::Key << std::string(f.key) << YAML::Value;
      f.yaml(e, s, f.always ? nullptr : ref);
      if (f.note_if && f.note_if(s)) e << YAML::Comment(std::string(f.note));
    }
  }
  nlohmann::json json(const S& s) const {
    nlohmann::json j = nlohmann::json::object();
    for (const Field<S>& f : fields) j[std::string(f.key)] = f.json(s);
    return j;
  }
};

// A field bound to `member`, read by `reader` (a callable T(const At&), see the readers below).
template <class S, class T, class R>
Field<S> field(std::string_view key, T S::*member, R reader, std::string_view doc) {
  Field<S> f;
  f.key = key, f.doc = doc;
  f.read = [member, reader](const At& at, S& s) { s.*member = reader(at); };
  f.yaml = [member](YAML::Emitter& e, const S& s, const S*) { emit_value(e, s.*member); };
  f.json = [member](const S& s) { return nlohmann::json(s.*member); };
  f.same = [member](const S& a, const S& b) { return a.*member == b.*member; };
  return f;
}

// A nested section (a mapping read and written by its own table).
template <class S, class T>
Field<S> section(std::string_view key, T S::*member, const Table<T>& table, std::string_view doc) {
  Field<S> f;
  f.key = key, f.doc = doc, f.schema = &table.schema;
  f.read = [member, &table](const At& at, S& s) { table.read(MapReader(at.c, at.node, at.path, table.schema), s.*member); };
  f.yaml = [member, &table](YAML::Emitter& e, const S& s, const S* ref) {
    e << YAML::BeginMap;
    table.emit(e, s.*member, ref ? &(ref->*member) : nullptr);
    e << YAML::EndMap;
  };
  f.json = [member, &table](const S& s) { return table.json(s.*member); };
  f.same = [member](const S& a, const S& b) { return a.*member == b.*member; };
  return f;
}

// A key whose reading and output the section's code supplies (structural keys: arms, gates).
template <class S>
Field<S> custom(std::string_view key, const Schema* schema, std::string_view doc) {
  Field<S> f;
  f.key = key, f.doc = doc, f.schema = schema;
  return f;
}

// ---- readers: callables T(const At&) ----
inline constexpr auto kIntMax = std::numeric_limits<int>::max();
inline auto Str() { return [](const At& a) { return as_string(a.c, a.node, a.path); }; }
inline auto Path() { return [](const At& a) { return as_path(a.c, a.node, a.path); }; }
inline auto EnvStr() { return [](const At& a) { return expand_env(a.c, a.node, a.path, as_string(a.c, a.node, a.path)); }; }
inline auto Device() { return [](const At& a) { return as_device(a.c, a.node, a.path); }; }
inline auto Bool() { return [](const At& a) { return as_bool(a.c, a.node, a.path); }; }
inline auto U64() { return [](const At& a) { return as_u64(a.c, a.node, a.path); }; }
inline auto StrList() { return [](const At& a) { return as_string_list(a.c, a.node, a.path, true); }; }
// An int in [lo, hi] (hi = kIntMax: no upper bound); `example` shows in "write e.g." fixes.
inline auto Int(std::int64_t lo, std::int64_t hi, std::int64_t example) {
  return [=](const At& a) { return as_int_in(a.c, a.node, a.path, lo, hi, example); };
}
inline auto Count(std::int64_t lo, std::int64_t example) {
  return [=](const At& a) { return as_count(a.c, a.node, a.path, lo, example); };
}
// An int in one of decoders/param_ranges.h's ranges (the decoders enforce the same at run time).
inline auto Int(std::int64_t example, const ranges::Range& r) {
  return [=](const At& a) {
    const auto v = as_int_in(a.c, a.node, a.path, std::numeric_limits<int>::min(), kIntMax, example);
    if (!r.ok(static_cast<double>(v))) a.fail(fmt::format("{} is out of range", v), r.fix);
    return v;
  };
}
// A number in one of decoders/param_ranges.h's ranges.
inline auto Real(double example, const ranges::Range& r) {
  return [=](const At& a) {
    const double v = as_double(a.c, a.node, a.path, example);
    if (!r.ok(v)) a.fail(fmt::format("{} is out of range", format_number(v)), r.fix);
    return v;
  };
}
inline auto Enum(std::span<const std::string_view> allowed, Aliases aliases = {}) {
  return [=](const At& a) { return as_enum(a.c, a.node, a.path, allowed, aliases); };
}
// Model dtypes, with common spellings suggested (fp16 -> float16).
inline constexpr std::pair<std::string_view, std::string_view> kDtypeAliases[] = {
    {"fp16", "float16"}, {"half", "float16"}, {"bf16", "bfloat16"}, {"fp32", "float32"}, {"float", "float32"}};
inline auto Dtype() { return Enum(kDtypes, kDtypeAliases); }

// ---------------------------------------------------------------- the tables

const Table<TargetSpec>& target_table();
const Table<DraftSpec>& draft_table();
const Table<DatasetSection>& dataset_table();
const Table<DatasetFields>& dataset_fields_table();
const Table<DecodingSpec>& decoding_table();
const Table<VerifierSpec>& verifier_table();
const Table<RunSpec>& run_table();
const Schema& gate_schema();  // the mapping form of a gate rule (reports/gate.h parses it)
// Defined in config.cpp (they read the structural keys: arms with sweeps, gates).
const Table<ArmSpec>& arm_table();
const Table<ExperimentSpec>& root_table();

// Applies one "key.path=value" override to the document (checked against root_table's schema).
void apply_override(const Ctx& c, Node root, const std::string& text);

}  // namespace ears::config::detail
