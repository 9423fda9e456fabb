// `ears-bench env [--json] [--model DIR]`: what would run here — threads, OpenMP wait policy,
// LibTorch and CUDA, the CPU, the kernel path (harness/run/environment.h); with --model, the dtypes,
// device and kernel path that checkpoint gets.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <memory>

#include "decoders/model.h"
#include "decoders/runtime.h"
#include "harness/base/error.h"
#include "harness/cli/commands.h"
#include "harness/run/environment.h"

namespace ears {
namespace {

using json = nlohmann::json;

struct EnvArgs {
  std::string model, dtype = "auto", device = "cpu";
};

std::string text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

int run_env(const EnvArgs& a, const CommonOptions& common) {
  set_threads(common.threads);
  json j = environment_json();
  json devices = json::array();
  for (int64_t i = 0; i < j["cuda_devices"].get<int64_t>(); ++i) devices.push_back(fmt::format("cuda:{}", i));
  j["cuda_device_names"] = devices;
  if (!a.model.empty()) {
    const c10::Device device = parse_device(a.device, "--device");
    std::optional<c10::ScalarType> dtype;
    if (a.dtype != "auto") dtype = parse_dtype(a.dtype, "--dtype");
    const CausalLM m = CausalLM::load(a.model, device, dtype);
    j["model"] = model_environment_json(m, a.dtype);
    j["model"]["path"] = a.model;
    set_path_notices(j, {dtype_name(m.dtype())}, m.device().str());
  }
  print_notices(j);
  if (common.json) {
    fmt::print("{}\n", j.dump());
    return 0;
  }
  for (const auto& [k, v] : j.items()) {
    if (k == "model") continue;
    fmt::print("{}: {}\n", k, text(v));
  }
  if (j.contains("model"))
    for (const auto& [k, v] : j["model"].items()) fmt::print("model.{}: {}\n", k, text(v));
  return 0;
}

}  // namespace

void add_env_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  auto args = std::make_shared<EnvArgs>();
  auto* sub = app.add_subcommand(
      "env", "Print what runs here: threads, OpenMP wait policy, LibTorch, CUDA, CPU and ISA, kernel path, load");
  sub->add_flag("--json", common.json, "Print one JSON object");
  sub->add_option("--threads", common.threads, threads_help());
  sub->add_option("--model", args->model, "Also load this checkpoint: its compute / weight / checkpoint dtype and kernel path");
  auto* dtype =
      sub->add_option("--dtype", args->dtype, "With --model: auto|float32|bfloat16|float16")->capture_default_str();
  auto* device = sub->add_option("--device", args->device, "With --model: cpu | cuda | cuda:N")->capture_default_str();
  sub->callback([args, dtype, device, &common, &exit_code] {
    // They say how --model's checkpoint would load; alone they would be silently ignored.
    for (const CLI::Option* o : {dtype, device})
      if (o->count() > 0 && args->model.empty())
        fail("{}: applies to the checkpoint of --model, and there is none; add --model DIR or drop {}", o->get_name(),
             o->get_name());
    exit_code = run_env(*args, common);
  });
}

}  // namespace ears
