// `ears-bench bench ...`: micro- and end-to-end benchmarks that pair every timing with a memory
// bandwidth reading taken in the same process (bandwidth on shared VMs drifts by ~2x).
//
//   bench bandwidth  read (at::sum) and copy bandwidth (harness/bench/probe.h)
//   bench forward    target decode-step time at several batch sizes for 1 and γ+1 tokens over a
//                    KV cache holding a 128-token context, next to the floor
//                    (weight bytes + KV bytes read) ÷ read bandwidth
//   bench linear     one linear layer (the kernel path's packed weight, larger than the last-level
//                    cache) at 1, γ+1 and batch-sized row counts, next to the weight-streaming floor
//   bench verify     cost of process_logits + verify (baseline / ears / typical) over a real
//                    Qwen3-sized vocabulary, relative to a target forward of the same step
//   bench e2e        Engine tokens/s, target-only vs speculative, with the time split
//
// Every command prints Markdown (header + table) or, with --json, one JSON object:
//   {"command", "env": {threads, omp_wait_policy, libtorch, cuda_build, cuda_devices, cpu_model,
//            cpu_isa, cpu_flags, logical_cpus, l3_cache_bytes, kernel_path_best, kernel_path,
//            load_average_1m_start, load_average_1m_end, [model: {device, dtype_requested,
//            compute_dtype, weight_dtype, checkpoint_dtype, kernel_path, weight_pages} (e2e)]}
//            (harness/run/environment.h)
//    "bandwidth": [{when, bytes, runs, threads, read_gbps, copy_gbps}], "floor_read_gbps",
//    "conventions": {...}, "rows": [...], ...}
// The row fields of each command are listed with its Args struct below.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ears {

struct ModelConfig;

struct BenchCommon {
  int threads = 0;       // 0 = the logical CPUs idle at start-up
  bool json = false;
  int repeats = 0;       // 0 = the command's default
  bool quick = false;    // tiny sizes and repeats (tests)
  std::string device = "cpu";
};

// Dimensions of a generated Qwen3 checkpoint with random weights. The defaults give 100.1M
// parameters including the (tied) embeddings.
struct GeneratedModelSpec {
  int64_t hidden = 768, layers = 12, heads = 12, kv_heads = 4, head_dim = 64, intermediate = 2048;
  int64_t vocab = 32000;
  bool tie_embeddings = true;
};

// The config.json write_random_qwen3 writes for `spec`.
ModelConfig generated_config(const GeneratedModelSpec& spec);

// Writes <dir>/config.json + <dir>/model.safetensors (bf16, N(0, 0.02²) matrices, norms ~1) of a
// Qwen3ForCausalLM with `spec`'s dimensions. Deterministic in `seed`. Creates `dir`.
void write_random_qwen3(const GeneratedModelSpec& spec, const std::filesystem::path& dir, uint64_t seed);

// bench bandwidth — rows: [{kernel: "read"|"copy", gbps, bytes, best_s, runs, threads, convention}]
int run_bench_bandwidth(const BenchCommon& common);

// bench forward — rows: [{model, path (the kernel path: amx | avx512bf16 | avx2 | aten | cuda), params, streamed_params, dtype, batch, tokens_per_step, ms_per_step, floor_ms,
// ratio, tokens_per_s, weight_bytes, kv_bytes, context, macs, weight_pages (decoders/weight_memory.h)}]
// (ms_per_step: median of `repeats`;
// tokens_per_s = batch·tokens_per_step ÷ step time); "summary": [{model, dtype,
// verify_over_decode_b1 (γ+1-token step ÷ 1-token step at batch 1), max_batch,
// throughput_max_batch_over_b1 (1-token tokens/s at the largest batch ÷ at batch 1)}]
struct ForwardBenchArgs {
  std::string model;                 // empty: a generated Qwen3 of `params` parameters
  // Parameters of the generated model (layers of GeneratedModelSpec{} added or removed); 0 = the
  // 100M default, or more when its bf16 weights would not be twice the last-level cache (sysfs).
  int64_t params = 0;
  std::vector<std::string> dtypes;   // default: bfloat16 and float32 (common.h default_dtypes)
  std::vector<int> batches;          // default: 1, 4, 16
  int gamma = 5;
  int context = 128;
  // On a CPU kernel path: also load the model on the aten path and time both side by side (rows
  // get path "aten"; markdown adds the per-shape speedups).
  bool compare_kernels = false;
  // CPU: also run every shape's forwards with each phase clocked (ForwardPhases, decoders/model.h)
  // and add a table of mean ms per phase (rows in JSON "phases").
  bool phases = false;
};
int run_bench_forward(const ForwardBenchArgs& args, const BenchCommon& common);

// bench linear — rows: [{path, dtype, in, out, rows, ms, gmac_per_s, weight_gbps, weight_bytes,
// floor_ms (weight bytes ÷ read bandwidth), ratio (ms ÷ floor_ms), over_min_rows (ms ÷ ms at the
// smallest row count of that dtype)}]
struct LinearBenchArgs {
  int64_t in = 1024;                 // input features (Qwen3-0.6B's hidden size)
  int64_t out = 0;                   // 0: bf16 weight >= 2 x the last-level cache (>= 192 MiB)
  std::vector<int> rows;             // default: 1, 6, 16
  std::vector<std::string> dtypes;   // default: bfloat16 and float32 (common.h default_dtypes)
};
int run_bench_linear(const LinearBenchArgs& args, const BenchCommon& common);

// bench verify — rows: [{verifier, batch, gamma, vocab, process_ms, verify_ms, total_ms,
// total_over_baseline, verify_over_baseline, forward_ms, share_of_forward, distortion_ms}]
// process_ms: process_logits of [B, γ+1, V] float32 logits (same for every verifier);
// verify_ms: verify(); total = process + verify; forward_ms: a γ+1-token forward of the
// generated Qwen3 (GeneratedModelSpec with vocab = `vocab`) at that batch; share_of_forward =
// total ÷ forward; distortion_ms: the engine's optional TV-distance metric (not part of decoding).
struct VerifyBenchArgs {
  int64_t vocab = 151936;            // Qwen3
  std::vector<int> batches;          // default: 1, 32
  int gamma = 5;
  double temperature = 0.9;
  double beta = 0.1;
  std::string dtype = "auto";        // of the reference forward (auto: its bf16 checkpoint's auto_dtype)
  std::string target = "100m";       // reference forward: "100m" (GeneratedModelSpec{}) | "qwen3-0.6b"
};
int run_bench_verify(const VerifyBenchArgs& args, const BenchCommon& common);

// bench e2e — rows: [{mode, verifier, temperature, new_tokens, steps, mean_accept_length,
// tokens_per_s, speedup, prefill_ms, draft_ms, verify_ms, other_ms, host_syncs,
// syncs_per_step, latency_ms}] (the median-latency run of `repeats` per arm; the arms take
// turns run by run in rotating order, so speedup is a side-by-side ratio)
struct E2eBenchArgs {
  std::string target, draft, draft_kind = "eagle3", dtype = "auto", prompt_ids;
  std::vector<double> temperatures;  // default: 0, 0.9
  int gamma = 5;
  int64_t max_new_tokens = 64;
  double beta = 0.1;
  uint64_t seed = 0;
  bool distortion = false;           // also compute the engine's TV-distortion metric
};
int run_bench_e2e(const E2eBenchArgs& args, const BenchCommon& common);

}  // namespace ears
