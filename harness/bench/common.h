// What the bench commands share (harness/bench/*.cpp): machine facts and bandwidth readings,
// Markdown tables, side-by-side timing, generated checkpoints and forward steps.
#pragma once
#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

#include "harness/bench/probe.h"
#include "decoders/kv_cache.h"
#include "harness/bench/bench.h"

namespace ears {

class CausalLM;
struct ForwardPhases;

namespace bench {
using json = nlohmann::json;
namespace fs = std::filesystem;

// The machine facts (harness/run/environment.h); `threads` must already be in effect.
json environment(int threads);
json bandwidth_json(const BandwidthResult& r, const std::string& when);
extern const json kBandwidthConventions;
BandwidthOptions bandwidth_options(const BenchCommon& c, c10::Device device);
// The document every bench command prints: {command, env (+ load_average_1m_end, read now; its
// notices also go to stderr),
// bandwidth (the readings), floor_read_gbps (their best read), conventions (the bandwidth ones;
// each command adds its own)}; the command adds "rows" and anything else.
json bench_doc(const std::string& command, json env, const json& readings);
// forward's and linear's --dtype default: bfloat16 and float32, or float32 alone where bfloat16
// would be emulated (harness/run/environment.h bf16_emulated: kernel path aten, no native bf16).
std::vector<std::string> default_dtypes(const std::string& device);
// env["notices"] (harness/run/environment.h path_notices) for a bench computing in `dtypes`
// (--dtype names) on `device`; `defaulted` (no --dtype given): also says when bfloat16 was left out.
void note_dtypes(json& env, const std::vector<std::string>& dtypes, c10::Device device, bool defaulted);

struct Column {
  std::string key, header;
  int decimals = -1;  // < 0: printed as is (integers, strings)
};
std::string cell(const json& v, int decimals);
std::string markdown_table(const std::vector<Column>& cols, const json& rows);
std::string env_line(const json& env);
std::string bandwidth_lines(const json& readings);
// One compute probe (harness/bench/probe.h) per kernel path among `rows` (each with "path" and
// "macs"): sets each row's compute_floor_ms = macs ÷ the path's rate (null where it is not
// measured) and returns the probes [{path, gmacs, threads, method}].
json compute_floors(json& rows);
// The Markdown lines naming each probe; `unit` is what one row's macs cover ("step", "call").
std::string compute_lines(const json& probes, const std::string& unit);
// A compute probe whose threads together read under this share of threads x one thread's rate did
// not get a whole core per thread at full clock (a shared VM's vCPUs, or a CPU whose all-core clock
// is this much below its one-core clock).
constexpr double kSharedCoresShare = 0.8;
// compute_lines' warning line for such a probe ({path, gmacs, gmacs_one_thread, threads}); "" otherwise.
std::string shared_cores_warning(const json& probe);
double max_read(const json& readings);
double median(std::vector<double> v);

// Calls run(k) for k < n, `repeats` times each: run by run the n take turns in rotating order
// (0..n-1, then 1..n-1,0, ...), so that drift in the machine's speed (these VMs' bandwidth
// varies) reaches each of them alike.
template <class Run>
void rotating(size_t n, int repeats, Run&& run) {
  for (int r = 0; r < repeats; ++r)
    for (size_t i = 0; i < n; ++i) run((i + static_cast<size_t>(r)) % n);
}

// Wall times (ms, device synchronised) of functions timed side by side: ms[k][r] is function k's
// time in round r; each round runs every function once (rotating order).
struct TimedRounds {
  std::vector<std::vector<double>> ms;
  // Median over the rounds of function k.
  double median_ms(size_t k) const;
  std::vector<double> medians() const;
  // a's time ÷ b's, paired: the median over rounds of ms[a][r] ÷ ms[b][r] (both from the same
  // round, so a slow spell of a shared machine reaches numerator and denominator alike).
  double paired_ratio(size_t a, size_t b) const;
};
// Times `fns` over `repeats` rounds after `warmup` untimed ones.
TimedRounds time_side_by_side(const std::vector<std::function<void()>>& fns, int warmup, int repeats,
                              c10::Device device);
double time_ms(const std::function<void()>& fn, int warmup, int repeats, c10::Device device);
// Prints `doc` (--json) or `markdown`. With --quick the JSON gets "quick": true and the Markdown
// opens with kQuickLine: the numbers of a smoke test are not meaningful.
void emit(const BenchCommon& c, const json& doc, const std::string& markdown);
inline constexpr const char* kQuickLine = "- QUICK: smoke-test sizes and repeats; numbers are not meaningful";

// A scratch directory under the system temp dir, removed with everything in it.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / fmt::format("ears-bench-{}-{}", tag, ::getpid());
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// Fails (one line naming `option`, ending in `fix`) unless `bytes` about to be allocated on the host
// fit in the memory the machine has available (/proc/meminfo MemAvailable; unchecked where
// unreadable): a --params or --in x --out beyond it filled the RAM and never printed a line.
void check_host_memory(double bytes, const std::string& option, const std::string& fix);

std::string human_params(int64_t n);
GeneratedModelSpec quick_spec(int64_t vocab);
// GeneratedModelSpec{} with as many layers as give about `params` parameters (at least 1 layer).
GeneratedModelSpec spec_with_params(int64_t params);
// bench forward's generated model: `params` when > 0, else the 100M default grown until its bf16
// weights are at least twice the last-level cache (a DRAM floor, not a cache floor).
GeneratedModelSpec sized_spec(int64_t params);
// Qwen3-0.6B's dimensions (its config.json), random weights.
GeneratedModelSpec qwen3_0_6b_spec(int64_t vocab);

// A cache of B sequences that each hold `context` positions of random K/V, with room for `extra`.
KVCache prefilled_cache(const CausalLM& m, int64_t B, int64_t context, int64_t extra);
// One forward of T random tokens per sequence at the cache's current lengths, rolled back after.
std::function<void()> decode_step(const CausalLM& m, KVCache& cache, int64_t T, at::Generator& gen,
                                  ForwardPhases* phases = nullptr);
int64_t dtype_bytes(c10::ScalarType t);
// K and V bytes one step reads over `span` positions per sequence.
int64_t kv_read_bytes(const ModelConfig& c, int64_t B, int64_t span, c10::ScalarType dtype);
// Multiply-accumulates of one step of T new tokens per sequence after `context` positions: every
// streamed parameter once per token (the RMSNorm weights, well under 1 %, included), plus
// attention's q . k and p . v over each token's visible keys (context + its index + 1).
int64_t step_macs(const ModelConfig& c, int64_t B, int64_t T, int64_t context);

}  // namespace bench
}  // namespace ears
