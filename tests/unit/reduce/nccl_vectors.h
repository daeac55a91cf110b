// Deterministic test vectors for comparing braid's reductions with NCCL's arithmetic.
//
// Shared by the GPU oracle (oracle/nccl_oracle.cu: NCCL's 2-rank all-reduce where there are
// two GPUs, and NCCL's operations emulated on one) and by the unit tests, which compute the
// same 2-rank reductions with braid's host kernels. Plain C++ so that both nvcc's host
// compiler and g++ build it; no dependence on braid.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace braid_vectors {

constexpr int kTypes = 12;  // ncclDataType_t 0..11
constexpr size_t kTypeSize[kTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

// The ops compared: ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg (0..4), then a user
// PreMulSum (index 5) with the scalar below.
constexpr int kOps = 6;
constexpr const char* kOpNames[kOps] = {"sum", "prod", "max", "min", "avg", "premulsum"};

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Elements per rank for a type: every pair of values for 1-byte types; for wider types a
// mix of random bit patterns, values close to each other (rounding ties), x and -x, and
// special values.
inline size_t vectorCount(int type) { return kTypeSize[type] == 1 ? 65536 : 4 * 65536; }

// Raw bits of a "reasonable" floating value: exponent near the middle of the range, so that
// sums and products of two of them round rather than overflow.
inline uint64_t moderateFloatBits(int type, uint64_t r) {
  switch (type) {
    case 6: return (r & 0x83ff) | (uint64_t(10 + (r >> 16) % 11) << 10);          // fp16 exp 10..20
    case 9: return (r & 0x807f) | (uint64_t(117 + (r >> 16) % 21) << 7);          // bf16 exp 117..137
    case 7: return (r & 0x807fffff) | (uint64_t(117 + (r >> 32) % 21) << 23);      // fp32
    case 8: return (r & 0x800fffffffffffffull) | (uint64_t(1013 + (r >> 52) % 21) << 52);  // fp64
    default: return r;
  }
}

// Special values per floating type (bit patterns): zeros, ones, extremes, subnormals, inf, NaN.
inline std::vector<uint64_t> specialBits(int type) {
  switch (type) {
    case 6: return {0x0000, 0x8000, 0x3c00, 0xbc00, 0x7bff, 0xfbff, 0x0001, 0x8001, 0x03ff, 0x0400,
                    0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x3555, 0x7bfe};
    case 9: return {0x0000, 0x8000, 0x3f80, 0xbf80, 0x7f7f, 0xff7f, 0x0001, 0x8001, 0x007f, 0x0080,
                    0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x3eab, 0x7f7e};
    case 7: return {0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x7f7fffff, 0xff7fffff,
                    0x00000001, 0x80000001, 0x007fffff, 0x00800000, 0x7f800000, 0xff800000,
                    0x7fc00000, 0xffc00001, 0x3eaaaaab, 0x7f7ffffe};
    case 8: return {0x0ull, 0x8000000000000000ull, 0x3ff0000000000000ull, 0xbff0000000000000ull,
                    0x7fefffffffffffffull, 0xffefffffffffffffull, 0x1ull, 0x8000000000000001ull,
                    0x000fffffffffffffull, 0x0010000000000000ull, 0x7ff0000000000000ull,
                    0xfff0000000000000ull, 0x7ff8000000000000ull, 0xfff8000000000001ull,
                    0x3fd5555555555555ull, 0x7feffffffffffffeull};
    default: return {0, 1, uint64_t(-1), 0x7f, 0x80, 0x7fffffff, 0x80000000, 0xffffffff,
                     0x7fffffffffffffffull, 0x8000000000000000ull, 2, 3, uint64_t(-2), 0xff, 0x100, 0x55};
  }
}

inline void storeBits(void* base, size_t index, size_t size, uint64_t bits) {
  std::memcpy(static_cast<char*>(base) + index * size, &bits, size);  // little-endian low bytes
}

// Fills the inputs of rank 0 and rank 1 (vectorCount(type) elements each).
inline void fillInputs(int type, void* rank0, void* rank1) {
  const size_t n = vectorCount(type), size = kTypeSize[type];
  const bool isFloat = type >= 6;
  if (size == 1) {  // every (a, b) pair
    for (size_t i = 0; i < n; i++) {
      storeBits(rank0, i, 1, i & 0xff);
      storeBits(rank1, i, 1, i >> 8);
    }
    return;
  }
  uint64_t state = 0x5eed0000ull + uint64_t(type);
  const std::vector<uint64_t> specials = specialBits(type);
  const uint64_t signBit = 1ull << (8 * size - 1);
  const size_t quarter = n / 4;
  for (size_t i = 0; i < n; i++) {
    uint64_t a = splitmix64(state), b = splitmix64(state);
    switch (i / quarter) {
      case 0:  // random bits; for floats, half of them moderate
        if (isFloat && (i & 1)) { a = moderateFloatBits(type, a); b = moderateFloatBits(type, b); }
        break;
      case 1:  // close values (ties and exponent carries); small integers
        if (isFloat) { a = moderateFloatBits(type, a); b = a + (b % 5) - 2; }
        else { a = (a % 2001) - 1000; b = (b % 2001) - 1000; }
        break;
      case 2:  // x and -x
        if (isFloat) { a = moderateFloatBits(type, a); b = a ^ signBit; }
        else { b = ~a + 1; }
        break;
      default:  // specials against everything
        a = specials[i % specials.size()];
        if (i % 3 == 0) b = specials[(i / specials.size()) % specials.size()];
        else if (isFloat && i % 3 == 1) b = moderateFloatBits(type, b);
        break;
    }
    storeBits(rank0, i, size, a);
    storeBits(rank1, i, size, b);
  }
}

// The user PreMulSum scalar for a type, as the bits of one value of the type: 0.3 rounded
// to nearest (3 for integer types).
inline uint64_t premulScalarBits(int type) {
  switch (type) {
    case 6: return 0x34cd;                 // fp16 0.30005
    case 7: return 0x3e99999a;             // fp32 0.3
    case 8: return 0x3fd3333333333333ull;  // fp64 0.3
    case 9: return 0x3e9a;                 // bf16 0.30078
    case 10: return 0x2a;                  // e4m3 0.3125 (0 0101 010)
    case 11: return 0x35;                  // e5m2 0.3125 (0 01101 01)
    default: return 3;
  }
}

inline uint64_t fnv1a64(const void* data, size_t bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace braid_vectors
