// Experiment configuration, internal: the generic schema pieces (key checks, MapReader, value
// output) and the tables of the leaf sections. See schema.h; arms and the top level are
// in config.cpp.
#include "harness/config/schema.h"

#include <memory>
#include <set>

#include "datasets/tasks.h"

namespace ears::config::detail {

// ---------------------------------------------------------------- layout and key checks

const Schema kLeaf{};

const Schema* Schema::field(std::string_view key) const {
  for (auto& [k, s] : fields)
    if (k == key) return s;
  return nullptr;
}

std::vector<std::string_view> Schema::keys() const {
  std::vector<std::string_view> out;
  for (auto& f : fields) out.push_back(f.first);
  return out;
}

namespace {
// Where else a misplaced key would be valid ("gamma" under target -> decoding).
std::string belongs_under(std::string_view key) {
  for (const Schema* s : {&root_table().schema, &target_table().schema, &draft_table().schema, &dataset_table().schema,
                          &decoding_table().schema, &verifier_table().schema, &arm_table().schema, &run_table().schema})
    if (s->field(key)) return std::string(s->name);
  return "";
}
}  // namespace

std::string unknown_key_fix(std::string_view key, const Schema& schema) {
  std::string guess = closest(key, schema.keys());
  if (!guess.empty()) return fmt::format("did you mean '{}'?", guess);
  std::string home = belongs_under(key);
  if (!home.empty() && home != schema.name)
    return fmt::format("'{}' belongs under {}; allowed here: {}", key, home, join(schema.keys(), ", "));
  return fmt::format("allowed keys: {}", join(schema.keys(), ", "));
}

MapReader::MapReader(const Ctx& c, const Node& node, std::string path, const Schema& schema)
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

Node MapReader::get(std::string_view key) const {
  for (auto& e : entries_)
    if (e.key == key && !e.value.IsNull()) return e.value;
  return Node(YAML::NodeType::Null);
}

bool MapReader::has(std::string_view key) const {
  for (auto& e : entries_)
    if (e.key == key && !e.value.IsNull()) return true;
  return false;
}

void MapReader::missing(std::string_view key, std::string_view fix) const {
  fail_at(c_, node_, sub(key), "missing required key", fix);
}

// ---------------------------------------------------------------- value output

void emit_value(YAML::Emitter& e, const std::string& v) { emit_str(e, v); }
void emit_value(YAML::Emitter& e, double v) { e << format_number(v); }
void emit_value(YAML::Emitter& e, std::int64_t v) { e << v; }
void emit_value(YAML::Emitter& e, int v) { e << v; }
void emit_value(YAML::Emitter& e, std::uint64_t v) { e << v; }
void emit_value(YAML::Emitter& e, bool v) { e << (v ? "true" : "false"); }
void emit_value(YAML::Emitter& e, const std::vector<std::string>& v) {
  e << YAML::Flow << YAML::BeginSeq;
  for (auto& s : v) emit_str(e, s);
  e << YAML::EndSeq;
}
void emit_value(YAML::Emitter& e, const std::vector<int>& v) {
  e << YAML::Flow << YAML::BeginSeq;
  for (int x : v) e << x;
  e << YAML::EndSeq;
}

// ---------------------------------------------------------------- leaf sections

namespace {
// A field's doc built at start-up (Field keeps a string_view: the text needs a stable home).
std::string_view stable_doc(std::string text) {
  static std::vector<std::unique_ptr<std::string>> docs;
  docs.push_back(std::make_unique<std::string>(std::move(text)));
  return *docs.back();
}
// "before a | b | c after": an enum key's doc from the values its reader allows.
template <class Values>
std::string_view choices_doc(const Values& values, std::string_view before = "", std::string_view after = "") {
  return stable_doc(fmt::format("{}{}{}", before, join(values, " | "), after));
}

// The dataset's task (datasets/tasks.h); an empty one for an unknown name.
const Task& task_of(const DatasetSection& d) {
  static const Task kNone{};
  const Task* t = find_task(d.name);
  return t ? *t : kNone;
}
bool is_synthetic(const DatasetSection& d) { return task_of(d).path == TaskPath::kNone; }

// Layer ids: a list of ints >= 0.
std::vector<int> read_aux_layers(const At& a) {
  if (!a.node.IsSequence())
    a.fail(fmt::format("expected a list of layer ids, got {}", describe(a.node)), "write e.g. 'aux_layers: [1, 3, 5]'");
  std::vector<int> out;
  for (size_t i = 0; i < a.node.size(); ++i)
    out.push_back(as_int_in(a.c, a.node[i], fmt::format("{}.{}", a.path, i), 0, kIntMax, 2));
  return out;
}
}  // namespace

const Table<TargetSpec>& target_table() {
  using T = TargetSpec;
  static const Table<T> t{
      "target",
      {field("path", &T::path, Path(), "directory of the HF checkpoint; relative to the YAML file")
           .when_absent([](const MapReader& m, T&) { m.missing("path", "add 'path: <directory of the HF checkpoint>' under target"); })
           .after([](const At& a, const T& t) {
             if (t.path.empty()) a.fail("empty path", "write the checkpoint directory");
           }),
       field("dtype", &T::dtype, Dtype(), choices_doc(kDtypes, "", "; auto = the checkpoint's torch_dtype, float16 on cuda only"))
           .after([](const At& a, const T& t) {  // decoders/model.cpp refuses it too, for the CLI
             const bool cpu = !a.m.has("device") || (a.m.get("device").IsScalar() && a.m.get("device").Scalar() == "cpu");
             if (t.dtype == "float16" && cpu)
               a.fail(ranges::kFloat16OnCpu, std::string(ranges::kFloat16OnCpuFix) + ", or device: cuda");
           }),
       field("device", &T::device, Device(), "cpu | cuda | cuda:N")}};
  return t;
}

const Table<DraftSpec>& draft_table() {
  using D = DraftSpec;
  static const Table<D> t{
      "draft",
      {field("kind", &D::kind, Enum(kDraftKinds), choices_doc(kDraftKinds)),
       field("path", &D::path, Path(), "draft checkpoint directory (eagle3: the EAGLE or vLLM speculators layout); required unless kind is none"),
       field("sampling", &D::sampling, Enum(kDraftSampling), choices_doc(kDraftSampling, "", " (greedy: one-hot q, as vLLM's EAGLE)")),
       field("dtype", &D::dtype, Dtype(), "auto or target.dtype's value: the draft computes in the target's dtype"),
       field("aux_layers", &D::aux_layers, read_aux_layers, "target layers feeding EAGLE-3; empty = the checkpoint's")
           .comment("empty = the checkpoint's eagle_aux_hidden_state_layer_ids", [](const D& d) { return d.aux_layers.empty(); }),
       field("aux_layer_convention", &D::aux_layer_convention, Enum(kAuxLayerConventions),
             "hf: id i = hidden state entering layer i; sglang: output of layer i (eagle_config ids; top-level and speculators ids are hf)")}};
  return t;
}

const Table<DatasetFields>& dataset_fields_table() {
  using F = DatasetFields;
  static const Table<F> t{"dataset.fields",
                          {field("prompt", &F::prompt, Str(), "JSON key of the prompt"),
                           field("answer", &F::answer, Str(), "JSON key of the reference answer"),
                           field("category", &F::category, Str(), "JSON key of the category")}};
  return t;
}

namespace {
constexpr auto kDatasetAliases = task_aliases();

// A task reading its requests from dataset.path (jsonl): required.
void dataset_path_needed(const MapReader& m, const DatasetSection& d) {
  if (task_of(d).path == TaskPath::kRequired && d.path.empty())
    m.missing("path", fmt::format("add 'path: <file.jsonl>' under dataset (required for {})", d.name));
}

// A task with a fixed category list (spec_bench): categories must be among it.
void check_categories(const At& a, const DatasetSection& d) {
  const Task& t = task_of(d);
  const auto& known = t.known_categories;
  if (known.empty()) return;
  for (size_t i = 0; i < d.categories.size(); ++i)
    if (!contains(known, d.categories[i])) {
      std::string guess = closest(d.categories[i], known);
      fail_at(a.c, a.node.IsSequence() ? a.node[i] : a.node, fmt::format("{}.{}", a.path, i),
              fmt::format("'{}' is not a {} category", d.categories[i], t.title),
              guess.empty() ? fmt::format("use some of {}", join(known, "|"))
                            : fmt::format("did you mean '{}'? (allowed: {})", guess, join(known, "|")));
    }
}

// "<option> only applies to <the tasks having it>, not <name>" when d's task lacks it.
void only_for(const At& a, const DatasetSection& d, bool Task::*option, std::string_view key, std::string_view names_prefix,
              std::string_view fix) {
  if (!task_has(d.name, option))
    a.fail(fmt::format("{} only applies to {}{}, not {}", key, names_prefix, task_names_with(option, ", ", " and "), d.name), fix);
}

std::string_view with_doc(bool Task::*option, std::string_view before, std::string_view after) {
  return stable_doc(fmt::format("{}{}{}", before, task_names_with(option, " / ", " / "), after));
}

}  // namespace

const Table<DatasetSection>& dataset_table() {
  using D = DatasetSection;
  static const Table<D> t{"dataset", {
      field("name", &D::name, Enum(kDatasetNames, kDatasetAliases), choices_doc(kDatasetNames))
          .when_absent([](const MapReader& m, D&) {
            m.missing("name", fmt::format("add 'name: <{}>' under dataset", join(kDatasetNames, "|")));
          }),
      field("path", &D::path, Path(), "file or directory; empty = the loader's default ($EARS_BENCH_DATA or data/)")
          .when_absent(dataset_path_needed)
          .before([](const At& a, const D& d) {
            if (is_synthetic(d)) a.fail(fmt::format("{} is generated, it reads no file", d.name), "remove dataset.path");
          })
          .after([](const At& a, const D& d) { dataset_path_needed(a.m, d); })
          .yaml_if([](const D& d) { return !is_synthetic(d); })
          .comment("empty = the loader's default location", [](const D& d) { return d.path.empty(); }),
      field("split", &D::split, Str(), "empty = the dataset's standard split")
          .comment("empty = the dataset's standard split", [](const D& d) { return d.split.empty(); }),
      field("limit", &D::limit, Count(0, 50), "number of requests; 0 = all").comment("0 = all", [](const D&) { return true; }),
      field("offset", &D::offset, Count(0, 0), "requests skipped first"),
      field("n_shot", &D::n_shot, Int(0, 64, 0), with_doc(&Task::n_shot, "few-shot examples (", " only)"))
          .after([](const At& a, const D& d) {
            if (d.n_shot > 0) only_for(a, d, &Task::n_shot, "n_shot", "", "remove it (or set n_shot: 0)");
          }),
      field("prompt_format", &D::prompt_format, Enum(kPromptFormats), choices_doc(kPromptFormats)),
      field("thinking", &D::thinking, Bool(), "chat template with thinking enabled (chat only)").after([](const At& a, const D& d) {
        if (d.thinking && d.prompt_format == "raw")
          a.fail("thinking only applies to prompt_format: chat", "remove it or set prompt_format: chat");
      }),
      field("seed", &D::seed, U64(), "seed of synthetic generation / sampling of the data"),
      // synth-gsm generates its problems in memory: 10^5 take ~3 s; 2*10^9 died of bad_alloc.
      field("n", &D::n, Int(1, 100000, 200), with_doc(&Task::n, "", " only: number of generated problems"))
          .before([](const At& a, const D& d) { only_for(a, d, &Task::n, "n", "", "use dataset.limit to cap the number of requests"); })
          .yaml_if([](const D& d) { return task_has(d.name, &Task::n); }),
      field("on_error", &D::on_error, Enum(kOnError), choices_doc(kOnError, "", " (bad JSONL lines)")),
      field("prompt_template", &D::prompt_template, Str(), "empty = the dataset's prompt; else must contain {question}")
          .after([](const At& a, const D& d) {
            if (!d.prompt_template.empty() && d.prompt_template.find("{question}") == std::string::npos)
              a.fail("the template has no {question} placeholder", "write e.g. 'prompt_template: \"Question: {question}\\nAnswer:\"'");
          })
          .comment("empty = the dataset's standard prompt", [](const D& d) { return d.prompt_template.empty(); }),
      field("scorer", &D::scorer, Enum(kScorers), choices_doc(kScorers, "empty = the dataset's scorer; else "))
          .skip_if([](const Node& n) { return n.IsScalar() && n.Scalar().empty(); })  // "" = default
          .comment("empty = the dataset's scorer", [](const D& d) { return d.scorer.empty(); }),
      section("fields", &D::fields, dataset_fields_table(), with_doc(&Task::fields, "", " only: which JSON keys hold what"))
          .before([](const At& a, const D& d) { only_for(a, d, &Task::fields, "fields", "name: ", "remove dataset.fields"); })
          .yaml_if([](const D& d) { return task_has(d.name, &Task::fields); }),
      field("categories", &D::categories, StrList(), with_doc(&Task::categories, "", ": keep only these (empty = all)"))
          .before([](const At& a, const D& d) { only_for(a, d, &Task::categories, "categories", "", "remove dataset.categories"); })
          .after(check_categories)
          .yaml_if([](const D& d) { return task_has(d.name, &Task::categories); })}};
  return t;
}

const Table<DecodingSpec>& decoding_table() {
  using D = DecodingSpec;
  static const Table<D> t{
      "decoding",
      {field("gamma", &D::gamma, Int(1, kMaxGamma, 5), "draft tokens per step"),
       field("temperature", &D::temperature, Real(0.9, ranges::kTemperature),
             "sampling temperature; 0 = greedy target, else >= 0.01"),
       field("top_p", &D::top_p, Real(1.0, ranges::kTopP),
             "nucleus sampling; 1 = off"),
       field("top_k", &D::top_k, Int(0, ranges::kTopK), "0 = off"),
       field("max_new_tokens", &D::max_new_tokens, Int(1, kIntMax, 256), "generation budget per request"),
       field("stop", &D::stop, StrList(), "stop strings (a single string is a list of one)").after([](const At& a, const D& d) {
         for (size_t i = 0; i < d.stop.size(); ++i)
           if (d.stop[i].empty()) fail_at(a.c, a.node, fmt::format("{}.{}", a.path, i), "empty stop string", "remove it");
       }),
       field("batch_size", &D::batch_size, Int(1, kIntMax, 1), "requests decoded together"),
       field("seed", &D::seed, U64(), "run seed; per-request generators derive from (seed, request id)"),
       field("distortion", &D::distortion, Bool(), "measure TV(p_t, verifier-induced distribution) per drafted position")}};
  return t;
}

// Ranges from decoders/param_ranges.h, which verify.cpp's validate() enforces at run time.
const Table<VerifierSpec>& verifier_table() {
  using V = VerifierSpec;
  static const Table<V> t{
      "arms.N.verifier",
      {field("type", &V::type, Enum(kVerifierTypes), choices_doc(kVerifierTypes)),
       field("beta", &V::beta, Real(0.1, ranges::kBeta), "ears: tolerance scale; a list sweeps")
           .skip_if([](const Node& n) { return n.IsSequence(); }),  // a sweep: the arm reader expands it
       field("uncertainty", &V::uncertainty, Enum(kUncertainty), choices_doc(kUncertainty, "ears: ")),
       field("eps", &V::eps, Real(0.09, ranges::kEps),
             "typical: probability floor"),
       field("delta", &V::delta, Real(0.3, ranges::kDelta), "typical: entropy scale")}};
  return t;
}

const Table<RunSpec>& run_table() {
  using R = RunSpec;
  static const Table<R> t{
      "run",
      {field("warmup", &R::warmup, Int(0, kIntMax, 1), "warm-up requests per arm, not measured"),
       field("repeats", &R::repeats, Int(1, kIntMax, 1), "measured passes over the dataset"),
       field("output_dir", &R::output_dir, EnvStr(), "empty = runs/<name>-<timestamp>; relative to the working directory")
           .comment("empty = runs/<name>-<timestamp>", [](const R&) { return true; }),
       field("order", &R::order, Enum(kRunOrders), choices_doc(kRunOrders)),
       field("threads", &R::threads, Int(0, kIntMax, 0), "CPU threads; 0 = the logical CPUs idle at start-up")
           .comment("0 = the logical CPUs idle at start-up", [](const R&) { return true; })}};
  return t;
}

const Schema& gate_schema() {
  static const Schema s{Schema::Kind::Map, {{"metric", &kLeaf}, {"arm", &kLeaf}, {"op", &kLeaf}, {"value", &kLeaf}}, nullptr, "gates.N"};
  return s;
}

}  // namespace ears::config::detail
