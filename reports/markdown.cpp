#include "reports/markdown.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "reports/environment_keys.h"
#include "reports/report.h"

namespace ears {

using nlohmann::json;

std::string text_at(const json& obj, std::initializer_list<const char*> path) {
  const json* x = &obj;
  for (const char* k : path) {
    if (!x->is_object() || !x->contains(k)) return "";
    x = &(*x)[k];
  }
  if (x->is_null()) return "";
  return x->is_string() ? x->get<std::string>() : x->dump();
}

namespace {

const char* kNa = "n/a";

std::string num(double x, int decimals) { return std::isfinite(x) ? fmt::format("{:.{}f}", x, decimals) : kNa; }
std::string signed_num(double x, int decimals) {
  return std::isfinite(x) ? fmt::format("{:+.{}f}", x, decimals) : kNa;
}
// x with 3 significant digits and no exponent (0.162, 25.3, 1234), at most 4 decimals.
std::string sig3(double x) {
  if (!std::isfinite(x)) return kNa;
  if (x == 0) return "0";
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(x))));
  return num(x, std::clamp(2 - magnitude, 0, 4));
}
std::string pct(double fraction, int decimals = 1) {
  return std::isfinite(fraction) ? fmt::format("{:.{}f}%", 100 * fraction, decimals) : kNa;
}
bool finite(const Interval& i) { return std::isfinite(i.lo) && std::isfinite(i.hi); }
std::string ci(const Interval& i, int decimals, bool sign) {
  if (!finite(i)) return "";
  return sign ? fmt::format(" [{:+.{}f}, {:+.{}f}]", i.lo, decimals, i.hi, decimals)
              : fmt::format(" [{:.{}f}, {:.{}f}]", i.lo, decimals, i.hi, decimals);
}
std::string p_value(double p) {
  if (!std::isfinite(p)) return kNa;
  return p < 0.001 ? "<0.001" : fmt::format("{:.3f}", p);
}
std::string cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}
std::string json_cell(const json& v) { return cell(v.is_string() ? v.get<std::string>() : v.dump()); }

std::string accuracy_cell(const ArmMetrics& m) {
  if (m.n_scored == 0) return kNa;
  return pct(m.accuracy) + ci({100 * m.accuracy_ci95.lo, 100 * m.accuracy_ci95.hi}, 1, false);
}

void key_value_table(std::string& md, const json& obj) {
  md += "| Key | Value |\n|---|---|\n";
  for (const auto& [k, v] : obj.items()) md += fmt::format("| {} | {} |\n", cell(k), json_cell(v));
  md += "\n";
}

// "1.2B parameters", "0.6M parameters"; "" for anything but a number.
std::string count_text(const json& n) {
  if (!n.is_number()) return "";
  const double v = n.get<double>();
  return v >= 1e9 ? fmt::format("{:.1f}B parameters", v / 1e9) : fmt::format("{:.1f}M parameters", v / 1e6);
}

std::string parameters_text(const json& env) { return count_text(env.value(env_key("target_parameters"), json())); }

// "γ 5, T 0.9, top-k off, top-p 1, max_new_tokens 160, batch 1, seed 0" from a decoding section.
std::string decoding_text(const json& d) {
  if (!d.is_object() || !d.contains("gamma")) return "";
  const std::string top_k = text_at(d, {"top_k"}) == "0" ? "off" : text_at(d, {"top_k"});
  return fmt::format("γ {}, T {}, top-k {}, top-p {}, max_new_tokens {}, batch {}, seed {}", text_at(d, {"gamma"}),
                     text_at(d, {"temperature"}), top_k, text_at(d, {"top_p"}), text_at(d, {"max_new_tokens"}),
                     text_at(d, {"batch_size"}), text_at(d, {"seed"}));
}

// "bfloat16 (checkpoint bfloat16), kernel path avx2, draft eagle3 in bfloat16 on kernel path avx2, 2 threads
// (OpenMP ...), CPU AMD EPYC (ISA ...)"
std::string compute_text(const json& env) {
  auto at = [&](const char* key) { return text_at(env, {key}); };  // key: env_key(...), checked at compile time
  std::vector<std::string> parts;
  const std::string dtype = at(env_key("compute_dtype")).empty() ? at(env_key("dtype")) : at(env_key("compute_dtype"));
  const std::string checkpoint = at(env_key("checkpoint_dtype"));
  if (!dtype.empty()) parts.push_back(dtype + (checkpoint.empty() ? "" : " (checkpoint " + checkpoint + ")"));
  if (const std::string p = at(env_key("kernel_path")); !p.empty()) parts.push_back("kernel path " + p);
  if (const std::string p = at(env_key("weight_pages")); !p.empty()) parts.push_back("packed weights on " + p);
  if (const std::string d = draft_in_words(env); !d.empty()) parts.push_back(d);
  if (const std::string threads = at(env_key("threads")); !threads.empty()) {
    const std::string wait = at(env_key("omp_wait_policy"));
    parts.push_back(threads + " thread(s)" + (wait.empty() ? "" : " (OpenMP wait " + wait + ")"));
  }
  const std::string device = at(env_key("device")), cpu = at(env_key("cpu_model"));
  const std::string isa = at(env_key("cpu_isa")), aten = at(env_key("aten_cpu_capability"));
  if (device.rfind("cuda", 0) == 0) parts.push_back("GPU " + device);
  else if (!cpu.empty())
    parts.push_back(fmt::format("CPU {}{}{}", cpu, isa.empty() ? "" : " (ISA " + isa + ")",
                                aten.empty() ? "" : ", ATen CPU capability " + aten));
  if (const std::string lt = at(env_key("libtorch")); !lt.empty())
    parts.push_back("LibTorch " + lt + (at(env_key("cuda_build")) == "true" ? " (CUDA build)" : ""));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// "0.42 at start, 2.10 at end (2 logical CPUs: quiet at start; the end counts the run's own threads)",
// or "busy at start" by load_busy(); "" when neither value was recorded.
std::string load_text(const json& env) {
  const std::string start = text_at(env, {env_key("load_average_1m_start")});
  const std::string end = text_at(env, {env_key("load_average_1m_end")});
  if (start.empty() && end.empty()) return "";
  std::string text = fmt::format("{} at start, {} at end", start.empty() ? kNa : start, end.empty() ? kNa : end);
  const json cpus = env.value(env_key("logical_cpus"), json());
  const json load = env.value(env_key("load_average_1m_start"), json());
  if (!cpus.is_number() || !load.is_number()) return text;
  return text + (load_busy(load.get<double>(), cpus.get<double>())
                     ? fmt::format(" (busy at start: at least the {} logical CPUs — other work shared them, the timings "
                                   "are noisy)", cpus.get<int>())
                     : fmt::format(" ({} logical CPUs: quiet at start; the end counts the run's own threads)",
                                   cpus.get<int>()));
}

// The configuration block: what ran, in one table a reviewer can paste.
void configuration_block(std::string& md, const Report& r) {
  const json& c = r.config;
  std::vector<std::pair<std::string, std::string>> rows;
  auto row = [&](std::string key, std::string value) {
    if (!value.empty()) rows.emplace_back(std::move(key), std::move(value));
  };
  std::string target = text_at(c, {"target", "path"});
  if (!target.empty() && !parameters_text(r.environment).empty()) target += " (" + parameters_text(r.environment) + ")";
  row("Target", target);
  if (text_at(c, {"draft", "kind"}) == "none") row("Draft", "none (target only)");
  else if (!text_at(c, {"draft", "kind"}).empty())
    row("Draft", fmt::format("{} {}", text_at(c, {"draft", "kind"}), text_at(c, {"draft", "path"})));
  row("Dataset", fmt::format("{}{}", text_at(r.dataset, {"name"}),
                             text_at(r.dataset, {"n_requests"}).empty() ? "" : ", " + text_at(r.dataset, {"n_requests"}) + " requests"));
  row("Decoding", decoding_text(c.contains("decoding") ? c["decoding"] : json()));
  if (c.contains("arms") && c["arms"].is_array())
    for (const auto& a : c["arms"])
      if (a.contains("decoding") && c.contains("decoding") && a["decoding"] != c["decoding"])
        row("Decoding (" + text_at(a, {"name"}) + ")", decoding_text(a["decoding"]));
  row("Computed in", compute_text(r.environment));
  row("Load average (1 min)", load_text(r.environment));
  row("Run", fmt::format("{}{}", text_at(r.environment, {"git_commit"}).empty() ? "" : "commit " + text_at(r.environment, {"git_commit"}),
                         text_at(r.environment, {"started_at"}).empty() ? "" : ", started " + text_at(r.environment, {"started_at"})));
  if (rows.empty()) return;
  md += "| Configuration | |\n|---|---|\n";
  for (const auto& [k, v] : rows) md += fmt::format("| {} | {} |\n", cell(k), cell(v));
  md += "\n";
}

// Partial results, warnings, the toy-model banner and the small-sample warning.
void notices(std::string& md, const Report& r) {
  if (r.partial)
    md += "> **Partial results**: the run was interrupted, shards are missing or the arms did not finish the same "
          "requests. Numbers cover the finished requests only.\n\n";
  for (const auto& w : r.warnings) md += fmt::format("> Warning: {}\n\n", w);
  const json& env = r.environment;
  const json parameters = env.value(env_key("target_parameters"), json());
  if (parameters.is_number() && parameters.get<double>() < kToyModelParameters && !is_toy_dataset(text_at(r.dataset, {"name"})))
    md += fmt::format("> **Toy models** ({}): these numbers show the harness works, not model quality. "
                      "Run a real target and draft for accuracy and speed claims.\n\n", parameters_text(env));
  // Requests, not (request, repeat) pairs: repeats of a request are not independent evidence.
  long fewest = -1;
  for (const auto& c : r.comparisons) {
    const long n = c.n_paired_requests > 0 ? c.n_paired_requests : c.n_pairs;  // a report.json from before the field
    fewest = fewest < 0 ? n : std::min(fewest, n);
  }
  if (fewest >= 0 && fewest < kSmallSamplePairs)
    md += fmt::format("> **Small sample**: {} paired request(s) (fewer than {}). The intervals are wide and no "
                      "difference below is conclusive; run more requests (dataset.limit; dataset.n for synth-gsm) before drawing conclusions.\n\n",
                      fewest, kSmallSamplePairs);
}

void results_table(std::string& md, const Report& r) {
  md += "## Results\n\n";
  md += "| Method | Output tok/s | Total tok/s | Avg latency (s) | τ | Accuracy |\n";
  md += "|---|---:|---:|---:|---:|---:|\n";
  for (const auto& a : r.arms) {
    const auto& m = a.metrics;
    md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", cell(a.name), num(m.output_tokens_per_s, 1),
                      num(m.total_tokens_per_s, 1), num(m.latency_mean_s, 3), num(m.mean_accept_length, 2),
                      accuracy_cell(m));
  }
  for (const auto& c : r.comparisons) {
    std::string tau = std::isfinite(c.accept_length_ratio) ? fmt::format("×{:.2f}", c.accept_length_ratio) : kNa;
    if (finite(c.accept_length_ratio_ci95))
      tau += fmt::format(" [{:.2f}, {:.2f}]", c.accept_length_ratio_ci95.lo, c.accept_length_ratio_ci95.hi);
    std::string acc = kNa;
    if (c.n_scored_pairs > 0)
      acc = signed_num(c.accuracy_delta_pp, 1) + " pp" + ci(c.accuracy_delta_ci95, 1, true) +
            fmt::format(" (McNemar p={})", p_value(c.mcnemar_p));
    md += fmt::format("| Relative gain: {} vs {} | {}%{} | {}% | {}%{} | {} | {} |\n", cell(c.arm), cell(c.baseline),
                      signed_num(c.throughput_gain_pct, 1), ci(c.throughput_gain_ci95, 1, true),
                      signed_num(c.total_throughput_gain_pct, 1), signed_num(c.latency_change_pct, 1),
                      ci(c.latency_change_ci95, 1, true), tau, acc);
  }
  md += "\nτ = tokens emitted per target verification step, bonus/correction token included (vLLM / Spec-Bench). "
        "Accuracy: the scorer's primary metric (GSM8K strict-match, QA exact match; report.json has "
        "flexible-extract and F1 too), 95% Wilson interval over requests. Relative gains: paired by (request, repeat), 95% paired bootstrap "
        "intervals over requests";
  if (!r.comparisons.empty())
    md += fmt::format(" (B={}, seed {})", r.comparisons.front().bootstrap_resamples, r.comparisons.front().bootstrap_seed);
  md += "; accuracy change in percentage points with an exact McNemar test (over requests: with repeats, the "
        "paired sign-flip test it generalises).\n\n";
  for (const auto& c : r.comparisons)
    if (c.pairs_only)
      md += fmt::format("> {} and {} failed different requests: their gains cover the {} pair(s) both finished, "
                        "from Σ latencies over them (not the table's wall-time rates).\n\n",
                        cell(c.arm), cell(c.baseline), c.n_pairs);
  if (std::any_of(r.comparisons.begin(), r.comparisons.end(), [](const auto& c) { return std::isfinite(c.specbench_speedup); })) {
    md += "Spec-Bench speedup (the mean of per-request output tokens/s ÷ the baseline's, over the pairs):";
    for (const auto& c : r.comparisons) {
      md += fmt::format(" {} {}", cell(c.arm),
                        std::isfinite(c.specbench_speedup) ? fmt::format("×{:.2f}", c.specbench_speedup) : kNa);
      if (finite(c.specbench_speedup_ci95))
        md += fmt::format(" [{:.2f}, {:.2f}]", c.specbench_speedup_ci95.lo, c.specbench_speedup_ci95.hi);
      md += ";";
    }
    md.back() = '.';
    md += "\n\n";
  }
  if (!r.comparisons.empty()) {
    md += "Outputs identical to the baseline's (same ids and text; every pair when both arms decode greedily):";
    for (const auto& c : r.comparisons) md += fmt::format(" {} {}/{};", cell(c.arm), c.identical_outputs, c.n_pairs);
    md.back() = '.';
    md += "\n\n";
  }
}

void details_table(std::string& md, const Report& r) {
  md += "## Details\n\n";
  md += "| Method | Verifier | Requests | Errors | p50 (s) | p90 (s) | p99 (s) | TTFT ms (mean / p99) | TPOT ms (mean / p99) | "
        "Acceptance rate | Wall (s) |\n";
  md += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& a : r.arms) {
    const auto& m = a.metrics;
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}{} |\n", cell(a.name),
                      cell(verifier_in_words(a.verifier)), m.n_requests, m.n_errors, num(m.latency_p50_s, 3),
                      num(m.latency_p90_s, 3), num(m.latency_p99_s, 3), sig3(1000 * m.ttft_mean_s) + " / " + sig3(1000 * m.ttft_p99_s),
                      sig3(1000 * m.tpot_mean_s) + " / " + sig3(1000 * m.tpot_p99_s), pct(m.acceptance_rate), num(m.wall_s, 2),
                      m.wall_from_latencies ? " (Σ latency)" : "");
  }
  md += "\n";
}

// The arms that decoded several requests at once ("spec-b4 (4)"), from the config's decoding sections.
std::vector<std::string> batched_arms(const Report& r) {
  const json& c = r.config;
  const std::string common = c.contains("decoding") ? text_at(c["decoding"], {"batch_size"}) : "";
  std::vector<std::string> out;
  if (!c.contains("arms") || !c["arms"].is_array()) return out;
  for (const auto& a : c["arms"]) {
    std::string b = a.contains("decoding") ? text_at(a["decoding"], {"batch_size"}) : "";
    if (b.empty()) b = common;
    if (!b.empty() && b != "1") out.push_back(fmt::format("{} ({})", text_at(a, {"name"}), b));
  }
  return out;
}

// Where each arm's time goes (time_split_s), per step and per decoded token, and the decoding's
// speed-up over the baseline: the part of the request that drafting can shorten.
void time_section(std::string& md, const Report& r) {
  auto total = [](const TimeSplit& t) { return t.prefill_s + t.draft_s + t.verify_s + t.other_s; };
  if (std::none_of(r.arms.begin(), r.arms.end(), [&](const auto& a) { return total(a.metrics.time_split_s) > 0; }))
    return;
  md += "## Where the time goes\n\n"
        "Σ over the requests: **prefill** = the prompt's forward and the first token (and the drafter's start), "
        "**draft** = proposing and the drafter's update after each verification, **verify** = the target's forward "
        "over the drafts and the verifier, **other** = the rest of the latency. **Decoding** = draft + verify + "
        "other: every token after a request's first. Drafting shortens the decoding only; the gains under "
        "Results also count the prefill.\n\n";
  md += "| Method | Prefill (s) | Draft (s) | Verify (s) | Other (s) | Steps | Verify (ms/step) | Draft (ms/step) | "
        "Decoding (ms/token) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& a : r.arms) {
    const auto& m = a.metrics;
    const TimeSplit& t = m.time_split_s;
    const double sum = total(t);
    auto part = [&](double s) { return fmt::format("{} ({})", num(s, 3), pct(sum > 0 ? s / sum : nan_value())); };
    auto per_step = [&](double s) { return sig3(m.steps > 0 ? 1000 * s / static_cast<double>(m.steps) : nan_value()); };
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", cell(a.name), part(t.prefill_s),
                      part(t.draft_s), part(t.verify_s), part(t.other_s), m.steps, per_step(t.verify_s),
                      per_step(t.draft_s), sig3(1000 * m.decode_s_per_token()));
  }
  for (const auto& c : r.comparisons) {
    std::string speedup = std::isfinite(c.decode_speedup) ? fmt::format("×{:.2f}", c.decode_speedup) : kNa;
    if (finite(c.decode_speedup_ci95))
      speedup += fmt::format(" [{:.2f}, {:.2f}]", c.decode_speedup_ci95.lo, c.decode_speedup_ci95.hi);
    md += fmt::format("| Decoding speed-up: {} vs {} | | | | | | | | {} |\n", cell(c.arm), cell(c.baseline), speedup);
  }
  md += "\nDecoding speed-up = the baseline's decoding ms/token ÷ the arm's, with the paired bootstrap interval "
        "of the gains above.";
  if (const auto batched = batched_arms(r); !batched.empty())
    md += fmt::format(" Batched arms ({}): a batched forward counts in every request it served, so their split and "
                      "ms/token are per request (like TPOT) and the speed-up compares per-request decoding speed, not "
                      "throughput (Results has that).",
                      fmt::join(batched, ", "));
  md += "\n\n";
}

void acceptance_sections(std::string& md, const Report& r) {
  size_t max_pos = 0;
  for (const auto& a : r.arms) max_pos = std::max(max_pos, a.metrics.acceptance_per_position.size());
  if (max_pos == 0) return;
  md += "## Acceptance per draft position\n\nShare of verification steps in which draft position k was accepted.\n\n";
  md += "| Method |";
  for (size_t k = 0; k < max_pos; ++k) md += fmt::format(" pos {} |", k + 1);
  md += "\n|---|";
  for (size_t k = 0; k < max_pos; ++k) md += "---:|";
  md += "\n";
  for (const auto& a : r.arms) {
    if (a.metrics.drafted == 0) continue;
    md += fmt::format("| {} |", cell(a.name));
    for (size_t k = 0; k < max_pos; ++k)
      md += fmt::format(" {} |", k < a.metrics.acceptance_per_position.size() ? pct(a.metrics.acceptance_per_position[k])
                                                                          : std::string(kNa));
    md += "\n";
  }
  md += "\n## Pardons and distortion\n\n";
  md += "Pardon share: accepted draft tokens that the exact rule would have rejected. "
        "Distortion: mean total-variation distance between the verifier's induced distribution and the target's.\n\n";
  md += "| Method | Acceptance rate | Pardon share | Distortion TV (mean) | Mean u | System efficiency |\n";
  md += "|---|---:|---:|---:|---:|---:|\n";
  for (const auto& a : r.arms) {
    const auto& m = a.metrics;
    if (m.drafted == 0) continue;
    md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", cell(a.name), pct(m.acceptance_rate), pct(m.pardon_share, 2),
                      num(m.distortion_tv_mean, 4), num(m.mean_uncertainty, 3), pct(m.system_efficiency));
  }
  md += "\n";
}

void uncertainty_section(std::string& md, const Report& r) {
  std::vector<const ArmReport*> drafting, pardoning;
  for (const auto& a : r.arms) {
    int64_t d = 0;
    for (const auto& b : a.metrics.uncertainty_buckets) d += b.drafted;
    if (d > 0) drafting.push_back(&a);
    if (d > 0 && a.metrics.pardoned > 0) pardoning.push_back(&a);
  }
  if (drafting.empty()) return;
  const ArmReport* ref = drafting.front();
  for (const auto* a : drafting)
    if (a->name == r.baseline) ref = a;
  md += "## Where EARS acts\n\n";
  md += fmt::format("Per decile of the target's uncertainty u = 1 − max p at the drafted position: share of "
                    "drafted tokens (arm {}), acceptance rate per arm, pardon share per arm.\n\n",
                    cell(ref->name));
  md += "| u range | Drafted share |";
  for (const auto* a : drafting) md += fmt::format(" Accept {} |", cell(a->name));
  for (const auto* a : pardoning) md += fmt::format(" Pardon {} |", cell(a->name));
  md += "\n|---|---:|";
  for (size_t i = 0; i < drafting.size() + pardoning.size(); ++i) md += "---:|";
  md += "\n";
  for (int d = 0; d < kUncertaintyDeciles; ++d) {
    bool any = false;
    for (const auto* a : drafting) any |= a->metrics.uncertainty_buckets[d].drafted > 0;
    if (!any) continue;
    md += fmt::format("| [{:.1f}, {:.1f}) | {} |", d / 10.0, (d + 1) / 10.0,
                      pct(ref->metrics.uncertainty_buckets[d].drafted_share));
    for (const auto* a : drafting) md += fmt::format(" {} |", pct(a->metrics.uncertainty_buckets[d].acceptance_rate));
    for (const auto* a : pardoning) md += fmt::format(" {} |", pct(a->metrics.uncertainty_buckets[d].pardon_share));
    md += "\n";
  }
  md += "\n";
}

void category_section(std::string& md, const Report& r) {
  std::set<std::string> categories;
  for (const auto& a : r.arms)
    for (const auto& c : a.metrics.categories) categories.insert(c.category);
  if (categories.size() <= 1) return;
  md += "## Per category\n\nThroughput per category is Σ output tokens / Σ request latency.\n\n";
  md += "| Category | Method | Requests | Accuracy | Output tok/s | τ |\n|---|---|---:|---:|---:|---:|\n";
  for (const auto& name : categories)
    for (const auto& a : r.arms)
      for (const auto& c : a.metrics.categories) {
        if (c.category != name) continue;
        const std::string acc = c.n_scored == 0 ? std::string(kNa)
                                                : pct(c.accuracy) + ci({100 * c.accuracy_ci95.lo, 100 * c.accuracy_ci95.hi}, 1, false);
        md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", cell(name), cell(a.name), c.n_requests, acc,
                          num(c.output_tokens_per_s, 1), num(c.mean_accept_length, 2));
      }
  md += "\n";
}

void sweep_and_charts(std::string& md, const Report& r) {
  const auto sweeps = sweep_series(r);
  if (!sweeps.empty()) {
    md += "## β sweep\n\n| Verifier | β | Arm | Throughput gain | Accuracy change |\n|---|---:|---|---:|---:|\n";
    for (const auto& s : sweeps)
      for (const auto& p : s.points)
        md += fmt::format("| {} | {:g} | {} | {}%{} | {} pp{} |\n", cell(s.name), p.beta, cell(p.arm),
                          signed_num(p.throughput_gain_pct, 1), ci(p.throughput_gain_ci95, 1, true),
                          signed_num(p.accuracy_delta_pp, 1), ci(p.accuracy_delta_ci95, 1, true));
    md += "\n";
  }
  if (!has_accept_length_chart(r) && !has_sweep_chart(r)) return;
  md += "## Charts\n\n";
  if (has_accept_length_chart(r)) md += fmt::format("![Tokens emitted per step]({})\n\n", kAcceptLengthChart);
  if (has_sweep_chart(r)) md += fmt::format("![Throughput gain vs accuracy change across β]({})\n\n", kSweepChart);
}

void appendix(std::string& md, const Report& r) {
  if (!r.dataset.empty()) {
    md += "## Dataset\n\n";
    key_value_table(md, r.dataset);
  }
  md += "## Environment\n\n";
  key_value_table(md, r.environment);
  if (!r.sources.empty()) {
    md += "## Sources\n\n";
    for (const auto& s : r.sources) md += fmt::format("- `{}`\n", s);
    md += "\n";
  }
}

}  // namespace

bool is_toy_dataset(const std::string& name) { return name == "synth-gsm" || name == "open-stems"; }

// "draft eagle3 in bfloat16 on kernel path amx (0.6M parameters)": environment.draft; "" without one.
std::string draft_in_words(const json& env) {
  const json d = env.value(env_key("draft"), json());
  if (text_at(d, {draft_env_key("kind")}).empty()) return "";
  const std::string count = count_text(d.value(draft_env_key("parameters"), json()));
  const std::string layout = text_at(d, {draft_env_key("config_layout")});
  return fmt::format("draft {}{} in {} on kernel path {}{}", text_at(d, {draft_env_key("kind")}),
                     layout == "speculators" ? " (speculators layout)" : "",
                     text_at(d, {draft_env_key("compute_dtype")}), text_at(d, {draft_env_key("kernel_path")}),
                     count.empty() ? "" : " (" + count + ")");
}

std::string verifier_in_words(const json& v) {
  const std::string type = text_at(v, {"type"});
  std::string words = type.empty() ? v.dump() : type;
  auto number = [&](const char* k) { return v.contains(k) && v[k].is_number() ? fmt::format("{:g}", v[k].get<double>()) : "?"; };
  if (type == "baseline") words = "baseline (exact)";
  else if (type == "ears") words = fmt::format("ears β={} ({})", number("beta"), text_at(v, {"uncertainty"}).empty() ? "max_prob" : text_at(v, {"uncertainty"}));
  else if (type == "typical") words = fmt::format("typical ε={} δ={}", number("eps"), number("delta"));
  const std::string draft = text_at(v, {"draft"});
  if (draft == "none") words += ", target only";
  else if (!draft.empty()) words += ", " + draft + " draft";
  return words;
}

bool has_accept_length_chart(const Report& report) {
  return std::any_of(report.arms.begin(), report.arms.end(), [](const ArmReport& a) { return a.metrics.drafted > 0; });
}

bool has_sweep_chart(const Report& report) {
  for (const auto& s : sweep_series(report))
    for (const auto& p : s.points)
      if (std::isfinite(p.accuracy_delta_pp) && std::isfinite(p.throughput_gain_pct)) return true;
  return false;
}

std::string render_markdown(const Report& report) {
  std::string md = "# ears-bench report\n\n";
  notices(md, report);
  configuration_block(md, report);
  md += fmt::format("Baseline: **{}**.\n\n", cell(report.baseline));
  results_table(md, report);
  details_table(md, report);
  time_section(md, report);
  acceptance_sections(md, report);
  uncertainty_section(md, report);
  category_section(md, report);
  sweep_and_charts(md, report);
  appendix(md, report);
  return md;
}

}  // namespace ears
