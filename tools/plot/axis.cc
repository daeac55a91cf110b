#include "tools/plot/axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace braid::plot {
namespace {

// 1, 2 or 5 times a power of ten, at least raw.
double niceStep(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  return 10 * p;
}

constexpr int kMaxTicks = 9;

}  // namespace

std::string formatBytes(double bytes) {
  static const struct {
    double size;
    const char* suffix;
  } units[] = {{1099511627776.0, "T"}, {1073741824.0, "G"}, {1048576.0, "M"}, {1024.0, "K"}};
  char buf[32];
  for (const auto& u : units) {
    if (std::fabs(bytes) >= u.size) {
      std::snprintf(buf, sizeof buf, "%.3g%s", bytes / u.size, u.suffix);
      return buf;
    }
  }
  std::snprintf(buf, sizeof buf, "%.3gB", bytes);
  return buf;
}

std::string formatNumber(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (a == 0) return "0";
  if (a >= 1e5 || a < 1e-3) {
    const int e = static_cast<int>(std::floor(std::log10(a)));
    const double m = v / std::pow(10.0, e);
    if (std::fabs(m - std::round(m)) < 1e-6)
      std::snprintf(buf, sizeof buf, "%de%d", static_cast<int>(std::round(m)), e);
    else
      std::snprintf(buf, sizeof buf, "%.2ge%d", m, e);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

Axis::Axis(const std::vector<double>& values, bool log, bool bytes) : log_(log), bytes_(bytes) {
  double lo = 0, hi = 0;
  for (double v : values) {
    if (!usable(v)) continue;
    const double t = transform(v);
    if (empty_) {
      lo = hi = t;
      empty_ = false;
    }
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  if (log_) {
    // Whole decades (or powers of two for sizes), at least one.
    lo_ = empty_ ? 0 : std::floor(lo);
    hi_ = empty_ ? 1 : std::ceil(hi);
    if (hi_ <= lo_) hi_ = lo_ + 1;
    const int span = static_cast<int>(hi_ - lo_);
    const int step = std::max(1, (span + kMaxTicks - 2) / (kMaxTicks - 1));
    hi_ = lo_ + step * ((span + step - 1) / step);  // the last tick at the top of the range
    for (int k = static_cast<int>(lo_); k <= static_cast<int>(hi_); k += step) {
      const double value = std::pow(bytes_ ? 2.0 : 10.0, k);
      ticks_.push_back({value, bytes_ ? formatBytes(value) : formatNumber(value)});
    }
    return;
  }
  // Linear: from zero when the data are all of one sign (bandwidths, times), on a nice step.
  if (empty_) {
    lo = 0;
    hi = 1;
  }
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  if (hi <= lo) hi = lo + 1;
  const double step = niceStep((hi - lo) / (kMaxTicks - 2));
  lo_ = std::floor(lo / step) * step;
  hi_ = std::ceil(hi / step) * step;
  for (int i = 0; i <= 2 * kMaxTicks; ++i) {
    double value = lo_ + i * step;
    if (value > hi_ + step * 1e-6) break;
    if (std::fabs(value) < step * 1e-6) value = 0;  // no "-1.4e-17" at zero
    ticks_.push_back({value, bytes_ ? formatBytes(value) : formatNumber(value)});
  }
}

bool Axis::usable(double v) const { return std::isfinite(v) && (!log_ || v > 0); }

double Axis::transform(double v) const {
  if (!log_) return v;
  return bytes_ ? std::log2(v) : std::log10(v);
}

double Axis::fraction(double v) const { return (transform(v) - lo_) / (hi_ - lo_); }

}  // namespace braid::plot
