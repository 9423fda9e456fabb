#include "harness/bench/common.h"
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
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
#include "decoders/weight_memory.h"
#include "decoders/layers.h"
#include "decoders/engine.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "decoders/sampling.h"
#include "decoders/verify.h"
#include "harness/run/environment.h"
#include "harness/base/error.h"
#include "harness/run/model_setup.h"

namespace ears {
using namespace bench;

namespace {

// The validated shape of one `bench forward` run.
struct ForwardPlan {
  std::vector<std::string> dtypes;
  std::vector<int> batches;
  int repeats = 0, warmup = 0;
};

ForwardPlan forward_plan(const ForwardBenchArgs& a, const BenchCommon& c) {
  ForwardPlan p;
  p.dtypes = a.dtypes.empty() ? default_dtypes(c.device) : a.dtypes;
  p.batches = a.batches;
  if (p.batches.empty()) p.batches = c.quick ? std::vector<int>{1, 2} : std::vector<int>{1, 4, 16};
  for (int b : p.batches)
    if (b < 1) fail("--batch: batch sizes must be >= 1 (got {})", b);
  if (a.context < 1) fail("--context must be >= 1 (got {})", a.context);
  if (a.phases && c.device != "cpu")
    fail("--phases: clocks phases on the CPU only (GPU kernels return before they finish); drop --phases or use "
         "--device cpu");
  int64_t widest = 2;
  for (const auto& d : p.dtypes) widest = std::max<int64_t>(widest, c10::elementSize(parse_dtype(d, "--dtype")));
  // The generated checkpoint (bf16) plus each load's weights and their packed copy in the widest dtype.
  if (a.model.empty() && !c.quick && a.params > 0)
    check_host_memory(static_cast<double>(a.params) * static_cast<double>(2 + 2 * widest), "--params",
                      "pass a smaller --params");
  p.repeats = c.repeats > 0 ? c.repeats : (c.quick ? 2 : 15);
  p.warmup = c.quick ? 1 : 3;
  return p;
}

// The cache holds --context positions plus a verify step's γ+1: within the model's context length
// (a longer one ran far past it, for minutes at --context 100000).
void check_context(const ForwardBenchArgs& a, const ModelConfig& cfg, const std::string& label) {
  const int64_t max = cfg.max_position_embeddings;
  if (max > 0 && a.context + a.gamma + 1 > max)
    fail("--context: {} positions plus a verify step's {} exceed {}'s context length of {} (max_position_embeddings); "
         "pass --context {} or less",
         a.context, a.gamma + 1, label, max, max - a.gamma - 1);
}

// A model as it runs on one kernel path (a model keeps the weight layout of the path it was
// loaded on; each timed forward switches to its own path).
struct PathModel {
  std::string name;
  kernels::Path path;
  CausalLM model;
};

// The model on the default path, plus (--compare-kernels, CPU) the same weights on the aten path.
std::vector<PathModel> load_paths(const fs::path& dir, c10::Device device, c10::ScalarType dtype, bool compare) {
  const kernels::Path start = kernels::path();
  std::vector<PathModel> paths;
  const std::string name = layers::kernel_path_name(device, dtype);
  paths.push_back({name, start, CausalLM::load(dir, device, dtype)});
  if (compare && device.is_cpu() && name != "aten") {
    kernels::set_path(kernels::Path::aten);
    paths.push_back({"aten", kernels::Path::aten, CausalLM::load(dir, device, dtype)});
    kernels::set_path(start);
  }
  return paths;
}

struct ForwardTables {
  json rows = json::array(), summary = json::array();
  std::vector<std::string> speedups;  // --compare-kernels
  json phases = json::array();        // --phases
};

// One timed shape: a path's model at batch B and T new tokens per sequence.
struct Shape {
  size_t path;
  int B, T;
};

// Every shape's timings: rounds.ms[k] is shape k's, at[{path, batch, tokens}] = k.
struct ShapeTimes {
  TimedRounds rounds;
  std::map<std::tuple<size_t, int, int>, size_t> at;
  // a's ms ÷ b's, paired by round.
  double ratio(const std::tuple<size_t, int, int>& a, const std::tuple<size_t, int, int>& b) const {
    return rounds.paired_ratio(at.at(a), at.at(b));
  }
};

// Times every shape side by side (round-robin, so that decode 1 vs verify γ+1 and batch 1 vs
// the largest batch see the same machine state: their ratios are paired); one row per shape.
void time_shapes(const ForwardBenchArgs& a, const ForwardPlan& plan, std::vector<PathModel>& paths,
                 const std::vector<Shape>& shapes, std::map<std::pair<size_t, int>, KVCache>& caches,
                 const std::string& label, at::Generator& gen, c10::Device device, ShapeTimes& times,
                 ForwardTables& t) {
  const kernels::Path start = kernels::path();
  std::vector<std::function<void()>> steps;
  for (const Shape& s : shapes) {
    std::function<void()> step = decode_step(paths[s.path].model, caches.at({s.path, s.B}), s.T, gen);
    steps.push_back([path = paths[s.path].path, step] {
      kernels::set_path(path);
      step();
    });
  }
  times.rounds = time_side_by_side(steps, plan.warmup, plan.repeats, device);
  const std::vector<double> medians = times.rounds.medians();
  kernels::set_path(start);
  const ModelConfig& cfg = paths[0].model.config();
  const c10::ScalarType dtype = paths[0].model.dtype();
  const std::string pages = weight_memory::pages_summary();  // while the models are loaded
  for (size_t k = 0; k < shapes.size(); ++k) {
    const auto [i, B, T] = shapes[k];
    times.at[{i, B, T}] = k;
    t.rows.push_back({{"model", label}, {"path", paths[i].name}, {"params", cfg.parameter_count()},
                      {"streamed_params", cfg.streamed_parameter_count()}, {"dtype", dtype_name(dtype)}, {"batch", B},
                      {"tokens_per_step", T}, {"ms_per_step", medians[k]},
                      {"weight_bytes", cfg.streamed_parameter_count() * dtype_bytes(dtype)},
                      {"kv_bytes", kv_read_bytes(cfg, B, a.context + T, dtype)}, {"context", a.context},
                      {"macs", step_macs(cfg, B, T, a.context)}, {"weight_pages", pages},
                      {"tokens_per_s", B * T / (medians[k] / 1e3)}});
  }
  if (paths.size() == 2)
    for (const Shape& s : shapes)
      if (s.path == 0)
        t.speedups.push_back(fmt::format("{} batch {} × {} token(s): {:.2f}×", dtype_name(dtype), s.B, s.T,
                                         times.ratio({1, s.B, s.T}, {0, s.B, s.T})));
}

// --phases: every shape's forwards run again (after the timed ones, so those stay unclocked), each
// phase clocked; one row of mean ms per phase per shape.
void phase_rows(const ForwardPlan& plan, std::vector<PathModel>& paths, const std::vector<Shape>& shapes,
                std::map<std::pair<size_t, int>, KVCache>& caches, const std::string& label, at::Generator& gen,
                ForwardTables& t) {
  const kernels::Path start = kernels::path();
  const DecodeScope scope;  // as the timed forwards (time_side_by_side)
  for (const Shape& s : shapes) {
    ForwardPhases ph;
    kernels::set_path(paths[s.path].path);
    const std::function<void()> step = decode_step(paths[s.path].model, caches.at({s.path, s.B}), s.T, gen, &ph);
    for (int r = 0; r < plan.warmup; ++r) step();
    ph = ForwardPhases{};
    for (int r = 0; r < plan.repeats; ++r) step();
    json row = {{"model", label}, {"path", paths[s.path].name}, {"dtype", dtype_name(paths[s.path].model.dtype())},
                {"batch", s.B}, {"tokens_per_step", s.T}};
    double total = 0;
    for (int p = 0; p < ForwardPhases::count; ++p) {
      const double ms = ph.seconds[static_cast<size_t>(p)] / static_cast<double>(ph.forwards) * 1e3;
      row[std::string(ForwardPhases::kNames[static_cast<size_t>(p)]) + "_ms"] = ms;
      total += ms;
    }
    row["total_ms"] = total;
    t.phases.push_back(row);
  }
  kernels::set_path(start);
}

// Every batch size and token count for one dtype, timed together, then its summary rows.
void time_dtype(const ForwardBenchArgs& a, const ForwardPlan& plan, const fs::path& dir, c10::Device device,
                c10::ScalarType dtype, at::Generator& gen, ForwardTables& t) {
  std::vector<PathModel> paths = load_paths(dir, device, dtype, a.compare_kernels);
  const ModelConfig& cfg = paths[0].model.config();
  std::string label = a.model.empty() ? fmt::format("generated qwen3 {} (V={})", human_params(cfg.parameter_count()),
                                                    cfg.vocab_size)
                                      : fs::path(a.model).lexically_normal().filename().string();
  if (label.empty()) label = fs::path(a.model).lexically_normal().parent_path().filename().string();
  check_context(a, cfg, label);
  std::map<std::pair<size_t, int>, KVCache> caches;  // (path, batch) -> cache holding the context
  std::vector<Shape> shapes;
  for (int B : plan.batches)
    for (int T : {1, a.gamma + 1})
      for (size_t i = 0; i < paths.size(); ++i) {
        if (!caches.count({i, B})) caches.emplace(std::pair{i, B}, prefilled_cache(paths[i].model, B, a.context, a.gamma + 1));
        shapes.push_back({i, B, T});
      }
  ShapeTimes times;
  time_shapes(a, plan, paths, shapes, caches, label, gen, device, times, t);
  if (a.phases) phase_rows(plan, paths, shapes, caches, label, gen, t);
  const int bmax = *std::max_element(plan.batches.begin(), plan.batches.end());
  const int bmin = *std::min_element(plan.batches.begin(), plan.batches.end());
  for (size_t i = 0; i < paths.size(); ++i) {
    json s = {{"model", label}, {"path", paths[i].name}, {"dtype", dtype_name(dtype)}, {"params", cfg.parameter_count()},
              {"min_batch", bmin}, {"max_batch", bmax}, {"gamma", a.gamma}};
    // Paired by round (ShapeTimes::ratio): tokens/s at bmax ÷ at bmin = bmax / bmin x ms(bmin) ÷ ms(bmax).
    s["verify_over_decode_b1"] = times.ratio({i, bmin, a.gamma + 1}, {i, bmin, 1});
    s["throughput_max_batch_over_b1"] = static_cast<double>(bmax) / bmin * times.ratio({i, bmin, 1}, {i, bmax, 1});
    t.summary.push_back(s);
  }
}

// The Markdown header lines above the tables.
std::string forward_notes(const ForwardBenchArgs& a, const json& doc, const ForwardTables& t) {
  const json& rows = t.rows;
  std::string md = fmt::format(
      "- floor = (weights streamed per step + K/V read over the {}+T span) ÷ {:.1f} GB/s (the higher read reading "
      "of this run); ratio = ms/step ÷ floor\n",
      a.context, doc["floor_read_gbps"].get<double>());
  md += compute_lines(doc["compute"], "step");
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
  std::string pages;
  for (const auto& r : rows) {
    if (r["weight_pages"].get<std::string>().empty()) continue;
    const std::string p = r["dtype"].get<std::string>() + " " + r["weight_pages"].get<std::string>();
    if (pages.find(p) == std::string::npos) pages += (pages.empty() ? "" : "; ") + p;
  }
  if (!pages.empty()) md += "- packed weights (decoders/weight_memory.h): " + pages + "\n";
  if (!t.speedups.empty()) {
    md += "- CPU kernels vs plain ATen, timed side by side (ATen ms ÷ kernels ms):";
    for (size_t i = 0; i < t.speedups.size(); ++i) md += (i ? "; " : " ") + t.speedups[i];
    md += "\n";
  }
  return md;
}

std::string forward_markdown(const ForwardBenchArgs& a, const json& doc, const ForwardTables& t) {
  std::string md = "## ears-bench bench forward\n\n" + env_line(doc["env"]) + "\n" + bandwidth_lines(doc["bandwidth"]);
  md += forward_notes(a, doc, t);
  md += "\n" + markdown_table({{"model", "model", -1},
                                {"path", "path", -1},
                                {"dtype", "dtype", -1},
                                {"batch", "batch", -1},
                                {"tokens_per_step", "tokens/step", -1},
                                {"ms_per_step", "ms/step", 2},
                                {"floor_ms", "floor ms", 2},
                                {"ratio", "ratio", 2},
                                {"compute_floor_ms", "compute floor ms", 2},
                                {"tokens_per_s", "tokens/s", 1}},
                               t.rows);
  const json& summary = t.summary;
  const int bmin = summary.empty() ? 1 : summary[0]["min_batch"].get<int>();
  const std::string tput = summary.empty() ? std::string("throughput ratio")
                                           : fmt::format("batch {} ÷ batch {} throughput (1 token)",
                                                         summary[0]["max_batch"].get<int>(), bmin);
  md += "\n" + markdown_table({{"model", "model", -1},
                                {"path", "path", -1},
                                {"dtype", "dtype", -1},
                                {"verify_over_decode_b1", fmt::format("verify {} ÷ decode 1 (batch {})", a.gamma + 1, bmin), 2},
                                {"throughput_max_batch_over_b1", tput, 2}},
                               summary);
  if (!t.phases.empty()) {
    md += "\n" + doc["conventions"]["phases"].get<std::string>() + "\n\n";
    std::vector<Column> cols = {{"path", "path", -1}, {"dtype", "dtype", -1}, {"batch", "batch", -1},
                                {"tokens_per_step", "tokens/step", -1}};
    for (const char* name : ForwardPhases::kNames) cols.push_back({std::string(name) + "_ms", name, 2});
    cols.push_back({"total_ms", "total", 2});
    md += markdown_table(cols, t.phases);
  }
  return md;
}

}  // namespace

int run_bench_forward(const ForwardBenchArgs& a, const BenchCommon& c) {
  const int threads = set_threads(c.threads);
  json env = environment(threads);  // before the benchmark loads the machine
  const ForwardPlan plan = forward_plan(a, c);
  const c10::Device device = parse_device(c.device, "--device");
  note_dtypes(env, plan.dtypes, device, a.dtypes.empty());
  json bw = json::array({bandwidth_json(measure_bandwidth(bandwidth_options(c, device)), "start")});

  std::optional<TempDir> tmp;
  fs::path dir = a.model;
  if (a.model.empty()) {
    tmp.emplace("forward");
    dir = tmp->path;
    write_random_qwen3(c.quick ? quick_spec(1000) : sized_spec(a.params), dir, 1234);
  } else if (!fs::is_directory(a.model)) {
    fail("--model: '{}' is not a checkpoint directory; pass a Hugging Face directory with config.json", a.model);
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  ForwardTables t;
  for (const auto& dname : plan.dtypes) time_dtype(a, plan, dir, device, parse_dtype(dname, "--dtype"), gen, t);
  bw.push_back(bandwidth_json(measure_bandwidth(bandwidth_options(c, device)), "end"));
  const double floor_bw = max_read(bw);
  for (auto& r : t.rows) {
    const double bytes = r["weight_bytes"].get<double>() + r["kv_bytes"].get<double>();
    r["floor_ms"] = bytes / (floor_bw * 1e9) * 1e3;
    r["ratio"] = r["ms_per_step"].get<double>() / r["floor_ms"].get<double>();
  }
  const json compute = compute_floors(t.rows);

  json doc = bench_doc("forward", env, bw);
  doc["compute"] = compute;
  doc["conventions"]["ms_per_step"] =
      fmt::format("median of {} timed forwards (after {} warm-up) of T new tokens per sequence over a KV cache "
                  "holding {} positions of random K/V; logits for all T rows; every batch, T and path of a dtype "
                  "timed round-robin, so their ratios are paired: each ratio (summary table, kernels vs ATen) is "
                  "the median over the rounds of that round's ratio",
                  plan.repeats, plan.warmup, a.context);
  doc["conventions"]["tokens_per_s"] = "batch * tokens_per_step / step time (positions scored per second)";
  doc["conventions"]["timer"] = DeviceTimer(device).method();
  if (a.phases) {
    std::string legend = fmt::format(
        "Phases (--phases): mean ms per forward over {} more forwards of each shape after the timed ones, the calling "
        "thread's wall clock from the cache append to the logits:",
        plan.repeats);
    for (size_t p = 0; p < ForwardPhases::count; ++p)
      legend += fmt::format("{} {} = {}", p ? ";" : "", ForwardPhases::kNames[p], ForwardPhases::kMeanings[p]);
    doc["conventions"]["phases"] = legend;
    doc["phases"] = t.phases;
  }
  doc["rows"] = t.rows;
  doc["summary"] = t.summary;
  emit(c, doc, forward_markdown(a, doc, t));
  return 0;
}

}  // namespace ears
