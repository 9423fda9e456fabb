// `ears-bench bench linear`: one linear layer (decoders/layers.h `linear`, the dispatch a model's
// forward calls) over a weight larger than the last-level cache, at 1, γ+1 and batch-sized row
// counts, next to the bandwidth floor of streaming the weight once. It separates what a forward's
// step ratios owe to the kernel (compute at many rows, streaming at one) from the rest of the
// forward (bench forward).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/randn.h>

#include <algorithm>

#include "decoders/aten_operators.h"
#include "decoders/kernel_path.h"
#include "decoders/layers.h"
#include "decoders/model_config.h"
#include "decoders/runtime.h"
#include "harness/base/error.h"
#include "harness/bench/common.h"
#include "harness/run/environment.h"

namespace ears {
using namespace bench;

namespace {

struct LinearPlan {
  int64_t in = 0, out = 0;
  std::vector<int> rows;
  std::vector<std::string> dtypes;
  int repeats = 0, warmup = 0;
};

// --out 0: enough outputs that the bf16 weight is at least twice the last-level cache (and 192 MiB
// when sysfs names no cache), a multiple of 1024.
int64_t default_out(int64_t in) {
  const int64_t llc = environment_json().value("l3_cache_bytes", int64_t{0});
  const int64_t bytes = std::max<int64_t>(2 * llc, int64_t{192} << 20);
  return (bytes / (2 * in) + 1023) / 1024 * 1024;
}

LinearPlan linear_plan(const LinearBenchArgs& a, const BenchCommon& c) {
  LinearPlan p;
  if (a.in < 1) fail("--in must be >= 1 (got {})", a.in);
  if (a.out < 0) fail("--out must be >= 0 (got {}; 0 = sized from the last-level cache)", a.out);
  p.in = c.quick ? 64 : a.in;
  p.out = c.quick ? 256 : a.out > 0 ? a.out : default_out(p.in);
  p.rows = a.rows.empty() ? std::vector<int>{1, 6, 16} : a.rows;
  for (int m : p.rows)
    if (m < 1) fail("--rows: row counts must be >= 1 (got {})", m);
  p.dtypes = a.dtypes.empty() ? default_dtypes(c.device) : a.dtypes;
  for (const auto& d : p.dtypes) parse_dtype(d, "--dtype");
  // The float32 draw, the weight in its dtype and its packed copy (at most 4 bytes each).
  check_host_memory(static_cast<double>(p.in) * static_cast<double>(p.out) * 12.0, "--in x --out",
                    "pass a smaller --in or --out");
  p.repeats = c.repeats > 0 ? c.repeats : (c.quick ? 2 : 30);
  p.warmup = c.quick ? 1 : 3;
  return p;
}

// One row per row count: median ms, GMAC/s, the weight's bytes per second and ms ÷ ms at the
// smallest row count (paired by round).
void time_dtype(const LinearPlan& p, c10::Device device, const std::string& dtype_name, at::Generator& gen, json& rows) {
  const c10::ScalarType dtype = parse_dtype(dtype_name, "--dtype");
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor w = (at::randn({p.out, p.in}, gen, opts) * 0.02).to(device, dtype);
  const layers::LinearWeight lw = layers::prepare_linear(w);
  const std::string path = layers::kernel_path_name(device, dtype);
  std::vector<std::function<void()>> fns;
  for (int m : p.rows) {
    const at::Tensor x = at::randn({m, p.in}, gen, opts).to(device, dtype);
    fns.push_back([x, &lw] { (void)layers::linear(x, lw); });
  }
  const TimedRounds timed = time_side_by_side(fns, p.warmup, p.repeats, device);
  const std::vector<double> ms = timed.medians();
  const double weight_bytes = static_cast<double>(p.out * p.in * dtype_bytes(dtype));
  const size_t fewest = static_cast<size_t>(std::min_element(p.rows.begin(), p.rows.end()) - p.rows.begin());
  for (size_t i = 0; i < p.rows.size(); ++i) {
    const double s = ms[i] / 1e3, macs = static_cast<double>(p.rows[i]) * p.out * p.in;
    rows.push_back({{"path", path}, {"dtype", dtype_name}, {"in", p.in}, {"out", p.out},
                    {"rows", p.rows[i]}, {"ms", ms[i]}, {"macs", macs}, {"gmac_per_s", macs / s / 1e9},
                    {"weight_gbps", weight_bytes / s / 1e9}, {"weight_bytes", weight_bytes},
                    {"over_min_rows", timed.paired_ratio(i, fewest)}});
  }
}

// floor_ms (the weight streamed once at the run's best read bandwidth) and ratio = ms ÷ floor_ms.
void add_floors(json& rows, double floor_bw) {
  for (auto& r : rows) {
    r["floor_ms"] = r["weight_bytes"].get<double>() / (floor_bw * 1e9) * 1e3;
    r["ratio"] = r["ms"].get<double>() / r["floor_ms"].get<double>();
  }
}

std::string linear_markdown(const LinearPlan& p, const json& doc) {
  return "## ears-bench bench linear\n\n" + env_line(doc["env"]) + "\n" + bandwidth_lines(doc["bandwidth"]) +
         fmt::format("- y = x W^T for x [rows, {}] and W [{}, {}] (decoders/layers.h linear: the kernel path's "
                     "packed weight, split over the threads); ms = median of {} after {} warm-up; floor = weight "
                     "bytes ÷ {:.1f} GB/s (the higher read reading); × fewest rows = ms ÷ ms at the smallest "
                     "row count, the median over the rounds of each round's ratio\n",
                     p.in, p.out, p.in, p.repeats, p.warmup, doc["floor_read_gbps"].get<double>()) +
         compute_lines(doc["compute"], "call") + "\n" +
         markdown_table({{"path", "path", -1},
                         {"dtype", "dtype", -1},
                         {"rows", "rows", -1},
                         {"ms", "ms", 3},
                         {"floor_ms", "floor ms", 3},
                         {"ratio", "× floor", 2},
                         {"compute_floor_ms", "compute floor ms", 3},
                         {"over_min_rows", "× fewest rows", 2},
                         {"gmac_per_s", "GMAC/s", 1},
                         {"weight_gbps", "weight GB/s", 1}},
                        doc["rows"]);
}

}  // namespace

int run_bench_linear(const LinearBenchArgs& a, const BenchCommon& c) {
  const int threads = set_threads(c.threads);
  json env = environment(threads);  // before the benchmark loads the machine
  const c10::Device device = parse_device(c.device, "--device");
  const LinearPlan plan = linear_plan(a, c);
  note_dtypes(env, plan.dtypes, device, a.dtypes.empty());
  json bw = json::array({bandwidth_json(measure_bandwidth(bandwidth_options(c, device)), "start")});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  json rows = json::array();
  for (const auto& d : plan.dtypes) time_dtype(plan, device, d, gen, rows);
  bw.push_back(bandwidth_json(measure_bandwidth(bandwidth_options(c, device)), "end"));
  json doc = bench_doc("linear", env, bw);
  add_floors(rows, doc["floor_read_gbps"].get<double>());
  doc["compute"] = compute_floors(rows);
  doc["conventions"]["ms"] = fmt::format("median of {} timed calls (after {} warm-up), the row counts taking turns",
                                         plan.repeats, plan.warmup);
  doc["conventions"]["gmac_per_s"] = "rows * out * in multiply-adds per second / 1e9";
  doc["rows"] = rows;
  emit(c, doc, linear_markdown(plan, doc));
  return 0;
}

}  // namespace ears
