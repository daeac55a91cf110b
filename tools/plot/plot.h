// Line plots written as PNG files, with no third-party dependency: braid-perf's --plot and
// braid-doctor's figures. Panels sit side by side in one image.
#pragma once
#include <string>
#include <vector>

namespace braid::plot {

struct Series {
  std::string label;
  std::vector<double> x, y;  // same length; points where either is not finite are skipped
};

struct Panel {
  std::string title, xLabel, yLabel;
  bool logX = true, logY = true;  // sizes and times/bandwidths span decades
  std::vector<Series> series;
};

// One PNG (8-bit RGB) with the panels side by side (each ~640x420 px), axes with tick
// labels (sizes as 8B/1K/1M/1G when xLabel is "bytes"), one colour per series and a legend.
// False, with *error naming the path and the reason (errno text), when it cannot be written.
// Non-positive values on a log axis are skipped, not fatal; empty series or panels still give
// a valid image.
bool writePng(const std::vector<Panel>& panels, const std::string& path, std::string* error);

}  // namespace braid::plot
