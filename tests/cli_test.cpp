// End-to-end checks of the model-level commands through the real executable: output formats,
// agreement with the golden fixtures, and one-line errors with non-zero exit codes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <functional>

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
}

// Mistakes the option parser finds are one line too, naming the command and its --help.
TEST(Cli, CommandLineMistakesGiveOneLineErrors) {
  expect_one_line_error(run_ears("no-such-command"), "unknown command 'no-such-command'");
  expect_one_line_error(run_ears("rn x.yaml"), "did you mean 'run'?");
  expect_one_line_error(run_ears(""), "commands: env,");
  expect_one_line_error(run_ears("run --bogus"), "ears-bench run: The following argument was not expected: --bogus; see "
                                                 "'ears-bench run --help'");
  expect_one_line_error(run_ears("generate --max-new-tokens abc"), "--max-new-tokens");
  expect_one_line_error(run_ears("gate"), "ears-bench gate: run_dir is required");
  expect_one_line_error(run_ears("bench"), "(commands: bandwidth, forward,");
  expect_one_line_error(run_ears("bench forward --nope"), "see 'ears-bench bench forward --help'");
  EXPECT_EQ(run_ears("--version").exit_code, 0);
  // Bytes that are not UTF-8, echoed from a file name or a corrupt file, print as U+FFFD.
  const auto r = run_ears("validate '/nonexistent/\xff.yaml'");
  expect_one_line_error(r, "/nonexistent/\xEF\xBF\xBD.yaml");
  EXPECT_EQ(r.err.find('\xff'), std::string::npos) << r.err;
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

// At a context's end the draft chain runs past the head's RoPE table (the bundled pair: 1024
// positions): the raw-rows step failed mid-chain ("Eagle3Head::forward_host: ... check
// host_step_ready first", exit 2) on every CPU kernel path. Now that step takes the tensor path
// and T = 0 speculation still equals the target's greedy output.
TEST(Cli, SpeculationAtTheEndOfTheContextEqualsGreedy) {
  const fs::path models = ears::test::source_dir() / "models";
  std::string ids;
  for (int i = 0; i < 950; ++i) ids += std::to_string(5 + (i * 7) % 300) + " ";
  const std::string base = "generate --json --threads 1 --target " + (models / "tiny-qwen3").string() +
                           " --temperature 0 --max-new-tokens 74 --ids '" + ids + "'";
  const auto greedy = run_ears(base);
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  for (const char* gamma : {"5", "16"}) {
    const auto spec = run_ears(base + " --draft " + (models / "tiny-eagle3").string() + " --gamma " + gamma);
    ASSERT_EQ(spec.exit_code, 0) << gamma << ": " << spec.err;
    EXPECT_EQ(json::parse(spec.out)["ids"], json::parse(greedy.out)["ids"]) << gamma;
    EXPECT_EQ(json::parse(spec.out)["ids"].size(), 74u);
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

namespace {

// Rewrites `from` as `to` (space-padded to the same length) in a safetensors file's JSON header.
void patch_header(const fs::path& file, const std::string& from, const std::string& to) {
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
}

}  // namespace

TEST(Cli, CorruptSafetensorsGiveOneLineErrors) {
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
  // Offsets past the end / unknown dtype: the JSON header rewritten in place (same length).
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
}

TEST(Cli, CheckpointsThatContradictTheirConfigGiveOneLineErrors) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const std::string ids = " --ids '1 2 3'";
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
  // Values no model has: refused at load, naming the file and key (rope_theta 0 gave NaN logits, exit 0).
  const std::vector<std::pair<std::function<void(json&)>, std::string>> bad_values = {
      {[](json& c) { c["rope_theta"] = 0; }, "key 'rope_theta' is 0; it must be a finite number > 0"},
      {[](json& c) { c["rms_norm_eps"] = -1; }, "key 'rms_norm_eps' is -1"},
      {[](json& c) { c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", -2}}; }, "rope_scaling: key 'factor' is -2"},
      {[](json& c) { c["num_hidden_layers"] = 1e30; }, "key 'num_hidden_layers' is 1e+30, too large"},
      // One layer fewer than the checkpoint holds ran a shallower model without a word.
      {[](json& c) { c["num_hidden_layers"] = c["num_hidden_layers"].get<int>() - 1; },
       "but the checkpoint holds layer"},
  };
  for (const auto& [edit, expect] : bad_values) {
    fs::path d = copy_fixture("qwen3-tiny");
    json cfg = json::parse(ears::test::read_file(d / "config.json"));
    edit(cfg);
    std::ofstream(d / "config.json") << cfg.dump();
    expect_one_line_error(run_ears("forward --model " + d.string() + ids), expect);
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
  expect_one_line_error(run_ears("generate" + t + " --draft " + (shared_dir() / "fixtures/eagle3-tiny").string() +
                                 " --verifier fancy"),
                        "fancy");
  expect_one_line_error(run_ears("generate" + t + " --max-new-tokens 0"), "max_new_tokens");
  expect_one_line_error(run_ears("generate" + t + " --draft-sampling argmax"), "--draft-sampling: 'argmax'");
  expect_one_line_error(run_ears("generate" + t + " --device gpu"), "unknown device 'gpu'; use cpu, cuda or cuda:N");
  expect_one_line_error(run_ears("generate" + t + " --device cuda:99999999999"), "unknown device 'cuda:99999999999'");
  expect_one_line_error(run_ears("generate" + t + " --max-new-tokens 100000"), "context");
  expect_one_line_error(run_ears("generate" + t + " --draft /nonexistent"), "/nonexistent");
  // float16 on CPU: LibTorch 1.13 lacks its matmul (a raw LibTorch error, exit 1), 2.x emulates it.
  expect_one_line_error(run_ears("generate" + t + " --dtype float16"), "float16 is not computed on CPU");
  // A tokenizer with ids the model cannot embed: refused at load (it aborted runs midway).
  if (fs::exists(shared_dir() / "tokenizers/qwen3/tokenizer.json"))
    expect_one_line_error(run_ears("generate --target " + (shared_dir() / "fixtures/qwen3-tiny").string() +
                                   " --tokenizer " + (shared_dir() / "tokenizers/qwen3").string() + " --prompt hi"),
                          "vocab_size 320");
  // A CUDA device on a LibTorch without CUDA: exit 2 naming the flag (was a LibTorch error, exit 1).
  const auto env = run_ears("env --json");
  if (env.out.find("\"cuda_build\":false") != std::string::npos) {
    expect_one_line_error(run_ears("generate" + t + " --device cuda"), "without CUDA");
    expect_one_line_error(run_ears("bench forward --quick --device cuda:1"), "--device");
  }
}

// `train eagle3 --draft-vocab`: a negative size, more ids than the target has, or a size other than
// the one an --init head already scores is one line naming the flag, before any training.
TEST(Cli, TrainDraftVocabRejectsBadSizes) {
  const fs::path models = ears::test::source_dir() / "models";
  const fs::path out = ears::test::temp_dir("draft-vocab");
  const std::string t = "train eagle3 --target " + (models / "tiny-qwen3").string() + " --out " + (out / "h").string();
  expect_one_line_error(run_ears(t + " --draft-vocab -1"), "--draft-vocab -1");
  expect_one_line_error(run_ears(t + " --draft-vocab 2049"), "2048");
  // One step of a head over 256 ids: saved with that vocabulary, which a second run from it keeps
  // and may not resize.
  const auto r = run_ears(t + " --draft-vocab 256 --steps 1 --batch 1 --seq-len 128 --eval-n 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cfg = nlohmann::json::parse(ears::test::read_file(out / "h/config.json"));
  EXPECT_EQ(cfg["draft_vocab_size"], 256);
  EXPECT_EQ(cfg["vocab_size"], 2048);
  const auto log = nlohmann::json::parse(ears::test::read_file(out / "h/train_log.json"));
  EXPECT_EQ(log["options"]["draft_vocab"]["source"], "frequency");
  const std::string again = "train eagle3 --target " + (models / "tiny-qwen3").string() + " --out " +
                            (out / "h2").string() + " --init " + (out / "h").string() + " --steps 1 --batch 1 --seq-len 64";
  expect_one_line_error(run_ears(again + " --draft-vocab 128"), "already scores 256 ids");
  fs::remove_all(out);
}

// `train eagle3` options that would train nothing or another architecture than EAGLE-3's: one
// `ears-bench: error:` line (the last on stderr, after the progress lines), exit 2, nothing saved.
// --seq-len shorter than every chat prompt trained 3 steps at loss 0.0000 and saved the random head
// (exit 0); --aux-layers 1,3 saved an fc of 2 x hidden inputs.
TEST(Cli, TrainEagle3RefusesWhatWouldTrainNothing) {
  const fs::path models = ears::test::source_dir() / "models";
  const fs::path out = ears::test::temp_dir("train-nothing");
  const std::string t = "train eagle3 --target " + (models / "tiny-qwen3").string() + " --out " + (out / "h").string() +
                        " --steps 3 --batch 4 --synth-n 50 --ttt 2 --gsm8k none --natural-fraction 0 --threads 2 "
                        "--log-every 1 --warmup 1";
  auto expect_refused = [&](const std::string& args, const std::string& must_contain) {
    SCOPED_TRACE(args);
    const auto r = run_ears(t + args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
    EXPECT_EQ(last.rfind("ears-bench: error: ", 0), 0u) << r.err;
    EXPECT_NE(last.find(must_contain), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("  loss "), std::string::npos) << "refused before training: " << r.err;
    EXPECT_FALSE(fs::exists(out / "h" / "model.safetensors"));
  };
  expect_refused(" --seq-len 32", "--seq-len 32: no training document reaches a loss position within 32 tokens");
  expect_refused(" --seq-len 48", "or more");
  expect_refused(" --seq-len 64 --aux-layers 1,3", "--aux-layers [1, 3]: give 3 distinct ids");
  expect_refused(" --seq-len 64 --aux-layers 1,3,3", "--aux-layers [1, 3, 3]: give 3 distinct ids");
  expect_refused(" --seq-len 64 --aux-layers 1,3,6", "--aux-layers: id 6 is outside 0..5");
}

// --threads follows one rule everywhere (decoders/threads.h): 0 = auto, 1 .. 4 x the logical
// CPUs; anything else is a one-line error naming --threads, exit 2, before any work (10000 used
// to hang, -3 was silently ignored).
TEST(Cli, ThreadsOutOfRangeIsOneLineError) {
  const fs::path models = ears::test::source_dir() / "models";
  const std::string target = (models / "tiny-qwen3").string(), draft = (models / "tiny-eagle3").string();
  const fs::path out = ears::test::temp_dir("threads-range");
  const std::vector<std::string> commands = {
      "generate --target " + target + " --ids '1 2' --max-new-tokens 2",
      "forward --model " + target + " --ids '1 2'",
      "bench bandwidth --quick",
      "bench e2e --quick --target " + target + " --draft " + draft,
      "train eagle3 --target " + target + " --out " + (out / "head").string(),
      "env",
      "run " + (ears::test::source_dir() / "configs/quickstart.yaml").string() + " --out " + (out / "run").string()};
  // Every command, each with one of the two values in turn (a process costs ~1-1.7 s; the rule is one
  // function, so each value on half of the commands still shows every command calls it).
  for (size_t i = 0; i < commands.size(); ++i) {
    const std::string bad = i % 2 == 0 ? "10000" : "-3", cmd = commands[i];
    SCOPED_TRACE(cmd + " --threads " + bad);
    const auto r = run_ears(cmd + " --threads " + bad);
    expect_one_line_error(r, "--threads");
    EXPECT_NE(r.err.find(bad + " is out of range"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("0 (auto"), std::string::npos) << "names the allowed range: " << r.err;
  }
  EXPECT_FALSE(fs::exists(out / "run" / "run_meta.json")) << "nothing is written before the check";
  // 1 and 0 (auto) are fine.
  for (const char* ok : {"0", "1"}) {
    const auto r = run_ears(std::string("env --json --threads ") + ok);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_GE(json::parse(r.out)["threads"].get<int>(), 1);
  }
}

// An option outside its range is one line naming it, exit 2, while the command line is parsed:
// before any model loads or training starts (each was a raw LibTorch error, an internal message
// after minutes of work, or silently clamped or ignored).
TEST(Cli, OptionRangesAreOneLineErrorsBeforeAnyWork) {
  const auto repeated_id = [](int n) {
    std::string ids;
    for (int i = 0; i < n; ++i) ids += "5 ";
    return ids;
  };
  const fs::path models = ears::test::source_dir() / "models";
  const std::string target = (models / "tiny-qwen3").string(), draft = (models / "tiny-eagle3").string();
  const fs::path out = ears::test::temp_dir("option-ranges");
  const std::string gen = "generate --target " + target + " --draft " + draft + " --ids '1 2' --max-new-tokens 2";
  const std::string fwd = "forward --model " + target + " --ids '1 2'";
  const std::string train = "train target --out " + (out / "t").string() + " --steps 1";
  const std::string head = "train eagle3 --target " + target + " --out " + (out / "h").string() + " --steps 1";
  // (command, what the line must name)
  const std::vector<std::pair<std::string, std::string>> cases = {
      // --gamma: 1 .. the config's kMaxGamma (16) for every command that drafts.
      {gen + " --gamma 100000", "--gamma: 100000 is out of range; --gamma must be >= 1 and <= 16"},
      {gen + " --gamma 0", "--gamma: 0 is out of range"},
      {"bench e2e --quick --target " + target + " --draft " + draft + " --gamma 17", "--gamma: 17 is out of range"},
      {"bench forward --quick --gamma 0", "--gamma: 0 is out of range; --gamma must be >= 1"},  // a width, no cap
      {"bench verify --quick --gamma 0", "--gamma: 0"},
      {fwd + " --draft " + draft + " --gamma -2", "--gamma: -2 is out of range"},
      {fwd + " --gamma 3", "--gamma: sets the draft chain's length, and there is no draft"},
      {fwd + " --draft " + draft + " --aux 1", "--aux: with --draft the forward reads the head's own aux layers"},
      {"bench e2e --quick --target " + target + " --draft " + draft + " --draft-kind none", "--draft-kind: 'none' is not allowed"},
      // generate: what would be silently unread is refused.
      {"generate --target " + target + " --ids '1 2' --gamma 3", "--gamma: applies to speculative decoding"},
      {"generate --target " + target + " --ids '1 2' --verifier ears", "--verifier: applies to speculative decoding"},
      {gen + " --draft-kind none", "--draft-kind none decodes with the target alone"},
      {"generate --target " + target + " --ids '1 2' --chat", "--chat requires --prompt"},
      {"generate --target " + target + " --prompt hi --thinking", "--thinking requires --chat"},
      {head + " --eval-n 1 --eval-gamma 0", "--eval-gamma: 0 is out of range"},
      // Sampling parameters in their decoders/param_ranges.h ranges (1e-39 was a raw LibTorch error, exit 1).
      {gen + " --temperature 1e-39", "--temperature: 1e-39 is out of range; temperature must be 0 (greedy) or >= 0.01"},
      {"bench e2e --quick --temperature 0,0.001", "--temperature: 0.001 is out of range"},
      {"bench verify --quick --temperature 1e-30", "--temperature: 1e-30"},
      {gen + " --top-k -1", "--top-k: -1 is out of range; top_k must be >= 0"},
      {gen + " --beta -0.5", "--beta: -0.5 is out of range; beta must be >= 0"},
      // Seeds: 0 .. 2^64 - 1 as in a config (CLI11 wrapped -1 and saturated past 2^64).
      {gen + " --seed -1", "--seed: -1 is out of range; --seed must be a whole number from 0 to 18446744073709551615"},
      {gen + " --seed 99999999999999999999999", "--seed: 99999999999999999999999 is out of range"},
      {"bench e2e --quick --seed -1", "--seed: -1"},
      {"bench e2e --quick --prompt-ids '  '", "--prompt-ids: no id given"},
      {train + " --seed -3", "--seed: -3"},
      // forward: the ids (and the draft's chain) within the model's context (20000 ids ran, exit 0).
      {"forward --model " + target + " --ids '" + repeated_id(1025) + "'",
       "--ids: 1025 ids exceed the model's context of 1024 positions"},
      {"forward --model " + target + " --draft " + draft + " --gamma 5 --ids '" + repeated_id(1020) + "'",
       "--ids: 1020 ids + --gamma 5 exceed"},
      // Command-line text is UTF-8 like every file (bad bytes became U+FFFD's ids), a stop string not "".
      {"tokenize --tokenizer " + target + " --text '\xff\xfe bad'", "--text: not valid UTF-8 (byte 0xFF at offset 0)"},
      {"generate --target " + target + " --prompt 'caf\xe9'", "--prompt: not valid UTF-8 (byte 0xE9 at offset 3)"},
      {gen + " --stop ''", "--stop: an empty string"},
      {"tokenize --tokenizer " + target + " --jsonl /dev/zero", "--jsonl /dev/zero: not a regular file"},
      {gen + " --stop '\xff'", "--stop: not valid UTF-8"},
      {fwd + " --last 0", "--last: 0 is out of range; --last must be >= 1"},
      {fwd + " --last -5", "--last: -5"},
      // env: --device / --dtype describe how --model loads; without it they did nothing.
      {"env --device tpu", "--device: applies to the checkpoint of --model"},
      {"env --dtype float16", "--dtype: applies to the checkpoint of --model"},
      // More memory than the machine has: it filled the RAM without a line (or a raw LibTorch error).
      {"bench forward --params 100000000000000 --dtype float32", "--params: needs about"},
      {"bench forward --params 99999999999999999999", "--params: 99999999999999999999 is out of range"},
      {"bench linear --in 2000000000 --out 2000000000", "--in x --out: needs about"},
      {"bench bandwidth --quick --repeats -1", "--repeats: -1 is out of range; --repeats must be >= 0"},
      {"bench linear --quick --repeats -1", "--repeats: -1"},
      {"bench forward --quick --repeats -1", "--repeats: -1"},
      // The cache would run past the model's 1024 positions (100000 ran for minutes).
      {"bench forward --quick --dtype float32 --batch 1 --model " + target + " --context 2000",
       "--context: 2000 positions plus a verify step's 6 exceed tiny-qwen3's context length of 1024"},
      {"bench forward --quick --dtype float32 --batch 1 --model " + target + " --context 100000", "--context 1018 or less"},
      // train: every schedule and shape value, before the output directory is made.
      {train + " --lr nan", "--lr: nan is out of range; --lr must be > 0"},
      {train + " --lr -1", "--lr: -1"},
      {train + " --steps 0", "--steps: 0 is out of range; --steps must be >= 1"},
      {train + " --steps -1", "--steps: -1"},
      {train + " --batch 0", "--batch: 0"},
      {train + " --seq-len 0", "--seq-len: 0"},
      {train + " --seq-len 5000", "--seq-len: 5000 is out of range; --seq-len must be <= 1024"},
      {train + " --layers 0", "--layers: 0"},
      {train + " --head-dim 0", "--head-dim: 0"},
      {train + " --hidden -1", "--hidden: -1"},
      {train + " --heads 3 --kv-heads 2", "--heads: 3 is not a multiple of --kv-heads 2"},
      {train + " --head-dim 3", "--head-dim: 3 is odd"},
      {train + " --synth-n -1", "--synth-n: -1 is out of range; --synth-n must be >= 1"},
      {head + " --synth-n 0", "--synth-n: 0"},
      {train + " --natural-fraction 2", "--natural-fraction: 2 is out of range; --natural-fraction must be >= 0 and <= 1"},
      {train + " --warmup -5", "--warmup: -5"},
      {train + " --clip -1", "--clip: -1 is out of range; --clip must be > 0"},
      {train + " --min-lr-ratio -1", "--min-lr-ratio: -1"},
      {train + " --log-every 0", "--log-every: 0"},
      {train + " --minutes -1", "--minutes: -1"},
      {train + " --eval-n -1", "--eval-n: -1"},
      {train + " --dtype float16", "--dtype: 'float16' is not allowed here; use one of: bfloat16, float32"},
      {head + " --heads 4 --kv-heads 3", "--heads: 4 is not a multiple of --kv-heads 3"},
      {head + " --natural-fraction -0.5", "--natural-fraction: -0.5"},
  };
  for (const auto& [cmd, expect] : cases) {
    SCOPED_TRACE(cmd);
    const auto r = run_ears(cmd);
    expect_one_line_error(r, expect);
  }
  EXPECT_FALSE(fs::exists(out / "t")) << "nothing is written before the checks";
  EXPECT_FALSE(fs::exists(out / "h")) << "nothing is written before the checks";
  // The edges are fine: --last 1 and the largest --gamma.
  const auto r = run_ears(fwd + " --last 1 --draft " + draft + " --gamma 16 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["draft"]["chain_target_ids"].size(), 16u);
}

// A trained model (or tokenizer) in --out is replaced only with --force (or --init naming --out:
// continued training in place); it was silently overwritten.
TEST(Cli, TrainRefusesToOverwriteATrainedModel) {
  const fs::path models = ears::test::source_dir() / "models";
  const fs::path out = ears::test::temp_dir("train-overwrite");
  std::ofstream(out / "model.safetensors") << "x";
  std::ofstream(out / "tokenizer.json") << "{}";
  const std::string o = " --out " + out.string();
  expect_one_line_error(run_ears("train target" + o), "already holds a trained model.safetensors; pass --force");
  expect_one_line_error(run_ears("train eagle3 --target " + (models / "tiny-qwen3").string() + o),
                        "already holds a trained model.safetensors; pass --force");
  expect_one_line_error(run_ears("train tokenizer" + o), "already holds a trained tokenizer.json; pass --force");
  EXPECT_EQ(ears::test::read_file(out / "model.safetensors"), "x") << "untouched";
  // --force goes past the check (to the next one: --threads, checked when training starts).
  expect_one_line_error(run_ears("train target --force --threads 10000" + o), "--threads");
}

// `ears-bench env --json`: what runs here (harness/run/environment.h).
TEST(Cli, EnvJsonHasTheFacts) {
  const auto r = run_ears("env --json --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  for (const char* k : {"threads", "omp_wait_policy", "libtorch", "cuda_build", "cuda_devices", "cpu_model", "cpu_isa",
                        "logical_cpus", "l3_cache_bytes", "kernel_path_best", "kernel_path", "aten_cpu_capability",
                        "load_average_1m_start"})
    EXPECT_TRUE(j.contains(k)) << k << " in " << r.out;
  // ATen's own vector code, from at::show_config() ("AVX2", "AVX512", "NO AVX").
  EXPECT_NE(j["aten_cpu_capability"], "unknown") << r.out;
  EXPECT_NE(j["aten_cpu_capability"], "") << r.out;
  // One vocabulary: report.json's names, no second spelling.
  for (const char* k : {"torch_version", "load_average_1m"}) EXPECT_FALSE(j.contains(k)) << k << " in " << r.out;
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(j["libtorch"].get<std::string>().at(0)))) << r.out;  // "1.13.0"
  EXPECT_GE(j["load_average_1m_start"].get<double>(), 0);
  if (std::getenv("EARS_KERNELS") == nullptr && std::getenv("EARS_NO_CPU_KERNELS") == nullptr) {
    EXPECT_EQ(j["notices"], json::array()) << "the default path is the best one, 1 thread: nothing to notice";
    EXPECT_EQ(r.err.find("notice"), std::string::npos) << r.err;
  }
  EXPECT_EQ(j["threads"], 1);
  EXPECT_GE(j["logical_cpus"].get<int>(), 1);
  // The test runs the executable without OMP_WAIT_POLICY / GOMP_SPINCOUNT unless the caller set
  // them: then main() re-executed itself with GOMP_SPINCOUNT=3000.
  const bool user_wait = std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr;
  if (!user_wait)
    EXPECT_EQ(j["omp_wait_policy"],
              "spin 3000 then sleep (ears-bench default: GOMP_SPINCOUNT=3000); CPU-kernel workers stay awake through "
              "each decode, yielding their CPU")
        << r.out;
  // A policy or spin count the user sets is kept (the child inherits this process's environment).
  if (!user_wait) {
    ::setenv("OMP_WAIT_POLICY", "ACTIVE", 1);
    const auto active = run_ears("env --json");
    ::unsetenv("OMP_WAIT_POLICY");
    ASSERT_EQ(active.exit_code, 0) << active.err;
    EXPECT_EQ(json::parse(active.out)["omp_wait_policy"], "OMP_WAIT_POLICY=ACTIVE (set by the user)") << active.out;
    ::setenv("GOMP_SPINCOUNT", "0", 1);
    const auto passive = run_ears("env --json");
    ::unsetenv("GOMP_SPINCOUNT");
    ASSERT_EQ(passive.exit_code, 0) << passive.err;
    EXPECT_EQ(json::parse(passive.out)["omp_wait_policy"], "GOMP_SPINCOUNT=0 (set by the user)") << passive.out;
  }
  // Plain text: one "key: value" per line.
  const auto text = run_ears("env");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("kernel_path: "), std::string::npos) << text.out;
  // --model adds the checkpoint's dtypes and kernel path.
  const auto m = run_ears("env --json --threads 1 --model " + (ears::test::source_dir() / "models/tiny-qwen3").string());
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const json mj = json::parse(m.out);
  ASSERT_TRUE(mj.contains("model")) << m.out;
  for (const char* k : {"device", "dtype_requested", "compute_dtype", "weight_dtype", "checkpoint_dtype", "kernel_path"})
    EXPECT_TRUE(mj["model"].contains(k)) << k << " in " << m.out;
  EXPECT_EQ(mj["model"]["dtype_requested"], "auto");
}

// The slow or forced paths are never silent: a capped kernel path and more threads than CPUs are
// notices in the JSON (naming the variable and the best path) and lines on stderr.
TEST(Cli, EnvNoticesACappedPathAndTooManyThreads) {
  const auto plain = run_ears("env --json --threads 1");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const std::string best = json::parse(plain.out)["kernel_path_best"].get<std::string>();
  const int cpus = json::parse(plain.out)["logical_cpus"].get<int>();
  if (best == "aten" || best == "avx2") GTEST_SKIP() << "needs a CPU above the avx2 path (best: " << best << ")";
  // EARS_NO_CPU_KERNELS=0 caps nothing: the test's own cap holds when the suite runs with the kernels off.
  ears::test::ScopedEnv path("EARS_KERNELS", "avx2"), aten("ATEN_CPU_CAPABILITY", "avx2"), on("EARS_NO_CPU_KERNELS", "0");
  const auto r = run_ears("env --json --threads " + std::to_string(cpus + 1));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["kernel_path"], "avx2");
  EXPECT_EQ(j["aten_cpu_capability"], "AVX2") << "ATen's own capability, capped the same way";
  const std::string capped = "kernel path avx2, below this CPU's best " + best +
                             ": EARS_KERNELS=avx2 caps it; unset EARS_KERNELS for the fastest path";
  const std::string threads = std::to_string(cpus + 1) + " LibTorch threads on " + std::to_string(cpus) +
                              " logical CPUs: the workers wait on each other; use at most " + std::to_string(cpus);
  ASSERT_EQ(j["notices"].size(), 2u) << r.out;
  EXPECT_EQ(j["notices"][0], capped);
  EXPECT_EQ(j["notices"][1].get<std::string>().rfind(threads, 0), 0u) << r.out;
  EXPECT_NE(r.err.find("ears-bench: notice: " + capped + "\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ears-bench: notice: " + threads), std::string::npos) << r.err;
}

// generate --json says what ran: threads, wait policy, kernel path, the target's dtypes.
TEST(Cli, GenerateJsonSaysWhatRan) {
  const fs::path models = ears::test::source_dir() / "models";
  const auto r = run_ears("generate --json --threads 1 --target " + (models / "tiny-qwen3").string() + " --draft " +
                          (models / "tiny-eagle3").string() + " --ids '24 26 221' --max-new-tokens 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_TRUE(j.contains("env")) << r.out;
  EXPECT_EQ(j["env"]["threads"], 1);
  EXPECT_GE(j["stats"]["mean_accept_length"].get<double>(), 1.0);
  // One new token is the prefill's: no step, so no τ (it said 0, below τ's least value 1).
  const auto one = run_ears("generate --json --threads 1 --target " + (models / "tiny-qwen3").string() +
                            " --ids '24 26 221' --max-new-tokens 1");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_TRUE(json::parse(one.out)["stats"]["mean_accept_length"].is_null()) << one.out;
  for (const char* k : {"omp_wait_policy", "cpu_isa", "kernel_path", "libtorch", "load_average_1m_start"})
    EXPECT_TRUE(j["env"].contains(k)) << k;
  EXPECT_FALSE(j["env"].contains("torch_version")) << r.out;
  const json& m = j["env"]["model"];
  EXPECT_EQ(m.value("dtype_requested", ""), "auto");
  EXPECT_FALSE(m.value("compute_dtype", "").empty()) << r.out;
  EXPECT_EQ(m.value("weight_dtype", ""), m.value("compute_dtype", "-"));
  EXPECT_FALSE(m.value("checkpoint_dtype", "").empty()) << r.out;
  EXPECT_FALSE(m.value("kernel_path", "").empty()) << r.out;
  // The draft's facts beside the target's: the EAGLE-3 head computes in its dtype on its path.
  const json& d = j["env"]["draft"];
  EXPECT_EQ(d.value("kind", ""), "eagle3") << r.out;
  EXPECT_EQ(d.value("path", ""), (models / "tiny-eagle3").string());
  for (const char* k : {"device", "compute_dtype", "weight_dtype", "kernel_path"}) EXPECT_EQ(d[k], m[k]) << k;
  EXPECT_EQ(d.value("parameters", int64_t{0}), 1246208) << "tiny-eagle3's weights but d2t / t2d";
  // The load around the command: before the models loaded, and at the end.
  for (const char* k : {"load_average_1m_start", "load_average_1m_end"}) EXPECT_GE(j["env"].value(k, -1.0), 0) << k;
  if (std::getenv("EARS_KERNELS") == nullptr && std::getenv("EARS_NO_CPU_KERNELS") == nullptr)
    EXPECT_EQ(r.err, "") << "nothing slow or forced to notice";
}

// The recipe that measures an AVX2-only CPU on an AVX-512 one (docs/performance.md): with oneDNN
// capped at AVX2, LibTorch's own bf16 ops are not native, so `auto` on the ATen path computes in
// float32 as on an AVX2-only CPU, an explicit bfloat16 still runs (LibTorch 1.13 hands bf16 matmul
// to oneDNN from CPUID, and capped oneDNN refuses it unless switched off: exit 1 before),
// and the environment records the cap.
TEST(Cli, OneDnnCapBelowAvx512RunsAsOnAnAvx2Cpu) {
  const std::string target = (ears::test::source_dir() / "models/tiny-qwen3").string();
  const std::string common = "generate --json --threads 1 --target " + target + " --ids '24 26 221' --max-new-tokens 4";
  ears::test::ScopedEnv cap("ONEDNN_MAX_CPU_ISA", "avx2"), path("EARS_KERNELS", "aten");
  const auto autod = run_ears(common);
  const auto bf16 = run_ears(common + " --dtype bfloat16");
  ASSERT_EQ(autod.exit_code, 0) << autod.err;
  const json a = json::parse(autod.out);
  EXPECT_EQ(a["env"]["model"]["compute_dtype"], "float32") << autod.out;
  EXPECT_NE(a["env"]["cpu_isa"].get<std::string>().find("; ONEDNN_MAX_CPU_ISA=avx2"), std::string::npos) << autod.out;
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  EXPECT_EQ(json::parse(bf16.out)["env"]["model"]["compute_dtype"], "bfloat16") << bf16.out;
  // Never silent: an emulated bf16 is a notice in the JSON and on stderr; auto (float32) has none.
  const std::string emulated = "bfloat16 on the CPU on kernel path aten, and this CPU has no native bf16";
  EXPECT_NE(json::parse(bf16.out)["env"]["notices"].dump().find(emulated), std::string::npos) << bf16.out;
  EXPECT_NE(bf16.err.find("ears-bench: notice: " + emulated), std::string::npos) << bf16.err;
  EXPECT_NE(bf16.err.find("ONEDNN_MAX_CPU_ISA=avx2): LibTorch emulates it"), std::string::npos) << bf16.err;
  EXPECT_EQ(a["env"]["notices"].dump().find(emulated), std::string::npos) << autod.out;
}
