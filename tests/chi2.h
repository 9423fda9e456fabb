// Chi-square tail probabilities for the statistical tests (verify_test, engine_law_test),
// computed independently of the code under test.
#pragma once
#include <algorithm>
#include <cmath>

namespace ears::test {

// Regularised upper incomplete gamma Q(a, x) (series below a + 1, continued fraction above).
inline double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double log_front = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 100000 && std::fabs(term) > 1e-16 * std::fabs(sum); ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return std::max(0.0, 1.0 - sum * std::exp(log_front));
  }
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return std::exp(log_front) * h;
}
inline double chi2_sf(double x, double df) { return gamma_q(df / 2, x / 2); }

// The x with chi2_sf(x, df) = alpha (bisection; sf is decreasing in x).
inline double chi2_critical(double alpha, double df) {
  double lo = 0, hi = df + 50 * std::sqrt(df) + 100;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (chi2_sf(mid, df) > alpha ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace ears::test
