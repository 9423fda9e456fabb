// Helpers shared by the reports/ tests (report_metrics_test.cpp, report_output_test.cpp).
#pragma once
#include <string>
#include <vector>

#include "reports/result.h"

namespace ears::report_test {

// A request that took `steps` steps with the given tokens emitted per step (γ = gamma).
// accepted in a step = emitted − 1 (one correction or bonus per step); bonus when all γ passed.
inline RequestResult make_result(const std::string& arm, const std::string& id, int gamma,
                                 const std::vector<int>& emitted_per_step, double latency, int repeat = 0) {
  RequestResult r;
  r.run_id = "run1";
  r.arm = arm;
  r.request_id = id;
  r.repeat = repeat;
  r.gamma = gamma;
  r.prompt_tokens = 10;
  r.latency_s = latency;
  r.ttft_s = latency / 10;
  r.accepted_per_position.assign(static_cast<size_t>(gamma), 0);
  r.accept_length_hist.assign(static_cast<size_t>(gamma) + 2, 0);
  for (int e : emitted_per_step) {
    ++r.steps;
    r.drafted += gamma;
    const int acc = e - 1;
    r.accepted += acc;
    for (int k = 0; k < acc; ++k) ++r.accepted_per_position[static_cast<size_t>(k)];
    if (acc == gamma) ++r.bonus;
    else ++r.corrections;
    ++r.accept_length_hist[static_cast<size_t>(e)];
  }
  r.output_tokens = r.emitted() + 1;
  return r;
}

}  // namespace ears::report_test
