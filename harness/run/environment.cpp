#include "harness/run/environment.h"

#include <ATen/detail/CUDAHooksInterface.h>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <string_view>
#include <fstream>
#include <sstream>

#include "decoders/kernel_path.h"
#include "decoders/weight_memory.h"
#include "decoders/layers.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "decoders/work_pool.h"
#include "ears_git_commit.h"  // generated: scripts/git_stamp.cmake
#include "harness/run/model_setup.h"
#include "harness/base/strings.h"

namespace ears {
using json = nlohmann::json;

namespace {

bool wait_unset(char** envp) {
  for (char** e = envp; e != nullptr && *e != nullptr; ++e)
    if (std::strncmp(*e, "OMP_WAIT_POLICY=", 16) == 0 || std::strncmp(*e, "GOMP_SPINCOUNT=", 15) == 0 ||
        std::strncmp(*e, "EARS_BENCH_OMP_WAIT=", 20) == 0)
      return false;
  return true;
}

bool user_set_wait() { return std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr; }

}  // namespace

// Runs before the C++ runtime and libc's initialiser: no allocation, no setenv, C calls only.
void omp_wait_preinit(int, char** argv, char** envp) {
  static_assert(std::string_view(kOmpWaitMarker) == "EARS_BENCH_OMP_WAIT");
  static_assert(std::string_view(kSpinCount) == "3000");
  if (envp == nullptr || !wait_unset(envp)) return;
  std::size_t n = 0;
  while (envp[n] != nullptr) ++n;
  if (n > 4096) return;  // main()'s fallback handles it
  static char* env[4096 + 3];
  std::memcpy(env, envp, n * sizeof(char*));
  static char spin[] = "GOMP_SPINCOUNT=3000", marker[] = "EARS_BENCH_OMP_WAIT=1";
  env[n] = spin;
  env[n + 1] = marker;
  env[n + 2] = nullptr;
  ::execve("/proc/self/exe", argv, env);  // on failure main() tries again, then runs on
}

void default_omp_wait(char** argv) {
  if (user_set_wait() || std::getenv(kOmpWaitMarker) != nullptr) return;
  ::setenv("GOMP_SPINCOUNT", kSpinCount, 1);
  ::setenv(kOmpWaitMarker, "1", 1);  // stops a loop, should GOMP_SPINCOUNT get lost
  ::execv("/proc/self/exe", argv);
  // No /proc (or exec refused): run on with libgomp's default, and say so.
  ::unsetenv("GOMP_SPINCOUNT");
  ::setenv(kOmpWaitMarker, "exec-failed", 1);
}

namespace {
// Where OpenMP's wait policy comes from: ears-bench's default, the user's variables, or libgomp's.
std::string omp_wait_source(const char* policy, const char* spin) {
  const char* marker = std::getenv(kOmpWaitMarker);
  const bool ours = marker != nullptr && std::string(marker) == "1" && policy == nullptr && spin != nullptr &&
                    std::string(spin) == kSpinCount;
  if (ours) return fmt::format("spin {} then sleep (ears-bench default: GOMP_SPINCOUNT={})", kSpinCount, kSpinCount);
  std::string user;
  if (policy != nullptr) user = fmt::format("OMP_WAIT_POLICY={}", policy);
  if (spin != nullptr) user += fmt::format("{}GOMP_SPINCOUNT={}", user.empty() ? "" : " ", spin);
  if (!user.empty()) return user + " (set by the user)";
  if (marker != nullptr && std::string(marker) == "exec-failed")
    return "unset: libgomp default (spin 300000, then sleep); the re-exec with GOMP_SPINCOUNT failed";
  return "unset: libgomp default (spin 300000, then sleep)";
}
}  // namespace

std::string omp_wait_policy() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  // The CPU kernels' workers follow the same spin, and stay awake through a decode unless it is 0
  // (decoders/work_pool.h, Warm); a spin forever needs no mention.
  const int64_t pauses = work_pool::spin_pauses(policy, spin);
  const bool warm = pauses > 0 && pauses != work_pool::kSpinForever;
  return omp_wait_source(policy, spin) +
         (warm ? "; CPU-kernel workers stay awake through each decode, yielding their CPU" : "");
}

void tune_malloc() {
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

double load_average_1m() {
  double load = -1;
  std::ifstream("/proc/loadavg") >> load;
  return load;
}

namespace {

// The /proc/cpuinfo flags that matter for the kernels and LibTorch's own bf16 / fp16 ops.
std::vector<std::string> cpu_flags() {
  std::vector<std::string> flags;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    const auto c = line.find(':');
    std::istringstream f(c == std::string::npos ? std::string() : line.substr(c + 1));
    std::string flag;
    while (f >> flag)
      if (flag == "avx2" || flag == "avx512f" || flag == "avx512_bf16" || flag == "amx_bf16" || flag == "avx512_fp16")
        flags.push_back(flag);
    break;
  }
  return flags;
}

// Last-level cache: a model smaller than the L3 can beat the DRAM floor.
int64_t l3_cache_bytes() {
  int64_t bytes = 0;
  std::ifstream l3("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string size;
  if (l3 >> size && !size.empty()) {
    const char unit = size.back();
    bytes = std::atoll(size.c_str()) * (unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1);
  }
  return bytes;
}

std::string emulated_bf16_notice() {
  const std::string cap = kernels::cpu_info().onednn_cap;
  return fmt::format("bfloat16 on the CPU on kernel path aten, and this CPU has no native bf16 (AVX512_BF16 or "
                     "AMX{}): LibTorch emulates it, several times slower than float32; use dtype auto or float32",
                     cap.empty() ? "" : ", or oneDNN is capped by ONEDNN_MAX_CPU_ISA=" + cap);
}

std::string kernel_cap_notice() {
  const kernels::PathCap cap = kernels::path_cap();
  const char* path = kernels::path_name(kernels::path());
  const char* best = kernels::path_name(kernels::best_path());
  if (cap.name.empty()) return fmt::format("kernel path {}, below this CPU's best {} (switched by the command)", path, best);
  return fmt::format("kernel path {}, below this CPU's best {}: {}={} caps it; unset {} for the fastest path", path,
                     best, cap.name, cap.value, cap.name);
}

}  // namespace

bool bf16_emulated(const std::string& device) {
  return device == "cpu" && kernels::path() == kernels::Path::aten && !kernels::native_bf16();
}

std::vector<std::string> path_notices(int threads, const std::string& compute_dtype, const std::string& device) {
  std::vector<std::string> out;
  if (compute_dtype == "bfloat16" && bf16_emulated(device)) out.push_back(emulated_bf16_notice());
  if (kernels::path() != kernels::best_path()) out.push_back(kernel_cap_notice());
  if (threads > logical_cpus())
    out.push_back(fmt::format("{} LibTorch threads on {} logical CPUs: the workers wait on each other; use at most {} "
                              "(or 0: the idle ones)",
                              threads, logical_cpus(), logical_cpus()));
  return out;
}

void set_path_notices(json& env, const std::vector<std::string>& compute_dtypes, const std::string& device) {
  std::vector<std::string> all;
  const int threads = env.value("threads", at::get_num_threads());
  for (const std::string& dtype : compute_dtypes.empty() ? std::vector<std::string>{""} : compute_dtypes)
    for (std::string& n : path_notices(threads, dtype, device))
      if (std::find(all.begin(), all.end(), n) == all.end()) all.push_back(std::move(n));
  env["notices"] = all;
}

std::vector<std::string> notice_lines(const json& env) {
  std::vector<std::string> lines;
  for (const auto& n : env.value("notices", json::array())) lines.push_back("ears-bench: notice: " + n.get<std::string>());
  return lines;
}

void print_notices(const json& env) {
  for (const std::string& line : notice_lines(env)) fmt::print(stderr, "{}\n", line);
}

std::string aten_cpu_capability() {
  static const std::string capability = [] {
    const std::string config = at::show_config();
    const std::string key = "CPU capability usage:";
    const auto at = config.find(key);
    if (at == std::string::npos) return std::string("unknown");
    const auto from = at + key.size();
    return trim(config.substr(from, config.find('\n', from) - from));
  }();
  return capability;
}

json environment_json() {
  const kernels::CpuInfo& cpu = kernels::cpu_info();
  // A CUDA build registers the real CUDA hooks (hasCUDART), with or without a visible device;
  // at::hasCUDA() also needs a driver and a device.
  const bool cuda_build = at::detail::getCUDAHooks().hasCUDART();
  return {{"threads", at::get_num_threads()},
          {"omp_wait_policy", omp_wait_policy()},
          {"libtorch", torch_version()},
          {"cuda_build", cuda_build},
          {"cuda_devices", at::hasCUDA() ? static_cast<int64_t>(at::getNumGPUs()) : 0},
          {"cpu_model", cpu.model},
          {"cpu_isa", cpu.onednn_cap.empty() ? cpu.isa() : cpu.isa() + "; ONEDNN_MAX_CPU_ISA=" + cpu.onednn_cap},
          {"cpu_flags", cpu_flags()},
          {"logical_cpus", logical_cpus()},
          {"l3_cache_bytes", l3_cache_bytes()},
          {"kernel_path_best", kernels::path_name(kernels::best_path())},
          {"kernel_path", kernels::path_name(kernels::path())},
          {"aten_cpu_capability", aten_cpu_capability()},
          {"load_average_1m_start", load_average_1m()},
          {"notices", path_notices(at::get_num_threads())}};
}

json model_environment_json(const CausalLM& model, const std::string& dtype_requested) {
  return {{"device", model.device().str()},
          {"dtype_requested", dtype_requested},
          {"compute_dtype", dtype_name(model.dtype())},
          {"weight_dtype", dtype_name(model.dtype())},
          {"checkpoint_dtype", dtype_name(model.config().torch_dtype)},
          {"kernel_path", layers::kernel_path_name(model.device(), model.dtype())},
          {"weight_pages", weight_memory::pages_summary()},
          {"target_parameters", model.config().parameter_count()}};
}

json draft_environment_json(const LoadedModels& m, const ModelSetup& setup) {
  if (!m.drafter) return json::object();
  const CausalLM* lm = m.draft_model ? m.draft_model.get() : m.target.get();  // kind model (or a self-draft)
  const c10::Device device = m.head ? m.head->device() : lm->device();
  const c10::ScalarType dtype = m.head ? m.head->dtype() : lm->dtype();
  json d = {{"kind", setup.draft_kind},
            {"path", setup.draft_path},
            {"device", device.str()},
            {"compute_dtype", dtype_name(dtype)},
            {"weight_dtype", dtype_name(dtype)},
            {"kernel_path", layers::kernel_path_name(device, dtype)},
            {"parameters", m.head ? m.head->parameter_count() : lm->config().parameter_count()}};
  if (m.head) {
    d["config_layout"] = layout_name(m.head->layout());
    d["norm_before_residual"] = m.head->norm_before_residual();
    d["norm_before_fc"] = m.head->norm_before_fc();
  }
  return d;
}

std::string resolved_dtype_name(const std::string& path, const std::string& dtype_requested, const std::string& device) {
  try {
    if (dtype_requested != "auto" && !dtype_requested.empty())
      return dtype_name(parse_dtype(dtype_requested, "dtype"));
    return dtype_name(auto_dtype(ModelConfig::load(path).torch_dtype, parse_device(device)));
  } catch (const std::exception&) {
    return dtype_requested;
  }
}

// ---- the run's process facts ----

namespace runner {

std::string git_commit() { return EARS_GIT_COMMIT; }

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  std::size_t start = 0;
  while (start < all.size()) {
    auto end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    std::string arg = all.substr(start, end - start);
    if (!out.empty()) out += ' ';
    if (arg.empty() || arg.find_first_of(" \t\"'$\\") != std::string::npos) {
      std::string q = "'";
      for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += q + "'";
    } else {
      out += arg;
    }
    start = end + 1;
  }
  return out;
}

double unix_time_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string now_iso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
  return buf;
}

}  // namespace runner
}  // namespace ears
