// Runs a test once per CPU kernel path (decoders/kernel_path.h) this machine supports: each
// parameterized test switches the process to its path for its duration (models loaded inside
// take that path's weight layout) and skips the paths the CPU lacks.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "decoders/kernel_path.h"

namespace ears::test {

class KernelPathGuard {
 public:
  explicit KernelPathGuard(kernels::Path p) : saved_(kernels::path()) { kernels::set_path(p); }
  ~KernelPathGuard() { kernels::set_path(saved_); }
  KernelPathGuard(const KernelPathGuard&) = delete;
  KernelPathGuard& operator=(const KernelPathGuard&) = delete;

 private:
  kernels::Path saved_;
};

inline bool supported(kernels::Path p) { return static_cast<int>(p) <= static_cast<int>(kernels::best_path()); }

inline std::string path_param_name(const ::testing::TestParamInfo<kernels::Path>& info) {
  return kernels::path_name(info.param);
}

#define EARS_SKIP_UNSUPPORTED_PATH(p)                                                                 \
  if (!::ears::test::supported(p))                                                                    \
  GTEST_SKIP() << "this CPU (" << ::ears::kernels::cpu_info().model << ") has no '"                  \
               << ::ears::kernels::path_name(p) << "' kernels (best: "                                \
               << ::ears::kernels::path_name(::ears::kernels::best_path()) << ")"

#define EARS_KERNEL_PATHS                                                                             \
  ::testing::Values(::ears::kernels::Path::aten, ::ears::kernels::Path::avx2,                         \
                    ::ears::kernels::Path::avx512bf16, ::ears::kernels::Path::amx)

}  // namespace ears::test
