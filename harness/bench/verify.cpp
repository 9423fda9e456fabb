#include "harness/bench/common.h"
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <sstream>
#include <thread>

#include "harness/bench/probe.h"
#include "decoders/aten_operators.h"
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

namespace ears {
using namespace bench;

namespace {

// What every batch size of `bench verify` shares.
struct VerifyRun {
  c10::Device device = c10::Device(c10::kCPU);
  int64_t V = 0, G = 0, context = 128;
  int repeats = 0, warmup = 0;
  c10::ScalarType dtype = c10::kFloat;
  SamplingParams sp;
  double beta = 0;
};

// One batch size: the (γ+1)-token forward, process_logits, the three verifiers side by side and
// the distortion metric; one row per verifier into `rows`.
void time_batch(const CausalLM& m, int B, const VerifyRun& r, at::Generator& gen, json& rows) {
  const int64_t V = r.V, G = r.G;
  double forward_ms = 0;
  {
    KVCache cache = prefilled_cache(m, B, r.context, G + 1);
    forward_ms = time_ms(decode_step(m, cache, G + 1, gen), r.warmup, r.repeats, r.device);
  }
  // Target logits and a draft distribution correlated with it (so acceptance is realistic).
  at::Tensor logits = (at::randn({B, G + 1, V}, gen, at::kFloat) * 2.0).to(r.device);
  at::Tensor draft_logits = logits.narrow(1, 0, G) + (at::randn({B, G, V}, gen, at::kFloat) * 0.5).to(r.device);
  at::Tensor q = process_logits(draft_logits, r.sp).probs;
  at::Tensor u_draft = at::rand({B * G}, gen, at::kFloat).to(r.device);
  at::Tensor draft_tokens = sample_from_probs(q.reshape({B * G, V}), u_draft).view({B, G});
  at::Tensor u_accept = at::rand({B, G}, gen, at::kFloat).to(r.device);
  at::Tensor u_sample = at::rand({B}, gen, at::kFloat).to(r.device);

  ProcessedProbs pp;
  const at::Tensor model_logits = logits.to(r.dtype);  // what the target's lm_head hands over
  const double process_ms = time_ms([&] { pp = process_logits(model_logits, r.sp); }, r.warmup, r.repeats, r.device);
  // The verifiers are timed side by side (time_side_by_side), baseline first.
  std::vector<VerifierSpec> specs;
  for (auto kind : {VerifierSpec::Baseline, VerifierSpec::Ears, VerifierSpec::Typical}) {
    specs.emplace_back();
    specs.back().kind = kind, specs.back().beta = r.beta;
  }
  const VerifyInput in{draft_tokens, pp.probs, pp.max_prob, q, u_accept, u_sample};
  std::vector<std::function<void()>> runs;
  for (const auto& vs : specs) runs.push_back([&vs, &in] { (void)verify(vs, in); });
  const TimedRounds verify_times = time_side_by_side(runs, r.warmup, r.repeats, r.device);
  const std::vector<double> verify_medians = verify_times.medians();
  double baseline_total = 0;
  for (size_t k = 0; k < specs.size(); ++k) {
    const VerifierSpec& vs = specs[k];
    const auto kind = vs.kind;
    const double verify_ms = verify_medians[k];
    json distortion = nullptr;
    if (kind != VerifierSpec::Baseline) {
      at::Tensor p_pos = pp.probs.narrow(1, 0, G), max_pos = pp.max_prob.narrow(1, 0, G), tv;
      distortion = time_ms([&] { tv = tv_distance(p_pos, induced_distribution(vs, p_pos, q, max_pos)); }, r.warmup,
                           r.repeats, r.device);
    }
    const double total = process_ms + verify_ms;
    if (kind == VerifierSpec::Baseline) baseline_total = total;
    rows.push_back({{"verifier", to_string(kind)},
                    {"batch", B},
                    {"gamma", G},
                    {"vocab", V},
                    {"process_ms", process_ms},
                    {"verify_ms", verify_ms},
                    {"total_ms", total},
                    {"total_over_baseline", total / baseline_total},
                    {"verify_over_baseline", verify_times.paired_ratio(k, 0)},  // baseline is runs[0]
                    {"forward_ms", forward_ms},
                    {"share_of_forward", total / forward_ms},
                    {"verify_share_of_forward", verify_ms / forward_ms},
                    {"distortion_ms", distortion}});
  }
}

// The JSON document and its Markdown, printed.
void emit_verify(const VerifyBenchArgs& a, const BenchCommon& c, const VerifyRun& r, json env, const json& bw,
                 int64_t fwd_params, const json& rows) {
  json doc = bench_doc("verify", env, bw);
  doc["conventions"]["timing"] = fmt::format(
      "median of {} runs after {} warm-up, verifiers interleaved run by run (verify ÷ baseline: the median over the "
      "runs of each run's ratio); {}",
      r.repeats, r.warmup, DeviceTimer(r.device).method());
  doc["conventions"]["process_ms"] =
      fmt::format("process_logits (temperature {}, no top-k/top-p) of random {} logits [B, {}, {}] (the forward's "
                  "dtype), float32 upcast included",
                  a.temperature, dtype_name(r.dtype), r.G + 1, r.V);
  doc["conventions"]["forward_ms"] = fmt::format(
      "one {}-token forward of a generated Qwen3 (--target {}: {} params, vocab {}, {}, random weights) over a "
      "{}-position KV cache; the smallest real Qwen3 is --target qwen3-0.6b, larger ones make the shares smaller",
      r.G + 1, a.target, fwd_params, r.V, dtype_name(r.dtype), r.context);
  doc["conventions"]["distortion_ms"] =
      "tv_distance(p_t, induced_distribution(...)) over the gamma draft positions: the engine's optional "
      "distortion metric (DecodeParams::measure_distortion), not part of decoding";
  if (a.temperature == 0)
    doc["conventions"]["temperature_0"] =
        "at T = 0 the engine verifies greedily whatever the verifier (decoders/verify.h, \"Temperature 0\"), on "
        "the CPU from the target's argmax on the host, without these tensor ops: the rows time each rule's tensor "
        "path on one-hot inputs";
  doc["forward_params"] = fwd_params;
  doc["rows"] = rows;

  std::string md = "## ears-bench bench verify\n\n" + env_line(doc["env"]) + "\n" + bandwidth_lines(bw);
  for (const char* k : {"timing", "process_ms", "forward_ms", "distortion_ms", "temperature_0"})
    if (doc["conventions"].contains(k)) md += fmt::format("- {}: {}\n", k, doc["conventions"][k].get<std::string>());
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
}

}  // namespace

int run_bench_verify(const VerifyBenchArgs& a, const BenchCommon& c) {
  const int threads = set_threads(c.threads);
  json env = environment(threads);  // before the benchmark loads the machine
  VerifyRun r;
  r.device = parse_device(c.device, "--device");
  r.V = c.quick ? 4096 : a.vocab;
  if (r.V < 2) fail("--vocab must be >= 2 (got {})", r.V);
  std::vector<int> batches = a.batches;
  if (batches.empty()) batches = c.quick ? std::vector<int>{1, 2} : std::vector<int>{1, 32};
  for (int b : batches)
    if (b < 1) fail("--batch: batch sizes must be >= 1 (got {})", b);
  r.repeats = c.repeats > 0 ? c.repeats : (c.quick ? 2 : 15);
  r.warmup = c.quick ? 1 : 3;
  std::optional<c10::ScalarType> dtype;
  if (a.dtype != "auto") dtype = parse_dtype(a.dtype, "--dtype");
  r.sp.temperature = a.temperature;
  validate(r.sp, "bench verify");
  r.G = a.gamma;
  r.beta = a.beta;

  json bw = json::array({bandwidth_json(measure_bandwidth(bandwidth_options(c, r.device)), "start")});
  // Reference forward: the generated Qwen3 with this vocabulary.
  TempDir tmp("verify");
  GeneratedModelSpec spec = c.quick ? quick_spec(r.V) : GeneratedModelSpec{};
  if (!c.quick && a.target == "qwen3-0.6b") spec = qwen3_0_6b_spec(r.V);
  spec.vocab = r.V;
  write_random_qwen3(spec, tmp.path, 99);
  const CausalLM m = CausalLM::load(tmp.path, r.device, dtype);
  r.dtype = m.dtype();
  env["model"] = model_environment_json(m, a.dtype);
  set_path_notices(env, {dtype_name(m.dtype())}, r.device.str());

  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  json rows = json::array();
  for (int B : batches) time_batch(m, B, r, gen, rows);
  bw.push_back(bandwidth_json(measure_bandwidth(bandwidth_options(c, r.device)), "end"));
  emit_verify(a, c, r, env, bw, m.config().parameter_count(), rows);
  return 0;
}

}  // namespace ears
