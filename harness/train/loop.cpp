#include "harness/train/loop.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/zeros.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "decoders/aten_operators.h"
#include "decoders/runtime.h"
#include "decoders/safetensors.h"
#include "harness/base/files.h"
#include "harness/train/optimizer.h"

namespace ears {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

ParamMap cast_params(const ParamMap& p, c10::ScalarType dt) {
  if (dt == at::kFloat) return p;
  ParamMap out;
  for (const auto& [n, t] : p) out.emplace(n, t.to(dt));
  return out;
}

std::vector<at::Tensor> values_of(const ParamMap& p) {
  std::vector<at::Tensor> v;
  for (const auto& [n, t] : p) v.push_back(t);
  return v;
}

std::vector<bool> decay_flags(const ParamMap& p) {
  std::vector<bool> d;
  for (const auto& [n, t] : p) d.push_back(t.dim() >= 2);
  return d;
}

int64_t numel_total(const ParamMap& p) {
  int64_t n = 0;
  for (const auto& [name, t] : p) n += t.numel();
  return n;
}

void load_init_weights(ParamMap& p, const std::filesystem::path& dir, c10::Device device, const LogFn& log) {
  const Checkpoint ck = Checkpoint::open(dir);
  at::NoGradGuard no_grad;
  for (auto& [name, t] : p) {
    // The options describe another shape than --init's model: the options are wrong, not its file.
    if (ck.contains(name) && ck.shape(name) != t.sizes().vec())
      fail("--init {}: tensor '{}' is [{}] but these options build [{}]; pass the shape options (--hidden, --layers, "
           "--heads, ...) the --init model was trained with (its config.json)",
           dir.string(), name, fmt::join(ck.shape(name), ", "), fmt::join(t.sizes().vec(), ", "));
    t.copy_(ck.load(name, device, at::kFloat, t.sizes().vec()));
  }
  emit(log, fmt::format("init: weights from {} (continued training)", dir.string()));
}

namespace {

std::string json_curve(const std::vector<std::pair<int64_t, double>>& curve) {
  ojson a = ojson::array();
  for (const auto& [s, l] : curve) a.push_back({s, std::round(l * 10000) / 10000});
  return a.dump();
}

}  // namespace

void write_train_log(const fs::path& file, const std::string& kind, const ojson& options, const TrainReport& r,
                     const fs::path& init) {
  ojson init_log;  // read before the write: --out may be the --init directory
  if (!init.empty() && fs::exists(init / "train_log.json"))
    init_log = ojson::parse(read_file(init / "train_log.json", "the --init checkpoint's train log"), nullptr, false);
  ojson j;
  j["kind"] = kind;
  j["options"] = options;
  j["steps_planned"] = r.steps_planned;
  j["steps_done"] = r.steps_done;
  j["seconds"] = std::round(r.seconds * 10) / 10;
  j["step_seconds"] = std::round(r.step_seconds * 10000) / 10000;
  j["metrics"] = r.metrics;
  j["loss_curve"] = ojson::parse(json_curve(r.loss_curve));
  j["torch_version"] = torch_version();
  if (!init_log.is_null() && !init_log.is_discarded()) j["init_train_log"] = std::move(init_log);
  write_file_atomic(file, j.dump(2) + "\n");
}

ojson schedule_json(const TrainSchedule& s) {
  return {{"steps", s.steps}, {"batch", s.batch}, {"seq_len", s.seq_len}, {"warmup", s.warmup},
          {"lr", s.lr}, {"min_lr_ratio", s.min_lr_ratio}, {"weight_decay", s.weight_decay}, {"clip", s.clip},
          {"minutes", s.minutes}, {"seed", s.seed}, {"threads", s.threads}, {"dtype", s.dtype}};
}

ojson corpus_json(const CorpusOptions& c, const std::string& natural_source) {
  return {{"synth_seed", c.seed}, {"synth_n", c.synth_n}, {"natural_source", natural_source}};
}

TrainReport run_loop(const TrainSchedule& s, std::vector<at::Tensor> params, std::vector<bool> decay,
                     const std::function<at::Tensor(int64_t)>& step_loss, const LogFn& log,
                     const std::function<std::string()>& extra_log) {
  AdamWOptions ao;
  ao.weight_decay = s.weight_decay;
  AdamW opt(params, std::move(decay), ao);
  TrainReport r;
  r.steps_planned = s.steps;
  const double t0 = now_s();
  at::Tensor window_sum = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
  int64_t window_n = 0;
  for (int64_t step = 0; step < r.steps_planned; ++step) {
    const double lr = cosine_lr(step, r.steps_planned, s.warmup, s.lr, s.min_lr_ratio);
    at::Tensor loss = step_loss(step);
    loss.backward();
    clip_grad_norm(params, s.clip);
    opt.step(lr);
    opt.zero_grad();
    window_sum = window_sum + loss.detach().to(at::kFloat).cpu();
    ++window_n;
    r.steps_done = step + 1;
    const double elapsed = now_s() - t0;
    if (s.minutes > 0 && (r.steps_done == 5 || r.steps_done % 25 == 0) &&
        static_cast<double>(r.steps_done) < 0.8 * static_cast<double>(r.steps_planned)) {
      // Fit the schedule into the wall-time budget (3% margin) at the mean step time so far;
      // re-checked every 25 steps until 80% of the plan, never beyond --steps.
      const double per = elapsed / static_cast<double>(r.steps_done);
      const int64_t fit = std::clamp<int64_t>(
          r.steps_done + static_cast<int64_t>((s.minutes * 60.0 - elapsed) * 0.97 / per), r.steps_done + 1, s.steps);
      if (fit != r.steps_planned && std::abs(static_cast<double>(fit - r.steps_planned)) > 0.02 * r.steps_planned) {
        r.steps_planned = fit;
        emit(log, fmt::format("time budget {:.1f} min at {:.3f} s/step: planning {} steps", s.minutes, per, r.steps_planned));
      }
    }
    const bool last = r.steps_done == r.steps_planned;
    if (r.steps_done % s.log_every == 0 || last || r.steps_done == 1) {
      const double mean = window_sum.item<double>() / static_cast<double>(window_n);
      r.loss_curve.emplace_back(r.steps_done, mean);
      emit(log, fmt::format("step {:>6}/{}  loss {:.4f}  lr {:.2e}  {:.3f} s/step  {:.0f} s{}", r.steps_done,
                            r.steps_planned, mean, lr, elapsed / static_cast<double>(r.steps_done), elapsed,
                            extra_log ? extra_log() : std::string()));
      window_sum = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
      window_n = 0;
    }
    if (s.minutes > 0 && elapsed > s.minutes * 60.0 && !last) {
      emit(log, fmt::format("wall-time budget of {:.1f} min reached after {} steps; stopping", s.minutes, r.steps_done));
      break;
    }
  }
  r.seconds = now_s() - t0;
  r.step_seconds = r.steps_done ? r.seconds / static_cast<double>(r.steps_done) : 0;
  return r;
}

}  // namespace ears
