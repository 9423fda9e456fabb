// Runtime plumbing shared by every tensor command: device names (dtype names: decoders/model.h), LibTorch threads,
// timing with the device synchronised at the measured boundaries, and the host-sync counter
// that keeps the decoding loop honest (at most one device->host sync per speculative step).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/ScalarType.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "decoders/threads.h"
#include "decoders/work_pool.h"

namespace ears {

// "cpu", "cuda", "cuda:1" -> device; ears::Error naming `what` (e.g. "--device") otherwise.
c10::Device parse_device(const std::string& name, const std::string& what = "device");

// Sets LibTorch's intra-op thread count: resolve_threads(requested, what) (decoders/threads.h:
// 0 = auto: the idle logical CPUs; outside [0, 4 x logical CPUs] an ears::Error naming `what`). Returns the
// count in effect.
int set_threads(int requested, const std::string& what = "--threads");

// Makes LibTorch's CPU backend agree with a oneDNN instruction-set cap below AVX-512
// (kernels::CpuInfo::onednn_below_avx512()): LibTorch 1.13 sends bf16 matmul to oneDNN when CPUID
// shows AVX-512, whatever the cap, and capped oneDNN refuses it ("could not create a primitive
// descriptor iterator"; 2.15 copes). Under such a cap oneDNN is switched off for the process, on
// both toolchains, so bf16 matmul takes LibTorch's own GEMM, as on a CPU without AVX-512. No-op
// without a cap. Call before the first tensor op: the CLI's main() and every LibTorch test binary
// do (tests/libtorch_setup.cpp).
void apply_onednn_cap();

// Blocks until all work queued on `device` is done (no-op on CPU).
void synchronize(c10::Device device);

// Times a region of device work. On an accelerator with LibTorch >= 2.5 (c10::Event with
// elapsedTime): timing events recorded on the current stream, read after one synchronisation
// (CUDA events on CUDA). Otherwise (CPU, LibTorch 1.x): the host clock, with the device
// synchronised at both ends. method() says which.
class DeviceTimer {
 public:
  explicit DeviceTimer(c10::Device device);
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;
  void start();
  double stop_ms();  // synchronises; milliseconds since start()
  const char* method() const;

 private:
  struct Events;
  c10::Device device_;
  std::unique_ptr<Events> events_;  // null when timing on the host clock
  double t0_ = 0;
};

// How every decode runs — a request's (Engine::generate) and bench's timed forwards alike: the CPU
// kernels' workers stay awake between its forks (work_pool::Warm), and LibTorch runs in inference
// mode, so its ops skip autograd's dispatch, view tracking and version counters (on the bundled
// pair's T = 0 decode ~0.06 ms a token of ~0.5; docs/performance-log.md, thirty-seventh session).
// Tensors made inside are inference tensors: none may be changed in place outside a scope (the
// engine keeps none across requests). Nestable.
class DecodeScope {
 public:
  DecodeScope() = default;
  DecodeScope(const DecodeScope&) = delete;
  DecodeScope& operator=(const DecodeScope&) = delete;

 private:
  work_pool::Warm warm_;
  c10::InferenceMode inference_;
};

// Seconds since an arbitrary epoch (steady clock).
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The only way decoding code copies a tensor to the host: counts the syncs.
at::Tensor to_host(const at::Tensor& t);
int64_t host_sync_count();

// LibTorch version string, e.g. "1.13.0".
std::string torch_version();

}  // namespace ears
