// Hand-written SVG charts (no dependencies): valid standalone XML with axes, ticks and labels.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reports/metrics.h"

namespace ears {

// Escapes & < > " ' for XML text and attribute values.
std::string xml_escape(std::string_view s);

// Grouped bars: for every arm, the share of steps that emitted n tokens (n = 0..max), from the
// arms' accept_length_hist. Arms without steps are drawn as an empty legend entry.
std::string svg_accept_length_histogram(const std::vector<std::pair<std::string, std::vector<int64_t>>>& arms);

struct SweepPoint {
  std::string arm;
  double beta = 0;
  double accuracy_delta_pp = nan_value();
  Interval accuracy_delta_ci95;
  double throughput_gain_pct = nan_value();
  Interval throughput_gain_ci95;
};

struct SweepSeries {
  std::string name;  // verifier type, e.g. "ears"
  std::vector<SweepPoint> points;  // ordered by beta
};

// Scatter + line per series: x = accuracy delta (pp) vs the baseline, y = throughput gain (%),
// points labelled β=..., 95 % interval whiskers when known, dashed zero lines.
std::string svg_sweep_chart(const std::vector<SweepSeries>& series, const std::string& baseline);

}  // namespace ears
