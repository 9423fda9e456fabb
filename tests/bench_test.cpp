// `ears-bench bench ...` driven as a user would: run the built executable, parse its JSON and check
// the documented fields. No timing thresholds: only that timings are positive and that the derived
// columns (floor, ratio, tokens/s, totals) are consistent with the raw ones.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "decoders/safetensors_header.h"
#include "harness/bench/common.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// $EARS_BENCH_EXE (set by ctest), else ears-bench beside this test binary.
std::string exe() {
  if (const char* e = std::getenv("EARS_BENCH_EXE")) return e;
  return (fs::read_symlink("/proc/self/exe").parent_path() / "ears-bench").string();
}

struct ExeRun {
  int code = -1;
  std::string out, err;
};

ExeRun run(const std::string& args) {
  const std::string err_file = (fs::temp_directory_path() / ("ears_bench_test_err_" + std::to_string(::getpid()))).string();
  const std::string cmd = "'" + exe() + "' " + args + " 2>'" + err_file + "'";
  ExeRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = ears::test::read_file(err_file);
  fs::remove(err_file);
  return r;
}

json run_json(const std::string& args) {
  ExeRun r = run(args);
  EXPECT_EQ(r.code, 0) << args << "\nstderr: " << r.err;
  json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << args << ": stdout is not JSON:\n" << r.out;
  return j;
}

void expect_positive(const json& obj, const std::vector<std::string>& keys, const std::string& where) {
  for (const auto& k : keys) {
    ASSERT_TRUE(obj.contains(k)) << where << ": missing '" << k << "' in " << obj.dump();
    ASSERT_TRUE(obj[k].is_number()) << where << ": '" << k << "' is not a number in " << obj.dump();
    EXPECT_GT(obj[k].get<double>(), 0) << where << ": " << k;
  }
}

// The header every bench command prints: environment + paired bandwidth readings.
void expect_header(const json& j, const std::string& command, size_t readings) {
  EXPECT_EQ(j.value("command", ""), command);
  ASSERT_TRUE(j.contains("env"));
  EXPECT_GT(j["env"].value("threads", 0), 0);
  EXPECT_FALSE(j["env"].value("libtorch", "").empty());
  for (const char* k : {"torch_version", "load_average_1m"}) EXPECT_FALSE(j["env"].contains(k)) << command << ": " << k;
  EXPECT_FALSE(j["env"].value("cpu_model", "").empty());
  // What ran (harness/run/environment.h).
  for (const char* k : {"omp_wait_policy", "cuda_build", "cuda_devices", "cpu_isa", "cpu_flags", "logical_cpus",
                        "l3_cache_bytes", "kernel_path_best", "kernel_path", "aten_cpu_capability", "load_average_1m_start",
                        "load_average_1m_end"})
    EXPECT_TRUE(j["env"].contains(k)) << command << ": env lacks " << k;
  EXPECT_TRUE(j["env"]["notices"].is_array()) << command << ": " << j["env"].dump();
  EXPECT_EQ(j.value("quick", false), true) << command << ": --quick numbers are marked as not meaningful";
  ASSERT_TRUE(j["bandwidth"].is_array());
  ASSERT_EQ(j["bandwidth"].size(), readings);
  double best = 0;
  for (const auto& b : j["bandwidth"]) {
    expect_positive(b, {"read_gbps", "copy_gbps", "bytes", "runs", "threads"}, command + " bandwidth");
    best = std::max(best, b["read_gbps"].get<double>());
  }
  ASSERT_TRUE(j.contains("floor_read_gbps"));
  EXPECT_DOUBLE_EQ(j["floor_read_gbps"].get<double>(), best);
  ASSERT_TRUE(j.contains("conventions"));
  EXPECT_TRUE(j["conventions"].contains("read_gbps"));
}

uint64_t checkpoint_params(const fs::path& file, uint64_t* embed) {
  const std::string bytes = ears::test::read_file(file);
  auto h = ears::parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), file.string());
  uint64_t n = 0;
  for (const auto& t : h.tensors) n += t.numel();
  *embed = h.find("model.embed_tokens.weight")->numel();
  return n;
}

// One compute probe per kernel path of the rows (the rate of that path's MAC instruction), and
// each row's compute_floor_ms = macs / that rate, or null where the path has no probe.
void expect_compute_floors(const json& j) {
  std::map<std::string, double> gmacs;
  for (const auto& c : j["compute"]) {
    ASSERT_FALSE(gmacs.count(c["path"].get<std::string>())) << c.dump();
    gmacs[c["path"].get<std::string>()] = c["gmacs"].get<double>();
    // Positive where measured, and below what any core can do: 8 lanes x 4 FMA pipes (avx2), 32
    // MACs x 2 (vdpbf16ps), at 6 GHz.
    const double per_thread_max = (c["path"] == "avx2" ? 8 * 4 : 32 * 2) * 6.0;
    if (c["path"] == "avx2" || c["path"] == "avx512bf16") {
      EXPECT_GT(c["gmacs"].get<double>(), 0) << c.dump();
      EXPECT_LT(c["gmacs"].get<double>() / c["threads"].get<double>(), per_thread_max) << c.dump();
      EXPECT_GT(c["gmacs_one_thread"].get<double>(), 0) << c.dump();
      EXPECT_LT(c["gmacs_one_thread"].get<double>(), per_thread_max) << c.dump();
    }
    if (c["path"] == "aten") EXPECT_EQ(c["gmacs"].get<double>(), 0) << c.dump();
  }
  for (const auto& r : j["rows"]) {
    ASSERT_TRUE(gmacs.count(r["path"].get<std::string>())) << r.dump();
    const double g = gmacs[r["path"].get<std::string>()];
    if (g > 0) {
      EXPECT_NEAR(r["compute_floor_ms"].get<double>(), r["macs"].get<double>() / (g * 1e9) * 1e3,
                  1e-9 * r["compute_floor_ms"].get<double>());
    } else {
      EXPECT_TRUE(r["compute_floor_ms"].is_null()) << r.dump();
    }
  }
}

}  // namespace

TEST(BenchCli, BandwidthQuickJson) {
  json j = run_json("bench bandwidth --quick --json");
  expect_header(j, "bandwidth", 1);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["kernel"], "read");
  EXPECT_EQ(j["rows"][1]["kernel"], "copy");
  for (const auto& r : j["rows"]) expect_positive(r, {"gbps", "bytes", "best_s", "runs", "threads"}, "bandwidth row");
  // read = bytes / time, copy = 2 * bytes / time
  const auto& rd = j["rows"][0];
  const auto& cp = j["rows"][1];
  EXPECT_NEAR(rd["gbps"].get<double>(), rd["bytes"].get<double>() / rd["best_s"].get<double>() / 1e9,
              1e-6 * rd["gbps"].get<double>());
  EXPECT_NEAR(cp["gbps"].get<double>(), 2 * cp["bytes"].get<double>() / cp["best_s"].get<double>() / 1e9,
              1e-6 * cp["gbps"].get<double>());
}

TEST(BenchCli, ForwardOnTinyCheckpoint) {
  EARS_REQUIRE_SHARED("fixtures/qwen3-tiny");
  const fs::path dir = ears::test::shared_dir() / "fixtures/qwen3-tiny";
  json j = run_json("bench forward --model '" + dir.string() + "' --quick --json");
  expect_header(j, "forward", 2);
  uint64_t embed = 0;
  const uint64_t params = checkpoint_params(dir / "model.safetensors", &embed);
  // 2 dtypes x 2 quick batch sizes x {1, gamma+1} tokens
  ASSERT_EQ(j["rows"].size(), 8u);
  const double bw = j["floor_read_gbps"].get<double>();
  expect_compute_floors(j);
  for (const auto& r : j["rows"]) {
    expect_positive(r, {"ms_per_step", "floor_ms", "ratio", "tokens_per_s", "weight_bytes", "kv_bytes", "params",
                        "batch", "tokens_per_step", "macs"},
                    "forward row");
    EXPECT_EQ(r["model"], "qwen3-tiny");
    EXPECT_EQ(r["params"].get<uint64_t>(), params);
    const uint64_t elem = r["dtype"] == "float32" ? 4 : 2;
    // untied lm_head: the step streams everything but the embedding table
    EXPECT_EQ(r["weight_bytes"].get<uint64_t>(), (params - embed) * elem) << r.dump();
    // K and V of 6 layers x 2 KV heads x head_dim 24 over the 128-position context + the new tokens
    const uint64_t B = r["batch"].get<uint64_t>(), T = r["tokens_per_step"].get<uint64_t>();
    EXPECT_EQ(r["kv_bytes"].get<uint64_t>(), 6 * 2 * B * 2 * (128 + T) * 24 * elem) << r.dump();
    // MACs: every streamed weight once per token; q.k and p.v of 4 heads x head_dim 24 in 6 layers over
    // token t's 128 + t + 1 keys
    uint64_t keys = 0;
    for (uint64_t t = 0; t < T; ++t) keys += 128 + t + 1;
    EXPECT_EQ(r["macs"].get<uint64_t>(), B * (T * (params - embed) + 6 * 2 * 4 * 24 * keys)) << r.dump();
    const double ms = r["ms_per_step"].get<double>();
    const double bytes = r["weight_bytes"].get<double>() + r["kv_bytes"].get<double>();
    const double floor_ms = bytes / (bw * 1e9) * 1e3;
    EXPECT_NEAR(r["floor_ms"].get<double>(), floor_ms, 1e-9 * floor_ms);
    EXPECT_NEAR(r["ratio"].get<double>(), ms / r["floor_ms"].get<double>(), 1e-6 * r["ratio"].get<double>());
    EXPECT_NEAR(r["tokens_per_s"].get<double>(), r["batch"].get<double>() * r["tokens_per_step"].get<double>() / ms * 1e3,
                1e-6 * r["tokens_per_s"].get<double>());
  }
  EXPECT_EQ(j["rows"][0]["dtype"], "bfloat16");
  EXPECT_EQ(j["rows"][4]["dtype"], "float32");
  EXPECT_EQ(j["rows"][1]["tokens_per_step"], 6);
  ASSERT_EQ(j["summary"].size(), 2u);
  for (const auto& s : j["summary"])
    expect_positive(s, {"verify_over_decode_b1", "throughput_max_batch_over_b1", "max_batch"}, "forward summary");
}

TEST(BenchCli, ForwardOnGeneratedCheckpointAndMarkdown) {
  // The generated checkpoint (--quick: hidden 64, 2 layers, 4 heads, 2 KV heads, head_dim 16,
  // intermediate 128, vocab 1000, tied) is written, loaded and counted.
  ExeRun r = run("bench forward --quick --dtype float32 --batch 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("- QUICK: smoke-test sizes and repeats; numbers are not meaningful\n\n## ears-bench bench forward", 0), 0u)
      << r.out;
  const int64_t D = 64, I = 128, hd = 16, H = 4, K = 2, V = 1000, L = 2;
  const int64_t per_layer = 2 * D + (H + 2 * K) * hd * D + H * hd * D + 3 * I * D + 2 * hd;
  const int64_t params = L * per_layer + D + V * D;
  EXPECT_NE(r.out.find("| model | path | dtype | batch | tokens/step | ms/step | floor ms | ratio | compute floor ms | "
                       "tokens/s |"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("- bandwidth (start): read "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("- bandwidth (end): read "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("- environment: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OpenMP wait: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; kernel path "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::to_string(params) + " parameters"), std::string::npos) << params << "\n" << r.out;
  EXPECT_TRUE(r.out.find("| aten | float32 | 3 | 6 |") != std::string::npos ||
              r.out.find("| avx2 | float32 | 3 | 6 |") != std::string::npos)
      << r.out;
}

TEST(BenchCli, ForwardCompareKernelsTimesBothPathsSideBySide) {
  json j = run_json("bench forward --quick --dtype bfloat16 --batch 1 --compare-kernels --json");
  expect_header(j, "forward", 2);
  std::map<std::string, int> per_path;
  for (const auto& r : j["rows"]) ++per_path[r["path"].get<std::string>()];
  const std::string path = j["env"]["kernel_path"].get<std::string>();  // bf16 takes the path in effect
  if (path != "aten") {
    // Same shapes on both paths, one summary each.
    EXPECT_EQ(per_path[path], 2);
    EXPECT_EQ(per_path["aten"], 2);
    ASSERT_EQ(j["summary"].size(), 2u);
    EXPECT_EQ(j["summary"][0]["path"], path);
    EXPECT_EQ(j["summary"][1]["path"], "aten");
  } else {
    // No CPU kernels here (or EARS_KERNELS=aten): only the ATen path exists.
    EXPECT_EQ(per_path["aten"], 2);
    EXPECT_EQ(per_path.size(), 1u);
  }
}

TEST(BenchCli, ForwardPhasesCoverEveryShapeAndAddUp) {
  // One thread: a stolen core stalls no barrier (2 threads on a shared VM once timed a 0.2 ms step
  // at 1.5 ms, median of 20).
  json j = run_json("bench forward --quick --dtype float32 --batch 1 --phases --repeats 40 --threads 1 --json");
  expect_header(j, "forward", 2);
  ASSERT_EQ(j["phases"].size(), j["rows"].size());  // one phase row per timed shape, same order
  const std::vector<std::string> names = {"norms", "qkv", "qk_rope_kv", "attention", "o_proj", "mlp", "logits", "rest"};
  for (size_t i = 0; i < j["phases"].size(); ++i) {
    const json& p = j["phases"][i];
    EXPECT_EQ(p["batch"], j["rows"][i]["batch"]);
    EXPECT_EQ(p["tokens_per_step"], j["rows"][i]["tokens_per_step"]);
    double sum = 0;
    for (const std::string& n : names) {
      ASSERT_TRUE(p.contains(n + "_ms")) << n << " " << p.dump();
      EXPECT_GE(p[n + "_ms"].get<double>(), 0.0) << n;
      sum += p[n + "_ms"].get<double>();
    }
    EXPECT_GT(p["qkv_ms"].get<double>(), 0.0) << p.dump();
    EXPECT_GT(p["mlp_ms"].get<double>(), 0.0) << p.dump();
    EXPECT_NEAR(p["total_ms"].get<double>(), sum, 1e-9 * sum);
    // Clocked forwards cost what the timed ones did: a median vs a mean of 40 sub-millisecond
    // forwards on a shared machine, so only a slip of units (1000x) or of the divisor (the sum
    // over the 40 forwards instead of the mean: 40x) is ruled out.
    const double timed = j["rows"][i]["ms_per_step"].get<double>();
    EXPECT_GT(sum, timed / 12) << p.dump();
    EXPECT_LT(sum, timed * 12) << p.dump();
  }
  EXPECT_NE(j["conventions"]["phases"].get<std::string>().find("attention = attention over the cache"),
            std::string::npos);
  ExeRun bad = run("bench forward --quick --phases --device cuda");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--phases"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

TEST(BenchCli, LinearQuickJsonAndMarkdown) {
  json j = run_json("bench linear --quick --json --rows 1,6 --dtype bfloat16 --dtype float32");
  expect_header(j, "linear", 2);
  ASSERT_EQ(j["rows"].size(), 4u);  // 2 dtypes x 2 row counts
  for (size_t i = 0; i < j["rows"].size(); ++i) {
    const auto& r = j["rows"][i];
    EXPECT_EQ(r["dtype"], i < 2 ? "bfloat16" : "float32");
    EXPECT_EQ(r["rows"], i % 2 == 0 ? 1 : 6);
    expect_positive(r, {"ms", "floor_ms", "ratio", "over_min_rows", "gmac_per_s", "weight_gbps", "weight_bytes"},
                    "linear row");
    // The derived columns from the measured ones, computed here independently.
    const double s = r["ms"].get<double>() / 1e3;
    EXPECT_NEAR(r["gmac_per_s"].get<double>(), r["rows"].get<double>() * 256 * 64 / s / 1e9, 1e-6);
    EXPECT_DOUBLE_EQ(r["macs"].get<double>(), r["rows"].get<double>() * 256 * 64);
    EXPECT_DOUBLE_EQ(r["weight_bytes"].get<double>(), 256.0 * 64 * (i < 2 ? 2 : 4));
    EXPECT_NEAR(r["floor_ms"].get<double>(), r["weight_bytes"].get<double>() / j["floor_read_gbps"].get<double>() / 1e6,
                1e-12);
    EXPECT_NEAR(r["ratio"].get<double>(), r["ms"].get<double>() / r["floor_ms"].get<double>(), 1e-9);
    // Paired by round (TimedRounds below): the fewest rows over themselves is 1 in every round.
    if (i % 2 == 0) EXPECT_EQ(r["over_min_rows"].get<double>(), 1.0);
  }
  expect_compute_floors(j);
  ExeRun md = run("bench linear --quick --rows 2");
  EXPECT_EQ(md.code, 0) << md.err;
  EXPECT_NE(md.out.find("| path | dtype | rows | ms |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| bfloat16 | 2 |"), std::string::npos) << "bf16 is a default where it is native\n" << md.out;
  {
    // Where bf16 would be emulated (kernel path aten, oneDNN capped below AVX-512: no native bf16)
    // the default dtypes are float32 alone, and the output says why.
    ears::test::ScopedEnv cap("ONEDNN_MAX_CPU_ISA", "avx2"), path("EARS_KERNELS", "aten");
    ExeRun masked = run("bench linear --quick --rows 2");
    ASSERT_EQ(masked.code, 0) << masked.err;
    EXPECT_EQ(masked.out.find("| bfloat16 |"), std::string::npos) << masked.out;
    EXPECT_NE(masked.out.find("| aten | float32 | 2 |"), std::string::npos) << masked.out;
    const std::string left_out = "bfloat16 left out of the default dtypes: on kernel path aten this CPU has no native bf16";
    EXPECT_NE(masked.out.find("- NOTICE: " + left_out), std::string::npos) << masked.out;
    EXPECT_NE(masked.err.find("ears-bench: notice: " + left_out), std::string::npos) << masked.err;
  }
  ExeRun bad = run("bench linear --quick --rows 0");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--rows"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

// Ratios between functions timed side by side are paired: the median of the rounds' ratios,
// not the ratio of the medians (which a slow spell in one function's rounds would move).
TEST(TimedRounds, RatiosArePairedByRound) {
  // Per-round ratios 2, 0.5, 3, 2, 0.5 -> median 2; the medians' ratio would be 30 / 20 = 1.5.
  const ears::bench::TimedRounds odd{{{10, 20, 30, 40, 50}, {5, 40, 10, 20, 100}}};
  EXPECT_DOUBLE_EQ(odd.paired_ratio(0, 1), 2.0);
  EXPECT_DOUBLE_EQ(odd.paired_ratio(1, 1), 1.0);
  EXPECT_DOUBLE_EQ(odd.median_ms(0), 30.0);
  EXPECT_DOUBLE_EQ(odd.median_ms(1), 20.0);
  // An even count of rounds: the mean of the middle two ratios (1, 2, 3, 4 -> 2.5).
  const ears::bench::TimedRounds even{{{4, 1, 3, 2}, {1, 1, 1, 1}}};
  EXPECT_DOUBLE_EQ(even.paired_ratio(0, 1), 2.5);
}

// The compute probe's threads together under 0.8 x threads x one thread's rate: they did not
// each get a whole core at full clock, and the Markdown says so next to the floor.
TEST(ComputeProbe, WarnsWhenThreadsShareACore) {
  using ears::bench::shared_cores_warning;
  const std::string w =
      shared_cores_warning({{"path", "avx2"}, {"gmacs", 73.4}, {"gmacs_one_thread", 50.0}, {"threads", 2}});
  EXPECT_NE(w.find("WARNING: the avx2 compute probe read 73.4 GMAC/s on 2 threads, 1.47 x one thread's 50.0"),
            std::string::npos)
      << w;
  EXPECT_EQ(std::count(w.begin(), w.end(), '\n'), 1) << w;
  // 99 >= 0.8 x 2 x 50 = 80: a core each. One thread, or nothing measured: nothing to compare.
  EXPECT_EQ(shared_cores_warning({{"path", "avx2"}, {"gmacs", 99.0}, {"gmacs_one_thread", 50.0}, {"threads", 2}}), "");
  EXPECT_EQ(shared_cores_warning({{"path", "avx2"}, {"gmacs", 30.0}, {"gmacs_one_thread", 50.0}, {"threads", 1}}), "");
  EXPECT_EQ(shared_cores_warning({{"path", "amx"}, {"gmacs", 0.0}, {"gmacs_one_thread", 0.0}, {"threads", 2}}), "");
}

TEST(BenchCli, VerifyQuickJson) {
  json j = run_json("bench verify --quick --json");
  expect_header(j, "verify", 2);
  ASSERT_EQ(j["rows"].size(), 6u);  // 2 quick batch sizes x baseline, ears, typical
  const std::vector<std::string> kinds = {"baseline", "ears", "typical"};
  for (size_t i = 0; i < j["rows"].size(); ++i) {
    const auto& r = j["rows"][i];
    EXPECT_EQ(r["verifier"], kinds[i % 3]);
    expect_positive(r, {"process_ms", "verify_ms", "total_ms", "total_over_baseline", "verify_over_baseline",
                        "forward_ms", "share_of_forward", "vocab", "batch", "gamma"},
                    "verify row");
    EXPECT_NEAR(r["total_ms"].get<double>(), r["process_ms"].get<double>() + r["verify_ms"].get<double>(), 1e-9);
    EXPECT_NEAR(r["share_of_forward"].get<double>(), r["total_ms"].get<double>() / r["forward_ms"].get<double>(),
                1e-9);
    if (i % 3 == 0) {
      EXPECT_TRUE(r["distortion_ms"].is_null());
      EXPECT_DOUBLE_EQ(r["total_over_baseline"].get<double>(), 1.0);
    } else {
      expect_positive(r, {"distortion_ms"}, "verify row");
    }
  }
  expect_positive(j, {"forward_params"}, "verify");
  // The reference forward's facts, as e2e's: --dtype auto resolved from its bf16 checkpoint.
  const json& m = j["env"]["model"];
  EXPECT_EQ(m.value("dtype_requested", ""), "auto") << j["env"].dump();
  EXPECT_EQ(m.value("checkpoint_dtype", ""), "bfloat16");
  EXPECT_EQ(m.value("compute_dtype", ""), "bfloat16") << "bf16 is native or has CPU kernels here";
  EXPECT_EQ(m.value("target_parameters", int64_t{0}), j["forward_params"].get<int64_t>());
}

TEST(BenchCli, E2eOnTinyPair) {
  EARS_REQUIRE_SHARED("fixtures/eagle3-tiny");
  const fs::path fx = ears::test::shared_dir() / "fixtures";
  json j = run_json("bench e2e --target '" + (fx / "qwen3-tiny").string() + "' --draft '" + (fx / "eagle3-tiny").string() +
                    "' --quick --json --max-new-tokens 16");
  expect_header(j, "e2e", 2);
  // The fixture has no tokenizer.json: the fixed pseudo-random prompt, and the report says so.
  EXPECT_EQ(j["prompt_ids"].size(), 32u);
  EXPECT_NE(j.value("prompt_source", "").find("pseudo-random"), std::string::npos) << j.value("prompt_source", "");
  // The target's dtypes and kernel path: `--dtype auto` resolved.
  ASSERT_TRUE(j["env"].contains("model")) << j["env"].dump();
  EXPECT_EQ(j["env"]["model"].value("dtype_requested", ""), "auto");
  for (const char* k : {"compute_dtype", "weight_dtype", "checkpoint_dtype", "device", "kernel_path"})
    EXPECT_FALSE(j["env"]["model"].value(k, "").empty()) << k;
  // The draft's beside them: the head computes in the target's dtype, on its path.
  const json& d = j["env"]["draft"];
  EXPECT_EQ(d.value("kind", ""), "eagle3") << j["env"].dump();
  EXPECT_EQ(d.value("path", ""), (fx / "eagle3-tiny").string());
  for (const char* k : {"compute_dtype", "weight_dtype", "device", "kernel_path"}) EXPECT_EQ(d[k], j["env"]["model"][k]) << k;
  EXPECT_GT(d.value("parameters", int64_t{0}), 0);
  // The Markdown's line names the draft in report.md's words, then where it came from.
  const std::string line = ears::bench::env_line(j["env"]);
  EXPECT_NE(line.find("\n- draft eagle3 in " + d["compute_dtype"].get<std::string>() + " on kernel path " +
                      d["kernel_path"].get<std::string>() + " ("),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(" parameters), from " + d["path"].get<std::string>() + " on cpu"), std::string::npos) << line;
  // The machine's facts as the JSON holds them (strings as they are, numbers as JSON).
  const json& e = j["env"];
  EXPECT_EQ(line.rfind("- environment: " + e["threads"].dump() + " LibTorch threads (OpenMP wait: " +
                           e["omp_wait_policy"].get<std::string>() + "), LibTorch " + e["libtorch"].get<std::string>(),
                       0),
            0u)
      << line;
  EXPECT_NE(line.find("; ISA " + e["cpu_isa"].get<std::string>() + "; ATen " + e["aten_cpu_capability"].get<std::string>() +
                      "); kernel path " + e["kernel_path"].get<std::string>() + " (best " +
                      e["kernel_path_best"].get<std::string>() + ")"),
            std::string::npos)
      << line;
  ASSERT_EQ(j["rows"].size(), 8u);  // T in {0, 0.9} x target-only, baseline, ears, typical
  for (size_t i = 0; i < j["rows"].size(); ++i) {
    const auto& r = j["rows"][i];
    EXPECT_EQ(r["mode"], i % 4 == 0 ? "target-only" : "speculative");
    EXPECT_EQ(r["new_tokens"], 16);
    expect_positive(r, {"tokens_per_s", "speedup", "steps", "mean_accept_length", "latency_ms", "prefill_ms",
                        "verify_ms", "host_syncs", "syncs_per_step"},
                    "e2e row");
    if (i % 4 == 0) {
      // plain decoding: the prefill's token, then one token per step
      EXPECT_EQ(r["steps"], 15);
      EXPECT_DOUBLE_EQ(r["speedup"].get<double>(), 1.0);
    } else {
      expect_positive(r, {"draft_ms"}, "e2e row");
    }
    const double split = r["prefill_ms"].get<double>() + r["draft_ms"].get<double>() + r["verify_ms"].get<double>() +
                         r["other_ms"].get<double>();
    EXPECT_LE(split, r["latency_ms"].get<double>() * 1.0001 + 1e-6) << r.dump();
  }
}

// With a tokenizer the default request is the text the pair is measured on (quickstart-greedy's first
// problem as a chat prompt), where the bundled head drafts well; on the pseudo-random ids its tau is ~1.6.
TEST(BenchCli, E2eDefaultPromptIsTheQuickstartsFirstProblem) {
  const fs::path models = ears::test::source_dir() / "models";
  json j = run_json("bench e2e --target '" + (models / "tiny-qwen3").string() + "' --draft '" +
                    (models / "tiny-eagle3").string() + "' --quick --json --temperature 0 --max-new-tokens 48");
  EXPECT_EQ(j.value("prompt_source", ""), "synth-gsm/test/0/0, chat, thinking off");
  EXPECT_GT(j["prompt_ids"].size(), 40u);
  ASSERT_EQ(j["rows"].size(), 4u);
  EXPECT_GT(j["rows"][1]["mean_accept_length"].get<double>(), 4.0) << j["rows"][1].dump();
}

TEST(BenchCli, BadInputIsOneLineError) {
  ExeRun r = run("bench forward --model /nonexistent/ears-model --quick");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  ExeRun b = run("bench forward --batch 0 --quick");
  EXPECT_EQ(b.code, 2);
  EXPECT_NE(b.err.find("--batch"), std::string::npos) << b.err;
}
