// One axis of a panel: its range from the data (linear, log10, or log2 for byte sizes) and its
// ticks with labels. Pure arithmetic, tested on its own.
#pragma once
#include <string>
#include <vector>

namespace braid::plot {

struct Tick {
  double value;       // in data units
  std::string label;  // "1K", "100", "1e6", "0.5"
};

class Axis {
 public:
  // values: every coordinate of this axis in the panel; those not finite, or not positive on a
  // log axis, are ignored. bytes: label ticks as sizes (8B, 1K, 1M, 1G), on powers of two when log.
  Axis(const std::vector<double>& values, bool log, bool bytes);

  bool usable(double v) const;  // finite, and positive on a log axis
  double fraction(double v) const;  // 0 at the low end, 1 at the high end (may be outside)
  const std::vector<Tick>& ticks() const { return ticks_; }
  bool empty() const { return empty_; }  // no usable value: a default range was taken

 private:
  double transform(double v) const;
  bool log_, bytes_;
  bool empty_ = true;
  double lo_ = 0, hi_ = 1;  // in transformed units
  std::vector<Tick> ticks_;
};

// "8B", "512B", "1K", "64M", "1G"; other values with up to 3 significant digits ("1.5K").
std::string formatBytes(double bytes);
// "0", "0.25", "12.5", "1000", "1e5", "1e-4": short enough for a tick.
std::string formatNumber(double v);

}  // namespace braid::plot
