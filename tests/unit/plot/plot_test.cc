// writePng's output read back by a small PNG reader written independently of the encoder:
// bit-by-bit CRC-32, Adler-32 summed without the encoder's blocking, stored deflate blocks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tools/plot/palette.h"
#include "tools/plot/plot.h"
#include "tools/plot/png.h"

namespace braid::plot {
namespace {

uint32_t crcBitwise(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

uint32_t adlerPlain(const std::vector<uint8_t>& v) {
  uint64_t a = 1, b = 0;
  for (uint8_t x : v) {
    a = (a + x) % 65521;
    b = (b + a) % 65521;
  }
  return static_cast<uint32_t>(b << 16 | a);
}

uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

struct Decoded {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // filter bytes removed
  std::vector<std::string> chunks;
};

// Decodes what writePng writes (RGB8, filter 0, stored blocks); any deviation fails the test.
Decoded decode(const std::vector<uint8_t>& f) {
  Decoded d;
  const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  EXPECT_GE(f.size(), 8u);
  if (f.size() < 8 || !std::equal(signature, signature + 8, f.begin())) {
    ADD_FAILURE() << "no PNG signature";
    return d;
  }
  std::vector<uint8_t> idat;
  size_t at = 8;
  while (at + 12 <= f.size()) {
    const uint32_t len = be32(&f[at]);
    if (at + 12 + len > f.size()) {
      ADD_FAILURE() << "chunk at " << at << " runs past the end";
      return d;
    }
    const std::string type(reinterpret_cast<const char*>(&f[at + 4]), 4);
    EXPECT_EQ(be32(&f[at + 8 + len]), crcBitwise(&f[at + 4], 4 + len)) << "CRC of chunk " << type;
    const uint8_t* data = &f[at + 8];
    if (type == "IHDR") {
      EXPECT_EQ(len, 13u);
      d.width = static_cast<int>(be32(data));
      d.height = static_cast<int>(be32(data + 4));
      EXPECT_EQ(data[8], 8) << "bit depth";
      EXPECT_EQ(data[9], 2) << "colour type RGB";
      EXPECT_EQ(data[10], 0);
      EXPECT_EQ(data[11], 0);
      EXPECT_EQ(data[12], 0);
    }
    if (type == "IDAT") idat.insert(idat.end(), data, data + len);
    d.chunks.push_back(type);
    at += 12 + len;
  }
  EXPECT_EQ(at, f.size()) << "bytes after the last chunk";
  EXPECT_FALSE(d.chunks.empty());
  if (d.chunks.empty()) return d;
  EXPECT_EQ(d.chunks.front(), "IHDR");
  EXPECT_EQ(d.chunks.back(), "IEND");

  // zlib: header, stored blocks, Adler-32 of the inflated bytes.
  EXPECT_GE(idat.size(), 6u);
  if (idat.size() < 6) return d;
  EXPECT_EQ(idat[0] & 0x0F, 8) << "deflate";
  EXPECT_EQ((idat[0] * 256 + idat[1]) % 31, 0) << "FCHECK";
  EXPECT_EQ(idat[1] & 0x20, 0) << "no preset dictionary";
  std::vector<uint8_t> raw;
  size_t p = 2;
  for (bool last = false; !last;) {
    if (p + 5 > idat.size()) {
      ADD_FAILURE() << "truncated deflate block header";
      return d;
    }
    last = idat[p] & 1;
    EXPECT_EQ((idat[p] >> 1) & 3, 0) << "stored block";
    const unsigned len = idat[p + 1] | idat[p + 2] << 8, nlen = idat[p + 3] | idat[p + 4] << 8;
    EXPECT_EQ(len ^ 0xFFFFu, nlen);
    p += 5;
    if (p + len > idat.size()) {
      ADD_FAILURE() << "stored block runs past the end";
      return d;
    }
    raw.insert(raw.end(), idat.begin() + p, idat.begin() + p + len);
    p += len;
  }
  EXPECT_EQ(p + 4, idat.size());
  if (p + 4 <= idat.size()) {
    EXPECT_EQ(be32(&idat[p]), adlerPlain(raw)) << "Adler-32";
  }

  const size_t rowBytes = static_cast<size_t>(d.width) * 3 + 1;
  EXPECT_EQ(raw.size(), rowBytes * d.height) << "height*(1+3*width)";
  if (raw.size() != rowBytes * d.height) return d;
  for (int y = 0; y < d.height; ++y) {
    EXPECT_EQ(raw[rowBytes * y], 0) << "filter of row " << y;
    d.rgb.insert(d.rgb.end(), raw.begin() + rowBytes * y + 1, raw.begin() + rowBytes * (y + 1));
  }
  return d;
}

size_t countColour(const Decoded& d, Rgb c) {
  size_t n = 0;
  for (size_t i = 0; i + 2 < d.rgb.size(); i += 3)
    if (d.rgb[i] == c.r && d.rgb[i + 1] == c.g && d.rgb[i + 2] == c.b) ++n;
  return n;
}

class PlotFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/braid-plot-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  static std::vector<uint8_t> read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::string dir_;
};

// Two panels as braid-perf draws them: time and bus bandwidth against bytes, two series each.
std::vector<Panel> perfLikePanels() {
  Series a{"float sum braid", {}, {}}, b{"float sum nccl", {}, {}};
  Series ba{"float sum braid", {}, {}}, bb{"float sum nccl", {}, {}};
  for (double bytes = 8; bytes <= 64.0 * 1024 * 1024; bytes *= 2) {
    a.x.push_back(bytes);
    a.y.push_back(10 + bytes / 2e5);
    b.x.push_back(bytes);
    b.y.push_back(8 + bytes / 3e5);
    ba.x.push_back(bytes);
    ba.y.push_back(bytes / (10 + bytes / 2e5) / 1e3);
    bb.x.push_back(bytes);
    bb.y.push_back(bytes / (8 + bytes / 3e5) / 1e3);
  }
  return {Panel{"time", "bytes", "time (us)", true, true, {a, b}},
          Panel{"bus bandwidth", "bytes", "GB/s", true, false, {ba, bb}}};
}

TEST_F(PlotFile, TwoPanelsDecodeWithEveryChecksumRight) {
  std::string error;
  ASSERT_TRUE(writePng(perfLikePanels(), path("perf.png"), &error)) << error;
  const Decoded d = decode(read(path("perf.png")));
  EXPECT_EQ(d.width, 2 * 640);
  EXPECT_EQ(d.height, 420);
  EXPECT_EQ((std::vector<std::string>{"IHDR", "IDAT", "IEND"}), d.chunks);
  ASSERT_EQ(d.rgb.size(), size_t(1280) * 420 * 3);
  // Both series are drawn (lines, markers and legend swatches: many pixels each).
  EXPECT_GT(countColour(d, palette::series(0)), 200u);
  EXPECT_GT(countColour(d, palette::series(1)), 200u);
  EXPECT_EQ(countColour(d, palette::series(2)), 0u) << "a third colour with only two series";
  // Text and axes are drawn, and most of the image is background.
  EXPECT_GT(countColour(d, palette::kInk), 1000u);
  EXPECT_GT(countColour(d, palette::kBackground), d.rgb.size() / 3 / 2);
}

TEST_F(PlotFile, EmptyAndUnplottableInputsStillGiveValidImages) {
  std::string error;
  ASSERT_TRUE(writePng({}, path("none.png"), &error)) << error;
  Decoded d = decode(read(path("none.png")));
  EXPECT_EQ(d.width, 640);
  EXPECT_EQ(d.height, 420);

  // An empty panel, an empty series, and a series whose every value is off its log axis.
  Panel empty{"nothing", "bytes", "us", true, true, {}};
  Panel offAxis{"off", "bytes", "us", true, true,
                {Series{"empty", {}, {}}, Series{"zeros", {0, -1, 8}, {5, 5, 0}}}};
  // Linear axes take zeros and negatives; mismatched lengths use the common prefix.
  Panel linear{"linear", "x", "y", false, false, {Series{"line", {0, 1, 2, 3}, {-1, 0, 4}}}};
  ASSERT_TRUE(writePng({empty, offAxis, linear}, path("odd.png"), &error)) << error;
  d = decode(read(path("odd.png")));
  EXPECT_EQ(d.width, 3 * 640);
  EXPECT_GT(countColour(d, palette::series(0)), 0u) << "the linear panel's line";
}

TEST_F(PlotFile, UnwritablePathIsFalseWithTheReason) {
  std::string error;
  const std::string bad = path("no-such-dir/plot.png");
  EXPECT_FALSE(writePng(perfLikePanels(), bad, &error));
  EXPECT_NE(error.find(bad), std::string::npos) << error;
  EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
  EXPECT_FALSE(writePng(perfLikePanels(), dir_, &error)) << "a directory";
  EXPECT_NE(error.find("Is a directory"), std::string::npos) << error;
  if (access("/dev/full", W_OK) == 0) {  // a write that fails only when the data are flushed
    EXPECT_FALSE(writePng({}, "/dev/full", &error)) << "a full device";
    EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
  }
}

TEST(Png, KnownChecksumsAndATinyImage) {
  const std::string check = "123456789";
  const auto* p = reinterpret_cast<const uint8_t*>(check.data());
  EXPECT_EQ(png::crc32(p, check.size()), 0xCBF43926u);  // the standard check value
  EXPECT_EQ(png::adler32(p, check.size()), 0x091E01DEu);
  std::vector<uint8_t> big(200000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7 + 3);
  EXPECT_EQ(png::adler32(big.data(), big.size()), adlerPlain(big)) << "across the 5552-byte blocks";
  EXPECT_EQ(png::crc32(big.data(), big.size()), crcBitwise(big.data(), big.size()));

  const std::vector<uint8_t> file = png::encodeRgb(2, 1, {255, 0, 0, 0, 0, 255});
  const Decoded d = decode(file);
  EXPECT_EQ(d.width, 2);
  EXPECT_EQ(d.height, 1);
  EXPECT_EQ(d.rgb, (std::vector<uint8_t>{255, 0, 0, 0, 0, 255}));
  // IEND's CRC is the same in every PNG.
  EXPECT_EQ(be32(&file[file.size() - 4]), 0xAE426082u);
  EXPECT_THROW(png::encodeRgb(2, 2, {1, 2, 3}), std::invalid_argument);
}

TEST(Png, ManyStoredBlocksForALargeImage) {
  std::vector<uint8_t> rgb(size_t(300) * 200 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i % 251);
  const Decoded d = decode(png::encodeRgb(300, 200, rgb));
  EXPECT_EQ(d.rgb, rgb);
}

// An independent decoder: python's zlib inflates IDAT and checks the Adler-32, zlib.crc32 the chunks.
TEST_F(PlotFile, PythonZlibDecodesIt) {
  if (std::system("python3 -c 'import zlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 with zlib is not on the PATH: the independent check by python's zlib is skipped";
  std::string error;
  ASSERT_TRUE(writePng(perfLikePanels(), path("perf.png"), &error)) << error;
  const std::string script = path("check.py");
  {
    std::ofstream py(script);
    py << "import struct, sys, zlib\n"
          "f = open(sys.argv[1], 'rb').read()\n"
          "assert f[:8] == b'\\x89PNG\\r\\n\\x1a\\n'\n"
          "at, idat, w, h = 8, b'', 0, 0\n"
          "while at < len(f):\n"
          "    n, = struct.unpack('>I', f[at:at+4]); t = f[at+4:at+8]; d = f[at+8:at+8+n]\n"
          "    assert struct.unpack('>I', f[at+8+n:at+12+n])[0] == zlib.crc32(t + d), t\n"
          "    if t == b'IHDR': w, h = struct.unpack('>II', d[:8])\n"
          "    if t == b'IDAT': idat += d\n"
          "    at += 12 + n\n"
          "raw = zlib.decompress(idat)\n"
          "assert len(raw) == h * (1 + 3 * w), (len(raw), w, h)\n"
          "print('python-ok', w, h)\n";
  }
  const std::string out = path("python.out");
  const int rc = std::system(("python3 " + script + " " + path("perf.png") + " >" + out + " 2>&1").c_str());
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("python-ok 1280 420"), std::string::npos) << text;
}

}  // namespace
}  // namespace braid::plot
