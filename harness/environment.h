// What ran: the one place that collects the facts about the machine, the build and the process
// (threads, OpenMP wait policy, LibTorch, CUDA, CPU, kernel path, load) and about a loaded model
// (dtypes, device, the kernel path it takes). `ears-bench env`, bench's "env", generate --json's
// "env" and a run's report.environment are all built from these.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <string>

namespace ears {

class CausalLM;

// Set to "1" when ears-bench itself set OMP_WAIT_POLICY=PASSIVE; "exec-failed" when the
// fallback re-exec failed (the process then runs with libgomp's default wait policy).
inline constexpr const char* kPassiveWaitMarker = "EARS_BENCH_PASSIVE_WAIT";

// libgomp reads OMP_WAIT_POLICY once, in its constructor, before main(); with it unset, idle
// OpenMP workers spin (GOMP_SPINCOUNT 300000) and on a shared machine burn the CPUs the busy
// threads need. Passive waiting (spin count 0) is ears-bench's default; a user's OMP_WAIT_POLICY
// is kept. When OMP_WAIT_POLICY and the marker are unset, the process re-executes itself
// (/proc/self/exe, same argv) once with OMP_WAIT_POLICY=PASSIVE and the marker added:
//   passive_wait_preinit()    from the executable's ELF .preinit_array, which the dynamic loader
//                             runs before any shared library's constructor, so the first image
//                             never runs LibTorch's static initialisers. (setenv() there does not
//                             work: libc's own initialiser, which runs after, resets environ.)
//   default_to_passive_wait() first thing in main(): the same when the preinit hook did not run.
// Both return only when nothing is to be done or the exec failed (the marker then says so).
void passive_wait_preinit(int argc, char** argv, char** envp);
void default_to_passive_wait(char** argv);

// "PASSIVE (ears-bench default)", "ACTIVE (OMP_WAIT_POLICY)", or "unset: libgomp default (spin,
// then sleep)".
std::string omp_wait_policy();

// 1-minute load average from /proc/loadavg (-1 when unreadable).
double load_average_1m();

// Machine and process facts:
//   {threads (LibTorch intra-op threads in effect), omp_wait_policy, torch_version, cuda_build,
//    cuda_devices, cpu_model, cpu_isa, cpu_flags, logical_cpus, l3_cache_bytes, kernel_path_best,
//    kernel_path (in effect for the process), load_average_1m}
nlohmann::json environment_json();

// A loaded model's facts: {device, dtype_requested, compute_dtype, weight_dtype (weights are held
// in the compute dtype), checkpoint_dtype (config.json's torch_dtype), kernel_path (the one this
// model's dtype and device take: layers::kernel_path_name)}.
nlohmann::json model_environment_json(const CausalLM& model, const std::string& dtype_requested);

// The compute dtype a model at `path` would get for `dtype_requested` ("auto" resolves through
// auto_dtype from config.json's torch_dtype) on `device`, without loading the weights; the
// requested text itself when config.json cannot be read.
std::string resolved_dtype_name(const std::string& path, const std::string& dtype_requested, const std::string& device);

}  // namespace ears
