#include "harness/bench/common.h"
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>
#include <sstream>
#include <thread>

#include "harness/bench/probe.h"
#include "decoders/kernel_path.h"
#include "decoders/layers.h"
#include "decoders/engine.h"
#include "decoders/model.h"
#include "decoders/runtime.h"
#include "decoders/sampling.h"
#include "decoders/verify.h"
#include "harness/run/environment.h"
#include "harness/base/error.h"
#include "harness/run/model_setup.h"

namespace ears {
using namespace bench;

// ---- bench bandwidth ------------------------------------------------------------------------

int run_bench_bandwidth(const BenchCommon& c) {
  const int threads = set_threads(c.threads);
  json env = environment(threads);  // before the benchmark loads the machine
  const c10::Device device = parse_device(c.device, "--device");
  BandwidthOptions o = bandwidth_options(c, device);
  if (c.repeats > 0) o.runs = c.repeats;
  const BandwidthResult r = measure_bandwidth(o);
  json doc = bench_doc("bandwidth", env, json::array({bandwidth_json(r, "run")}));
  doc["rows"] = json::array(
      {{{"kernel", "read"}, {"gbps", r.read_gbps}, {"bytes", r.bytes}, {"best_s", r.read_s}, {"runs", r.runs},
        {"threads", r.threads}, {"convention", "bytes read / time of a load stream (see method); used for decode floors"}, {"method", r.method}},
       {{"kernel", "copy"}, {"gbps", r.copy_gbps}, {"bytes", r.bytes}, {"best_s", r.copy_s}, {"runs", r.runs},
        {"threads", r.threads}, {"convention", "(bytes read + bytes written) / time of a copy"}, {"method", r.method}}});
  std::string md = "## ears-bench bench bandwidth\n\n" + env_line(doc["env"]) + "\n" +
                   "- read = bytes read ÷ time of a load stream over the buffer, one slice per thread (what a "
                   "decode step's weight streaming needs; used for floors). copy = (read + written bytes) ÷ time "
                   "of a copy. Best of runs; GB = 1e9 bytes. Method: " + r.method + ".\n\n" +
                   markdown_table({{"kernel", "kernel", -1},
                                   {"gbps", "GB/s", 1},
                                   {"bytes", "buffer bytes", -1},
                                   {"best_s", "best s", 4},
                                   {"runs", "runs", -1},
                                   {"threads", "threads", -1}},
                                  doc["rows"]);
  emit(c, doc, md);
  return 0;
}

// ---- bench forward --------------------------------------------------------------------------

}  // namespace ears
