// The environment variables through which the launcher tells a rank who it is, and the hex
// coding of the unique id. No NCCL dependency, so that the launcher builds without it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace braid::test {

inline constexpr const char* kRankVar = "BRAID_LAUNCH_RANK";
inline constexpr const char* kNRanksVar = "BRAID_LAUNCH_NRANKS";
inline constexpr const char* kUniqueIdVar = "BRAID_UNIQUE_ID";

inline std::string encodeHex(const void* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const auto* bytes = static_cast<const uint8_t*>(data);
  std::string hex(2 * size, '0');
  for (size_t i = 0; i < size; ++i) {
    hex[2 * i] = kDigits[bytes[i] >> 4];
    hex[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return hex;
}

// Fills exactly `size` bytes; false unless `hex` has exactly 2*size hex digits.
inline bool decodeHex(std::string_view hex, void* out, size_t size) {
  if (hex.size() != 2 * size) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  auto* bytes = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < size; ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace braid::test
