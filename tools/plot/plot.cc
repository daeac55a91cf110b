#include "tools/plot/plot.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tools/plot/axis.h"
#include "tools/plot/canvas.h"
#include "tools/plot/palette.h"
#include "tools/plot/png.h"

namespace braid::plot {
namespace {

constexpr int kPanelWidth = 640, kPanelHeight = 420;
// The plot area inside a panel: room on the left for the y ticks and label, below for the x's.
constexpr int kLeft = 74, kRight = 18, kTop = 34, kBottom = 46;
constexpr int kTitleScale = 2;

struct Area {
  int x0, y0, x1, y1;  // [x0, x1) x [y0, y1)
};

std::vector<double> coordinates(const Panel& panel, bool wantX) {
  std::vector<double> out;
  for (const Series& s : panel.series) {
    const auto& v = wantX ? s.x : s.y;
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void drawAxes(Canvas& c, const Area& a, const Axis& x, const Axis& y) {
  const int w = a.x1 - a.x0 - 1, h = a.y1 - a.y0 - 1;
  for (const Tick& t : x.ticks()) {
    const int px = a.x0 + static_cast<int>(std::lround(x.fraction(t.value) * w));
    c.line(px, a.y0, px, a.y1 - 1, palette::kGrid);
    c.line(px, a.y1 - 1, px, a.y1 + 3, palette::kInk);
    c.text(px - Canvas::textWidth(t.label) / 2, a.y1 + 6, t.label, palette::kInk);
  }
  for (const Tick& t : y.ticks()) {
    const int py = a.y1 - 1 - static_cast<int>(std::lround(y.fraction(t.value) * h));
    c.line(a.x0, py, a.x1 - 1, py, palette::kGrid);
    c.line(a.x0 - 4, py, a.x0, py, palette::kInk);
    c.text(a.x0 - 7 - Canvas::textWidth(t.label), py - Canvas::textHeight() / 2, t.label, palette::kInk);
  }
  c.line(a.x0, a.y0, a.x0, a.y1 - 1, palette::kInk);
  c.line(a.x0, a.y1 - 1, a.x1 - 1, a.y1 - 1, palette::kInk);
  c.line(a.x0, a.y0, a.x1 - 1, a.y0, palette::kInk);
  c.line(a.x1 - 1, a.y0, a.x1 - 1, a.y1 - 1, palette::kInk);
}

// Lines between consecutive usable points, and a small square on each.
void drawSeries(Canvas& c, const Area& a, const Axis& x, const Axis& y, const Series& s, Rgb colour) {
  const int w = a.x1 - a.x0 - 1, h = a.y1 - a.y0 - 1;
  c.setClip(a.x0 + 1, a.y0 + 1, a.x1 - 1, a.y1 - 1);
  bool havePrevious = false;
  int px0 = 0, py0 = 0;
  const size_t n = std::min(s.x.size(), s.y.size());
  for (size_t i = 0; i < n; ++i) {
    if (!x.usable(s.x[i]) || !y.usable(s.y[i])) continue;
    const int px = a.x0 + static_cast<int>(std::lround(x.fraction(s.x[i]) * w));
    const int py = a.y1 - 1 - static_cast<int>(std::lround(y.fraction(s.y[i]) * h));
    if (havePrevious) c.line(px0, py0, px, py, colour, 2);
    c.fillRect(px - 2, py - 2, px + 3, py + 3, colour);
    px0 = px;
    py0 = py;
    havePrevious = true;
  }
  c.clearClip();
}

// Top-left inside the plot area: where time and bandwidth curves (rising with size) leave room.
void drawLegend(Canvas& c, const Area& a, const std::vector<Series>& series) {
  if (series.empty()) return;
  constexpr int kSwatch = 16, kRow = 11, kPad = 5;
  int textWidth = 0;
  for (const Series& s : series) textWidth = std::max(textWidth, Canvas::textWidth(s.label));
  const int x0 = a.x0 + 8, y0 = a.y0 + 8;
  const int x1 = std::min(a.x1 - 8, x0 + kPad + kSwatch + 4 + textWidth + kPad);
  const int y1 = std::min(a.y1 - 8, y0 + kPad + static_cast<int>(series.size()) * kRow + kPad - 4);
  c.setClip(x0, y0, x1 + 1, y1 + 1);
  c.fillRect(x0, y0, x1, y1, palette::kBackground);
  c.line(x0, y0, x1, y0, palette::kInk);
  c.line(x0, y1, x1, y1, palette::kInk);
  c.line(x0, y0, x0, y1, palette::kInk);
  c.line(x1, y0, x1, y1, palette::kInk);
  c.setClip(x0 + 1, y0 + 1, x1, y1);  // labels longer than the plot are cut at the frame
  for (size_t i = 0; i < series.size(); ++i) {
    const int ty = y0 + kPad + static_cast<int>(i) * kRow;
    const Rgb colour = palette::series(i);
    c.fillRect(x0 + kPad, ty + 2, x0 + kPad + kSwatch, ty + 5, colour);
    c.text(x0 + kPad + kSwatch + 4, ty, series[i].label, palette::kInk);
  }
  c.clearClip();
}

void drawPanel(Canvas& c, int originX, const Panel& panel) {
  const Area a{originX + kLeft, kTop, originX + kPanelWidth - kRight, kPanelHeight - kBottom};
  const bool bytes = panel.xLabel == "bytes";
  const Axis x(coordinates(panel, true), panel.logX, bytes);
  const Axis y(coordinates(panel, false), panel.logY, false);
  c.text(originX + kPanelWidth / 2 - Canvas::textWidth(panel.title, kTitleScale) / 2, 8, panel.title, palette::kInk,
         kTitleScale);
  drawAxes(c, a, x, y);
  c.text((a.x0 + a.x1) / 2 - Canvas::textWidth(panel.xLabel) / 2, a.y1 + 22, panel.xLabel, palette::kInk);
  c.textUp(originX + 8, (a.y0 + a.y1) / 2 + Canvas::textWidth(panel.yLabel) / 2, panel.yLabel, palette::kInk);
  bool any = false;
  for (size_t i = 0; i < panel.series.size(); ++i) {
    drawSeries(c, a, x, y, panel.series[i], palette::series(i));
    any = any || !panel.series[i].x.empty();
  }
  if (!any || x.empty() || y.empty()) {
    const std::string none = "no data";
    c.text((a.x0 + a.x1) / 2 - Canvas::textWidth(none, 2) / 2, (a.y0 + a.y1) / 2, none, palette::kFaint, 2);
  }
  drawLegend(c, a, panel.series);
}

bool writeFile(const std::string& path, const std::vector<uint8_t>& bytes, std::string* error) {
  auto failed = [&](const char* what) {
    if (error) *error = "cannot " + std::string(what) + " " + path + ": " + std::strerror(errno);
    return false;
  };
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return failed("create");
  const bool wrote = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const int savedErrno = errno;
  if (std::fclose(f) != 0) return failed("write");  // the data may only reach the disk here
  if (!wrote) {
    errno = savedErrno;
    return failed("write");
  }
  return true;
}

}  // namespace

bool writePng(const std::vector<Panel>& panels, const std::string& path, std::string* error) {
  const int count = std::max<int>(1, static_cast<int>(panels.size()));
  Canvas canvas(count * kPanelWidth, kPanelHeight, palette::kBackground);
  if (panels.empty()) drawPanel(canvas, 0, Panel{});
  for (size_t i = 0; i < panels.size(); ++i) drawPanel(canvas, static_cast<int>(i) * kPanelWidth, panels[i]);
  return writeFile(path, png::encodeRgb(canvas.width(), canvas.height(), canvas.pixels()), error);
}

}  // namespace braid::plot
