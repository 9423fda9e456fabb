#include "harness/bench/common.h"
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
#include "harness/run/decode_params.h"
#include "datasets/synth_gsm.h"
#include "decoders/tokenizer.h"

namespace ears {
using namespace bench;

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

// --prompt-ids when given; else the text the bundled pair is measured on (quickstart-greedy's first
// request: synth-gsm test problem 0, zero-shot, chat, thinking off) when the target has a tokenizer;
// else a fixed pseudo-random prompt of 32 ids. `source` says which.
std::vector<int32_t> default_or_given_prompt(const E2eBenchArgs& a, const LoadedModels& m, int64_t V,
                                             std::string& source) {
  std::vector<int32_t> prompt = parse_prompt_ids(a.prompt_ids);
  if (!prompt.empty()) {
    source = "--prompt-ids";
  } else if (m.tokenizer) {
    const Request r = synth_gsm(1, 0, "test").at(0);
    prompt = m.tokenizer->encode(qwen3_chat_prompt(r.prompt, /*thinking=*/false));
    source = r.id + ", chat, thinking off";
  } else {
    for (int64_t i = 0; i < 32; ++i) prompt.push_back(static_cast<int32_t>((17 + 7919 * i) % std::min<int64_t>(V, 30000)));
    source = "pseudo-random: the target has no tokenizer.json";
  }
  return prompt;
}

// The arms, taking turns run by run.
struct Arm {
  std::string mode;
  Engine* engine;
  std::optional<VerifierSpec::Kind> kind;
};

// One temperature: each arm warmed up, then `repeats` rotating runs; the median-latency run of
// each arm as a row.
void time_temperature(double T, const E2eBenchArgs& a, int repeats, const std::vector<Arm>& arms, const GenRequest& req,
                      json& rows) {
  std::vector<DecodeParams> params;
  for (const auto& arm : arms) {
    runner::DecodeSettings s;
    s.temperature = T;
    s.gamma = a.gamma;
    s.max_new_tokens = a.max_new_tokens;
    s.distortion = a.distortion;
    if (arm.kind) s.verifier = to_string(*arm.kind);
    s.beta = a.beta;
    const DecodeParams p = runner::decode_params(s, {});
    DecodeParams warm = p;
    warm.max_new_tokens = std::min<int64_t>(8, p.max_new_tokens);
    arm.engine->generate({req}, warm);
    params.push_back(p);
  }
  // The arms take turns (rotating), so the speedup column is a ratio measured side by side.
  // (runs[i][r] is arm i's run of round r.)
  std::vector<std::vector<GenResult>> runs(arms.size());
  rotating(arms.size(), repeats, [&](size_t i) {
    GenResult g = arms[i].engine->generate({req}, params[i]).at(0);
    if (!g.error.empty()) fail("bench e2e: generation failed: {}", g.error);
    runs[i].push_back(std::move(g));
  });
  // Speedup over the target alone, paired by round: ms per token of its run ÷ the arm's, the median
  // over the rounds.
  TimedRounds ms_per_token{std::vector<std::vector<double>>(arms.size())};
  for (size_t i = 0; i < arms.size(); ++i)
    for (const GenResult& g : runs[i])
      ms_per_token.ms[i].push_back(g.latency_s * 1e3 / static_cast<double>(std::max<size_t>(1, g.ids.size())));
  const auto base_arm = std::find_if(arms.begin(), arms.end(), [](const Arm& arm) { return !arm.kind; });
  const size_t base = static_cast<size_t>(base_arm - arms.begin());  // arms.size(): none
  for (size_t i = 0; i < arms.size(); ++i) {
    const Arm& arm = arms[i];
    std::vector<GenResult>& rs = runs[i];
    std::sort(rs.begin(), rs.end(), [](const GenResult& x, const GenResult& y) { return x.latency_s < y.latency_s; });
    const GenResult& g = rs[rs.size() / 2];
    const auto& st = g.stats;
    const double tps = g.ids.size() / g.latency_s;
    rows.push_back({{"mode", arm.mode},
                    {"verifier", arm.kind ? to_string(*arm.kind) : std::string("-")},
                    {"temperature", T},
                    {"new_tokens", g.ids.size()},
                    {"steps", st.steps},
                    {"mean_accept_length", st.mean_accept_length()},
                    {"tokens_per_s", tps},
                    {"speedup", base == arms.size() ? 1.0 : ms_per_token.paired_ratio(base, i)},
                    {"latency_ms", g.latency_s * 1e3},
                    {"prefill_ms", st.prefill_s * 1e3},
                    {"draft_ms", st.draft_s * 1e3},
                    {"verify_ms", st.verify_s * 1e3},
                    {"other_ms", st.other_s * 1e3},
                    {"host_syncs", st.host_syncs},
                    {"syncs_per_step", st.steps ? double(st.host_syncs) / st.steps : 0.0}});
  }
}

// The JSON document and its Markdown, printed.
void emit_e2e(const E2eBenchArgs& a, const BenchCommon& c, c10::Device device, int repeats, json env, json bw,
              const std::vector<int32_t>& prompt, const std::string& prompt_source, const json& rows) {
  bw.push_back(bandwidth_json(measure_bandwidth(bandwidth_options(c, device)), "end"));

  json doc = bench_doc("e2e", env, bw);
  doc["conventions"]["run"] = fmt::format(
      "one request of {} prompt ids ({}), exactly {} new tokens (stop ids ignored), gamma {}, the median-latency run of "
      "{} per arm (after a short warm-up; the arms take turns run by run); tokens_per_s = new tokens / latency incl. "
      "prefill; speedup = the median over the rounds of the target alone's ms per token ÷ the arm's in that round "
      "(paired); distortion metric {}",
      prompt.size(), prompt_source, a.max_new_tokens, a.gamma, repeats, a.distortion ? "on" : "off");
  doc["conventions"]["split"] =
      "GenStats: prefill (incl. first token + drafter begin), draft (propose + accept), verify (target forward + "
      "process_logits + verify + the step's host copy), other (host bookkeeping); host_syncs includes the prefill's";
  doc["target"] = a.target;
  doc["draft"] = a.draft;
  doc["draft_kind"] = a.draft_kind;
  doc["prompt_ids"] = prompt;
  doc["prompt_source"] = prompt_source;
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
  env["draft"] = draft_environment_json(m, setup);
  set_path_notices(env, {dtype_name(m.target->dtype())}, m.target->device().str());
  const int64_t V = m.target->config().vocab_size;
  std::string prompt_source;
  const std::vector<int32_t> prompt = default_or_given_prompt(a, m, V, prompt_source);
  for (int32_t id : prompt)
    if (id >= V) fail("--prompt-ids: id {} is outside the target vocabulary of {} ids", id, V);

  Engine target_only(*m.target, nullptr, nullptr);
  Engine speculative(*m.target, m.drafter.get(), nullptr);
  GenRequest req;
  req.prompt = prompt;
  req.run_seed = a.seed;
  req.key = "bench-e2e";

  const std::vector<Arm> arms = {{"target-only", &target_only, std::nullopt},
                                 {"speculative", &speculative, VerifierSpec::Baseline},
                                 {"speculative", &speculative, VerifierSpec::Ears},
                                 {"speculative", &speculative, VerifierSpec::Typical}};
  json rows = json::array();
  for (double T : temps) time_temperature(T, a, repeats, arms, req, rows);
  emit_e2e(a, c, device, repeats, env, bw, prompt, prompt_source, rows);
  return 0;
}

}  // namespace ears
