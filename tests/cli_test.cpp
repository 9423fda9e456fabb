// End-to-end checks of the model-level commands through the real executable: output formats,
// agreement with the golden fixtures, and one-line errors with non-zero exit codes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <fstream>

#include "tests/test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using ears::test::run_ears;
using ears::test::shared_dir;

namespace {

std::string ids_arg(const json& ids) {
  std::string s;
  for (const auto& i : ids) s += std::to_string(i.get<int>()) + " ";
  return "\"" + s + "\"";
}

// A user-facing error: exit code 2, one line on stderr, prefixed, no backtrace.
void expect_one_line_error(const ears::test::CommandResult& r, const std::string& must_contain) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("ears-bench: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(must_contain), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Exception raised from"), std::string::npos) << r.err;
}

fs::path copy_fixture(const std::string& name) {
  fs::path dst = ears::test::temp_dir(name);
  fs::copy(shared_dir() / "fixtures" / name, dst, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  return dst;
}

}  // namespace

TEST(Cli, HelpOnEveryCommand) {
  for (const char* cmd : {"forward", "tokenize", "generate"}) {
    auto r = run_ears(std::string(cmd) + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << cmd;
  }
  auto r = run_ears("no-such-command");
  EXPECT_EQ(r.exit_code, 2);
}

TEST(Cli, ForwardMatchesFixtureLogits) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  json expected = json::parse(ears::test::read_file(shared_dir() / "fixtures/qwen3-tiny/expected.json"));
  for (const auto& c : expected["cases"]) {
    const auto& rows = c["logits"];
    auto r = run_ears("forward --threads 1 --model " + (shared_dir() / "fixtures/qwen3-tiny").string() + " --ids " +
                      ids_arg(c["prompt_ids"]) + " --last " + std::to_string(rows.size()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json got = json::parse(r.out);
    ASSERT_EQ(got["logits"].size(), rows.size());
    double max_err = 0;
    for (size_t i = 0; i < rows.size(); ++i)
      for (size_t v = 0; v < rows[i].size(); ++v)
        max_err = std::max(max_err, std::abs(got["logits"][i][v].get<double>() - rows[i][v].get<double>()));
    EXPECT_LT(max_err, 1e-4) << c["name"];
  }
}

TEST(Cli, ForwardWithDraftMatchesEagle3Fixture) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  json expected = json::parse(ears::test::read_file(shared_dir() / "fixtures/eagle3-tiny/expected.json"));
  for (const auto& c : expected["cases"]) {
    auto r = run_ears("forward --threads 1 --model " + (shared_dir() / "fixtures/qwen3-tiny").string() + " --draft " +
                      (shared_dir() / "fixtures/eagle3-tiny").string() + " --gamma 5 --ids " + ids_arg(c["prompt_ids"]));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json got = json::parse(r.out)["draft"];
    EXPECT_EQ(got["chain_target_ids"], c["draft_tokens_target_ids"]);
    const auto& want = c["prefill"]["logits"].back();
    ASSERT_EQ(got["logits_last"].size(), want.size());
    double max_err = 0;
    for (size_t v = 0; v < want.size(); ++v)
      max_err = std::max(max_err, std::abs(got["logits_last"][v].get<double>() - want[v].get<double>()));
    EXPECT_LT(max_err, 1e-4);
  }
}

TEST(Cli, GenerateGreedyMatchesFixtureWithAndWithoutDraft) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  json expected = json::parse(ears::test::read_file(shared_dir() / "fixtures/qwen3-tiny/expected.json"));
  const auto& c = expected["cases"][1];
  const auto& want = c["greedy"]["tokens"];
  const std::string base = "generate --json --threads 1 --target " + (shared_dir() / "fixtures/qwen3-tiny").string() +
                           " --temperature 0 --ids " + ids_arg(c["prompt_ids"]) +
                           " --max-new-tokens " + std::to_string(want.size());
  for (const std::string extra :
       {std::string(""), " --draft " + (shared_dir() / "fixtures/eagle3-tiny").string() + " --verifier baseline",
        " --draft " + (shared_dir() / "fixtures/eagle3-tiny").string() + " --verifier ears --beta 0.3 --gamma 3"}) {
    auto r = run_ears(base + extra);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json got = json::parse(r.out);
    EXPECT_EQ(got["ids"], want) << extra;
    const auto& st = got["stats"];
    EXPECT_LE(static_cast<int>(want.size()),
              st["accepted"].get<int>() + st["corrections"].get<int>() + st["bonus"].get<int>() + 1);
    EXPECT_LE(st["host_syncs"].get<int>(), st["steps"].get<int>() + 1) << "at most one host sync per step";
  }
}

TEST(Cli, TokenizeMatchesQwen3) {
  EARS_REQUIRE_SHARED("tokenizers/qwen3/tokenizer.json");
  const std::string tok = (shared_dir() / "tokenizers/qwen3").string();
  auto r = run_ears("tokenize --tokenizer " + tok + " --text 'Hello world'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["ids"], json::parse("[9707, 1879]"));
  r = run_ears("tokenize --tokenizer " + tok + " --ids '9707 1879'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["text"], "Hello world");
}

TEST(Cli, CorruptCheckpointsGiveOneLineErrors) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const std::string ids = " --ids '1 2 3'";
  // Truncated file.
  {
    fs::path d = copy_fixture("qwen3-tiny");
    fs::resize_file(d / "model.safetensors", fs::file_size(d / "model.safetensors") - 100);
    expect_one_line_error(run_ears("forward --model " + d.string() + ids), "model.safetensors");
  }
  // Header length beyond the file.
  {
    fs::path d = copy_fixture("qwen3-tiny");
    std::fstream f(d / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    uint64_t huge = 1ull << 40;
    f.write(reinterpret_cast<const char*>(&huge), 8);
    f.close();
    expect_one_line_error(run_ears("forward --model " + d.string() + ids), "model.safetensors");
  }
  // Offsets past the end / unknown dtype: rewrite the JSON header in place (same length).
  auto patch_header = [](const fs::path& file, const std::string& from, const std::string& to) {
    std::string bytes = ears::test::read_file(file);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    std::string header = bytes.substr(8, n);
    auto pos = header.find(from);
    ASSERT_NE(pos, std::string::npos) << from;
    std::string replaced = to;
    replaced.resize(from.size(), ' ');
    ASSERT_EQ(replaced.size(), from.size());
    header.replace(pos, from.size(), replaced);
    bytes.replace(8, n, header);
    std::ofstream(file, std::ios::binary) << bytes;
  };
  {
    fs::path d = copy_fixture("qwen3-tiny");
    std::string bytes = ears::test::read_file(d / "model.safetensors");
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const std::string header = bytes.substr(8, n);
    // The last tensor's end offset, pushed past the end of the file.
    auto last = header.rfind("\"data_offsets\":[");
    auto comma = header.find(',', last);
    auto close = header.find(']', comma);
    std::string end = header.substr(comma + 1, close - comma - 1);
    std::string bigger = std::to_string(std::stoull(end) + 9);
    patch_header(d / "model.safetensors", "," + end + "]", "," + bigger + "]");
    expect_one_line_error(run_ears("forward --model " + d.string() + ids), "model.safetensors");
  }
  {
    fs::path d = copy_fixture("qwen3-tiny");
    patch_header(d / "model.safetensors", "\"F32\"", "\"X32\"");
    expect_one_line_error(run_ears("forward --model " + d.string() + ids), "X32");
  }
  // Shape not matching the config.
  {
    fs::path d = copy_fixture("qwen3-tiny");
    json cfg = json::parse(ears::test::read_file(d / "config.json"));
    cfg["intermediate_size"] = 128;
    std::ofstream(d / "config.json") << cfg.dump();
    expect_one_line_error(run_ears("forward --model " + d.string() + ids), "mlp");
  }
  // Missing tensor (sharded index pointing at a tensor no shard has).
  {
    fs::path d = copy_fixture("qwen3-tiny-sharded");
    json idx = json::parse(ears::test::read_file(d / "model.safetensors.index.json"));
    idx["weight_map"].erase("model.norm.weight");
    std::ofstream(d / "model.safetensors.index.json") << idx.dump();
    expect_one_line_error(run_ears("forward --model " + d.string() + ids), "model.norm.weight");
  }
  // Missing directory, missing config key, bad ids.
  expect_one_line_error(run_ears("forward --model /nonexistent/dir" + ids), "/nonexistent/dir");
  {
    fs::path d = copy_fixture("qwen3-tiny");
    json cfg = json::parse(ears::test::read_file(d / "config.json"));
    cfg.erase("hidden_size");
    std::ofstream(d / "config.json") << cfg.dump();
    expect_one_line_error(run_ears("forward --model " + d.string() + ids), "hidden_size");
  }
  expect_one_line_error(run_ears("forward --model " + (shared_dir() / "fixtures/qwen3-tiny").string() + " --ids 'a b'"),
                        "--ids");
  expect_one_line_error(
      run_ears("forward --model " + (shared_dir() / "fixtures/qwen3-tiny").string() + " --ids '99999'"), "vocabulary");
}

TEST(Cli, GenerateRejectsBadOptions) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const std::string t = " --target " + (shared_dir() / "fixtures/qwen3-tiny").string() + " --ids '1 2'";
  expect_one_line_error(run_ears("generate" + t + " --temperature -1"), "temperature");
  expect_one_line_error(run_ears("generate" + t + " --top-p 0"), "top_p");
  expect_one_line_error(run_ears("generate" + t + " --verifier fancy"), "fancy");
  expect_one_line_error(run_ears("generate" + t + " --max-new-tokens 0"), "max_new_tokens");
  expect_one_line_error(run_ears("generate" + t + " --max-new-tokens 100000"), "context");
  expect_one_line_error(run_ears("generate" + t + " --draft /nonexistent"), "/nonexistent");
}
