#include "reports/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ears {

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
const char* colour(size_t i) { return kPalette[i % std::size(kPalette)]; }

struct Frame {
  double width = 760, height = 440;
  double left = 70, right = 180, top = 44, bottom = 64;  // right margin holds the legend
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;                 // data ranges

  double plot_w() const { return width - left - right; }
  double plot_h() const { return height - top - bottom; }
  double px(double x) const { return left + (x - x0) / (x1 - x0) * plot_w(); }
  double py(double y) const { return top + (1 - (y - y0) / (y1 - y0)) * plot_h(); }
};

// "Nice" tick step (1, 2, 5 × 10^k) giving about `target` intervals over [lo, hi].
double nice_step(double lo, double hi, int target = 5) {
  const double raw = (hi - lo) / target;
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

// Expands [lo, hi] outward to multiples of the nice step.
void nice_range(double& lo, double& hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi - lo < 1e-12) lo -= 1, hi += 1;
  const double step = nice_step(lo, hi);
  lo = std::floor(lo / step + 1e-9) * step;
  hi = std::ceil(hi / step - 1e-9) * step;
}

std::string tick_label(double v, double step) {
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  if (std::abs(v) < step * 1e-6) v = 0;
  return fmt::format("{:.{}f}", v, decimals);
}

std::string header(const Frame& f, const std::string& title) {
  std::string s = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n"
      "<text x=\"{2:.1f}\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">{3}</text>\n",
      f.width, f.height, f.left + f.plot_w() / 2, xml_escape(title));
  return s;
}

// Y axis with ticks and grid lines over [y0, y1]; an X axis line at the bottom; axis labels.
std::string y_axis(const Frame& f, const std::string& label) {
  std::string s;
  const double step = nice_step(f.y0, f.y1);
  for (double v = f.y0; v <= f.y1 + step * 1e-6; v += step) {
    const double y = f.py(v);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e0e0e0\"/>\n", f.left, y,
                     f.left + f.plot_w(), y);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#000000\"/>\n", f.left - 5,
                     y, f.left, y);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", f.left - 8, y + 4,
                     tick_label(v, step));
  }
  s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#000000\"/>\n", f.left,
                   f.top, f.top + f.plot_h());
  s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#000000\"/>\n", f.left,
                   f.top + f.plot_h(), f.left + f.plot_w());
  s += fmt::format(
      "<text x=\"18\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0:.1f})\">{1}</text>\n",
      f.top + f.plot_h() / 2, xml_escape(label));
  return s;
}

std::string x_label(const Frame& f, const std::string& label) {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", f.left + f.plot_w() / 2,
                     f.height - 18, xml_escape(label));
}

std::string legend_entry(const Frame& f, size_t i, const std::string& name) {
  const double x = f.left + f.plot_w() + 16, y = f.top + 8 + 20 * static_cast<double>(i);
  return fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n"
      "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
      x, y - 10, colour(i), x + 18, y, xml_escape(name));
}

}  // namespace

std::string svg_accept_length_histogram(const std::vector<std::pair<std::string, std::vector<int64_t>>>& arms) {
  Frame f;
  size_t n_bins = 1;
  std::vector<std::vector<double>> shares;
  double max_share = 0;
  for (const auto& [name, hist] : arms) n_bins = std::max(n_bins, hist.size());
  for (const auto& [name, hist] : arms) {
    const double total = static_cast<double>(std::accumulate(hist.begin(), hist.end(), int64_t{0}));
    std::vector<double> s(n_bins, 0.0);
    for (size_t k = 0; k < hist.size(); ++k) s[k] = total > 0 ? static_cast<double>(hist[k]) / total : 0.0;
    for (double x : s) max_share = std::max(max_share, x);
    shares.push_back(std::move(s));
  }
  f.y0 = 0;
  f.y1 = max_share > 0 ? max_share : 1;
  double lo = 0;
  nice_range(lo, f.y1);
  f.x0 = 0;
  f.x1 = static_cast<double>(n_bins);

  std::string s = header(f, "Tokens emitted per verification step");
  s += y_axis(f, "share of steps");
  s += x_label(f, "tokens emitted per step (accepted drafts + correction/bonus)");
  const double group = f.plot_w() / static_cast<double>(n_bins);
  const double bar = group * 0.8 / static_cast<double>(std::max<size_t>(arms.size(), 1));
  for (size_t k = 0; k < n_bins; ++k) {
    const double gx = f.left + group * static_cast<double>(k);
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#000000\"/>\n",
                     gx + group / 2, f.top + f.plot_h(), f.top + f.plot_h() + 5);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", gx + group / 2,
                     f.top + f.plot_h() + 18, k);
    for (size_t a = 0; a < shares.size(); ++a) {
      const double v = shares[a][k];
      if (v <= 0) continue;
      const double x = gx + group * 0.1 + bar * static_cast<double>(a);
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
          "<title>{}: {} tokens, {:.1f}% of steps</title></rect>\n",
          x, f.py(v), bar, f.py(0) - f.py(v), colour(a), xml_escape(arms[a].first), k, 100 * v);
    }
  }
  for (size_t a = 0; a < arms.size(); ++a) s += legend_entry(f, a, arms[a].first);
  s += "</svg>\n";
  return s;
}

namespace {

// Data ranges covering every point and interval of the series, and the baseline's (0, 0).
Frame sweep_frame(const std::vector<SweepSeries>& series) {
  Frame f;
  double xlo = 0, xhi = 0, ylo = 0, yhi = 0;
  auto widen = [](double& lo, double& hi, double v) {
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  };
  for (const auto& se : series)
    for (const auto& p : se.points) {
      widen(xlo, xhi, p.accuracy_delta_pp);
      widen(xlo, xhi, p.accuracy_delta_ci95.lo);
      widen(xlo, xhi, p.accuracy_delta_ci95.hi);
      widen(ylo, yhi, p.throughput_gain_pct);
      widen(ylo, yhi, p.throughput_gain_ci95.lo);
      widen(ylo, yhi, p.throughput_gain_ci95.hi);
    }
  nice_range(xlo, xhi);
  nice_range(ylo, yhi);
  f.x0 = xlo, f.x1 = xhi, f.y0 = ylo, f.y1 = yhi;
  return f;
}

// Numeric x ticks and their labels.
std::string x_ticks(const Frame& f) {
  std::string s;
  const double step = nice_step(f.x0, f.x1);
  for (double v = f.x0; v <= f.x1 + step * 1e-6; v += step) {
    const double x = f.px(v);
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#000000\"/>\n", x,
                     f.top + f.plot_h(), f.top + f.plot_h() + 5);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x,
                     f.top + f.plot_h() + 18, tick_label(v, step));
  }
  return s;
}

// One series: its line, and per point the two interval whiskers, a dot with a tooltip and a β label.
std::string sweep_series(const Frame& f, const SweepSeries& se, size_t i) {
  auto plotted = [](const SweepPoint& p) {
    return std::isfinite(p.accuracy_delta_pp) && std::isfinite(p.throughput_gain_pct);
  };
  auto finite = [](const Interval& v) { return std::isfinite(v.lo) && std::isfinite(v.hi); };
  std::string s, path;
  for (const auto& p : se.points)
    if (plotted(p))
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "" : " ", f.px(p.accuracy_delta_pp),
                          f.py(p.throughput_gain_pct));
  if (!path.empty())
    s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n", path,
                     colour(i));
  for (const auto& p : se.points) {
    if (!plotted(p)) continue;
    const double x = f.px(p.accuracy_delta_pp), y = f.py(p.throughput_gain_pct);
    if (finite(p.accuracy_delta_ci95))
      s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" opacity=\"0.5\"/>\n",
                       f.px(p.accuracy_delta_ci95.lo), y, f.px(p.accuracy_delta_ci95.hi), y, colour(i));
    if (finite(p.throughput_gain_ci95))
      s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" opacity=\"0.5\"/>\n",
                       x, f.py(p.throughput_gain_ci95.lo), x, f.py(p.throughput_gain_ci95.hi), colour(i));
    s += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>{}: β={:g}, {:+.1f}% throughput, "
        "{:+.1f} pp accuracy</title></circle>\n",
        x, y, colour(i), xml_escape(p.arm), p.beta, p.throughput_gain_pct, p.accuracy_delta_pp);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\">β={:g}</text>\n", x + 6, y - 6, p.beta);
  }
  return s + legend_entry(f, i, se.name);
}

}  // namespace

std::string svg_sweep_chart(const std::vector<SweepSeries>& series, const std::string& baseline) {
  const Frame f = sweep_frame(series);
  std::string s = header(f, "Throughput gain vs accuracy change across β (vs " + baseline + ")");
  s += y_axis(f, "output throughput gain (%)");
  s += x_label(f, "accuracy change (percentage points)");
  s += x_ticks(f);
  // The baseline sits at (0, 0).
  s += fmt::format(
      "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#888888\" stroke-dasharray=\"4 3\"/>\n",
      f.px(0), f.top, f.top + f.plot_h());
  s += fmt::format(
      "<line x1=\"{1:.1f}\" y1=\"{0:.1f}\" x2=\"{2:.1f}\" y2=\"{0:.1f}\" stroke=\"#888888\" stroke-dasharray=\"4 3\"/>\n",
      f.py(0), f.left, f.left + f.plot_w());
  for (size_t i = 0; i < series.size(); ++i) s += sweep_series(f, series[i], i);
  s += "</svg>\n";
  return s;
}

}  // namespace ears
