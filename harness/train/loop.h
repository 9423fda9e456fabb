// The training loop shared by the target and the EAGLE-3 head: warmup + cosine LR, gradient
// clipping, AdamW on fp32 master weights, loss logging and the wall-time budget; and the
// train_log.json every trained checkpoint directory carries.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness/train/checkpoint_writer.h"
#include "harness/train/corpus.h"

namespace ears {

struct TrainSchedule {
  int64_t steps = 1000, batch = 16, seq_len = 256, warmup = 50;
  double lr = 3e-3, min_lr_ratio = 0.1, weight_decay = 0.1, clip = 1.0;
  double minutes = 0;  // > 0: wall-time budget; the step count is cut to fit after 5 timed steps
  uint64_t seed = 0;
  int64_t log_every = 10;
  int threads = 0;
  std::string device = "cpu";
  // Compute dtype: the fp32 master weights are cast to it for every forward/backward (mixed
  // precision); bfloat16 uses the CPU's bf16 matmul units (AMX/AVX512-BF16 via oneDNN), about
  // 10x faster than fp32 here. Optimizer state and updates stay fp32.
  std::string dtype = "bfloat16";
};

struct TrainReport {
  int64_t steps_done = 0, steps_planned = 0;
  double seconds = 0, step_seconds = 0;       // wall time of the loop, mean time per step
  std::vector<std::pair<int64_t, double>> loss_curve;  // (step, mean loss over the log window)
  std::map<std::string, double> metrics;      // eval results (accuracy, tau, ...)
};

// log(line) when a log is given.
inline void emit(const LogFn& log, const std::string& line) {
  if (log) log(line);
}

// Mixed precision: the fp32 master weights cast to the compute dtype (autograd-tracked casts).
ParamMap cast_params(const ParamMap& p, c10::ScalarType dt);
// The tensors in name order, and their weight-decay flags (2-D weights only, not norms).
std::vector<at::Tensor> values_of(const ParamMap& p);
std::vector<bool> decay_flags(const ParamMap& p);
// Number of scalars in all tensors.
int64_t numel_total(const ParamMap& p);
// Continued training: every tensor of p overwritten by the same-named, same-shaped tensor of the
// checkpoint in dir (fails naming the tensor when one is missing or shaped otherwise); logs it.
void load_init_weights(ParamMap& p, const std::filesystem::path& dir, c10::Device device, const LogFn& log);

// The loop: for each step, loss = step_loss(step), backward, clip, AdamW step at the scheduled
// LR, zero grads. Logs every log_every steps (plus the first and last) the mean loss of the
// window, with extra_log() appended. With a time budget, the planned step count is refitted
// after 5 steps and every 25 (until 80% of the plan, never beyond schedule.steps).
TrainReport run_loop(const TrainSchedule& schedule, std::vector<at::Tensor> params, std::vector<bool> decay,
                     const std::function<at::Tensor(int64_t)>& step_loss, const LogFn& log,
                     const std::function<std::string()>& extra_log = {});

// train_log.json: kind, options, steps, timing, metrics, loss curve, torch version; for continued
// training (init: the checkpoint it started from), that checkpoint's own train_log.json as
// "init_train_log", so the log keeps every stage that made the weights.
void write_train_log(const std::filesystem::path& file, const std::string& kind, const nlohmann::ordered_json& options,
                     const TrainReport& report, const std::filesystem::path& init = {});
nlohmann::ordered_json schedule_json(const TrainSchedule& s);
nlohmann::ordered_json corpus_json(const CorpusOptions& c, const std::string& natural_source);

}  // namespace ears
