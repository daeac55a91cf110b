// Bit-exact conversions between float and the narrow floating-point types of NCCL 2.28
// (fp16, bf16, fp8 e4m3, fp8 e5m2), plus per-type facts (size, name, signedness).
//
// Header-only; the same code runs on the host and in CUDA device code, so that the CPU
// engine and the GPU executor round identically. Every conversion gives the same bits as
// the CUDA toolkit's own (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h), which NCCL uses:
//   float -> fp16, bf16     round to nearest even; overflow gives +-inf; NaN gives 0x7fff
//                           (CUDA's canonical NaN: the sign is dropped).
//   float -> fp8 e4m3/e5m2  round to nearest even and saturate to the largest finite value
//                           (+-448 / +-57344), also for +-inf: what `__nv_fp8_e4m3(float)`
//                           does (__NV_SATFINITE), and what NCCL stores. NaN gives 0x7f.
//   fp16, fp8 -> float      exact; any NaN gives the canonical float NaN 0x7fffffff.
//   bf16 -> float           exact, NaN payload kept (the top half of the float).
// The code is branch-free (mask selects, not jumps) so that loops over it vectorise. It relies on
// the FPU rounding to nearest even (the default) for subnormals; flush-to-zero of float
// subnormals cannot change any result here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "nccl.h"

#if defined(__CUDACC__)
#define BRAID_HD __host__ __device__
#else
#define BRAID_HD
#endif

namespace braid {

BRAID_HD inline uint32_t floatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

BRAID_HD inline float bitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// c ? a : b through masks. Written this way the compiler keeps both arms computed and
// branch-free, so loops vectorise even where it may not speculate a floating-point add.
BRAID_HD inline uint32_t selectBits(bool c, uint32_t a, uint32_t b) {
  uint32_t mask = 0u - uint32_t(c);
  return (a & mask) | (b & ~mask);
}

constexpr uint32_t kCanonicalNanF32 = 0x7fffffffu;
constexpr uint64_t kCanonicalNanF64 = 0x7fffffffffffffffull;

// ---- fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits --------------------------------

BRAID_HD inline float halfBitsToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t mag = h & 0x7fffu;
  // Normal: widen the mantissa and rebias the exponent from 15 to 127.
  uint32_t normal = (mag << 13) + (112u << 23);
  // Subnormal (and zero): mag * 2^-24, computed exactly as (0.5 + mag*2^-24) - 0.5, since
  // the ulp of 0.5 is 2^-24.
  uint32_t subnormal = floatToBits(bitsToFloat(0x3f000000u | mag) - 0.5f);
  uint32_t bits = selectBits(mag >= 0x7c00u, 0x7f800000u, selectBits(mag >= 0x0400u, normal, subnormal));
  return bitsToFloat(selectBits(mag > 0x7c00u, kCanonicalNanF32, bits | sign));
}

BRAID_HD inline uint16_t floatToHalfBits(float f) {
  uint32_t x = floatToBits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  // Normal: drop 13 mantissa bits rounding to nearest even; a carry into the exponent is
  // exactly right (it rounds up to the next binade).
  uint32_t normal = (a + 0x0fffu + ((a >> 13) & 1u) - (112u << 23)) >> 13;
  // Subnormal: let the FPU round onto the 2^-24 grid by adding 0.5 (ulp 2^-24). The result
  // 0x400 (rounded up to the smallest normal) is the right encoding too.
  uint32_t subnormal = floatToBits(bitsToFloat(a) + 0.5f) - 0x3f000000u;
  // 65520 is halfway between 65504 (the largest half) and 65536: from there on it is inf.
  uint32_t r = selectBits(a >= 0x477ff000u, 0x7c00u, selectBits(a >= 0x38800000u, normal, subnormal));
  return uint16_t(selectBits(a > 0x7f800000u, 0x7fffu, r | sign));
}

// ---- bf16: the top 16 bits of a float ----------------------------------------------------

BRAID_HD inline float bf16BitsToFloat(uint16_t b) { return bitsToFloat(uint32_t(b) << 16); }

BRAID_HD inline uint16_t floatToBf16Bits(float f) {
  uint32_t x = floatToBits(f);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;  // overflow rounds to inf
  return uint16_t(selectBits((x & 0x7fffffffu) > 0x7f800000u, 0x7fffu, rounded));
}

// ---- fp8 e4m3 (OCP E4M3FN): bias 7, 3 mantissa bits, no inf, NaN = S.1111.111, max 448 ---

BRAID_HD inline float fp8e4m3BitsToFloat(uint8_t b) {
  uint32_t sign = uint32_t(b & 0x80u) << 24;
  uint32_t mag = b & 0x7fu;
  uint32_t normal = (mag << 20) + (120u << 23);
  // Subnormal: mag * 2^-9, exactly (2^14 + mag*2^-9) - 2^14 (the ulp of 2^14 is 2^-9).
  uint32_t subnormal = floatToBits(bitsToFloat(0x46800000u | mag) - 16384.0f);
  uint32_t bits = selectBits(mag >= 0x08u, normal, subnormal);
  return bitsToFloat(selectBits(mag == 0x7fu, kCanonicalNanF32, bits | sign));
}

BRAID_HD inline uint8_t floatToFp8e4m3Bits(float f) {
  uint32_t x = floatToBits(f);
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t a = x & 0x7fffffffu;
  uint32_t normal = (a + 0x7ffffu + ((a >> 20) & 1u) - (120u << 23)) >> 20;
  uint32_t subnormal = floatToBits(bitsToFloat(a) + 16384.0f) - 0x46800000u;
  // Above 464 (halfway between 448 and the NaN pattern's 480) saturate to 448; 464 itself
  // rounds to even, which is 448 too.
  uint32_t r = selectBits(a > 0x43e80000u, 0x7eu, selectBits(a >= 0x3c800000u, normal, subnormal));
  return uint8_t(selectBits(a > 0x7f800000u, 0x7fu, r | sign));
}

// ---- fp8 e5m2: bias 15, 2 mantissa bits, inf and NaN like IEEE, max finite 57344 ---------
// An e5m2 value is the top byte of the fp16 with the same value.

BRAID_HD inline float fp8e5m2BitsToFloat(uint8_t b) { return halfBitsToFloat(uint16_t(b << 8)); }

BRAID_HD inline uint8_t floatToFp8e5m2Bits(float f) {
  uint32_t x = floatToBits(f);
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t a = x & 0x7fffffffu;
  uint32_t normal = (a + 0xfffffu + ((a >> 21) & 1u) - (112u << 23)) >> 21;
  uint32_t subnormal = floatToBits(bitsToFloat(a) + 128.0f) - 0x43000000u;  // ulp(128) = 2^-16
  // From 61440 (halfway between 57344 and 65536) on, saturate to 57344 (inf included).
  uint32_t r = selectBits(a >= 0x47700000u, 0x7bu, selectBits(a >= 0x38800000u, normal, subnormal));
  return uint8_t(selectBits(a > 0x7f800000u, 0x7fu, r | sign));
}

// ---- Storage types: plain bits, distinct from CUDA's __half etc. --------------------------

struct Half {
  uint16_t bits;
  BRAID_HD static Half fromFloat(float f) { return Half{floatToHalfBits(f)}; }
  BRAID_HD float toFloat() const { return halfBitsToFloat(bits); }
};
struct Bf16 {
  uint16_t bits;
  BRAID_HD static Bf16 fromFloat(float f) { return Bf16{floatToBf16Bits(f)}; }
  BRAID_HD float toFloat() const { return bf16BitsToFloat(bits); }
};
struct Fp8E4M3 {
  uint8_t bits;
  BRAID_HD static Fp8E4M3 fromFloat(float f) { return Fp8E4M3{floatToFp8e4m3Bits(f)}; }
  BRAID_HD float toFloat() const { return fp8e4m3BitsToFloat(bits); }
};
struct Fp8E5M2 {
  uint8_t bits;
  BRAID_HD static Fp8E5M2 fromFloat(float f) { return Fp8E5M2{floatToFp8e5m2Bits(f)}; }
  BRAID_HD float toFloat() const { return fp8e5m2BitsToFloat(bits); }
};
static_assert(sizeof(Half) == 2 && sizeof(Bf16) == 2 && sizeof(Fp8E4M3) == 1 && sizeof(Fp8E5M2) == 1);

// ---- Per-type facts -----------------------------------------------------------------------

constexpr int kNumDataTypes = 12;  // ncclInt8 .. ncclFloat8e5m2

BRAID_HD constexpr bool validDataType(ncclDataType_t t) { return int(t) >= 0 && int(t) < kNumDataTypes; }

// The int held by an ncclDataType_t that nothing has validated yet: a C caller may store any
// int there, but the C++ enum's values are 0..15 and loading another one as the enum is
// undefined behaviour (UBSan: "not a valid value for type"). Checks read the bytes instead.
inline int dataTypeBits(const ncclDataType_t& t) {
  static_assert(sizeof(ncclDataType_t) == sizeof(int));
  int bits;
  std::memcpy(&bits, &t, sizeof bits);
  return bits;
}

// Bytes per element; 0 for a value that is not a data type.
BRAID_HD constexpr size_t sizeOfType(ncclDataType_t t) {
  switch (int(t)) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

BRAID_HD constexpr bool isFloatType(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}
BRAID_HD constexpr bool isSignedIntType(ncclDataType_t t) {
  return t == ncclInt8 || t == ncclInt32 || t == ncclInt64;
}

// nccl-tests' names ("int8" ... "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"),
// so that braid-perf prints the same table; "invalid" otherwise.
inline const char* typeName(ncclDataType_t t) {
  static const char* const names[kNumDataTypes] = {"int8",  "uint8", "int32",  "uint32",
                                                   "int64", "uint64", "half",  "float",
                                                   "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return validDataType(t) ? names[int(t)] : "invalid";
}

// nccl-tests' names of the ops ("sum", "prod", "max", "min", "avg"; "mulsum" for a user op from
// ncclRedOpCreatePreMulSum), for tables and messages.
inline const char* opName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "mulsum";
  }
}

}  // namespace braid
