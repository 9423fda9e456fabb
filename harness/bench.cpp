#include "harness/bench.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>
#include <sstream>
#include <thread>

#include "decoders/bandwidth.h"
#include "decoders/kernel_path.h"
#include "decoders/layers.h"
#include "decoders/engine.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "decoders/sampling.h"
#include "decoders/verify.h"
#include "harness/environment.h"
#include "harness/error.h"
#include "harness/model_setup.h"
#include "harness/train.h"

namespace ears {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// ---- environment, bandwidth, output ---------------------------------------------------------

// The machine facts (harness/environment.h); `threads` must already be in effect.
json environment(int threads) {
  json env = environment_json();
  env["threads"] = threads;
  return env;
}

json bandwidth_json(const BandwidthResult& r, const std::string& when) {
  return {{"when", when},         {"bytes", r.bytes},         {"runs", r.runs},     {"threads", r.threads},
          {"read_gbps", r.read_gbps}, {"copy_gbps", r.copy_gbps}, {"method", r.method}};
}

const json kBandwidthConventions = {
    {"read_gbps", "bytes read per second by a load stream over the buffer, one slice per LibTorch thread (CPU; "
                  "at::sum on a GPU), best of runs; 1 GB = 1e9 bytes"},
    {"copy_gbps", "(bytes read + bytes written) per second of a buffer copy (STREAM copy convention)"},
    {"floor", "floor = bytes a step must read (weights + KV span) / read_gbps; the higher of the run's readings"}};

BandwidthOptions bandwidth_options(const BenchCommon& c, c10::Device device) {
  BandwidthOptions o;
  o.device = device;
  if (c.quick) o.bytes = int64_t{16} << 20, o.runs = 2;
  return o;
}

struct Column {
  std::string key, header;
  int decimals = -1;  // < 0: printed as is (integers, strings)
};

std::string cell(const json& v, int decimals) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (decimals >= 0 && v.is_number()) return fmt::format("{:.{}f}", v.get<double>(), decimals);
  return v.dump();
}

std::string markdown_table(const std::vector<Column>& cols, const json& rows) {
  std::string out = "|";
  for (const auto& c : cols) out += " " + c.header + " |";
  out += "\n|";
  for (const auto& c : cols) out += c.decimals >= 0 ? " ---: |" : " --- |";
  out += "\n";
  for (const auto& r : rows) {
    out += "|";
    for (const auto& c : cols) out += " " + cell(r.contains(c.key) ? r[c.key] : json(), c.decimals) + " |";
    out += "\n";
  }
  return out;
}

std::string env_line(const json& env) {
  std::string flags;
  for (const auto& f : env["cpu_flags"]) flags += (flags.empty() ? "" : " ") + f.get<std::string>();
  std::string line = fmt::format(
      "- environment: {} LibTorch threads (OpenMP wait: {}), LibTorch {}{}, CPU: {} ({} logical CPUs; L3 {} MiB; {}; "
      "ISA {}); kernel path {} (best {}); load average {:.2f} at start{}",
      env["threads"].get<int>(), env.value("omp_wait_policy", std::string("?")), env["torch_version"].get<std::string>(),
      env.value("cuda_build", false) ? fmt::format(" (CUDA build, {} device(s))", env.value("cuda_devices", 0)) : "",
      env["cpu_model"].get<std::string>(), env["logical_cpus"].get<int>(), env["l3_cache_bytes"].get<int64_t>() >> 20,
      flags.empty() ? "-" : flags, env.value("cpu_isa", std::string("-")), env.value("kernel_path", std::string("?")),
      env.value("kernel_path_best", std::string("?")), env["load_average_1m"].get<double>(),
      env.contains("load_average_1m_end") ? fmt::format(", {:.2f} at end", env["load_average_1m_end"].get<double>()) : "");
  if (env.contains("model")) {
    const json& m = env["model"];
    line += fmt::format("\n- model: {} compute, {} weights (checkpoint {}, --dtype {}) on {}, kernel path {}",
                        m["compute_dtype"].get<std::string>(), m["weight_dtype"].get<std::string>(),
                        m["checkpoint_dtype"].get<std::string>(), m["dtype_requested"].get<std::string>(),
                        m["device"].get<std::string>(), m["kernel_path"].get<std::string>());
  }
  // (A previous bench run alone keeps the 1-minute load near 1, hence "at least the CPU count".)
  if (env["load_average_1m"].get<double>() >= env["logical_cpus"].get<double>())
    line += "\n- WARNING: the machine is busy (load average >= the CPU count): timings are noisy; LibTorch threads "
            "wait on descheduled peers, so --threads 1 is steadier";
  return line;
}

std::string bandwidth_lines(const json& readings) {
  std::string out;
  for (const auto& b : readings)
    out += fmt::format("- bandwidth ({}): read {:.1f} GB/s, copy {:.1f} GB/s (read+write); {} MiB, best of {}, {} "
                       "thread(s); {}\n",
                       b["when"].get<std::string>(), b["read_gbps"].get<double>(), b["copy_gbps"].get<double>(),
                       b["bytes"].get<int64_t>() >> 20, b["runs"].get<int>(), b["threads"].get<int>(),
                       b.value("method", std::string()));
  return out;
}

double max_read(const json& readings) {
  double m = 0;
  for (const auto& b : readings) m = std::max(m, b["read_gbps"].get<double>());
  return m;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Calls run(k) for k < n, `repeats` times each: run by run the n take turns in rotating order
// (0..n-1, then 1..n-1,0, ...), so that drift in the machine's speed (these VMs' bandwidth
// varies) reaches each of them alike.
template <class Run>
void rotating(size_t n, int repeats, Run&& run) {
  for (int r = 0; r < repeats; ++r)
    for (size_t i = 0; i < n; ++i) run((i + static_cast<size_t>(r)) % n);
}

// Median wall time (ms) of each function over `repeats` runs after `warmup` runs, device
// synchronised, the functions taking turns (rotating).
std::vector<double> time_side_by_side(const std::vector<std::function<void()>>& fns, int warmup, int repeats,
                                      c10::Device device) {
  for (int i = 0; i < warmup; ++i)
    for (const auto& fn : fns) fn();
  DeviceTimer timer(device);
  std::vector<std::vector<double>> t(fns.size());
  rotating(fns.size(), repeats, [&](size_t k) {
    timer.start();
    fns[k]();
    t[k].push_back(timer.stop_ms());
  });
  std::vector<double> medians;
  for (auto& samples : t) medians.push_back(median(std::move(samples)));
  return medians;
}

double time_ms(const std::function<void()>& fn, int warmup, int repeats, c10::Device device) {
  return time_side_by_side({fn}, warmup, repeats, device)[0];
}

void emit(const BenchCommon& c, const json& doc, const std::string& markdown) {
  if (c.json) fmt::print("{}\n", doc.dump(2));
  else fmt::print("{}", markdown);
  std::fflush(stdout);
}

// ---- generated checkpoints ------------------------------------------------------------------

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

std::string human_params(int64_t n) {
  return n >= 1000000 ? fmt::format("{:.1f}M", n / 1e6) : fmt::format("{:.1f}K", n / 1e3);
}

GeneratedModelSpec quick_spec(int64_t vocab) {
  GeneratedModelSpec s;
  s.hidden = 64, s.layers = 2, s.heads = 4, s.kv_heads = 2, s.head_dim = 16, s.intermediate = 128, s.vocab = vocab;
  return s;
}

// Qwen3-0.6B's dimensions (its config.json), random weights.
// GeneratedModelSpec{} with as many layers as give about `params` parameters (at least 1 layer).
GeneratedModelSpec spec_with_params(int64_t params) {
  GeneratedModelSpec s;
  const int64_t per_layer = s.hidden * (s.heads + 2 * s.kv_heads) * s.head_dim + s.heads * s.head_dim * s.hidden +
                            3 * s.hidden * s.intermediate + 2 * s.hidden + 2 * s.head_dim;
  s.layers = std::max<int64_t>(1, (params - s.vocab * s.hidden - s.hidden + per_layer / 2) / per_layer);
  return s;
}

// bench forward's generated model: `params` when > 0, else the 100M default grown until its bf16
// weights are at least twice the last-level cache (a DRAM floor, not a cache floor).
GeneratedModelSpec sized_spec(int64_t params) {
  if (params > 0) return spec_with_params(params);
  GeneratedModelSpec s;
  const int64_t llc = environment_json().value("l3_cache_bytes", int64_t{0});
  if (llc > 0 && int64_t{200'000'000} < 2 * llc) s = spec_with_params(llc);  // llc params: 2 x llc bytes of bf16
  return s;
}

GeneratedModelSpec qwen3_0_6b_spec(int64_t vocab) {
  GeneratedModelSpec s;
  s.hidden = 1024, s.layers = 28, s.heads = 16, s.kv_heads = 8, s.head_dim = 128, s.intermediate = 3072, s.vocab = vocab;
  return s;
}

// ---- forward timing -------------------------------------------------------------------------

// A cache of B sequences that each hold `context` positions of random K/V (costs the same to
// attend over as a real prefill, without running one), with room for `extra` more.
// (The device's default generator fills it: the values only have to be ordinary numbers.)
KVCache prefilled_cache(const CausalLM& m, int64_t B, int64_t context, int64_t extra) {
  KVCache cache = m.new_cache(B, context + extra);
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    cache.k(l).normal_();
    cache.v(l).normal_();
  }
  cache.commit(cache.prepare_append(context));
  return cache;
}

// One forward of T random tokens per sequence at the cache's current lengths, rolled back after.
std::function<void()> decode_step(const CausalLM& m, KVCache& cache, int64_t T, at::Generator& gen) {
  const at::Tensor ids = at::randint(m.config().vocab_size, {cache.batch(), T}, gen, at::kLong).to(m.device());
  const std::vector<int64_t> lengths = cache.lengths();
  return [&m, &cache, ids, lengths] {
    ForwardOutput out = m.forward(ids, cache);
    cache.set_lengths(lengths);
  };
}

int64_t dtype_bytes(c10::ScalarType t) { return static_cast<int64_t>(c10::elementSize(t)); }

// K and V bytes one step reads over `span` positions per sequence.
int64_t kv_read_bytes(const ModelConfig& c, int64_t B, int64_t span, c10::ScalarType dtype) {
  return c.num_hidden_layers * 2 * B * c.num_key_value_heads * span * c.head_dim * dtype_bytes(dtype);
}

}  // namespace

// ---- parameter counts and the checkpoint writer ----------------------------------------------

int64_t streamed_param_count(const ModelConfig& c) {
  const int64_t D = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  const int64_t H = c.num_attention_heads, K = c.num_key_value_heads;
  int64_t layer = 2 * D + (H + 2 * K) * hd * D + H * hd * D + 3 * I * D;
  if (c.qkv_bias) layer += (H + 2 * K) * hd;
  if (c.o_bias) layer += D;
  if (c.mlp_bias) layer += 2 * I + D;
  if (c.qk_norm) layer += 2 * hd;
  return c.num_hidden_layers * layer + D + c.vocab_size * D;
}

int64_t param_count(const ModelConfig& c) {
  return streamed_param_count(c) + (c.tie_word_embeddings ? 0 : c.vocab_size * c.hidden_size);
}

void write_random_qwen3(const GeneratedModelSpec& s, const fs::path& dir, uint64_t seed) {
  fs::create_directories(dir);
  TargetArch arch;
  arch.hidden = s.hidden;
  arch.layers = s.layers;
  arch.heads = s.heads;
  arch.kv_heads = s.kv_heads;
  arch.head_dim = s.head_dim;
  arch.intermediate = s.intermediate;
  arch.max_position_embeddings = 4096;
  arch.tie_word_embeddings = s.tie_embeddings;
  const ModelConfig c = qwen3_config(arch, s.vocab, /*eos_token_id=*/1);
  std::ofstream(dir / "config.json") << qwen3_config_json(c, at::kBFloat16);
  save_safetensors(dir / "model.safetensors", init_qwen3_params(c, seed), at::kBFloat16);
}

// ---- bench bandwidth ------------------------------------------------------------------------

int run_bench_bandwidth(const BenchCommon& c) {
  const int threads = set_threads(c.threads);
  json env = environment(threads);  // before the benchmark loads the machine
  const c10::Device device = parse_device(c.device, "--device");
  BandwidthOptions o = bandwidth_options(c, device);
  if (c.repeats > 0) o.runs = c.repeats;
  const BandwidthResult r = measure_bandwidth(o);
  json doc;
  doc["command"] = "bandwidth";
  env["load_average_1m_end"] = load_average_1m();
  doc["env"] = env;
  doc["bandwidth"] = json::array({bandwidth_json(r, "run")});
  doc["floor_read_gbps"] = r.read_gbps;
  doc["conventions"] = kBandwidthConventions;
  doc["rows"] = json::array(
      {{{"kernel", "read"}, {"gbps", r.read_gbps}, {"bytes", r.bytes}, {"best_s", r.read_s}, {"runs", r.runs},
        {"threads", r.threads}, {"convention", "bytes read / time of a load stream (see method); used for decode floors"}, {"method", r.method}},
       {{"kernel", "copy"}, {"gbps", r.copy_gbps}, {"bytes", r.bytes}, {"best_s", r.copy_s}, {"runs", r.runs},
        {"threads", r.threads}, {"convention", "(bytes read + bytes written) / time of a copy"}, {"method", r.method}}});
  std::string md = "## ears-bench bench bandwidth\n\n" + env_line(doc["env"]) + "\n" +
                   "- read = bytes read ÷ time of a load stream over the buffer, one slice per thread (what a "
                   "decode step's weight streaming needs; used for floors). copy = (read + written bytes) ÷ time "
                   "of a copy. Best of runs; GB = 1e9 bytes. Method: " + r.method + ".\n\n" +
                   markdown_table({{"kernel", "kernel", -1},
                                   {"gbps", "GB/s", 1},
                                   {"bytes", "buffer bytes", -1},
                                   {"best_s", "best s", 4},
                                   {"runs", "runs", -1},
                                   {"threads", "threads", -1}},
                                  doc["rows"]);
  emit(c, doc, md);
  return 0;
}

// ---- bench forward --------------------------------------------------------------------------

int run_bench_forward(const ForwardBenchArgs& a, const BenchCommon& c) {
  const int threads = set_threads(c.threads);
  json env = environment(threads);  // before the benchmark loads the machine
  const c10::Device device = parse_device(c.device, "--device");
  std::vector<std::string> dtypes = a.dtypes.empty() ? std::vector<std::string>{"bfloat16", "float32"} : a.dtypes;
  std::vector<int> batches = a.batches;
  if (batches.empty()) batches = c.quick ? std::vector<int>{1, 2} : std::vector<int>{1, 4, 16};
  for (int b : batches)
    if (b < 1) fail("--batch: batch sizes must be >= 1 (got {})", b);
  if (a.gamma < 1) fail("--gamma must be >= 1 (got {})", a.gamma);
  if (a.context < 1) fail("--context must be >= 1 (got {})", a.context);
  for (const auto& d : dtypes) parse_dtype(d, "--dtype");
  const int repeats = c.repeats > 0 ? c.repeats : (c.quick ? 2 : 15);
  const int warmup = c.quick ? 1 : 3;

  json bw = json::array({bandwidth_json(measure_bandwidth(bandwidth_options(c, device)), "start")});

  std::optional<TempDir> tmp;
  fs::path dir = a.model;
  std::string label;
  if (a.model.empty()) {
    GeneratedModelSpec spec = c.quick ? quick_spec(1000) : sized_spec(a.params);
    tmp.emplace("forward");
    dir = tmp->path;
    write_random_qwen3(spec, dir, 1234);
  } else if (!fs::is_directory(a.model)) {
    fail("--model: '{}' is not a checkpoint directory; pass a Hugging Face directory with config.json", a.model);
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  json rows = json::array(), summary = json::array();
  std::vector<std::string> speedups;  // --compare-kernels
  const kernels::Path start_path = kernels::path();
  for (const auto& dname : dtypes) {
    const c10::ScalarType dtype = parse_dtype(dname, "--dtype");
    // The model as it runs by default, plus (--compare-kernels) the same weights loaded and run
    // on the aten path. Each timed forward switches to its own path (a model keeps the weight
    // layout of the path it was loaded on).
    struct Path {
      std::string name;
      kernels::Path path;
      CausalLM model;
    };
    std::vector<Path> paths;
    const std::string name = layers::kernel_path_name(device, dtype);
    paths.push_back({name, start_path, CausalLM::load(dir, device, dtype)});
    if (a.compare_kernels && device.is_cpu() && name != "aten") {
      kernels::set_path(kernels::Path::aten);
      paths.push_back({"aten", kernels::Path::aten, CausalLM::load(dir, device, dtype)});
      kernels::set_path(start_path);
    }
    const ModelConfig& cfg = paths[0].model.config();
    const int64_t params = param_count(cfg);
    label = a.model.empty() ? fmt::format("generated qwen3 {} (V={})", human_params(params), cfg.vocab_size)
                            : fs::path(a.model).lexically_normal().filename().string();
    if (label.empty()) label = fs::path(a.model).lexically_normal().parent_path().filename().string();
    const int64_t weight_bytes = streamed_param_count(cfg) * dtype_bytes(dtype);
    std::map<std::tuple<size_t, int, int>, double> ms;  // (path, batch, tokens) -> median
    for (int B : batches) {
      std::vector<KVCache> caches;
      for (const Path& p : paths) caches.push_back(prefilled_cache(p.model, B, a.context, a.gamma + 1));
      for (int T : {1, a.gamma + 1}) {
        std::vector<std::function<void()>> steps;
        for (size_t i = 0; i < paths.size(); ++i) {
          std::function<void()> step = decode_step(paths[i].model, caches[i], T, gen);
          steps.push_back([path = paths[i].path, step] {
            kernels::set_path(path);
            step();
          });
        }
        const std::vector<double> medians = time_side_by_side(steps, warmup, repeats, device);
        kernels::set_path(start_path);
        for (size_t i = 0; i < paths.size(); ++i) {
          const double step_ms = medians[i];
          ms[{i, B, T}] = step_ms;
          const int64_t kv = kv_read_bytes(cfg, B, a.context + T, dtype);
          rows.push_back({{"model", label},
                          {"path", paths[i].name},
                          {"params", params},
                          {"streamed_params", streamed_param_count(cfg)},
                          {"dtype", dtype_name(dtype)},
                          {"batch", B},
                          {"tokens_per_step", T},
                          {"ms_per_step", step_ms},
                          {"weight_bytes", weight_bytes},
                          {"kv_bytes", kv},
                          {"context", a.context},
                          {"tokens_per_s", B * T / (step_ms / 1e3)}});
        }
        if (paths.size() == 2)
          speedups.push_back(fmt::format("{} batch {} × {} token(s): {:.2f}×", dtype_name(dtype), B, T,
                                         ms[{1, B, T}] / ms[{0, B, T}]));
      }
    }
    const int bmax = *std::max_element(batches.begin(), batches.end());
    const int bmin = *std::min_element(batches.begin(), batches.end());
    for (size_t i = 0; i < paths.size(); ++i) {
      json s = {{"model", label}, {"path", paths[i].name}, {"dtype", dtype_name(dtype)}, {"params", params},
                {"min_batch", bmin}, {"max_batch", bmax}, {"gamma", a.gamma}};
      s["verify_over_decode_b1"] = ms[{i, bmin, a.gamma + 1}] / ms[{i, bmin, 1}];
      s["throughput_max_batch_over_b1"] = (bmax / ms[{i, bmax, 1}]) / (bmin / ms[{i, bmin, 1}]);
      summary.push_back(s);
    }
  }
  bw.push_back(bandwidth_json(measure_bandwidth(bandwidth_options(c, device)), "end"));
  const double floor_bw = max_read(bw);
  for (auto& r : rows) {
    const double bytes = r["weight_bytes"].get<double>() + r["kv_bytes"].get<double>();
    r["floor_ms"] = bytes / (floor_bw * 1e9) * 1e3;
    r["ratio"] = r["ms_per_step"].get<double>() / r["floor_ms"].get<double>();
  }

  json doc;
  doc["command"] = "forward";
  env["load_average_1m_end"] = load_average_1m();
  doc["env"] = env;
  doc["bandwidth"] = bw;
  doc["floor_read_gbps"] = floor_bw;
  doc["conventions"] = kBandwidthConventions;
  doc["conventions"]["ms_per_step"] =
      fmt::format("median of {} timed forwards (after {} warm-up) of T new tokens per sequence over a KV cache "
                  "holding {} positions of random K/V; logits for all T rows",
                  repeats, warmup, a.context);
  doc["conventions"]["tokens_per_s"] = "batch * tokens_per_step / step time (positions scored per second)";
  doc["conventions"]["timer"] = DeviceTimer(device).method();
  doc["rows"] = rows;
  doc["summary"] = summary;

  std::string md = "## ears-bench bench forward\n\n" + env_line(doc["env"]) + "\n" + bandwidth_lines(bw);
  md += fmt::format("- floor = (weights streamed per step + K/V read over the {}+T span) ÷ {:.1f} GB/s (the higher "
                    "read reading of this run); ratio = ms/step ÷ floor\n",
                    a.context, floor_bw);
  md += "- " + doc["conventions"]["ms_per_step"].get<std::string>() + "; tokens/s = batch × tokens/step ÷ step time\n";
  const int64_t l3 = doc["env"]["l3_cache_bytes"].get<int64_t>();
  for (const auto& r : rows)
    if (l3 > 0 && r["weight_bytes"].get<int64_t>() < l3 && r["batch"] == rows[0]["batch"] &&
        r["tokens_per_step"] == 1 && r["path"] == rows[0]["path"])
      md += fmt::format("- note: {} {} weights ({} MiB) fit in the reported L3 ({} MiB, shared on a VM): a ratio below 1 "
                        "is possible\n",
                        r["model"].get<std::string>(), r["dtype"].get<std::string>(),
                        r["weight_bytes"].get<int64_t>() >> 20, l3 >> 20);
  if (a.model.empty() && !rows.empty())
    md += fmt::format("- generated model: Qwen3, {} parameters incl. tied embeddings ({} streamed per step), random "
                      "bf16 weights\n",
                      rows[0]["params"].get<int64_t>(), rows[0]["streamed_params"].get<int64_t>());
  if (!speedups.empty()) {
    md += "- CPU kernels vs plain ATen, timed side by side (ATen ms ÷ kernels ms):";
    for (size_t i = 0; i < speedups.size(); ++i) md += (i ? "; " : " ") + speedups[i];
    md += "\n";
  }
  md += "\n" + markdown_table({{"model", "model", -1},
                                {"path", "path", -1},
                                {"dtype", "dtype", -1},
                                {"batch", "batch", -1},
                                {"tokens_per_step", "tokens/step", -1},
                                {"ms_per_step", "ms/step", 2},
                                {"floor_ms", "floor ms", 2},
                                {"ratio", "ratio", 2},
                                {"tokens_per_s", "tokens/s", 1}},
                               rows);
  std::vector<Column> scol = {{"model", "model", -1}, {"path", "path", -1}, {"dtype", "dtype", -1},
                              {"verify_over_decode_b1", fmt::format("verify {} ÷ decode 1 (batch {})", a.gamma + 1,
                                                                    summary.empty() ? 1 : summary[0]["min_batch"].get<int>()), 2},
                              {"throughput_max_batch_over_b1",
                               summary.empty() ? std::string("throughput ratio")
                                               : fmt::format("batch {} ÷ batch {} throughput (1 token)",
                                                             summary[0]["max_batch"].get<int>(),
                                                             summary[0]["min_batch"].get<int>()),
                               2}};
  md += "\n" + markdown_table(scol, summary);
  emit(c, doc, md);
  return 0;
}

// ---- bench verify ---------------------------------------------------------------------------

int run_bench_verify(const VerifyBenchArgs& a, const BenchCommon& c) {
  const int threads = set_threads(c.threads);
  json env = environment(threads);  // before the benchmark loads the machine
  const c10::Device device = parse_device(c.device, "--device");
  const int64_t V = c.quick ? 4096 : a.vocab;
  if (V < 2) fail("--vocab must be >= 2 (got {})", V);
  if (a.gamma < 1) fail("--gamma must be >= 1 (got {})", a.gamma);
  std::vector<int> batches = a.batches;
  if (batches.empty()) batches = c.quick ? std::vector<int>{1, 2} : std::vector<int>{1, 32};
  for (int b : batches)
    if (b < 1) fail("--batch: batch sizes must be >= 1 (got {})", b);
  const int repeats = c.repeats > 0 ? c.repeats : (c.quick ? 2 : 15);
  const int warmup = c.quick ? 1 : 3;
  const c10::ScalarType fwd_dtype = parse_dtype(a.dtype, "--dtype");
  SamplingParams sp;
  sp.temperature = a.temperature;
  validate(sp, "--temperature");
  const int64_t G = a.gamma, context = 128;

  json bw = json::array({bandwidth_json(measure_bandwidth(bandwidth_options(c, device)), "start")});

  // Reference forward: the generated Qwen3 with this vocabulary.
  TempDir tmp("verify");
  GeneratedModelSpec spec = c.quick ? quick_spec(V) : GeneratedModelSpec{};
  if (!c.quick && a.target == "qwen3-0.6b") spec = qwen3_0_6b_spec(V);
  spec.vocab = V;
  write_random_qwen3(spec, tmp.path, 99);
  const CausalLM m = CausalLM::load(tmp.path, device, fwd_dtype);
  const int64_t fwd_params = param_count(m.config());

  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  json rows = json::array();
  for (int B : batches) {
    double forward_ms = 0;
    {
      KVCache cache = prefilled_cache(m, B, context, G + 1);
      forward_ms = time_ms(decode_step(m, cache, G + 1, gen), warmup, repeats, device);
    }
    // Target logits and a draft distribution correlated with it (so acceptance is realistic).
    at::Tensor logits = (at::randn({B, G + 1, V}, gen, at::kFloat) * 2.0).to(device);
    at::Tensor draft_logits = logits.narrow(1, 0, G) + (at::randn({B, G, V}, gen, at::kFloat) * 0.5).to(device);
    at::Tensor q = process_logits(draft_logits, sp).probs;
    at::Tensor u_draft = at::rand({B * G}, gen, at::kFloat).to(device);
    at::Tensor draft_tokens = sample_from_probs(q.reshape({B * G, V}), u_draft).view({B, G});
    at::Tensor u_accept = at::rand({B, G}, gen, at::kFloat).to(device);
    at::Tensor u_sample = at::rand({B}, gen, at::kFloat).to(device);

    ProcessedProbs pp;
    const at::Tensor model_logits = logits.to(fwd_dtype);  // what the target's lm_head hands over
    const double process_ms = time_ms([&] { pp = process_logits(model_logits, sp); }, warmup, repeats, device);
    // The verifiers are timed side by side (time_side_by_side), baseline first.
    std::vector<VerifierSpec> specs;
    for (auto kind : {VerifierSpec::Baseline, VerifierSpec::Ears, VerifierSpec::Typical}) {
      specs.emplace_back();
      specs.back().kind = kind, specs.back().beta = a.beta;
    }
    const VerifyInput in{draft_tokens, pp.probs, pp.max_prob, q, u_accept, u_sample};
    std::vector<std::function<void()>> runs;
    for (const auto& vs : specs) runs.push_back([&vs, &in] { (void)verify(vs, in); });
    const std::vector<double> verify_medians = time_side_by_side(runs, warmup, repeats, device);
    double baseline_total = 0, baseline_verify = 0;
    for (size_t k = 0; k < specs.size(); ++k) {
      const VerifierSpec& vs = specs[k];
      const auto kind = vs.kind;
      const double verify_ms = verify_medians[k];
      json distortion = nullptr;
      if (kind != VerifierSpec::Baseline) {
        at::Tensor p_pos = pp.probs.narrow(1, 0, G), max_pos = pp.max_prob.narrow(1, 0, G), tv;
        distortion = time_ms([&] { tv = tv_distance(p_pos, induced_distribution(vs, p_pos, q, max_pos)); }, warmup,
                             repeats, device);
      }
      const double total = process_ms + verify_ms;
      if (kind == VerifierSpec::Baseline) baseline_total = total, baseline_verify = verify_ms;
      rows.push_back({{"verifier", to_string(kind)},
                      {"batch", B},
                      {"gamma", G},
                      {"vocab", V},
                      {"process_ms", process_ms},
                      {"verify_ms", verify_ms},
                      {"total_ms", total},
                      {"total_over_baseline", total / baseline_total},
                      {"verify_over_baseline", verify_ms / baseline_verify},
                      {"forward_ms", forward_ms},
                      {"share_of_forward", total / forward_ms},
                      {"verify_share_of_forward", verify_ms / forward_ms},
                      {"distortion_ms", distortion}});
    }
  }
  bw.push_back(bandwidth_json(measure_bandwidth(bandwidth_options(c, device)), "end"));

  json doc;
  doc["command"] = "verify";
  env["load_average_1m_end"] = load_average_1m();
  doc["env"] = env;
  doc["bandwidth"] = bw;
  doc["floor_read_gbps"] = max_read(bw);
  doc["conventions"] = kBandwidthConventions;
  doc["conventions"]["timing"] = fmt::format("median of {} runs after {} warm-up, verifiers interleaved run by run; {}",
                                             repeats, warmup, DeviceTimer(device).method());
  doc["conventions"]["process_ms"] =
      fmt::format("process_logits (temperature {}, no top-k/top-p) of random {} logits [B, {}, {}] (the forward's "
                  "dtype), float32 upcast included",
                  a.temperature, dtype_name(fwd_dtype), G + 1, V);
  doc["conventions"]["forward_ms"] = fmt::format(
      "one {}-token forward of a generated Qwen3 (--target {}: {} params, vocab {}, {}, random weights) over a "
      "{}-position KV cache; the smallest real Qwen3 is --target qwen3-0.6b, larger ones make the shares smaller",
      G + 1, a.target, fwd_params, V, dtype_name(fwd_dtype), context);
  doc["conventions"]["distortion_ms"] =
      "tv_distance(p_t, induced_distribution(...)) over the gamma draft positions: the engine's optional "
      "distortion metric (DecodeParams::measure_distortion), not part of decoding";
  doc["forward_params"] = fwd_params;
  doc["rows"] = rows;

  std::string md = "## ears-bench bench verify\n\n" + env_line(doc["env"]) + "\n" + bandwidth_lines(bw);
  for (const char* k : {"timing", "process_ms", "forward_ms", "distortion_ms"})
    md += fmt::format("- {}: {}\n", k, doc["conventions"][k].get<std::string>());
  md += fmt::format("- EARS beta {}, uncertainty max_prob; total = process_logits + verify\n\n", a.beta);
  md += markdown_table({{"verifier", "verifier", -1},
                        {"batch", "batch", -1},
                        {"process_ms", "process_logits ms", 3},
                        {"verify_ms", "verify ms", 3},
                        {"total_ms", "total ms", 3},
                        {"total_over_baseline", "total ÷ baseline", 2},
                        {"verify_over_baseline", "verify ÷ baseline", 2},
                        {"forward_ms", "forward ms (γ+1)", 2},
                        {"share_of_forward", "total ÷ forward", 3},
                        {"verify_share_of_forward", "verify ÷ forward", 3},
                        {"distortion_ms", "distortion metric ms", 3}},
                       rows);
  emit(c, doc, md);
  return 0;
}

// ---- bench e2e ------------------------------------------------------------------------------

namespace {

std::vector<int32_t> parse_prompt_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string s = text;
  for (char& ch : s)
    if (ch == ',' || ch == '[' || ch == ']') ch = ' ';
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != tok.size() || v < 0 || v > INT32_MAX)
      fail("--prompt-ids: '{}' is not a token id; pass non-negative integers, e.g. \"1 2 3\"", tok);
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

}  // namespace

int run_bench_e2e(const E2eBenchArgs& a, const BenchCommon& c) {
  const int threads = set_threads(c.threads);
  json env = environment(threads);  // before the benchmark loads the machine
  const c10::Device device = parse_device(c.device, "--device");
  const int repeats = c.repeats > 0 ? c.repeats : (c.quick ? 1 : 5);
  std::vector<double> temps = a.temperatures.empty() ? std::vector<double>{0.0, 0.9} : a.temperatures;

  json bw = json::array({bandwidth_json(measure_bandwidth(bandwidth_options(c, device)), "start")});
  ModelSetup setup;
  setup.target_path = a.target;
  setup.dtype = a.dtype;
  setup.device = c.device;
  setup.draft_kind = a.draft_kind;
  setup.draft_path = a.draft;
  if (a.draft.empty()) fail("--draft: give a draft checkpoint directory (EAGLE-3 head or, with --draft-kind model, an LM)");
  LoadedModels m = load_models(setup, /*need_tokenizer=*/false);
  env["model"] = model_environment_json(*m.target, a.dtype);
  const int64_t V = m.target->config().vocab_size;
  std::vector<int32_t> prompt = parse_prompt_ids(a.prompt_ids);
  if (prompt.empty())  // a fixed pseudo-random prompt of 32 ids
    for (int64_t i = 0; i < 32; ++i) prompt.push_back(static_cast<int32_t>((17 + 7919 * i) % std::min<int64_t>(V, 30000)));
  for (int32_t id : prompt)
    if (id >= V) fail("--prompt-ids: id {} is outside the target vocabulary of {} ids", id, V);

  Engine target_only(*m.target, nullptr, nullptr);
  Engine speculative(*m.target, m.drafter.get(), nullptr);
  GenRequest req;
  req.prompt = prompt;
  req.run_seed = a.seed;
  req.key = "bench-e2e";

  struct Arm {
    std::string mode;
    Engine* engine;
    std::optional<VerifierSpec::Kind> kind;
  };
  std::vector<Arm> arms = {{"target-only", &target_only, std::nullopt},
                           {"speculative", &speculative, VerifierSpec::Baseline},
                           {"speculative", &speculative, VerifierSpec::Ears},
                           {"speculative", &speculative, VerifierSpec::Typical}};
  json rows = json::array();
  for (double T : temps) {
    std::vector<DecodeParams> params;
    for (const auto& arm : arms) {
      DecodeParams p;
      p.sampling.temperature = T;
      p.gamma = a.gamma;
      p.max_new_tokens = a.max_new_tokens;
      p.measure_distortion = a.distortion;
      if (arm.kind) p.verifier.kind = *arm.kind;
      p.verifier.beta = a.beta;
      DecodeParams warm = p;
      warm.max_new_tokens = std::min<int64_t>(8, p.max_new_tokens);
      arm.engine->generate({req}, warm);
      params.push_back(p);
    }
    // The arms take turns (rotating), so the speedup column is a ratio measured side by side.
    std::vector<std::vector<GenResult>> runs(arms.size());
    rotating(arms.size(), repeats, [&](size_t i) {
      GenResult g = arms[i].engine->generate({req}, params[i]).at(0);
      if (!g.error.empty()) fail("bench e2e: generation failed: {}", g.error);
      runs[i].push_back(std::move(g));
    });
    double base_tps = 0;
    for (size_t i = 0; i < arms.size(); ++i) {
      const Arm& arm = arms[i];
      std::vector<GenResult>& rs = runs[i];
      std::sort(rs.begin(), rs.end(), [](const GenResult& x, const GenResult& y) { return x.latency_s < y.latency_s; });
      const GenResult& g = rs[rs.size() / 2];
      const auto& st = g.stats;
      const double tps = g.ids.size() / g.latency_s;
      if (!arm.kind) base_tps = tps;
      rows.push_back({{"mode", arm.mode},
                      {"verifier", arm.kind ? to_string(*arm.kind) : std::string("-")},
                      {"temperature", T},
                      {"new_tokens", g.ids.size()},
                      {"steps", st.steps},
                      {"mean_accept_length", st.steps ? double(st.emitted()) / st.steps : 0.0},
                      {"tokens_per_s", tps},
                      {"speedup", base_tps > 0 ? tps / base_tps : 1.0},
                      {"latency_ms", g.latency_s * 1e3},
                      {"prefill_ms", st.prefill_s * 1e3},
                      {"draft_ms", st.draft_s * 1e3},
                      {"verify_ms", st.verify_s * 1e3},
                      {"other_ms", st.other_s * 1e3},
                      {"host_syncs", st.host_syncs},
                      {"syncs_per_step", st.steps ? double(st.host_syncs) / st.steps : 0.0}});
    }
  }
  bw.push_back(bandwidth_json(measure_bandwidth(bandwidth_options(c, device)), "end"));

  json doc;
  doc["command"] = "e2e";
  env["load_average_1m_end"] = load_average_1m();
  doc["env"] = env;
  doc["bandwidth"] = bw;
  doc["floor_read_gbps"] = max_read(bw);
  doc["conventions"] = kBandwidthConventions;
  doc["conventions"]["run"] = fmt::format(
      "one request of {} prompt ids, exactly {} new tokens (stop ids ignored), gamma {}, the median-latency run of "
      "{} per arm (after a short warm-up; the arms take turns run by run); tokens_per_s = new tokens / latency incl. prefill; distortion metric {}",
      prompt.size(), a.max_new_tokens, a.gamma, repeats, a.distortion ? "on" : "off");
  doc["conventions"]["split"] =
      "GenStats: prefill (incl. first token + drafter begin), draft (propose + accept), verify (target forward + "
      "process_logits + verify + the step's host copy), other (host bookkeeping); host_syncs includes the prefill's";
  doc["target"] = a.target;
  doc["draft"] = a.draft;
  doc["draft_kind"] = a.draft_kind;
  doc["prompt_ids"] = prompt;
  doc["rows"] = rows;

  std::string md = "## ears-bench bench e2e\n\n" + env_line(doc["env"]) + "\n" + bandwidth_lines(bw);
  md += fmt::format("- target {}, draft {} ({})\n", a.target, a.draft, a.draft_kind);
  md += "- " + doc["conventions"]["run"].get<std::string>() + "\n";
  md += "- split: " + doc["conventions"]["split"].get<std::string>() + "\n\n";
  md += markdown_table({{"mode", "mode", -1},
                        {"verifier", "verifier", -1},
                        {"temperature", "T", 1},
                        {"new_tokens", "new tokens", -1},
                        {"steps", "steps", -1},
                        {"mean_accept_length", "τ", 2},
                        {"tokens_per_s", "tokens/s", 1},
                        {"speedup", "speedup", 2},
                        {"prefill_ms", "prefill ms", 1},
                        {"draft_ms", "draft ms", 1},
                        {"verify_ms", "verify ms", 1},
                        {"other_ms", "other ms", 1},
                        {"syncs_per_step", "syncs/step", 2}},
                       rows);
  emit(c, doc, md);
  return 0;
}

}  // namespace ears
