// Experiment configuration: YAML -> validated ExperimentSpec. See config.h for the contract.
//
// Flow: YAML::Load -> apply --set overrides to the node tree (override.cpp) -> read the
// top-level table (below), which reads each section through its table (schema.cpp) with
// strict checks (unknown keys, duplicates, types, ranges). to_yaml / to_json walk the same tables.
// This file holds the structural part: arms (sweeps, baseline, draft paths), gates, the top level.
#include "harness/config/config.h"

#include <optional>

#include "harness/base/error.h"
#include "harness/base/files.h"
#include "harness/base/strings.h"
#include "harness/config/schema.h"

namespace ears::config {
namespace fs = std::filesystem;
using namespace detail;

namespace {

// ---------------------------------------------------------------- arms

// The draft an arm actually uses must name a checkpoint unless it is "none", and computes in the
// target's dtype (an EAGLE-3 head reads the target's hidden states; a draft model shares the
// target's device and dtype): its dtype is auto or target.dtype's.
void check_draft(const Ctx& c, const DraftSpec& d, const std::string& target_dtype, const Node& at, const std::string& path) {
  if (d.kind != "none" && d.path.empty())
    fail_at(c, at, path + ".path", fmt::format("missing required key (draft kind {})", d.kind),
            fmt::format("add 'path: <draft checkpoint directory>' under {} or set kind: none", path));
  if (d.dtype != "auto" && d.dtype != target_dtype)
    fail_at(c, at.IsMap() && at["dtype"].IsDefined() ? at["dtype"] : at, path + ".dtype",
            fmt::format("the draft computes in the target's dtype (target.dtype: {}), not {}", target_dtype, d.dtype),
            "write 'dtype: auto' or leave the key out");
}

// The beta values of a sweep ("beta: [0.05, 0.1]"), each read like a single beta.
std::vector<double> read_beta_sweep(const Ctx& c, const MapReader& v) {
  std::vector<double> sweep;
  if (!(v.has("beta") && v.get("beta").IsSequence())) return sweep;
  Node betas = v.get("beta");
  if (betas.size() == 0) fail_at(c, betas, v.sub("beta"), "empty beta sweep", "list at least one value, e.g. [0.05, 0.1, 0.2]");
  const Field<VerifierSpec>& beta = verifier_table().at("beta");
  for (size_t k = 0; k < betas.size(); ++k) {
    VerifierSpec one;
    beta.read(At{c, v, betas[k], fmt::format("{}.{}", v.sub("beta"), k)}, one);
    sweep.push_back(one.beta);
  }
  return sweep;
}

// A beta sweep on an arm whose rule reads no beta made several identical arms: refused at the key.
// (A single beta there stays legal, unread: the resolved config.yaml of every run writes each
// verifier key for every arm, and a resume reads it back.)
void check_beta_sweep_type(const Ctx& c, const MapReader& v, const std::string& type) {
  if (type != "ears" && v.has("beta") && v.get("beta").IsSequence())
    fail_at(c, v.get("beta"), v.sub("beta"),
            fmt::format("a beta sweep applies to type ears only, and this arm's type is {}", type),
            "give the sweep to an ears arm, or a single beta");
}

// One arm given as a mapping (arm holds the top-level decoding and draft); returns its sweep.
std::vector<double> read_arm_map(const Ctx& c, const Node& el, const std::string& path, const Node& draft_node,
                                 const std::string& target_dtype, ArmSpec& arm) {
  const Table<ArmSpec>& t = arm_table();
  MapReader m(c, el, path, t.schema);
  if (!el.IsMap()) fail_at(c, el, path, fmt::format("expected an arm mapping, got {}", describe(el)), "write '- {name: ..., verifier: {...}}'");
  std::vector<double> sweep;
  if (m.has("verifier")) {
    MapReader v(c, m.get("verifier"), m.sub("verifier"), verifier_table().schema);
    verifier_table().read(v, arm.verifier);
    check_beta_sweep_type(c, v, arm.verifier.type);
    sweep = read_beta_sweep(c, v);
  }
  arm.name = m.has("name") ? as_string(c, m.get("name"), m.sub("name")) : arm.verifier.type;
  if (!valid_name(arm.name))
    fail_at(c, m.has("name") ? m.get("name") : el, m.sub("name"), fmt::format("'{}' is not a valid arm name", arm.name),
            "use letters, digits, '.', '_' and '-' only");
  t.read_key(m, "baseline", arm);
  t.read_key(m, "decoding", arm);
  bool own_draft = false;
  if (m.has("draft")) {
    MapReader d(c, m.get("draft"), m.sub("draft"), draft_table().schema);
    draft_table().read(d, arm.draft);
    own_draft = d.has("kind") || d.has("path") || d.has("dtype");
  }
  if (own_draft)
    check_draft(c, arm.draft, target_dtype, m.get("draft"), m.sub("draft"));
  else
    check_draft(c, arm.draft, target_dtype, draft_node, "draft");
  if (sweep.size() > 1 && arm.baseline)
    fail_at(c, m.get("baseline"), m.sub("baseline"), "a beta sweep expands into several arms, which one is the baseline?",
            "mark a separate arm as baseline");
  return sweep;
}

// Unique names, exactly one baseline (the first arm when none is marked).
void check_arms(const Ctx& c, std::vector<ArmSpec>& arms, const std::vector<Node>& arm_nodes) {
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
}

// The arms list (at.node) of the top level; s.draft and s.decoding are read already.
void read_arms(const At& at, ExperimentSpec& s) {
  const Ctx& c = at.c;
  const Node& list = at.node;
  if (!list.IsSequence())
    fail_at(c, list, "arms", fmt::format("expected a list of arms, got {}", describe(list)), "write '- name: ...' entries");
  if (list.size() == 0) fail_at(c, list, "arms", "no arms", "add at least one arm");

  std::vector<Node> arm_nodes;
  Node draft_node = at.m.has("draft") ? at.m.get("draft") : at.m.node();
  for (size_t i = 0; i < list.size(); ++i) {
    Node el = list[i];
    std::string path = fmt::format("arms.{}", i);
    ArmSpec arm;
    arm.decoding = s.decoding;
    arm.draft = s.draft;
    std::vector<double> sweep;
    if (el.IsScalar()) {  // shorthand: "- ears" = {name: ears, verifier: {type: ears}}
      verifier_table().at("type").read(At{c, at.m, el, path}, arm.verifier);
      arm.name = arm.verifier.type;
      check_draft(c, arm.draft, s.target.dtype, draft_node, "draft");
    } else {
      sweep = read_arm_map(c, el, path, draft_node, s.target.dtype, arm);
    }
    if (sweep.empty()) {
      s.arms.push_back(arm);
      arm_nodes.push_back(el);
    }
    for (double b : sweep) {  // a beta sweep: one arm per value, named <name>-b<beta>
      ArmSpec a = arm;
      a.verifier.beta = b;
      a.name = fmt::format("{}-b{}", arm.name, format_number(b));
      s.arms.push_back(a);
      arm_nodes.push_back(el);
    }
  }
  check_arms(c, s.arms, arm_nodes);
}

// ---------------------------------------------------------------- gates

GateRule read_gate_map(const Ctx& c, const Node& n, const std::string& path) {
  MapReader m(c, n, path, gate_schema());
  std::string prefix = fmt::format("{}: {}", where(c, n), path);
  if (!m.has("metric")) m.missing("metric", "add 'metric: <name>', e.g. accuracy_delta_pp");
  if (!m.has("op")) m.missing("op", fmt::format("add 'op: \">=\"' (one of {})", gate_ops_list()));
  if (!m.has("value")) m.missing("value", "add 'value: <number>'");
  std::string text = fmt::format("{}: {} {} {}", m.has("arm") ? as_string(c, m.get("arm"), m.sub("arm")) : "*",
                                 as_string(c, m.get("metric"), m.sub("metric")), as_string(c, m.get("op"), m.sub("op")),
                                 as_string(c, m.get("value"), m.sub("value")));
  return parse_gate_rule(text, prefix);
}

// Each rule as text or as a map; "*" expanded per arm, arm names checked (reports/gate.h).
void read_gates(const At& at, ExperimentSpec& s) {
  const Ctx& c = at.c;
  const Node& gates = at.node;
  if (!gates.IsSequence())
    fail_at(c, gates, "gates", fmt::format("expected a list of rules, got {}", describe(gates)),
            "write '- \"ears: accuracy_delta_pp >= -1\"' entries");
  std::vector<std::string> names;
  std::string baseline;
  for (const ArmSpec& a : s.arms) {
    names.push_back(a.name);
    if (a.baseline) baseline = a.name;
  }
  for (size_t i = 0; i < gates.size(); ++i) {
    const Node g = gates[i];
    const std::string path = fmt::format("gates.{}", i), where_at = fmt::format("{}: {}", where(c, g), path);
    const GateRule rule = g.IsMap() ? read_gate_map(c, g, path) : parse_gate_rule(as_string(c, g, path), where_at);
    for (GateRule& r : expand_gate_rules({rule}, names, baseline, where_at)) {
      const ArmSpec& arm = *std::find_if(s.arms.begin(), s.arms.end(), [&](const ArmSpec& a) { return a.name == r.arm; });
      check_gate_index(r, arm.draft.kind == "none" ? 0 : arm.decoding.gamma, where_at);
      s.gates.push_back(std::move(r));
    }
  }
}

// ---------------------------------------------------------------- the top level

// The name: given (checked), or the file's stem made valid. It names the run directory,
// runs/<name>-<timestamp>, which must fit a file name (255 bytes on most file systems).
constexpr size_t kMaxNameLength = 200;

std::string read_name(const At& a) {
  std::string name = as_string(a.c, a.node, a.path);
  if (name.size() > kMaxNameLength)
    a.fail(fmt::format("{} characters is too long", name.size()),
           fmt::format("use at most {} (it names the output directory)", kMaxNameLength));
  if (!valid_name(name))
    a.fail(fmt::format("'{}' is not a valid experiment name", name), "use letters, digits, '.', '_' and '-' only (it names the output directory)");
  return name;
}

void default_name(const MapReader& m, ExperimentSpec& s) {
  s.name = fs::path(m.ctx().file).stem().string().substr(0, kMaxNameLength);
  for (char& ch : s.name)
    if (!valid_name(std::string_view(&ch, 1))) ch = '-';
  if (s.name.empty()) s.name = "experiment";
}

// A top-level section that must be present.
auto required_section(std::string_view key, std::string fix) {
  return [key, fix](const MapReader& m, ExperimentSpec&) { fail_at(m.ctx(), m.node(), key, "missing required section", fix); };
}

Field<ExperimentSpec> arms_field() {
  static const Schema list{Schema::Kind::List, {}, &arm_table().schema, "arms"};
  Field<ExperimentSpec> f = custom<ExperimentSpec>("arms", &list, "the compared arms (>= 1); a beta list sweeps");
  f.absent = required_section("arms", "add 'arms:' with at least one arm, e.g. '- {name: ears, verifier: {type: ears, beta: 0.1}}'");
  f.read = read_arms;
  // to_yaml: each arm's decoding and draft only where they differ from the top-level ones.
  f.yaml = [](YAML::Emitter& e, const ExperimentSpec& s, const ExperimentSpec*) {
    ArmSpec ref;
    ref.decoding = s.decoding, ref.draft = s.draft;
    e << YAML::BeginSeq;
    for (const ArmSpec& a : s.arms) {
      e << YAML::BeginMap;
      arm_table().emit(e, a, &ref);
      e << YAML::EndMap;
    }
    e << YAML::EndSeq;
  };
  f.json = [](const ExperimentSpec& s) {
    nlohmann::json arms = nlohmann::json::array();
    for (const ArmSpec& a : s.arms) arms.push_back(arm_table().json(a));
    return arms;
  };
  return f;
}

Field<ExperimentSpec> gates_field() {
  static const Schema list{Schema::Kind::List, {}, &kLeaf, "gates"};  // --set replaces a rule whole
  Field<ExperimentSpec> f = custom<ExperimentSpec>("gates", &list, "pass/fail rules on the report (reports/gate.h)");
  f.read = read_gates;
  f.yaml = [](YAML::Emitter& e, const ExperimentSpec& s, const ExperimentSpec*) {
    e << YAML::BeginSeq;
    for (const GateRule& g : s.gates) e << YAML::DoubleQuoted << to_string(g);
    e << YAML::EndSeq;
  };
  f.json = [](const ExperimentSpec& s) {
    nlohmann::json gates = nlohmann::json::array();
    for (const GateRule& g : s.gates)
      gates.push_back({{"arm", g.arm}, {"metric", g.metric}, {"op", g.op}, {"value", g.value}, {"text", to_string(g)}});
    return gates;
  };
  return f;
}

}  // namespace

namespace detail {

const Table<ArmSpec>& arm_table() {
  using A = ArmSpec;
  static const Table<A> t{
      "arms.N",
      {field("name", &A::name, Str(), "unique; [A-Za-z0-9._-]+; default = the verifier type").in_full(),
       field("baseline", &A::baseline, Bool(), "the comparison baseline (default: the first arm)").in_full(),
       section("verifier", &A::verifier, verifier_table(), "the acceptance rule").in_full(),
       section("decoding", &A::decoding, decoding_table(), "overrides of the top-level decoding"),
       section("draft", &A::draft, draft_table(), "overrides of the top-level draft")}};
  return t;
}

const Table<ExperimentSpec>& root_table() {
  using E = ExperimentSpec;
  static const Table<E> t{
      "the top level",
      {field("name", &E::name, read_name, "[A-Za-z0-9._-]+; default: the file's stem").when_absent(default_name),
       field("description", &E::description, Str(), "free text"),
       section("target", &E::target, target_table(), "the target model")
           .when_absent(required_section("target", "add 'target: {path: <directory of the HF checkpoint>}'")),
       section("draft", &E::draft, draft_table(), "the draft model (arms may override keys)"),
       section("dataset", &E::dataset, dataset_table(), "the requests")
           .when_absent(required_section(
               "dataset", fmt::format("add 'dataset: {{name: gsm8k, path: ...}}' (names: {})", join(kDatasetNames, "|")))),
       section("decoding", &E::decoding, decoding_table(), "decoding settings (arms may override keys)"),
       arms_field(),
       section("run", &E::run, run_table(), "warm-up, repeats, output, order, threads"),
       gates_field()}};
  return t;
}

}  // namespace detail

// ================================================================ public

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
    if (doc.IsDefined() && !doc.IsNull()) check_single_document(yaml_text, file_label);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}:{}: (yaml): syntax error: {}; fix the YAML here (indentation, ':' after keys, closing brackets and quotes)",
                            file_label, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (!doc.IsDefined() || doc.IsNull())
    throw Error(fmt::format("{}:1:1: (document): the file is empty; it needs at least target, dataset and arms", file_label));
  const Table<ExperimentSpec>& root = root_table();
  if (!doc.IsMap())
    fail_at(c, doc, "(document)", fmt::format("expected a mapping of sections, got {}", describe(doc)),
            fmt::format("write sections as 'key: value' ({})", join(root.schema.keys(), ", ")));
  for (const auto& ov : overrides) apply_override(c, doc, ov);

  ExperimentSpec s;
  root.read(MapReader(c, doc, "", root.schema), s);
  return s;
}

ExperimentSpec load_experiment(const fs::path& file, const std::vector<std::string>& overrides) {
  const std::string text = read_file(file, "the experiment file", "check the path", kMaxTextFileBytes);
  return parse_experiment(text, file.string(), fs::absolute(file).parent_path(), overrides);
}

std::string to_yaml(const ExperimentSpec& s) {
  YAML::Emitter e;
  e << YAML::Comment("ears-bench experiment, fully resolved (every default filled in)");
  e << YAML::BeginMap;
  root_table().emit(e, s);
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

nlohmann::json to_json(const ExperimentSpec& s) {
  nlohmann::json j = root_table().json(s);
  j["baseline_arm"] = s.arms.empty() ? std::string() : s.baseline_arm().name;
  return j;
}

}  // namespace ears::config
