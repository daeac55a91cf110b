// A PNG encoder for 8-bit RGB images without zlib: the image data goes into stored
// (uncompressed) deflate blocks inside a zlib stream. Plots are a few MB at most, so size
// does not matter and nothing third-party is needed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace braid::plot::png {

// CRC-32 (ISO 3309, as PNG chunks use it) of data, continuing from crc (0 to start).
uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc = 0);

// Adler-32 (RFC 1950, the zlib stream's checksum) of data.
uint32_t adler32(const uint8_t* data, size_t size);

// The PNG file for a width x height image, rgb holding width*height*3 bytes row by row from
// the top. Each row gets filter type 0 (none).
std::vector<uint8_t> encodeRgb(int width, int height, const std::vector<uint8_t>& rgb);

}  // namespace braid::plot::png
