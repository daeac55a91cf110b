#include "tools/plot/canvas.h"

#include <algorithm>
#include <cstdlib>

#include "tools/plot/font.h"

namespace braid::plot {

Canvas::Canvas(int width, int height, Rgb background)
    : width_(std::max(width, 1)), height_(std::max(height, 1)), clipX1_(width_), clipY1_(height_),
      pixels_(static_cast<size_t>(width_) * height_ * 3) {
  for (size_t i = 0; i < pixels_.size(); i += 3) {
    pixels_[i] = background.r;
    pixels_[i + 1] = background.g;
    pixels_[i + 2] = background.b;
  }
}

Rgb Canvas::at(int x, int y) const {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return {};
  const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
  return {pixels_[i], pixels_[i + 1], pixels_[i + 2]};
}

void Canvas::setClip(int x0, int y0, int x1, int y1) {
  clipX0_ = std::clamp(x0, 0, width_);
  clipY0_ = std::clamp(y0, 0, height_);
  clipX1_ = std::clamp(x1, clipX0_, width_);
  clipY1_ = std::clamp(y1, clipY0_, height_);
}

void Canvas::clearClip() { setClip(0, 0, width_, height_); }

void Canvas::set(int x, int y, Rgb c) {
  if (x < clipX0_ || y < clipY0_ || x >= clipX1_ || y >= clipY1_) return;
  const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
  pixels_[i] = c.r;
  pixels_[i + 1] = c.g;
  pixels_[i + 2] = c.b;
}

void Canvas::fillRect(int x0, int y0, int x1, int y1, Rgb c) {
  x0 = std::max(x0, clipX0_);
  y0 = std::max(y0, clipY0_);
  x1 = std::min(x1, clipX1_);
  y1 = std::min(y1, clipY1_);
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) set(x, y, c);
}

// Bresenham's line, each step stamping a thickness x thickness square.
void Canvas::line(int x0, int y0, int x1, int y1, Rgb c, int thickness) {
  // Far outside points (a value off a log axis's range) would make the walk long; the
  // callers map into the plot, so bound the walk to a few canvas sizes.
  const int limit = 4 * (width_ + height_);
  x0 = std::clamp(x0, -limit, limit);
  x1 = std::clamp(x1, -limit, limit);
  y0 = std::clamp(y0, -limit, limit);
  y1 = std::clamp(y1, -limit, limit);
  const int before = (thickness - 1) / 2;
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  for (;;) {
    fillRect(x0 - before, y0 - before, x0 - before + thickness, y0 - before + thickness, c);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

void Canvas::text(int x, int y, const std::string& s, Rgb c, int scale) {
  for (size_t i = 0; i < s.size(); ++i) {
    const font::Glyph& g = font::glyph(s[i]);
    const int gx = x + static_cast<int>(i) * font::kAdvance * scale;
    for (int row = 0; row < font::kGlyphHeight; ++row)
      for (int col = 0; col < font::kGlyphWidth; ++col)
        if (g.rows[row][col] == '#') fillRect(gx + col * scale, y + row * scale, gx + (col + 1) * scale,
                                              y + (row + 1) * scale, c);
  }
}

void Canvas::textUp(int x, int y, const std::string& s, Rgb c, int scale) {
  // Glyph column col goes up the page, glyph row row goes right: (col, row) -> (x + row, y - col).
  for (size_t i = 0; i < s.size(); ++i) {
    const font::Glyph& g = font::glyph(s[i]);
    const int gy = y - static_cast<int>(i) * font::kAdvance * scale;
    for (int row = 0; row < font::kGlyphHeight; ++row)
      for (int col = 0; col < font::kGlyphWidth; ++col)
        if (g.rows[row][col] == '#') fillRect(x + row * scale, gy - (col + 1) * scale, x + (row + 1) * scale,
                                              gy - col * scale, c);
  }
}

int Canvas::textWidth(const std::string& s, int scale) {
  return s.empty() ? 0 : (static_cast<int>(s.size()) * font::kAdvance - 1) * scale;
}

int Canvas::textHeight(int scale) { return font::kGlyphHeight * scale; }

}  // namespace braid::plot
