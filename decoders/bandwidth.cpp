#include "decoders/bandwidth.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>

#include "decoders/runtime.h"
#include "harness/error.h"

namespace ears {

BandwidthResult measure_bandwidth(const BandwidthOptions& opt) {
  if (opt.bytes < (int64_t{1} << 20)) fail("bandwidth probe: buffer of {} bytes is too small (need >= 1 MiB)", opt.bytes);
  if (opt.runs < 1) fail("bandwidth probe: runs must be >= 1 (got {})", opt.runs);
  const int64_t n = opt.bytes / 4;
  const auto options = at::TensorOptions().dtype(at::kFloat).device(opt.device);
  // fill_ touches every page so first-touch faults stay out of the timed passes.
  at::Tensor src = at::empty({n}, options).fill_(1.0);
  at::Tensor dst = at::empty({n}, options).fill_(0.0);

  auto best_of = [&](auto&& kernel) {
    kernel();  // warm-up
    synchronize(opt.device);
    double best = std::numeric_limits<double>::infinity();
    for (int r = 0; r < opt.runs; ++r) {
      const double t0 = now_s();
      kernel();
      synchronize(opt.device);
      best = std::min(best, now_s() - t0);
    }
    return best;
  };
  at::Tensor sink;
  BandwidthResult res;
  res.bytes = n * 4;
  res.runs = opt.runs;
  res.threads = at::get_num_threads();
  res.read_s = best_of([&] { sink = src.sum(); });
  res.copy_s = best_of([&] { dst.copy_(src); });
  res.read_gbps = static_cast<double>(res.bytes) / res.read_s / 1e9;
  res.copy_gbps = 2.0 * static_cast<double>(res.bytes) / res.copy_s / 1e9;
  return res;
}

}  // namespace ears
