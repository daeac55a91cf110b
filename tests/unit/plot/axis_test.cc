// The axes' ranges, ticks and labels, and the font table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tools/plot/axis.h"
#include "tools/plot/font.h"

namespace braid::plot {
namespace {

std::vector<std::string> labels(const Axis& a) {
  std::vector<std::string> out;
  for (const Tick& t : a.ticks()) out.push_back(t.label);
  return out;
}

TEST(Axis, SizesTickOnPowersOfTwoWithSizeLabels) {
  // braid-perf's default sweep, 8 B .. 64 MB: 23 doublings, shown every 8x.
  std::vector<double> sizes;
  for (double b = 8; b <= 64.0 * 1024 * 1024; b *= 2) sizes.push_back(b);
  const Axis a(sizes, true, true);
  EXPECT_EQ(labels(a), (std::vector<std::string>{"8B", "64B", "512B", "4K", "32K", "256K", "2M", "16M", "128M"}));
  EXPECT_DOUBLE_EQ(a.fraction(8), 0.0);
  EXPECT_DOUBLE_EQ(a.fraction(128.0 * 1024 * 1024), 1.0);
  const Axis small({8, 16, 32, 64, 128, 256, 512, 1024}, true, true);
  EXPECT_EQ(labels(small), (std::vector<std::string>{"8B", "16B", "32B", "64B", "128B", "256B", "512B", "1K"}));
}

TEST(Axis, LogSkipsNonPositiveAndSpansWholeDecades) {
  const Axis a({0, -3, 12, 950, NAN, INFINITY}, true, false);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(labels(a), (std::vector<std::string>{"10", "100", "1000"}));
  EXPECT_FALSE(a.usable(0));
  EXPECT_FALSE(a.usable(-1));
  EXPECT_TRUE(a.usable(1e-9));
  const Axis one({100, 100}, true, false);
  EXPECT_EQ(labels(one), (std::vector<std::string>{"100", "1000"})) << "one value still has a range";
  const Axis none({0, -1}, true, false);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(labels(none), (std::vector<std::string>{"1", "10"}));
  const Axis wide({1e-2, 1e7}, true, false);
  EXPECT_EQ(labels(wide).front(), "0.01");
  EXPECT_EQ(labels(wide).back(), "1e8") << "9 decades tick every 2, so the range ends on a tick";
  EXPECT_LE(wide.ticks().size(), 9u);
}

TEST(Axis, LinearStartsAtZeroOnNiceSteps) {
  const Axis a({3, 47.5, 12}, false, false);
  EXPECT_EQ(labels(a), (std::vector<std::string>{"0", "10", "20", "30", "40", "50"}));
  const Axis neg({-0.3, 0.25}, false, false);
  EXPECT_EQ(labels(neg).front(), "-0.3");
  EXPECT_EQ(labels(neg).back(), "0.3");
  for (const Tick& t : neg.ticks()) EXPECT_NE(t.label.find("e-1"), 0u);
  const Axis flat({0, 0}, false, false);
  EXPECT_GE(flat.ticks().size(), 2u);
  EXPECT_TRUE(flat.usable(-5));
}

TEST(Axis, Formats) {
  EXPECT_EQ(formatBytes(8), "8B");
  EXPECT_EQ(formatBytes(1024), "1K");
  EXPECT_EQ(formatBytes(1536), "1.5K");
  EXPECT_EQ(formatBytes(64.0 * 1024 * 1024), "64M");
  EXPECT_EQ(formatBytes(1024.0 * 1024 * 1024), "1G");
  EXPECT_EQ(formatNumber(0), "0");
  EXPECT_EQ(formatNumber(12.5), "12.5");
  EXPECT_EQ(formatNumber(1000), "1000");
  EXPECT_EQ(formatNumber(1e5), "1e5");
  EXPECT_EQ(formatNumber(2.5e6), "2.5e6");
  EXPECT_EQ(formatNumber(1e-4), "1e-4");
  EXPECT_EQ(formatNumber(-40), "-40");
}

TEST(Font, EveryPrintableCharacterInOrderWithFiveBySevenRows) {
  char expected = font::kFirst;
  for (const font::Glyph& g : font::kGlyphs) {
    EXPECT_EQ(g.c, expected);
    for (const char* row : g.rows) {
      ASSERT_EQ(std::strlen(row), size_t(font::kGlyphWidth)) << "glyph '" << g.c << "'";
      for (const char* p = row; *p; ++p) EXPECT_TRUE(*p == '#' || *p == '.') << "glyph '" << g.c << "'";
    }
    ++expected;
  }
  EXPECT_EQ(&font::glyph('\n'), &font::glyph('?'));
  EXPECT_EQ(font::glyph('A').c, 'A');
}

}  // namespace
}  // namespace braid::plot
