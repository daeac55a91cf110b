// An RGB pixel buffer with the few drawing operations a plot needs: rectangles, thick lines,
// and text in the built-in font (across, or rotated to read bottom to top). Drawing outside the
// canvas or the clip rectangle is dropped, so callers need not clip.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace braid::plot {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

class Canvas {
 public:
  Canvas(int width, int height, Rgb background);

  int width() const { return width_; }
  int height() const { return height_; }
  const std::vector<uint8_t>& pixels() const { return pixels_; }  // row-major RGB from the top
  Rgb at(int x, int y) const;

  // Later drawing only touches [x0, x1) x [y0, y1); clearClip() allows the whole canvas again.
  void setClip(int x0, int y0, int x1, int y1);
  void clearClip();

  void set(int x, int y, Rgb c);
  void fillRect(int x0, int y0, int x1, int y1, Rgb c);  // [x0, x1) x [y0, y1)
  void line(int x0, int y0, int x1, int y1, Rgb c, int thickness = 1);

  // Text with its top-left corner at (x, y), each font pixel drawn as scale x scale.
  void text(int x, int y, const std::string& s, Rgb c, int scale = 1);
  // Text turned a quarter left (reads bottom to top), its bottom-left corner at (x, y).
  void textUp(int x, int y, const std::string& s, Rgb c, int scale = 1);
  static int textWidth(const std::string& s, int scale = 1);
  static int textHeight(int scale = 1);

 private:
  int width_, height_;
  int clipX0_ = 0, clipY0_ = 0, clipX1_, clipY1_;
  std::vector<uint8_t> pixels_;
};

}  // namespace braid::plot
