#include "decoders/kernel_path.h"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "harness/base/error.h"
#include "harness/base/strings.h"

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define EARS_KERNELS_X86 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ears {
namespace kernels {

namespace {

constexpr const char* kNames[] = {"aten", "avx2", "avx512bf16", "amx"};

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon));
    if (key == "model name" || key == "Hardware" || key == "cpu model") return trim(line.substr(colon + 1));
  }
  return "unknown";
}

#if defined(EARS_KERNELS_X86)
// CPUID leaf 1's family: the base family, plus the extended family when the base is 0xF.
unsigned cpuid_family() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  const unsigned base = (eax >> 8) & 0xF;
  return base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
}
#endif

CpuInfo detect() {
  CpuInfo c;
  c.model = read_cpu_model();
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* v = std::getenv(name); v && *v && c.onednn_cap.empty()) c.onednn_cap = v;
#if defined(EARS_KERNELS_X86)
  __builtin_cpu_init();
  c.avx2 = __builtin_cpu_supports("avx2");
  c.fma = __builtin_cpu_supports("fma");
  c.f16c = __builtin_cpu_supports("f16c");
  c.avx512f = __builtin_cpu_supports("avx512f");
  c.avx512bw = __builtin_cpu_supports("avx512bw");
  c.avx512vl = __builtin_cpu_supports("avx512vl");
  c.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  c.amx_tile = __builtin_cpu_supports("amx-tile");
  c.amx_bf16 = __builtin_cpu_supports("amx-bf16");
  c.prefetch_t1_to_l2 = __builtin_cpu_is("intel") || c.avx512f;
  c.lone_row_one_block = __builtin_cpu_is("amd") && cpuid_family() >= 0x1A;
  if (c.amx_tile && c.amx_bf16) {
    // Linux gives a process the AMX tile state only on request (ARCH_REQ_XCOMP_PERM, XTILEDATA).
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    c.amx_granted = syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }
#endif
  return c;
}

Path detect_best(const CpuInfo& c) {
  const bool avx512 = c.avx512f && c.avx512bw && c.avx512vl && c.avx512bf16;
  if (avx512 && c.amx_tile && c.amx_bf16 && c.amx_granted) return Path::amx;
  if (avx512) return Path::avx512bf16;
  if (c.avx2 && c.fma) return Path::avx2;
  return Path::aten;
}

Path initial_path() {
  const Path best = best_path();
  const PathCap cap = path_cap();
  if (cap.name.empty()) return best;
  if (cap.name == "EARS_NO_CPU_KERNELS") return Path::aten;
  const Path p = parse_path(cap.value, "EARS_KERNELS");
  if (static_cast<int>(p) > static_cast<int>(best))
    fail("EARS_KERNELS={}: this CPU supports at most '{}' ({}); unset it or pick a smaller path", cap.value,
         path_name(best), cpu_info().model);
  return p;
}

std::atomic<int>& current() {
  static std::atomic<int> p{static_cast<int>(initial_path())};
  return p;
}

}  // namespace

PathCap path_cap() {
  if (const char* off = std::getenv("EARS_NO_CPU_KERNELS"); off && *off && std::strcmp(off, "0") != 0)
    return {"EARS_NO_CPU_KERNELS", off};
  if (const char* want = std::getenv("EARS_KERNELS"); want && *want) return {"EARS_KERNELS", want};
  return {};
}

const char* path_name(Path p) { return kNames[static_cast<int>(p)]; }

Path parse_path(const std::string& name, const std::string& origin) {
  for (int i = 0; i < 4; ++i)
    if (name == kNames[i]) return static_cast<Path>(i);
  fail("{}: unknown kernel path '{}'; use aten, avx2, avx512bf16 or amx", origin, name);
}

// oneDNN's ISA names below AVX-512 start with SSE or AVX but not AVX512 / AVX10 (AVX2_VNNI, ...);
// oneDNN matches them case-insensitively.
bool CpuInfo::onednn_below_avx512() const {
  std::string isa = onednn_cap;
  for (char& ch : isa) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const auto starts = [&](const char* p) { return isa.rfind(p, 0) == 0; };
  return starts("SSE") || (starts("AVX") && !starts("AVX512") && !starts("AVX10"));
}

std::string CpuInfo::isa() const {
  std::string s;
  const std::pair<bool, const char*> flags[] = {{avx2, "avx2"},         {fma, "fma"},           {f16c, "f16c"},
                                                {avx512f, "avx512f"},   {avx512bw, "avx512bw"}, {avx512vl, "avx512vl"},
                                                {avx512bf16, "avx512bf16"}, {amx_tile, "amx-tile"}, {amx_bf16, "amx-bf16"}};
  for (const auto& [on, name] : flags)
    if (on) s += (s.empty() ? "" : " ") + std::string(name);
  return s.empty() ? "none" : s;
}

const CpuInfo& cpu_info() {
  static const CpuInfo info = detect();
  return info;
}

Path best_path() {
  static const Path best = detect_best(cpu_info());
  return best;
}

Path path() { return static_cast<Path>(current().load()); }

void set_path(Path p) {
  if (static_cast<int>(p) > static_cast<int>(best_path()))
    fail("kernel path '{}' needs instructions this CPU ({}) lacks; it supports at most '{}'", path_name(p),
         cpu_info().model, path_name(best_path()));
  current().store(static_cast<int>(p));
}

bool native_bf16() {
  const CpuInfo& c = cpu_info();
  return !c.onednn_below_avx512() && (c.avx512bf16 || (c.amx_bf16 && c.amx_granted));
}

}  // namespace kernels
}  // namespace ears
