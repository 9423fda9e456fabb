// `ears-bench bench <bandwidth|forward|linear|verify|e2e>`: performance benchmarks (harness/bench/bench.h).
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "harness/bench/bench.h"
#include "harness/cli/args.h"
#include "harness/cli/commands.h"

namespace ears {
namespace {

// The options every bench subcommand shares. --json and --threads land in CommonOptions.
void add_common(CLI::App* sub, CommonOptions& common, BenchCommon& bc) {
  sub->add_flag("--json", common.json, "Print one JSON object instead of Markdown");
  sub->add_option("--threads", common.threads, threads_help());
  auto* repeats = sub->add_option("--repeats", bc.repeats, "Timed repeats per measurement (0 = the command's default)");
  in_range(repeats->capture_default_str(), 0);
  sub->add_flag("--quick", bc.quick, "Tiny sizes and repeats (smoke test; numbers are not meaningful)");
  sub->add_option("--device", bc.device, "cpu | cuda | cuda:N")->capture_default_str();
}

// --dtype for the benches that time several dtypes (forward, linear).
void add_dtype_list(CLI::App* sub, std::vector<std::string>& dtypes) {
  sub->add_option("--dtype", dtypes,
                  "bfloat16 | float32 | float16 (repeatable; default: bfloat16 and float32, float32 alone where "
                  "bfloat16 would be emulated: kernel path aten on a CPU without native bf16, said in a notice)");
}

BenchCommon merged(const CommonOptions& common, BenchCommon bc) {
  bc.threads = common.threads;
  bc.json = common.json;
  return bc;
}

// `ears-bench bench bandwidth`
void add_bandwidth_command(CLI::App* bench, CommonOptions& common, const std::shared_ptr<BenchCommon>& bc,
                           int& exit_code) {
  auto* sub = bench->add_subcommand("bandwidth", "Memory bandwidth: read (load stream) and copy, in GB/s");
  add_common(sub, common, *bc);
  sub->callback([bc, &common, &exit_code] { exit_code = run_bench_bandwidth(merged(common, *bc)); });
}

// `ears-bench bench forward`
void add_forward_command(CLI::App* bench, CommonOptions& common, const std::shared_ptr<BenchCommon>& bc,
                         int& exit_code) {
  auto args = std::make_shared<ForwardBenchArgs>();
  auto* sub = bench->add_subcommand(
      "forward", "Target decode-step time (1 and γ+1 tokens, 128-token context) vs the bandwidth floor");
  add_common(sub, common, *bc);
  sub->add_option("--model", args->model, "Checkpoint directory (default: a generated Qwen3, see --params)");
  // Past int64 it wrapped; the memory check (harness/bench/common.h) is the real ceiling.
  in_range(sub->add_option("--params", args->params,
                           "Parameters of the generated Qwen3 (e.g. 300000000; default 0: 100M, or enough that its "
                           "bf16 weights are twice the last-level cache)"),
           0, 1e15);
  add_dtype_list(sub, args->dtypes);
  sub->add_option("--batch", args->batches, "Batch sizes, e.g. 1,4,16")->delimiter(',');
  // Only a forward's width here, not a draft: not capped at the config's gamma (docs/performance-log.md times a
  // 78-token prefill as --gamma 77 --context 1); the model's context length bounds it (forward.cpp).
  in_range(sub->add_option("--gamma", args->gamma, "Draft tokens per step (a verify forward scores γ+1)")
               ->capture_default_str(),
           1);
  sub->add_option("--context", args->context, "Positions already in the KV cache (up to the model's context length)")
      ->capture_default_str();
  sub->add_flag("--compare-kernels", args->compare_kernels,
                "On a CPU kernel path: also time the plain-ATen path, side by side");
  sub->add_flag("--phases", args->phases,
                "CPU: also clock each phase of every shape's forwards (norms, projections, attention, MLP, "
                "lm_head, rest) and print mean ms per phase");
  sub->callback([args, bc, &common, &exit_code] { exit_code = run_bench_forward(*args, merged(common, *bc)); });
}

// `ears-bench bench linear`
void add_linear_command(CLI::App* bench, CommonOptions& common, const std::shared_ptr<BenchCommon>& bc,
                        int& exit_code) {
  auto args = std::make_shared<LinearBenchArgs>();
  auto* sub = bench->add_subcommand(
      "linear", "One linear layer (weight > last-level cache) at 1, γ+1 and batch-sized row counts vs the floor");
  add_common(sub, common, *bc);
  in_range(sub->add_option("--in", args->in, "Input features")->capture_default_str(), 1, 1e12);
  in_range(sub->add_option("--out", args->out, "Output features (0: the bf16 weight is twice the last-level cache)")
               ->capture_default_str(),
           0, 1e12);
  sub->add_option("--rows", args->rows, "Row counts, e.g. 1,6,16")->delimiter(',');
  add_dtype_list(sub, args->dtypes);
  sub->callback([args, bc, &common, &exit_code] { exit_code = run_bench_linear(*args, merged(common, *bc)); });
}

// `ears-bench bench verify`
void add_verify_command(CLI::App* bench, CommonOptions& common, const std::shared_ptr<BenchCommon>& bc,
                        int& exit_code) {
  auto args = std::make_shared<VerifyBenchArgs>();
  auto* sub = bench->add_subcommand(
      "verify", "Verifier cost (process_logits + verify) per step over a Qwen3-sized vocabulary");
  add_common(sub, common, *bc);
  sub->add_option("--vocab", args->vocab, "Vocabulary size (ignored with --quick)")->capture_default_str();
  sub->add_option("--batch", args->batches, "Batch sizes, e.g. 1,32")->delimiter(',');
  gamma_range(sub->add_option("--gamma", args->gamma, "Draft tokens per step")->capture_default_str());
  param_range(sub->add_option("--temperature", args->temperature, "Sampling temperature for process_logits")
                  ->capture_default_str(),
              ranges::kTemperature);
  param_range(sub->add_option("--beta", args->beta, "EARS beta")->capture_default_str(), ranges::kBeta);
  sub->add_option("--dtype", args->dtype, "dtype of the reference target forward: auto | bfloat16 | float32 | float16")
      ->capture_default_str();
  sub->add_option("--target", args->target,
                  "Reference target forward (random weights): 100m (hidden 768, 12 layers) or qwen3-0.6b "
                  "(Qwen3-0.6B's dimensions)")
      ->check(CLI::IsMember({"100m", "qwen3-0.6b"}))
      ->capture_default_str();
  sub->callback([args, bc, &common, &exit_code] { exit_code = run_bench_verify(*args, merged(common, *bc)); });
}

// `ears-bench bench e2e`
void add_e2e_command(CLI::App* bench, CommonOptions& common, const std::shared_ptr<BenchCommon>& bc, int& exit_code) {
  auto args = std::make_shared<E2eBenchArgs>();
  auto* sub = bench->add_subcommand("e2e", "Engine tokens/s: target-only vs speculative (baseline, ears, typical)");
  add_common(sub, common, *bc);
  sub->add_option("--target", args->target, "Target checkpoint directory")->required();
  sub->add_option("--draft", args->draft, "Draft checkpoint directory")->required();
  // Not none: the speculative rows would time the target alone under their name.
  one_of(sub->add_option("--draft-kind", args->draft_kind, "eagle3 | model")->capture_default_str(), {"eagle3", "model"});
  sub->add_option("--dtype", args->dtype, "auto | bfloat16 | float32 | float16")->capture_default_str();
  sub->add_option("--prompt-ids", args->prompt_ids,
                  "Prompt token ids (default: synth-gsm test problem 0 as a chat prompt, or 32 pseudo-random ids "
                  "without a tokenizer)")
      ->check(CLI::Validator(
          [](std::string& text) {  // given but blank ran the default prompt without a word
            if (text.find_first_not_of(" \t\n") == std::string::npos)
              fail("--prompt-ids: no id given; pass ids, e.g. \"1 2 3\", or leave the option out for the default prompt");
            return std::string();
          },
          ""));
  param_range(sub->add_option("--temperature", args->temperatures, "Temperatures, e.g. 0,0.9 (default: 0 and 0.9)")
                  ->delimiter(','),
              ranges::kTemperature);
  gamma_range(sub->add_option("--gamma", args->gamma, "Draft tokens per step")->capture_default_str());
  sub->add_option("--max-new-tokens", args->max_new_tokens)->capture_default_str();
  param_range(sub->add_option("--beta", args->beta, "EARS beta")->capture_default_str(), ranges::kBeta);
  seed_range(sub->add_option("--seed", args->seed, "Run seed")->capture_default_str());
  sub->add_flag("--distortion", args->distortion, "Also compute the engine's TV-distortion metric each step");
  sub->callback([args, bc, &common, &exit_code] { exit_code = run_bench_e2e(*args, merged(common, *bc)); });
}

}  // namespace

void add_bench_commands(CLI::App& app, CommonOptions& common, int& exit_code) {
  auto* bench = app.add_subcommand("bench", "Performance benchmarks: bandwidth, forward, linear, verify, e2e");
  bench->require_subcommand(1);
  auto bc = std::make_shared<BenchCommon>();
  add_bandwidth_command(bench, common, bc, exit_code);
  add_forward_command(bench, common, bc, exit_code);
  add_linear_command(bench, common, bc, exit_code);
  add_verify_command(bench, common, bc, exit_code);
  add_e2e_command(bench, common, bc, exit_code);
}

}  // namespace ears
