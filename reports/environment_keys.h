// The `environment` object of run_meta.json and report.json: what ran. Its keys, each with when
// it is present and what it means, are written once here. harness/run (environment.cpp, the
// runner) writes them, report.md's configuration block reads them (through env_key, which fails
// to compile on a key not listed), docs/report-schema.md's table is generated from them, and the
// runner's tests check that a run writes these keys and no others. Torch-free.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace ears {

struct EnvironmentKey {
  std::string_view key;
  std::string_view present;  // "" = in every run's environment; else when it is
  std::string_view doc;
};

inline constexpr EnvironmentKey kEnvironmentKeys[] = {
    {"device", "", "the target's device: `cpu`, `cuda:0`, ..."},
    {"dtype", "", "the compute dtype in effect (`dtype: auto` resolved)"},
    {"dtype_requested", "", "the config's `target.dtype`"},
    {"compute_dtype", "", "the dtype the target computes in (= `dtype`)"},
    {"weight_dtype", "", "the dtype its weights are held in (the compute dtype)"},
    {"checkpoint_dtype", "", "config.json's `torch_dtype`"},
    {"kernel_path", "", "the CPU kernel path the target takes: `amx` | `avx512bf16` | `avx2` | `aten`, or the "
                        "accelerator type"},
    {"kernel_path_best", "", "the best kernel path this CPU has"},
    {"weight_pages", "", "the page size the packed CPU weights got, e.g. `2 MiB pages: 190 of 190 MiB (THP madvise)` "
                         "(decoders/weight_memory.h)"},
    {"threads", "", "LibTorch intra-op threads"},
    {"omp_wait_policy", "", "how idle OpenMP and kernel workers wait"},
    {"libtorch", "", "the LibTorch version"},
    {"cuda_build", "", "whether this LibTorch is a CUDA build"},
    {"cuda_devices", "", "CUDA devices visible"},
    {"cpu_model", "", "the CPU's model name"},
    {"cpu_isa", "", "its vector ISA, ending in `; ONEDNN_MAX_CPU_ISA=...` when that cap was set"},
    {"aten_cpu_capability", "", "the vector code ATen's own CPU ops run (`AVX2`, `AVX512`, `NO AVX`, from "
                                "`at::show_config()`; `ATEN_CPU_CAPABILITY` caps it)"},
    {"cpu_flags", "", "the CPU flags that choose a path"},
    {"logical_cpus", "", "logical CPUs"},
    {"l3_cache_bytes", "", "L3 cache size"},
    {"load_average_1m_start", "", "1-minute load average when the run started; report.md calls the run busy when it "
                                  "is at least `logical_cpus` (other work shared the CPUs), quiet otherwise"},
    {"load_average_1m_end", "when the run finished", "1-minute load average when it ended (counts the run's own threads)"},
    {"notices", "", "the slow or forced paths, one sentence each: bfloat16 emulated by LibTorch on kernel path `aten`, "
                    "a kernel path below `kernel_path_best` with the `EARS_KERNELS` / `EARS_NO_CPU_KERNELS` value that "
                    "caps it, more threads than logical CPUs; printed as `ears-bench: notice: ...` and listed among the "
                    "report's warnings"},
    {"target_parameters", "", "the target checkpoint's weight count (`ModelConfig::parameter_count`)"},
    {"draft", "when an arm drafts", "the first drafting arm's draft, named as the target's facts (the table below)"},
    {"fingerprint", "", "`{target, drafts: {path: fp}, dataset, prompts}`: FNV-1a of each checkpoint's config.json, "
                        "tokenizer files, safetensors headers and sizes and a sample of every tensor's bytes; of the "
                        "dataset file; of every request's id, prompt and gold answers. What `--resume` and `merge` "
                        "compare (harness/run/run_dir.h)"},
    {"git_commit", "", "the commit the binary was built from; `-dirty` with local changes"},
    {"hostname", "", "the machine's host name"},
    {"ears_bench_version", "", "the ears-bench version"},
    {"command_line", "", "the command as typed"},
    {"started_at", "", "local start time, ISO 8601"},
    {"resumed", "after `--resume`", "one entry per resumed session (its keys: `environment.resumed[]` below)"},
    {"forced", "after `--resume --force`", "one entry per forced session, with the differences it accepted"},
};

// environment.draft: the draft's facts (an EAGLE-3 head computes in the target's dtype on the
// target's device; `parameters` counts the weights it holds, not the target's embeddings it shares).
inline constexpr EnvironmentKey kDraftEnvironmentKeys[] = {
    {"kind", "", "`eagle3` | `model`"},
    {"path", "", "its checkpoint directory"},
    {"device", "", "its device"},
    {"compute_dtype", "", "the dtype it computes in"},
    {"weight_dtype", "", "the dtype its weights are held in"},
    {"kernel_path", "", "its CPU kernel path"},
    {"parameters", "", "the weights it holds"},
    {"config_layout", "", "`eagle3`: its config.json layout, `eagle` or `speculators` (decoders/eagle3_config.h); absent for `model`"},
    {"norm_before_residual", "", "`eagle3`: whether its layer's first residual is the normed hidden input; absent for `model`"},
    {"norm_before_fc", "", "`eagle3`: whether an RMSNorm over the concatenated aux features precedes fc; absent for `model`"},
};

// environment.resumed[]: one entry per `--resume` session, its own facts, then each of kPathFacts
// (below) as that session saw them.
inline constexpr EnvironmentKey kResumedEnvironmentKeys[] = {
    {"at", "", "when the session started, ISO 8601"},
    {"command_line", "", "the command as typed"},
    {"threads", "", "LibTorch intra-op threads"},
    {"load_average_1m_start", "", "1-minute load average when the session started"},
    {"notices", "", "the slow or forced paths it took, as `notices` above"},
};

namespace detail {
void not_an_environment_key();  // never defined: reached only while compiling a bad env_key
}

// `key`, when kEnvironmentKeys (env_key), kDraftEnvironmentKeys (draft_env_key) or
// kResumedEnvironmentKeys (resumed_env_key) lists it; else a compile error (consteval): a reader
// cannot ask for a key no writer is held to.
template <std::size_t N>
consteval const char* listed_key(const EnvironmentKey (&keys)[N], const char* key) {
  for (const EnvironmentKey& k : keys)
    if (k.key == std::string_view(key)) return key;
  detail::not_an_environment_key();
  return key;
}
consteval const char* env_key(const char* key) { return listed_key(kEnvironmentKeys, key); }
consteval const char* draft_env_key(const char* key) { return listed_key(kDraftEnvironmentKeys, key); }
consteval const char* resumed_env_key(const char* key) { return listed_key(kResumedEnvironmentKeys, key); }

// The environment facts that say which code computed a run's numbers. A resumed session (its
// "resumed" entry) or a merged part that differs in any of them from the recorded environment
// mixes two paths in one report: a warning, not a failure (shards may run on different nodes).
inline constexpr const char* kPathFacts[] = {env_key("kernel_path"), env_key("compute_dtype"), env_key("cpu_model"),
                                             env_key("cpu_isa"),     env_key("libtorch"),      env_key("git_commit")};

// The Markdown tables of docs/report-schema.md (between the markers below): the environment's
// keys, the draft's, a resumed session's (with kPathFacts).
inline constexpr const char* kEnvironmentDocBegin = "<!-- BEGIN environment keys: generated from reports/environment_keys.h -->";
inline constexpr const char* kEnvironmentDocEnd = "<!-- END environment keys -->";
std::string environment_keys_markdown();

}  // namespace ears
