// BRAID_SHADOW's comparison of braid's output with the real NCCL's, element by element: the
// rule for one call (compareSpecFor) and the test of one pair of elements (elementsAgree).
// Plain C++ for the host (tests/unit/reduce tests it against hand-made cases) and CUDA for the
// device (shadow_compare.cu runs it over whole buffers). Elements travel as raw bits.
//
// Tolerances (docs/fallback.md says why): integers, copies (no op), min and max are exact;
// floating sum/prod/avg/premulsum agree within maxUlps, 0 for one or two ranks (a+b == b+a
// in IEEE arithmetic, so two ranks' orders give one rounding of the same value), n-1 for n > 2
// ranks (each order rounds n-1 times, at most half an ulp of the partial sums each), plus 1
// for avg (the division by n placed elsewhere). NaN agrees with any NaN, +0 with -0; an
// infinity only with itself.
#pragma once
#include <cstdint>

#include "nccl.h"

#if defined(__CUDACC__)
#define BRAID_SHADOW_HD __host__ __device__
#else
#define BRAID_SHADOW_HD
#endif

namespace braid::kernels {

// An IEEE-like binary format: sign bit, expBits exponent bits, the rest mantissa.
struct FloatFormat {
  int bits = 0;       // 8, 16, 32, 64
  int expBits = 0;
  bool hasInf = true;  // e4m3 has no infinities; its one NaN pattern is S.1111.111
};

struct CompareSpec {
  int elemBytes = 4;
  bool isFloat = false;
  bool exactFloat = false;  // min/max and copies of floats: equal bits (NaN, +-0 as above)
  uint32_t maxUlps = 0;
  FloatFormat format;
};

// What the shadow kernel reports: how many elements differ, the first one, both values' bits.
struct ShadowResult {
  unsigned long long mismatches;
  unsigned long long firstIndex;  // ~0ull when none
  unsigned long long mineBits;    // braid's element at firstIndex
  unsigned long long refBits;     // the real NCCL's
};

BRAID_SHADOW_HD inline FloatFormat floatFormatOf(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return {16, 5, true};
    case ncclBfloat16: return {16, 8, true};
    case ncclFloat32: return {32, 8, true};
    case ncclFloat64: return {64, 11, true};
    case ncclFloat8e4m3: return {8, 4, false};
    case ncclFloat8e5m2: return {8, 5, true};
    default: return {};
  }
}

// `reduces`: the call combines ranks' values with `op` (all-reduce, reduce, reduce-scatter);
// the others only move data. `op` may be a PreMulSum op (>= ncclNumOps): a scaled sum.
inline CompareSpec compareSpecFor(ncclDataType_t type, ncclRedOp_t op, bool reduces, int nRanks, int elemBytes) {
  CompareSpec spec;
  spec.elemBytes = elemBytes;
  spec.format = floatFormatOf(type);
  spec.isFloat = spec.format.bits != 0;
  if (!spec.isFloat) return spec;
  if (!reduces || op == ncclMin || op == ncclMax) {
    spec.exactFloat = true;
    return spec;
  }
  uint32_t ulps = nRanks > 2 ? static_cast<uint32_t>(nRanks - 1) : 0;
  if (op == ncclAvg || op >= ncclNumOps) ulps += 1;  // the scaling by 1/n, or by the user's scalar
  spec.maxUlps = ulps;
  return spec;
}

BRAID_SHADOW_HD inline unsigned long long signBit(const FloatFormat& f) { return 1ull << (f.bits - 1); }
BRAID_SHADOW_HD inline unsigned long long magnitude(unsigned long long bits, const FloatFormat& f) {
  return bits & (signBit(f) - 1);
}
BRAID_SHADOW_HD inline unsigned long long infBits(const FloatFormat& f) {  // the magnitude of infinity
  int manBits = f.bits - 1 - f.expBits;
  return ((1ull << f.expBits) - 1) << manBits;
}
BRAID_SHADOW_HD inline bool isNan(unsigned long long bits, const FloatFormat& f) {
  unsigned long long m = magnitude(bits, f);
  if (!f.hasInf) return m == signBit(f) - 1;  // e4m3: all exponent and mantissa bits set
  return m > infBits(f);
}
BRAID_SHADOW_HD inline bool isInf(unsigned long long bits, const FloatFormat& f) {
  return f.hasInf && magnitude(bits, f) == infBits(f);
}

// How many representable values lie between a and b (both finite): the formats' bit patterns,
// as sign and magnitude, map monotonically onto the integers (-0 and +0 both onto 0).
BRAID_SHADOW_HD inline unsigned long long ulpsBetween(unsigned long long a, unsigned long long b, const FloatFormat& f) {
  long long oa = static_cast<long long>(magnitude(a, f)), ob = static_cast<long long>(magnitude(b, f));
  if (a & signBit(f)) oa = -oa;
  if (b & signBit(f)) ob = -ob;
  return oa > ob ? static_cast<unsigned long long>(oa - ob) : static_cast<unsigned long long>(ob - oa);
}

BRAID_SHADOW_HD inline bool elementsAgree(unsigned long long mine, unsigned long long ref, const CompareSpec& s) {
  if (!s.isFloat) return mine == ref;
  const FloatFormat& f = s.format;
  bool nanMine = isNan(mine, f), nanRef = isNan(ref, f);
  if (nanMine || nanRef) return nanMine && nanRef;
  if (isInf(mine, f) || isInf(ref, f)) return mine == ref;
  if (magnitude(mine, f) == 0 && magnitude(ref, f) == 0) return true;  // +0 and -0
  if (s.exactFloat) return mine == ref;
  return ulpsBetween(mine, ref, f) <= s.maxUlps;
}

// BRAID_SHADOW_TEST_PERTURB's change to one element: flips a bit that no tolerance forgives
// (integers: the lowest; floats: the exponent's highest, which moves any value by far more
// than a few ulps, or turns it into an infinity or NaN).
BRAID_SHADOW_HD inline unsigned long long perturbMask(const CompareSpec& s) {
  if (!s.isFloat) return 1ull;
  return 1ull << (s.format.bits - 2);
}

}  // namespace braid::kernels
