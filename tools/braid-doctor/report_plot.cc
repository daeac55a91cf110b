// The picture: bandwidth against message size, one line per measured path (tools/plot). Paths
// measured in microseconds get a second panel of their own.
#include "report.h"

#include "tools/plot/plot.h"

namespace braid::doctor {

bool writePlot(const Report& r, const std::string& path, std::string* error) {
  plot::Panel bandwidth{"Measured bandwidth by size", "bytes", "GB/s", true, true, {}};
  plot::Panel latency{"Measured time by size", "bytes", "us", true, true, {}};
  for (const auto& f : r.figures) {
    if (f.points.empty()) continue;
    plot::Panel* panel = f.unit == "GB/s" ? &bandwidth : f.unit == "us" ? &latency : nullptr;
    if (!panel) continue;
    plot::Series s;
    s.label = f.path;
    for (const auto& p : f.points) {
      s.x.push_back(p.bytes);
      s.y.push_back(p.value);
    }
    panel->series.push_back(std::move(s));
  }
  std::vector<plot::Panel> panels{bandwidth};
  if (!latency.series.empty()) panels.push_back(latency);
  return plot::writePng(panels, path, error);
}

}  // namespace braid::doctor
