// Helpers shared by the runner tests (runner_helpers_test.cpp, runner_cli_test.cpp,
// runner_resume_test.cpp): result-file readers and the fixture (a model dir with qwen3-tiny and a
// byte-level tokenizer.json, a JSONL dataset, configs) in this process's scratch directory.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "harness/base/error.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace ears::test::runner_test {

using test::cli;
using test::show;
using test::spawn_ears;
using test::wait_for;
using Proc = test::CommandResult;

inline std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> out;
  std::istringstream in(test::read_file(p));
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

inline int count_lines(const fs::path& p) {
  const std::string s = test::read_file(p);
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

inline json read_json(const fs::path& p) { return json::parse(test::read_file(p)); }

// (arm, request_id, repeat) -> the result line.
inline std::map<std::tuple<std::string, std::string, int>, json> results_by_key(const fs::path& run_dir) {
  std::map<std::tuple<std::string, std::string, int>, json> out;
  for (const auto& l : lines_of(run_dir / "results.jsonl")) {
    json j = json::parse(l);
    auto key = std::make_tuple(j["arm"].get<std::string>(), j["request_id"].get<std::string>(), j["repeat"].get<int>());
    EXPECT_FALSE(out.count(key)) << "duplicate result " << l;
    out[key] = j;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Fixture: a model dir (qwen3-tiny + a byte-level tokenizer.json), a JSONL dataset, configs.

inline std::string byte_char(unsigned char b) {
  auto printable = [](int x) { return (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE; };
  int n = 0;
  for (int x = 0; x < b; ++x) n += printable(x) ? 0 : 1;
  const uint32_t cp = printable(b) ? b : 256 + n;
  std::string s;
  if (cp < 0x80) {
    s.push_back(char(cp));
  } else {
    s.push_back(char(0xC0 | (cp >> 6)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  }
  return s;
}

// 256 byte tokens (ids 0..255), a few merges (256..), and Qwen's three special tokens at 300..302:
// every id fits qwen3-tiny's 320-entry vocabulary.
inline json tiny_tokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(uint8_t(b))] = b;
  const std::string sp = byte_char(' ');
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"t", "h"}, {"th", "e"}, {sp, "the"}, {"i", "s"}, {sp, "is"}, {"a", "t"}, {"w", "h"}, {"wh", "at"}, {sp, "what"}};
  int id = 256;
  json m = json::array();
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    m.push_back(a + " " + b);
  }
  json added = json::array();
  int sid = 300;
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
    added.push_back({{"id", sid++}, {"content", t}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
            {"merges", m}}}};
}

struct Env {
  fs::path root, model, draft, data;
  fs::path config3;  // baseline + ears(β=0.2) + target-only, 6 requests, 16 tokens
  fs::path config2;  // baseline + ears, all 40 requests, 24 tokens (resume / shards / SIGINT)
};

inline void write(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

// This process's scratch directory (removed by ScratchCleanup at the end).
inline fs::path scratch_root() { return fs::temp_directory_path() / fmt::format("ears-runner-test-{}", ::getpid()); }

inline const Env& env() {
  static Env e = [] {
    Env x;
    x.root = scratch_root();
    fs::remove_all(x.root);
    fs::create_directories(x.root / "model");
    x.model = x.root / "model";
    const fs::path fixtures = test::shared_dir() / "fixtures";
    fs::create_symlink(fixtures / "qwen3-tiny" / "config.json", x.model / "config.json");
    fs::create_symlink(fixtures / "qwen3-tiny" / "model.safetensors", x.model / "model.safetensors");
    write(x.model / "tokenizer.json", tiny_tokenizer().dump());
    x.draft = fixtures / "eagle3-tiny";
    x.data = x.root / "questions.jsonl";
    std::string data;
    for (int i = 0; i < 40; ++i)
      data += json{{"prompt", fmt::format("Question {}: what is {} plus {}? The answer is", i, i, i + 1)},
                   {"answer", std::to_string(2 * i + 1)},
                   {"category", i % 2 ? "odd" : "even"}}
                  .dump() +
              "\n";
    write(x.data, data);
    const std::string common = fmt::format(
        "target: {{path: {}}}\n"
        "draft: {{kind: eagle3, path: {}}}\n"
        "dataset: {{name: jsonl, path: {}, prompt_format: raw}}\n",
        x.model.string(), x.draft.string(), x.data.string());
    x.config3 = x.root / "three.yaml";
    write(x.config3, "name: three\n" + common +
                         "decoding: {gamma: 3, temperature: 0.9, max_new_tokens: 16, seed: 7}\n"
                         "arms:\n"
                         "  - {name: baseline, verifier: {type: baseline}}\n"
                         "  - {name: ears, verifier: {type: ears, beta: 0.2}}\n"
                         "  - {name: target-only, draft: {kind: none}}\n"
                         "run: {warmup: 1}\n"
                         "gates:\n"
                         "  - \"ears: mean_accept_length >= 1\"\n"
                         "  - \"ears: throughput_gain_pct >= 100000\"\n");
    x.config2 = x.root / "two.yaml";
    write(x.config2, "name: two\n" + common +
                         "decoding: {gamma: 3, temperature: 0.9, max_new_tokens: 24, seed: 11}\n"
                         "arms:\n"
                         "  - {name: baseline, verifier: {type: baseline}}\n"
                         "  - {name: ears, verifier: {type: ears, beta: 0.2}}\n"
                         "run: {warmup: 0, order: random}\n");
    return x;
  }();
  return e;
}


}  // namespace ears::test::runner_test
