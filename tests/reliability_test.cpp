// The bad-input catalogue (docs/reliability.md): every input a user can get wrong — YAML,
// checkpoints, tokenizer, draft/target pairing, datasets, requests — driven through the real
// `ears-bench` executable. Each must end in ONE line "ears-bench: error: <file/key>: <problem>;
// <fix>" with exit code 2 (or, for a bad request inside a good run, an error recorded in
// results.jsonl while the run goes on), and never a crash, a hang or a C++/c10 backtrace.
//
// The Markdown table it builds (case, what was done, exit code, the message as printed) must be
// docs/reliability.md's catalogue; EARS_UPDATE_DOCS=1 rewrites the doc's copy.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <fstream>
#include <functional>

#include "tests/test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using ears::test::CommandResult;
using ears::test::cli;
using ears::test::read_file;
using ears::test::shared_dir;
using ears::test::show;

namespace {

void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

fs::path fixture(const std::string& name) { return shared_dir() / "fixtures" / name; }

// A runnable target: qwen3-tiny's weights + our byte-level tokenizer (ids fit its 320 vocab).
fs::path make_target(const fs::path& dir, const std::string& fixture_name = "qwen3-tiny") {
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(fixture(fixture_name)))
    if (e.path().filename() != "expected.json") fs::copy_file(e.path(), dir / e.path().filename());
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(ears::test::source_dir() / "tests/data/byte-tokenizer" / f, dir / f);
  return dir;
}

fs::path make_draft(const fs::path& dir) {
  fs::copy(fixture("eagle3-tiny"), dir, fs::copy_options::recursive);
  fs::remove(dir / "expected.json");
  return dir;
}

std::string questions(int n) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s += json{{"prompt", "What is " + std::to_string(i) + " plus 1? The answer is"}, {"answer", std::to_string(i + 1)}}
             .dump() +
         "\n";
  return s;
}

// Rewrites the safetensors JSON header (the data section is kept byte for byte).
void rewrite_header(const fs::path& file, const std::function<void(json&)>& edit) {
  const std::string bytes = read_file(file);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  json h = json::parse(bytes.substr(8, n));
  edit(h);
  std::string header = h.dump();
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');
  const uint64_t hn = header.size();
  write(file, std::string(reinterpret_cast<const char*>(&hn), 8) + header + bytes.substr(8 + n));
}

// The header's [begin, end] offsets of tensor `name`, relative to the data section.
std::pair<uint64_t, uint64_t> offsets_of(const fs::path& file, const std::string& name) {
  const std::string bytes = read_file(file);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const json h = json::parse(bytes.substr(8, n));
  return {h.at(name).at("data_offsets")[0].get<uint64_t>(), h.at(name).at("data_offsets")[1].get<uint64_t>()};
}

void edit_json(const fs::path& file, const std::function<void(json&)>& f) {
  json j = json::parse(read_file(file));
  f(j);
  write(file, j.dump(2));
}

// One catalogue entry. `setup` prepares files under its own directory and returns the command
// line; the check is the exit code, a substring of stderr (or of results.jsonl for request
// errors), and the absence of any crash marker.
struct Case {
  std::string id, group, what;
  std::function<std::vector<std::string>(const fs::path& dir)> setup;
  int exit_code = 2;
  std::string expect;          // must appear in stderr's error line
  std::string expect_results;  // must appear in results.jsonl (requests that fail inside a run)
};

struct Paths {
  fs::path root, target, draft, data;
};

// The experiment YAML every case starts from; `edit` replaces one substring.
std::string base_yaml(const Paths& p, const fs::path& out) {
  return "name: catalogue\n"
         "target: {path: " + p.target.string() + "}\n"
         "draft: {kind: eagle3, path: " + p.draft.string() + "}\n"
         "dataset: {name: jsonl, path: " + p.data.string() + ", prompt_format: raw}\n"
         "decoding: {gamma: 3, temperature: 0.9, top_p: 1.0, max_new_tokens: 4, seed: 1}\n"
         "arms:\n"
         "  - {name: baseline, verifier: {type: baseline}}\n"
         "  - {name: ears, verifier: {type: ears, beta: 0.1}}\n"
         "run: {warmup: 0, output_dir: " + out.string() + "}\n";
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) s.replace(pos, from.size(), to);
  return s;
}

std::vector<Case> catalogue(const Paths& P) {
  std::vector<Case> c;
  // ---- experiment YAML (checked by `validate`, which `run` also does first) ----
  auto yaml_case = [&](std::string id, std::string what, std::string from, std::string to, std::string expect) {
    c.push_back({id, "config", what,
                 [=](const fs::path& d) {
                   write(d / "exp.yaml", replaced(base_yaml(P, d / "out"), from, to));
                   return std::vector<std::string>{"validate", (d / "exp.yaml").string()};
                 },
                 2, expect});
  };
  yaml_case("yaml-syntax", "unclosed flow mapping", "max_new_tokens: 4, seed: 1}", "max_new_tokens: 4, seed: 1",
            "exp.yaml:");
  yaml_case("unknown-key", "`decoding.gama`", "gamma: 3", "gama: 3", "did you mean 'gamma'");
  yaml_case("wrong-type", "`gamma: three`", "gamma: 3", "gamma: three", "decoding.gamma");
  yaml_case("gamma-0", "`gamma: 0`", "gamma: 3", "gamma: 0", "decoding.gamma");
  yaml_case("beta-negative", "`beta: -0.1`", "beta: 0.1", "beta: -0.1", "beta");
  yaml_case("temperature-negative", "`temperature: -1`", "temperature: 0.9", "temperature: -1", "temperature");
  // 1e-39 was a LibTorch error (exit 1) that left a broken run directory; 1e-30 failed every request.
  yaml_case("temperature-tiny", "`temperature: 1e-39`", "temperature: 0.9", "temperature: 1e-39", "or >= 0.01");
  yaml_case("top-p-0", "`top_p: 0`", "top_p: 1.0", "top_p: 0", "top_p");
  yaml_case("top-p-above-1", "`top_p: 1.5`", "top_p: 1.0", "top_p: 1.5", "top_p");
  yaml_case("max-new-tokens-0", "`max_new_tokens: 0`", "max_new_tokens: 4", "max_new_tokens: 0", "max_new_tokens");
  // Every request would fail: validate and run exited 0 with a report of errors only.
  yaml_case("max-new-tokens-past-context", "`max_new_tokens` at the target's context", "max_new_tokens: 4",
            "max_new_tokens: 100000", "leaves no room for a prompt");
  yaml_case("unknown-verifier", "`type: fancy`", "type: baseline", "type: fancy", "fancy");
  yaml_case("float16-on-cpu", "`target.dtype: float16` on CPU", "target: {path: " + P.target.string() + "}",
            "target: {dtype: float16, path: " + P.target.string() + "}", "float16 is not computed on CPU");
  yaml_case("draft-dtype-differs", "`draft.dtype: float32` beside `target.dtype: auto`", "draft: {kind: eagle3,",
            "draft: {dtype: float32, kind: eagle3,", "the draft computes in the target's dtype");
  // It names the run directory: 100000 characters passed validate, then `run` failed on the file system.
  yaml_case("name-too-long", "`name:` of 100000 characters", "name: catalogue", "name: " + std::string(100000, 'n'),
            "name: 100000 characters is too long");

  // ---- checkpoints and tokenizer (found when `run` loads the models) ----
  auto run_case = [&](std::string id, std::string group, std::string what,
                      std::function<void(const fs::path& target, const fs::path& draft)> corrupt, std::string expect) {
    c.push_back({id, group, what,
                 [=](const fs::path& d) {
                   const fs::path t = make_target(d / "target"), dr = make_draft(d / "draft");
                   corrupt(t, dr);
                   std::string y = replaced(base_yaml(P, d / "out"), "target: {path: " + P.target.string() + "}",
                                            "target: {path: " + t.string() + "}");
                   y = replaced(y, "path: " + P.draft.string() + "}", "path: " + dr.string() + "}");
                   write(d / "exp.yaml", y);
                   return std::vector<std::string>{"run", (d / "exp.yaml").string(), "--threads", "1", "--quiet"};
                 },
                 2, expect});
  };
  c.push_back({"missing-checkpoint-dir", "checkpoint", "target.path names no directory",
               [=](const fs::path& d) {
                 write(d / "exp.yaml", replaced(base_yaml(P, d / "out"), P.target.string(), (d / "nowhere").string()));
                 return std::vector<std::string>{"run", (d / "exp.yaml").string(), "--quiet"};
               },
               2, "target.path"});
  run_case("missing-tokenizer", "checkpoint", "`run` with a target directory without tokenizer.json",
           [](const fs::path& t, const fs::path&) { fs::remove(t / "tokenizer.json"); },
           "copy the model's tokenizer.json into that directory");
  run_case("missing-weights", "checkpoint", "no model.safetensors in the directory",
           [](const fs::path& t, const fs::path&) { fs::remove(t / "model.safetensors"); }, "model.safetensors");
  run_case("missing-shard", "checkpoint", "sharded checkpoint, one shard file deleted",
           [](const fs::path& t, const fs::path&) {
             fs::remove(t / "model.safetensors");
             for (const auto& e : fs::directory_iterator(fixture("qwen3-tiny-sharded")))
               if (e.path().filename() != "expected.json" && e.path().filename() != "config.json")
                 fs::copy_file(e.path(), t / e.path().filename());
             fs::remove(t / "model-00002-of-00002.safetensors");
           },
           "model-00002-of-00002.safetensors");
  run_case("truncated-safetensors", "checkpoint", "model.safetensors cut short by 100 bytes",
           [](const fs::path& t, const fs::path&) {
             fs::resize_file(t / "model.safetensors", fs::file_size(t / "model.safetensors") - 100);
           },
           "model.safetensors");
  run_case("header-length-past-end", "checkpoint", "header length field = 2^40",
           [](const fs::path& t, const fs::path&) {
             std::fstream f(t / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
             const uint64_t huge = 1ull << 40;
             f.write(reinterpret_cast<const char*>(&huge), 8);
           },
           "model.safetensors");
  run_case("offsets-past-end", "checkpoint", "a tensor's data_offsets moved past the end of the file",
           [](const fs::path& t, const fs::path&) {
             const uint64_t size = fs::file_size(t / "model.safetensors");
             rewrite_header(t / "model.safetensors", [&](json& h) {
               const uint64_t n = h["model.norm.weight"]["data_offsets"][1].get<uint64_t>() -
                                  h["model.norm.weight"]["data_offsets"][0].get<uint64_t>();
               h["model.norm.weight"]["data_offsets"] = {size, size + n};
             });
           },
           "model.norm.weight");
  run_case("overlapping-offsets", "checkpoint", "two tensors given the same byte range",
           [](const fs::path& t, const fs::path&) {
             rewrite_header(t / "model.safetensors", [](json& h) {
               h["model.layers.0.post_attention_layernorm.weight"]["data_offsets"] =
                   h["model.layers.0.input_layernorm.weight"]["data_offsets"];
             });
           },
           "overlap");
  run_case("unsupported-dtype", "checkpoint", "a tensor's dtype set to \"X32\"",
           [](const fs::path& t, const fs::path&) {
             rewrite_header(t / "model.safetensors", [](json& h) { h["model.norm.weight"]["dtype"] = "X32"; });
           },
           "X32");
  run_case("shape-not-config", "checkpoint", "config.json intermediate_size 128 (weights have another)",
           [](const fs::path& t, const fs::path&) {
             edit_json(t / "config.json", [](json& j) { j["intermediate_size"] = 128; });
           },
           "mlp");
  run_case("config-missing-key", "checkpoint", "config.json without hidden_size",
           [](const fs::path& t, const fs::path&) { edit_json(t / "config.json", [](json& j) { j.erase("hidden_size"); }); },
           "hidden_size");
  run_case("config-rope-theta-0", "checkpoint", "config.json rope_theta 0 (NaN logits before)",
           [](const fs::path& t, const fs::path&) { edit_json(t / "config.json", [](json& j) { j["rope_theta"] = 0; }); },
           "rope_theta");
  run_case("config-fewer-layers", "checkpoint", "config.json num_hidden_layers one below the checkpoint's",
           [](const fs::path& t, const fs::path&) {
             edit_json(t / "config.json", [](json& j) { j["num_hidden_layers"] = j["num_hidden_layers"].get<int>() - 1; });
           },
           "num_hidden_layers");
  run_case("config-not-json", "checkpoint", "config.json truncated mid-object",
           [](const fs::path& t, const fs::path&) {
             const std::string s = read_file(t / "config.json");
             write(t / "config.json", s.substr(0, s.size() / 2));
           },
           "config.json");
  run_case("tokenizer-malformed", "tokenizer", "tokenizer.json truncated mid-object",
           [](const fs::path& t, const fs::path&) {
             const std::string s = read_file(t / "tokenizer.json");
             write(t / "tokenizer.json", s.substr(0, s.size() / 3));
           },
           "tokenizer.json");
  run_case("tokenizer-no-model", "tokenizer", "tokenizer.json without its \"model\" section",
           [](const fs::path& t, const fs::path&) { edit_json(t / "tokenizer.json", [](json& j) { j.erase("model"); }); },
           "tokenizer.json");
  run_case("draft-hidden-mismatch", "draft", "draft's target_hidden_size differs from the target's hidden_size",
           [](const fs::path&, const fs::path& d) {
             edit_json(d / "config.json", [](json& j) { j["target_hidden_size"] = 128; });
           },
           "target_hidden_size");
  run_case("draft-vocab-mismatch", "draft", "draft vocabulary (96) != target's (320) and no d2t map",
           [](const fs::path&, const fs::path& d) {
             rewrite_header(d / "model.safetensors", [](json& h) { h.erase("d2t"); });
           },
           "draft_vocab_size");
  run_case("draft-d2t-not-one-to-one", "draft", "d2t maps draft ids 0 and 1 to one target id",
           [](const fs::path&, const fs::path& d) {
             const fs::path f = d / "model.safetensors";
             std::string bytes = read_file(f);
             uint64_t n = 0;
             std::memcpy(&n, bytes.data(), 8);
             const uint64_t at = 8 + n + offsets_of(f, "d2t").first;  // int64 offsets: target = draft id + d2t
             int64_t first = 0;
             std::memcpy(&first, bytes.data() + at, 8);
             const int64_t second = first - 1;  // draft id 1 onto draft id 0's target id
             std::memcpy(bytes.data() + at + 8, &second, 8);
             write(f, bytes);
           },
           "d2t maps two draft ids to target id");
  run_case("draft-target-vocab-mismatch", "draft", "draft's config.json vocab_size 4096 != the target's",
           [](const fs::path&, const fs::path& d) { edit_json(d / "config.json", [](json& j) { j["vocab_size"] = 4096; }); },
           "vocab_size 4096");
  run_case("draft-aux-layer-out-of-range", "draft", "eagle_aux_hidden_state_layer_ids names layer 99",
           [](const fs::path&, const fs::path& d) {
             edit_json(d / "config.json", [](json& j) {
               j["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = json::array({0, 1, 99});
             });
           },
           "aux layer ids [0, 1, 99]");
  run_case("draft-aux-layer-post-norm", "draft", "eagle_aux_hidden_state_layer_ids [2, 3, 6] on a 6-layer target",
           [](const fs::path&, const fs::path& d) {
             edit_json(d / "config.json", [](json& j) {
               j["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = json::array({2, 3, 6});
             });
           },
           "aux layer ids [2, 3, 6] (hf convention) name layer 6");
  run_case("draft-aux-ids-disagree", "draft", "top-level eagle_aux_hidden_state_layer_ids differ from eagle_config's",
           [](const fs::path&, const fs::path& d) {
             edit_json(d / "config.json", [](json& j) { j["eagle_aux_hidden_state_layer_ids"] = json::array({1, 3, 5}); });
           },
           "eagle_aux_hidden_state_layer_ids [1, 3, 5] at the top level");
  run_case("draft-hidden-act", "draft", "draft's config.json hidden_act gelu",
           [](const fs::path&, const fs::path& d) { edit_json(d / "config.json", [](json& j) { j["hidden_act"] = "gelu"; }); },
           "hidden_act 'gelu'");

  // The experiment's own ids are named as such (the head's config.json was blamed for them).
  c.push_back({"draft-aux-layers-yaml-out-of-range", "draft", "`draft.aux_layers: [0, 1, 99]` in the experiment",
               [=](const fs::path& d) {
                 write(d / "exp.yaml", replaced(base_yaml(P, d / "out"), "draft: {kind: eagle3,",
                                                "draft: {aux_layers: [0, 1, 99], kind: eagle3,"));
                 return std::vector<std::string>{"run", (d / "exp.yaml").string(), "--threads", "1", "--quiet"};
               },
               2, "draft.aux_layers: aux layer ids [0, 1, 99]"});

  // ---- datasets (checked by `validate`, which loads the dataset) ----
  auto data_case = [&](std::string id, std::string what, std::string content, std::string on_error, int code,
                       std::string expect) {
    c.push_back({id, "dataset", what,
                 [=](const fs::path& d) {
                   write(d / "data.jsonl", content);
                   std::string y = replaced(base_yaml(P, d / "out"), P.data.string(), (d / "data.jsonl").string());
                   if (!on_error.empty()) y = replaced(y, "prompt_format: raw", "prompt_format: raw, on_error: " + on_error);
                   write(d / "exp.yaml", y);
                   return std::vector<std::string>{"validate", (d / "exp.yaml").string()};
                 },
                 code, expect});
  };
  c.push_back({"out-is-a-file", "config", "run --out names an existing file",
               [=](const fs::path& d) {
                 write(d / "exp.yaml", base_yaml(P, d / "out"));
                 write(d / "taken", "x");
                 return std::vector<std::string>{"run", (d / "exp.yaml").string(), "--out", (d / "taken").string(),
                                                 "--quiet"};
               },
               2, "is a file, not a directory; pass another output path"});
  c.push_back({"dataset-missing", "dataset", "dataset.path names no file",
               [=](const fs::path& d) {
                 write(d / "exp.yaml", replaced(base_yaml(P, d / "out"), P.data.string(), (d / "none.jsonl").string()));
                 return std::vector<std::string>{"validate", (d / "exp.yaml").string()};
               },
               2, "none.jsonl"});
  c.push_back({"gsm8k-not-downloaded", "dataset", "dataset gsm8k with no file anywhere it looks",
               [=](const fs::path& d) {
                 write(d / "exp.yaml", replaced(base_yaml(P, d / "out"),
                                                "{name: jsonl, path: " + P.data.string() + ", prompt_format: raw}",
                                                "{name: gsm8k, path: " + (d / "nothing").string() + "}"));
                 return std::vector<std::string>{"validate", (d / "exp.yaml").string()};
               },
               2, "curl"});
  data_case("dataset-empty", "an empty file", "", "", 2, "empty file");
  data_case("dataset-bad-json-line", "line 3 is not JSON", questions(2) + "{\"prompt\": \"x\",\n" + questions(1), "", 2,
            "data.jsonl:3: invalid JSON");
  data_case("dataset-not-object", "line 2 is a JSON array", questions(1) + "[1, 2]\n", "", 2,
            "data.jsonl:2: expected a JSON object");
  data_case("dataset-missing-field", "line 2 has no prompt field", questions(1) + "{\"answer\": \"3\"}\n", "", 2,
            "data.jsonl:2:");
  // It passed validate, then failed the run naming no file, even with on_error: skip.
  data_case("dataset-empty-prompt", "line 2's prompt is \"\"",
            questions(1) + "{\"prompt\": \"\", \"answer\": \"2\"}\n", "", 2, "data.jsonl:2: field 'prompt' is empty");
  data_case("dataset-prompt-not-string", "line 2's prompt is 5", questions(1) + "{\"prompt\": 5}\n", "", 2,
            "(set dataset.fields.prompt)");
  data_case("dataset-non-utf8", "line 2 holds the byte 0xFF", questions(1) + "{\"prompt\": \"caf\xff\", \"answer\": \"1\"}\n",
            "", 2, "data.jsonl:2: invalid UTF-8");
  data_case("dataset-all-bad-skipped", "every line bad, on_error: skip", "nope\n{\n", "skip", 2, "no usable records");
  // on_error: skip in a real run: the bad lines are counted in run_meta.json and the report.
  c.push_back({"dataset-bad-lines-skipped", "dataset", "3 bad lines (one an empty prompt), on_error: skip (a full run)",
               [=](const fs::path& d) {
                 write(d / "data.jsonl", questions(2) + "{oops\n" + questions(1) + "\xff\n{\"prompt\": \"\"}\n");
                 std::string y = replaced(base_yaml(P, d / "out"), P.data.string(), (d / "data.jsonl").string());
                 y = replaced(y, "prompt_format: raw", "prompt_format: raw, on_error: skip");
                 write(d / "exp.yaml", y);
                 return std::vector<std::string>{"run", (d / "exp.yaml").string(), "--threads", "1", "--quiet"};
               },
               0, "", ""});

  // ---- requests that fail inside a good run: recorded, the run goes on ----
  c.push_back({"prompt-beyond-context", "request", "one prompt longer than max_position_embeddings",
               [=](const fs::path& d) {
                 std::string longp(5000, 'x');
                 write(d / "data.jsonl", questions(1) + json{{"prompt", longp}, {"answer", "1"}}.dump() + "\n" + questions(1));
                 write(d / "exp.yaml", replaced(base_yaml(P, d / "out"), P.data.string(), (d / "data.jsonl").string()));
                 return std::vector<std::string>{"run", (d / "exp.yaml").string(), "--threads", "1", "--quiet"};
               },
               0, "exceed the model's context", "exceeds the model's context"});
  c.push_back({"every-prompt-beyond-context", "request", "every prompt longer than the context (a run)",
               [=](const fs::path& d) {
                 write(d / "data.jsonl", json{{"prompt", std::string(3000, 'x')}, {"answer", "1"}}.dump() + "\n");
                 write(d / "exp.yaml", replaced(base_yaml(P, d / "out"), P.data.string(), (d / "data.jsonl").string()));
                 return std::vector<std::string>{"run", (d / "exp.yaml").string(), "--threads", "1", "--quiet"};
               },
               2, "fills the model's context of 512 tokens"});
  c.push_back({"every-prompt-beyond-max-new-tokens", "request", "every prompt + max_new_tokens past the context (a run)",
               [=](const fs::path& d) {
                 write(d / "data.jsonl", json{{"prompt", std::string(500, 'x')}, {"answer", "1"}}.dump() + "\n");
                 std::string y = replaced(base_yaml(P, d / "out"), P.data.string(), (d / "data.jsonl").string());
                 write(d / "exp.yaml", replaced(y, "max_new_tokens: 4", "max_new_tokens: 100"));
                 return std::vector<std::string>{"run", (d / "exp.yaml").string(), "--threads", "1", "--quiet"};
               },
               2, "so every request would fail; lower max_new_tokens to"});
  c.push_back({"nan-logits", "request", "model.norm.weight overwritten with NaN",
               [=](const fs::path& d) {
                 const fs::path t = make_target(d / "target");
                 const auto [b, e] = offsets_of(t / "model.safetensors", "model.norm.weight");
                 std::string bytes = read_file(t / "model.safetensors");
                 uint64_t n = 0;
                 std::memcpy(&n, bytes.data(), 8);
                 const float nan = std::numeric_limits<float>::quiet_NaN();
                 for (uint64_t o = 8 + n + b; o + 4 <= 8 + n + e; o += 4) std::memcpy(bytes.data() + o, &nan, 4);
                 write(t / "model.safetensors", bytes);
                 write(d / "exp.yaml", replaced(base_yaml(P, d / "out"), P.target.string(), t.string()));
                 return std::vector<std::string>{"run", (d / "exp.yaml").string(), "--threads", "1", "--quiet"};
               },
               0, "requests failed", "non-finite logits"});
  return c;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// Markers of a crash or an escaped exception; none may appear on stderr.
const char* const kCrashMarkers[] = {"Exception raised from", "terminate called", "what():", "Segmentation",
                                     "Aborted", "c10::", "frame #", "AddressSanitizer", "runtime error:"};

}  // namespace

TEST(BadInputCatalogue, EveryCaseFailsWithOneClearLine) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  const fs::path root = ears::test::temp_dir("catalogue");
  Paths P{root, make_target(root / "target"), make_draft(root / "draft"), root / "data.jsonl"};
  write(P.data, questions(3));
  // The base config itself is fine.
  {
    write(root / "ok.yaml", base_yaml(P, root / "ok-out"));
    const CommandResult r = cli({"run", (root / "ok.yaml").string(), "--threads", "1", "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << show(r);
  }
  std::string table =
      "| case | input | exit | message (stderr, as printed) |\n| --- | --- | --- | --- |\n";
  for (const Case& k : catalogue(P)) {
    SCOPED_TRACE(k.id);
    const fs::path dir = root / k.id;
    fs::create_directories(dir);
    const CommandResult r = cli(k.setup(dir), 120);
    EXPECT_EQ(r.exit_code, k.exit_code) << show(r);
    for (const char* m : kCrashMarkers) EXPECT_EQ(r.err.find(m), std::string::npos) << m << "\n" << show(r);
    std::string message;
    if (k.exit_code == 2) {
      EXPECT_EQ(r.out, "") << "a failed command prints its error only (validate printed the config first)\n" << show(r);
      EXPECT_EQ(r.err.rfind("ears-bench: error: ", 0), 0u) << show(r);
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << show(r);
      message = first_line(r.err);
    } else {
      const size_t w = r.err.find("ears-bench: warning: ");
      if (!k.expect.empty()) EXPECT_NE(w, std::string::npos) << show(r);
      if (w != std::string::npos) message = first_line(r.err.substr(w));
    }
    if (!k.expect.empty()) EXPECT_NE(r.err.find(k.expect), std::string::npos) << show(r);
    if (!k.expect_results.empty()) {
      const std::string results = read_file(dir / "out" / "results.jsonl");
      EXPECT_NE(results.find(k.expect_results), std::string::npos) << results;
      const json report = json::parse(read_file(dir / "out" / "report.json"));
      EXPECT_GT(report["arms"][0]["metrics"]["n_errors"].get<int>(), 0);
      std::istringstream lines(results);
      for (std::string l; std::getline(lines, l);) {
        const std::string e = json::parse(l).value("error", "");
        if (e.empty()) continue;
        message += "; results.jsonl `error`: \"" + e + "\"";
        break;
      }
    }
    if (k.id == "dataset-bad-lines-skipped") {
      const json report = json::parse(read_file(dir / "out" / "report.json"));
      EXPECT_EQ(report["dataset"]["skipped_lines"], 3);
      EXPECT_EQ(report["arms"][0]["metrics"]["n_requests"], 3);
      bool warned = false;
      for (const auto& w : report["warnings"]) warned |= w.get<std::string>().find("3 bad dataset line") != std::string::npos;
      EXPECT_TRUE(warned) << report["warnings"].dump();
      EXPECT_NE(read_file(dir / "out" / "report.md").find("3 bad dataset line"), std::string::npos);
      message = "report.json: dataset.skipped_lines = 3, warning \"3 bad dataset line(s) skipped\"";
    }
    // Paths differ per machine: show them relative to the case directory.
    for (size_t p; (p = message.find(dir.string())) != std::string::npos;) message.replace(p, dir.string().size(), "CASE");
    for (size_t p; (p = message.find(root.string())) != std::string::npos;) message.replace(p, root.string().size(), "TMP");
    for (size_t p = 0; (p = message.find('|', p)) != std::string::npos; p += 2) message.replace(p, 1, "\\|");
    table += "| `" + k.id + "` | " + k.what + " | " + std::to_string(r.exit_code) + " | " + message + " |\n";
  }
  ears::test::expect_generated_block("reliability.md",
                                     "<!-- BEGIN catalogue: generated by BadInputCatalogue.EveryCaseFailsWithOneClearLine -->\n",
                                     "<!-- END catalogue -->", table, "./reliability_tests");
}
