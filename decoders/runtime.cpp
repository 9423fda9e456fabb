#include "decoders/runtime.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/api/include/torch/version.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "decoders/kernel_path.h"
#include "decoders/param_ranges.h"
#include "harness/base/error.h"

namespace ears {

c10::Device parse_device(const std::string& name, const std::string& what) {
  c10::optional<c10::Device> parsed;
  try {  // c10 refuses an index past its range (cuda:99999999999)
    if (ranges::is_device_name(name)) parsed = c10::Device(name);
  } catch (const std::exception&) {
  }
  if (!parsed) fail("{}: unknown device '{}'; {}", what, name, ranges::kDeviceFix);
  const c10::Device device = *parsed;
  if (device.is_cpu()) return device;
  if (!at::hasCUDA())
    fail("{}: device '{}' but this ears-bench was built against a LibTorch without CUDA (or no GPU is "
         "visible); use cpu, or build against a CUDA LibTorch (docs/cuda.md)",
         what, name);
  const int64_t n = static_cast<int64_t>(at::getNumGPUs());
  if (device.has_index() && device.index() >= n)
    fail("{}: device '{}' but {} CUDA device(s) are visible (cuda:0..cuda:{})", what, name, n, n - 1);
  return device;
}

int set_threads(int requested, const std::string& what) {
  at::set_num_threads(resolve_threads(requested, what));
  return at::get_num_threads();
}

void apply_onednn_cap() {
  if (kernels::cpu_info().onednn_below_avx512()) at::globalContext().setUserEnabledMkldnn(false);
}

void synchronize(c10::Device device) {
  if (device.is_cpu()) return;
  // Waits for the current stream of `device` (the one our kernels are queued on).
  c10::impl::getDeviceGuardImpl(device.type())->getStream(device).synchronize();
}

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#define EARS_DEVICE_EVENT_TIMING 1
struct DeviceTimer::Events {
  c10::Event begin, end;
  explicit Events(c10::DeviceType t)
      : begin(t, c10::EventFlag::BACKEND_DEFAULT), end(t, c10::EventFlag::BACKEND_DEFAULT) {}
};
#else
struct DeviceTimer::Events {};
#endif

DeviceTimer::DeviceTimer(c10::Device device) : device_(device) {
#ifdef EARS_DEVICE_EVENT_TIMING
  if (!device.is_cpu()) events_ = std::make_unique<Events>(device.type());
#endif
}

DeviceTimer::~DeviceTimer() = default;  // here, where Events is complete

const char* DeviceTimer::method() const {
  return events_ ? "device timing events on the current stream" : "host clock, device synchronised at both ends";
}

void DeviceTimer::start() {
#ifdef EARS_DEVICE_EVENT_TIMING
  if (events_) {
    events_->begin.record(c10::impl::getDeviceGuardImpl(device_.type())->getStream(device_));
    return;
  }
#endif
  synchronize(device_);
  t0_ = now_s();
}

double DeviceTimer::stop_ms() {
#ifdef EARS_DEVICE_EVENT_TIMING
  if (events_) {
    events_->end.record(c10::impl::getDeviceGuardImpl(device_.type())->getStream(device_));
    events_->end.synchronize();
    return events_->begin.elapsedTime(events_->end);
  }
#endif
  synchronize(device_);
  return (now_s() - t0_) * 1e3;
}

static std::atomic<int64_t> g_host_syncs{0};

at::Tensor to_host(const at::Tensor& t) {
  ++g_host_syncs;  // counted on CPU too, so tests on this machine see what a GPU run would
  if (t.device().is_cpu()) return t;
  // On an accelerator: into page-locked host memory (ATen's caching host allocator), so the copy
  // is one DMA transfer rather than a staged one; then wait for it on the tensor's stream.
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
  host.copy_(t, /*non_blocking=*/true);
  synchronize(t.device());
  return host;
}

int64_t host_sync_count() { return g_host_syncs.load(); }

std::string torch_version() { return TORCH_VERSION; }

}  // namespace ears
