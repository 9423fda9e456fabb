// What ran: the one place that collects the facts about the machine, the build and the process
// (threads, OpenMP wait policy, LibTorch, CUDA, CPU, kernel path, load) and about a loaded model
// (dtypes, device, the kernel path it takes). `ears-bench env`, bench's "env", generate --json's
// "env" and a run's report.environment are all built from these.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace ears {

class CausalLM;
struct LoadedModels;
struct ModelSetup;

// Set to "1" when ears-bench itself set GOMP_SPINCOUNT; "exec-failed" when the fallback re-exec
// failed (the process then runs with libgomp's default).
inline constexpr const char* kOmpWaitMarker = "EARS_BENCH_OMP_WAIT";
// ears-bench's default GOMP_SPINCOUNT: idle OpenMP workers spin ~30 us (a `pause` is ~10 ns on
// both CPUs below: 1000 spins 10 us), then sleep; the CPU kernels' own workers follow the same count
// (decoders/work_pool.h). Decode forks 5 parallel regions per layer, a
// few to a few tens of microseconds apart (the serial work between two linears), and a sleeping
// worker costs the next fork 35-65 us to wake on these VMs. 2-thread 1-token decode, bf16:
//   spin count        Zen 4, 100M, avx2        Xeon (AMX), 100M, amx    Xeon, 503M (> L3), amx
//                     quiet   one core busy    quiet   one core busy    quiet
//   0 (PASSIVE)       10.1    11.3 ms          12.8 ms                  -
//   1000              8.2     14.5             11.5    18.3             65.5 ms
//   3000              -       -                7.9     20.2             43.8
//   5000              -       -                7.8     22.9             43.5
//   10000             8.6     35.8             -       28.8             -
//   300000 (libgomp)  8.6     ~80              -       -                -
// ("one core busy": `yes` holding a core, --threads 2 forced; the default --threads 0 takes the
// CPUs idle at start-up, 1 there, which no spin count touches.)
inline constexpr const char* kSpinCount = "3000";

// libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT once, in its constructor, before main(). A
// user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept. When both and the marker are unset, the
// process re-executes itself (/proc/self/exe, same argv) once with GOMP_SPINCOUNT=kSpinCount and
// the marker added:
//   omp_wait_preinit()   from the executable's ELF .preinit_array, which the dynamic loader runs
//                        before any shared library's constructor, so the first image never runs
//                        LibTorch's static initialisers. (setenv() there does not work: libc's
//                        own initialiser, which runs after, resets environ.)
//   default_omp_wait()   first thing in main(): the same when the preinit hook did not run.
// Both return only when nothing is to be done or the exec failed (the marker then says so).
void omp_wait_preinit(int argc, char** argv, char** envp);
void default_omp_wait(char** argv);

// "spin 3000 then sleep (ears-bench default: GOMP_SPINCOUNT=3000)", "OMP_WAIT_POLICY=ACTIVE (set
// by the user)", or "unset: libgomp default (spin 300000, then sleep)".
std::string omp_wait_policy();

// glibc malloc tuned for a process that allocates the same activations every forward: blocks up
// to 32 MiB come from the heap (not a fresh mmap each time, whose pages the kernel zeroes on
// first touch: clear_page was 4-10% of a 100M decode's CPU time, more at 6 or 16 rows) and freed
// memory stays in the process (trim above 1 GiB only). Weights (larger) are still mapped.
void tune_malloc();

// 1-minute load average from /proc/loadavg (-1 when unreadable).
double load_average_1m();

// The slow or forced paths this process takes, one sentence each (never silent: every output
// records them as "notices", stderr shows them as `ears-bench: notice: ...`, a run's report lists
// them among its warnings):
//   a model computing in bfloat16 on the CPU on kernel path aten without native bf16
//     (kernels::native_bf16()): LibTorch emulates it ("bfloat16" == compute_dtype, device "cpu");
//   a kernel path below kernel_path_best: capped by EARS_KERNELS / EARS_NO_CPU_KERNELS (or switched);
//   more LibTorch threads than logical CPUs.
// `compute_dtype` "" when no model is loaded.
// bf16_emulated(device): bfloat16 on `device` would be emulated (the first notice's case).
bool bf16_emulated(const std::string& device);
std::vector<std::string> path_notices(int threads, const std::string& compute_dtype = "",
                                      const std::string& device = "cpu");
// env["notices"] = path_notices for env["threads"] and each of `compute_dtypes` on `device`, each
// notice once.
void set_path_notices(nlohmann::json& env, const std::vector<std::string>& compute_dtypes, const std::string& device);
// env["notices"] as the lines every command shows them: `ears-bench: notice: ...`, one each.
std::vector<std::string> notice_lines(const nlohmann::json& env);
// Prints notice_lines(env) to stderr.
void print_notices(const nlohmann::json& env);

// The vector code ATen's own CPU ops dispatch to ("AVX2", "AVX512", "NO AVX"; ATEN_CPU_CAPABILITY
// caps it), from at::show_config()'s "CPU capability usage:" line (LibTorch 1.13 does not export
// get_cpu_capability); "unknown" without that line.
std::string aten_cpu_capability();

// Machine and process facts:
//   {threads (LibTorch intra-op threads in effect), omp_wait_policy, libtorch (its version),
//    cuda_build, cuda_devices, cpu_model, cpu_isa, cpu_flags, logical_cpus, l3_cache_bytes,
//    kernel_path_best, kernel_path (in effect for the process), aten_cpu_capability,
//    load_average_1m_start (now), notices (path_notices without a model)}
// Every output uses these names; where the command reads the load again at its end, that reading
// is load_average_1m_end.
nlohmann::json environment_json();

// A loaded model's facts: {device, dtype_requested, compute_dtype, weight_dtype (weights are held
// in the compute dtype), checkpoint_dtype (config.json's torch_dtype), kernel_path (the one this
// model's dtype and device take: layers::kernel_path_name), weight_pages (the packed weights' page
// size: decoders/weight_memory.h), target_parameters (ModelConfig::parameter_count)}.
nlohmann::json model_environment_json(const CausalLM& model, const std::string& dtype_requested);

// The draft's facts, named as the target's ({} for draft kind none): {kind, path, device,
// compute_dtype, weight_dtype, kernel_path, parameters}. An EAGLE-3 head computes in the target's
// dtype on the target's device; a draft model (kind model) in the dtype it loaded with.
nlohmann::json draft_environment_json(const LoadedModels& models, const ModelSetup& setup);

// The compute dtype a model at `path` would get for `dtype_requested` ("auto" resolves through
// auto_dtype from config.json's torch_dtype) on `device`, without loading the weights; the
// requested text itself when config.json cannot be read.
std::string resolved_dtype_name(const std::string& path, const std::string& dtype_requested, const std::string& device);

// Facts about this process for a run's report.environment.
namespace runner {
std::string git_commit();  // the build's `git describe --always --dirty` (scripts/git_stamp.cmake), else "unknown"
std::string host_name();
std::string command_line();  // /proc/self/cmdline, arguments joined by spaces (quoted when needed)
std::string now_iso();       // local time, "YYYY-mm-ddTHH:MM:SS+zzzz"
double unix_time_s();        // s since the Unix epoch (system clock): results' start_s
}  // namespace runner

}  // namespace ears
