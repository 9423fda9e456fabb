#include "harness/bench/common.h"
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/randint.h>
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

#include "harness/bench/probe.h"
#include "decoders/kernel_path.h"
#include "decoders/layers.h"
#include "decoders/engine.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "decoders/sampling.h"
#include "decoders/verify.h"
#include "harness/run/environment.h"
#include "harness/base/error.h"
#include "harness/run/model_setup.h"
#include "reports/environment_keys.h"
#include "reports/markdown.h"
#include "reports/report.h"

namespace ears {
namespace bench {

// ---- environment, bandwidth, output ---------------------------------------------------------

// The machine facts (harness/run/environment.h); `threads` must already be in effect.
json environment(int threads) {
  json env = environment_json();
  env["threads"] = threads;
  return env;
}

json bandwidth_json(const BandwidthResult& r, const std::string& when) {
  return {{"when", when},         {"bytes", r.bytes},         {"runs", r.runs},     {"threads", r.threads},
          {"read_gbps", r.read_gbps}, {"copy_gbps", r.copy_gbps}, {"method", r.method}};
}


BandwidthOptions bandwidth_options(const BenchCommon& c, c10::Device device) {
  BandwidthOptions o;
  o.device = device;
  if (c.quick) o.bytes = int64_t{16} << 20, o.runs = 2;
  return o;
}


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

namespace {
// The machine's line of env_line: threads, LibTorch, the CPU and its paths, the load.
std::string machine_line(const json& env) {
  auto text = [&](const char* key) {  // key: env_key(...), checked at compile time; "?" when missing
    return env.contains(key) ? text_at(env, {key}) : std::string("?");
  };
  std::string flags;
  for (const auto& f : env[env_key("cpu_flags")]) flags += (flags.empty() ? "" : " ") + f.get<std::string>();
  const bool cuda = env.value(env_key("cuda_build"), false);
  return fmt::format(
      "- environment: {} LibTorch threads (OpenMP wait: {}), LibTorch {}{}, CPU: {} ({} logical CPUs; L3 {} MiB; {}; "
      "ISA {}; ATen {}); kernel path {} (best {}); load average {:.2f} at start{}",
      text(env_key("threads")), text(env_key("omp_wait_policy")), text(env_key("libtorch")),
      cuda ? fmt::format(" (CUDA build, {} device(s))", text(env_key("cuda_devices"))) : "", text(env_key("cpu_model")),
      text(env_key("logical_cpus")), env[env_key("l3_cache_bytes")].get<int64_t>() >> 20, flags.empty() ? "-" : flags,
      text(env_key("cpu_isa")), text(env_key("aten_cpu_capability")), text(env_key("kernel_path")),
      text(env_key("kernel_path_best")), env[env_key("load_average_1m_start")].get<double>(),
      env.contains(env_key("load_average_1m_end"))
          ? fmt::format(", {:.2f} at end", env[env_key("load_average_1m_end")].get<double>())
          : "");
}
}  // namespace

std::string env_line(const json& env) {
  std::string line = machine_line(env);
  if (env.contains("model")) {  // bench's and generate's own key: the target's facts (model_environment_json)
    const json& m = env["model"];
    line += fmt::format("\n- model: {} compute, {} weights (checkpoint {}, --dtype {}) on {}, kernel path {}; {}",
                        m[env_key("compute_dtype")].get<std::string>(), m[env_key("weight_dtype")].get<std::string>(),
                        m[env_key("checkpoint_dtype")].get<std::string>(),
                        m[env_key("dtype_requested")].get<std::string>(), m[env_key("device")].get<std::string>(),
                        m[env_key("kernel_path")].get<std::string>(), m.value(env_key("weight_pages"), std::string("-")));
  }
  if (const std::string d = draft_in_words(env); !d.empty())
    line += fmt::format("\n- {}, from {} on {}", d, env[env_key("draft")][draft_env_key("path")].get<std::string>(),
                        env[env_key("draft")][draft_env_key("device")].get<std::string>());
  for (const auto& n : env.value(env_key("notices"), json::array())) line += "\n- NOTICE: " + n.get<std::string>();
  if (load_busy(env[env_key("load_average_1m_start")].get<double>(), env[env_key("logical_cpus")].get<double>()))
    line += "\n- WARNING: the machine is busy (load average >= the CPU count): timings are noisy; LibTorch threads "
            "wait on descheduled peers, so --threads 1 is steadier";
  return line;
}

json compute_floors(json& rows) {
  std::map<std::string, double> gmacs;
  json probes = json::array();
  for (auto& r : rows) {
    const std::string path = r["path"].get<std::string>();
    if (!gmacs.count(path)) {
      const ComputeResult p = measure_compute(path);
      gmacs[path] = p.gmacs;
      probes.push_back({{"path", path},
                        {"gmacs", p.gmacs},
                        {"gmacs_one_thread", p.gmacs_one_thread},
                        {"threads", p.threads},
                        {"method", p.method}});
    }
    r["compute_floor_ms"] = gmacs[path] > 0 ? json(r["macs"].get<double>() / (gmacs[path] * 1e9) * 1e3) : json();
  }
  return probes;
}

std::string shared_cores_warning(const json& probe) {
  const int threads = probe.value("threads", 1);
  const double all = probe.value("gmacs", 0.0), one = probe.value("gmacs_one_thread", 0.0);
  if (threads < 2 || all <= 0 || one <= 0 || all >= kSharedCoresShare * threads * one) return "";
  return fmt::format("- WARNING: the {} compute probe read {:.1f} GMAC/s on {} threads, {:.2f} x one thread's {:.1f}: "
                     "the threads did not each get a whole core at full clock (another process or VM on these "
                     "CPUs, or a lower all-core clock); compute-bound rows (many rows per step) read slow\n",
                     probe.value("path", std::string()), all, threads, all / one, one);
}

std::string compute_lines(const json& probes, const std::string& unit) {
  std::string out;
  for (const auto& c : probes) {
    const std::string path = c["path"].get<std::string>(), method = c["method"].get<std::string>();
    out += c["gmacs"].get<double>() > 0
               ? fmt::format("- compute floor ({} path) = multiply-accumulates per {} ÷ {:.1f} GMAC/s ({}, {} "
                             "thread(s), measured after the timings; one thread alone {:.1f})\n",
                             path, unit, c["gmacs"].get<double>(), method, c["threads"].get<int>(),
                             c.value("gmacs_one_thread", 0.0))
               : fmt::format("- compute floor ({} path): {}\n", path, method);
    out += shared_cores_warning(c);
  }
  if (!probes.empty())
    out += fmt::format("- a {} costs at least the larger floor: the memory floor holds only if the arithmetic hides "
                       "under the weight stream, the compute floor only if the stream hides under the arithmetic\n",
                       unit);
  return out;
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


double TimedRounds::median_ms(size_t k) const { return median(ms.at(k)); }

std::vector<double> TimedRounds::medians() const {
  std::vector<double> m;
  for (size_t k = 0; k < ms.size(); ++k) m.push_back(median_ms(k));
  return m;
}

double TimedRounds::paired_ratio(size_t a, size_t b) const {
  std::vector<double> r;
  for (size_t i = 0; i < ms.at(a).size() && i < ms.at(b).size(); ++i) r.push_back(ms[a][i] / ms[b][i]);
  return median(std::move(r));
}

TimedRounds time_side_by_side(const std::vector<std::function<void()>>& fns, int warmup, int repeats,
                              c10::Device device) {
  const DecodeScope scope;  // as a request's decode runs (Engine::generate)
  for (int i = 0; i < warmup; ++i)
    for (const auto& fn : fns) fn();
  DeviceTimer timer(device);
  TimedRounds t{std::vector<std::vector<double>>(fns.size())};
  rotating(fns.size(), repeats, [&](size_t k) {
    timer.start();
    fns[k]();
    t.ms[k].push_back(timer.stop_ms());
  });
  return t;
}

json bench_doc(const std::string& command, json env, const json& readings) {
  json doc;
  doc["command"] = command;
  env["load_average_1m_end"] = load_average_1m();
  print_notices(env);
  doc["env"] = std::move(env);
  doc["bandwidth"] = readings;
  doc["floor_read_gbps"] = max_read(readings);
  doc["conventions"] = kBandwidthConventions;
  return doc;
}

std::vector<std::string> default_dtypes(const std::string& device) {
  if (bf16_emulated(device)) return {"float32"};
  return {"bfloat16", "float32"};
}

void note_dtypes(json& env, const std::vector<std::string>& dtypes, c10::Device device, bool defaulted) {
  std::vector<std::string> names;
  for (const auto& d : dtypes) names.push_back(dtype_name(parse_dtype(d, "--dtype")));
  set_path_notices(env, names, device.str());
  if (defaulted && bf16_emulated(device.str()))
    env["notices"].push_back("bfloat16 left out of the default dtypes: on kernel path aten this CPU has no native "
                             "bf16 and LibTorch would emulate it; --dtype bfloat16 times it anyway");
}

double time_ms(const std::function<void()>& fn, int warmup, int repeats, c10::Device device) {
  return time_side_by_side({fn}, warmup, repeats, device).median_ms(0);
}

void emit(const BenchCommon& c, const json& doc, const std::string& markdown) {
  if (c.json) {
    json out = doc;
    if (c.quick) out["quick"] = true;
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print("{}{}", c.quick ? std::string(kQuickLine) + "\n\n" : "", markdown);
  }
  std::fflush(stdout);
}

const json kBandwidthConventions = {
    {"read_gbps", "bytes read per second by a load stream over the buffer, one slice per LibTorch thread (CPU; "
                  "at::sum on a GPU), best of runs; 1 GB = 1e9 bytes"},
    {"copy_gbps", "(bytes read + bytes written) per second of a buffer copy (STREAM copy convention)"},
    {"floor", "floor = bytes a step must read (weights + KV span) / read_gbps; the higher of the run's readings"}};

// ---- generated checkpoints ------------------------------------------------------------------


std::string human_params(int64_t n) {
  return n >= 1000000 ? fmt::format("{:.1f}M", n / 1e6) : fmt::format("{:.1f}K", n / 1e3);
}

GeneratedModelSpec quick_spec(int64_t vocab) {
  GeneratedModelSpec s;
  s.hidden = 64, s.layers = 2, s.heads = 4, s.kv_heads = 2, s.head_dim = 16, s.intermediate = 128, s.vocab = vocab;
  return s;
}

// GeneratedModelSpec{} with as many layers as give about `params` parameters (at least 1 layer).
GeneratedModelSpec spec_with_params(int64_t params) {
  GeneratedModelSpec s;
  const ModelConfig c = generated_config(s);
  const int64_t per_layer = c.layer_parameter_count();
  const int64_t outside_layers = c.parameter_count() - c.num_hidden_layers * per_layer;  // embeddings, final norm
  s.layers = std::max<int64_t>(1, (params - outside_layers + per_layer / 2) / per_layer);
  return s;
}

namespace {

// MemAvailable in bytes, or 0 when /proc/meminfo cannot be read.
double available_host_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return 0;
}

}  // namespace

void check_host_memory(double bytes, const std::string& option, const std::string& fix) {
  const double available = available_host_bytes();
  if (available > 0 && bytes > available)
    fail("{}: needs about {:.1f} GiB of memory, more than the {:.1f} GiB available on this machine; {}", option,
         bytes / 1073741824.0, available / 1073741824.0, fix);
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
std::function<void()> decode_step(const CausalLM& m, KVCache& cache, int64_t T, at::Generator& gen,
                                  ForwardPhases* phases) {
  const at::Tensor ids = at::randint(m.config().vocab_size, {cache.batch(), T}, gen, at::kLong).to(m.device());
  const std::vector<int64_t> lengths = cache.lengths();
  return [&m, &cache, ids, lengths, phases] {
    ForwardOptions opt;
    opt.phases = phases;
    ForwardOutput out = m.forward(ids, cache, opt);
    cache.set_lengths(lengths);
  };
}

int64_t dtype_bytes(c10::ScalarType t) { return static_cast<int64_t>(c10::elementSize(t)); }

// K and V bytes one step reads over `span` positions per sequence.
int64_t kv_read_bytes(const ModelConfig& c, int64_t B, int64_t span, c10::ScalarType dtype) {
  return c.num_hidden_layers * 2 * B * c.num_key_value_heads * span * c.head_dim * dtype_bytes(dtype);
}

int64_t step_macs(const ModelConfig& c, int64_t B, int64_t T, int64_t context) {
  const int64_t keys = T * context + T * (T + 1) / 2;  // summed over the T tokens
  return B * (T * c.streamed_parameter_count() + 2 * c.num_hidden_layers * c.num_attention_heads * c.head_dim * keys);
}

}  // namespace bench
}  // namespace ears
