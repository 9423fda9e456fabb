// Profiler ranges around the engine's phases (prefill / draft / verify / accept), for Nsight
// Systems on a GPU. Compiled in with the CMake option EARS_NVTX=ON (uses the CUDA Toolkit's
// header-only NVTX3; nothing else of CUDA); otherwise every range is a no-op.
#pragma once
#if defined(EARS_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

namespace ears {

class TraceRange {
 public:
  explicit TraceRange(const char* name) {
#if defined(EARS_NVTX)
    nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  ~TraceRange() {
#if defined(EARS_NVTX)
    nvtxRangePop();
#endif
  }
  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;
};

}  // namespace ears
