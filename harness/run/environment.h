// What ran: the one place that collects the facts about the machine, the build and the process
// (threads, OpenMP wait policy, LibTorch, CUDA, CPU, kernel path, load) and about a loaded model
// (dtypes, device, the kernel path it takes). `ears-bench env`, bench's "env", generate --json's
// "env" and a run's report.environment are all built from these.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <string>

namespace ears {

class CausalLM;

// Set to "1" when ears-bench itself set GOMP_SPINCOUNT; "exec-failed" when the fallback re-exec
// failed (the process then runs with libgomp's default).
inline constexpr const char* kOmpWaitMarker = "EARS_BENCH_OMP_WAIT";
// ears-bench's default GOMP_SPINCOUNT: idle OpenMP workers spin ~10 us (libgomp counts ~100000
// spins per ms), then sleep. Decode forks ~100 parallel regions per token, a few to a few hundred
// microseconds apart. Measured (Zen 4, 2 vCPUs, 100M bf16 Qwen3, avx2 path, 1-token decode):
//   spin count        quiet     one core busy (`yes`)
//   0 (PASSIVE)       10.1 ms   11.3 ms   (every fork waits for a sleeping worker to wake)
//   1000              8.2 ms    14.5 ms
//   10000             8.6 ms    35.8 ms
//   300000 (default)  8.6 ms    ~80 ms    (workers spin through the busy core's time slices)
inline constexpr const char* kSpinCount = "1000";

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

// "spin 1000 then sleep (ears-bench default: GOMP_SPINCOUNT=1000)", "OMP_WAIT_POLICY=ACTIVE (set
// by the user)", or "unset: libgomp default (spin 300000, then sleep)".
std::string omp_wait_policy();

// glibc malloc tuned for a process that allocates the same activations every forward: blocks up
// to 32 MiB come from the heap (not a fresh mmap each time, whose pages the kernel zeroes on
// first touch: clear_page was 4-10% of a 100M decode's CPU time, more at 6 or 16 rows) and freed
// memory stays in the process (trim above 1 GiB only). Weights (larger) are still mapped.
void tune_malloc();

// 1-minute load average from /proc/loadavg (-1 when unreadable).
double load_average_1m();

// Machine and process facts:
//   {threads (LibTorch intra-op threads in effect), omp_wait_policy, torch_version, cuda_build,
//    cuda_devices, cpu_model, cpu_isa, cpu_flags, logical_cpus, l3_cache_bytes, kernel_path_best,
//    kernel_path (in effect for the process), load_average_1m}
nlohmann::json environment_json();

// A loaded model's facts: {device, dtype_requested, compute_dtype, weight_dtype (weights are held
// in the compute dtype), checkpoint_dtype (config.json's torch_dtype), kernel_path (the one this
// model's dtype and device take: layers::kernel_path_name), weight_pages (the packed weights' page
// size: decoders/weight_memory.h), target_parameters (ModelConfig::parameter_count)}.
nlohmann::json model_environment_json(const CausalLM& model, const std::string& dtype_requested);

// The compute dtype a model at `path` would get for `dtype_requested` ("auto" resolves through
// auto_dtype from config.json's torch_dtype) on `device`, without loading the weights; the
// requested text itself when config.json cannot be read.
std::string resolved_dtype_name(const std::string& path, const std::string& dtype_requested, const std::string& device);

// Facts about this process for a run's report.environment.
namespace runner {
std::string git_commit();  // `git rev-parse --short HEAD` of the source dir, else "unknown"
std::string host_name();
std::string command_line();  // /proc/self/cmdline, arguments joined by spaces (quoted when needed)
std::string now_iso();       // local time, "YYYY-mm-ddTHH:MM:SS+zzzz"
}  // namespace runner

}  // namespace ears
