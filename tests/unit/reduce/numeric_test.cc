// numeric.h against the CUDA toolkit's own host-side conversions (cuda_fp16.h, cuda_bf16.h,
// cuda_fp8.h), which are what NCCL converts with, plus hand-picked cases.
#include "core/numeric.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace braid {
namespace {

uint32_t bitsOf(float f) { return floatToBits(f); }

uint16_t cudaHalf(float f) { return __half_as_ushort(__float2half_rn(f)); }
uint16_t cudaBf16(float f) { return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(f)).x; }
uint8_t cudaE4m3(float f) { return __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3); }
uint8_t cudaE5m2(float f) { return __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2); }
float cudaHalfToFloat(uint16_t h) { return __half2float(__ushort_as_half(h)); }
float cudaBf16ToFloat(uint16_t b) {
  __nv_bfloat16_raw r;
  r.x = b;
  return __bfloat162float(__nv_bfloat16(r));
}
float cudaE4m3ToFloat(uint8_t b) {
  __nv_fp8_e4m3 v;
  v.__x = b;
  return float(v);
}
float cudaE5m2ToFloat(uint8_t b) {
  __nv_fp8_e5m2 v;
  v.__x = b;
  return float(v);
}

// Compares all four float -> narrow conversions for one float; counts mismatches.
struct NarrowChecker {
  long bad = 0;
  void check(uint32_t u) {
    const float f = bitsToFloat(u);
    const bool ok = floatToHalfBits(f) == cudaHalf(f) && floatToBf16Bits(f) == cudaBf16(f) &&
                    floatToFp8e4m3Bits(f) == cudaE4m3(f) && floatToFp8e5m2Bits(f) == cudaE5m2(f);
    if (!ok && bad++ < 10) {
      ADD_FAILURE() << std::hex << "float 0x" << u << ": half 0x" << floatToHalfBits(f) << "/0x" << cudaHalf(f)
                    << " bf16 0x" << floatToBf16Bits(f) << "/0x" << cudaBf16(f) << " e4m3 0x"
                    << unsigned(floatToFp8e4m3Bits(f)) << "/0x" << unsigned(cudaE4m3(f)) << " e5m2 0x"
                    << unsigned(floatToFp8e5m2Bits(f)) << "/0x" << unsigned(cudaE5m2(f));
    }
  }
};

TEST(Numeric, EveryHalfPatternToFloatAndBack) {
  for (uint32_t h = 0; h < 65536; h++) {
    const float f = halfBitsToFloat(uint16_t(h));
    ASSERT_EQ(bitsOf(f), bitsOf(cudaHalfToFloat(uint16_t(h)))) << std::hex << h;
    const bool nan = (h & 0x7fff) > 0x7c00;
    ASSERT_EQ(floatToHalfBits(f), nan ? 0x7fff : h) << std::hex << h;
  }
}

TEST(Numeric, EveryBf16PatternToFloatAndBack) {
  for (uint32_t b = 0; b < 65536; b++) {
    const float f = bf16BitsToFloat(uint16_t(b));
    ASSERT_EQ(bitsOf(f), bitsOf(cudaBf16ToFloat(uint16_t(b)))) << std::hex << b;
    const bool nan = (b & 0x7fff) > 0x7f80;
    ASSERT_EQ(floatToBf16Bits(f), nan ? 0x7fff : b) << std::hex << b;
  }
}

TEST(Numeric, EveryFp8PatternToFloatAndBack) {
  for (uint32_t b = 0; b < 256; b++) {
    const float e4 = fp8e4m3BitsToFloat(uint8_t(b)), e5 = fp8e5m2BitsToFloat(uint8_t(b));
    ASSERT_EQ(bitsOf(e4), bitsOf(cudaE4m3ToFloat(uint8_t(b)))) << std::hex << b;
    ASSERT_EQ(bitsOf(e5), bitsOf(cudaE5m2ToFloat(uint8_t(b)))) << std::hex << b;
    // e4m3: NaN is S.1111.111; every other pattern comes back unchanged.
    ASSERT_EQ(floatToFp8e4m3Bits(e4), (b & 0x7f) == 0x7f ? 0x7f : b) << std::hex << b;
    // e5m2: NaN gives 0x7f; inf saturates to the largest finite value, keeping its sign.
    const uint32_t e5back = (b & 0x7f) > 0x7c ? 0x7f : (b & 0x7f) == 0x7c ? (b & 0x80) | 0x7b : b;
    ASSERT_EQ(floatToFp8e5m2Bits(e5), e5back) << std::hex << b;
  }
  EXPECT_EQ(fp8e4m3BitsToFloat(0x7e), 448.0f);
  EXPECT_EQ(fp8e4m3BitsToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8e5m2BitsToFloat(0x7b), 57344.0f);
  EXPECT_EQ(fp8e5m2BitsToFloat(0x01), std::ldexp(1.0f, -16));
  EXPECT_TRUE(std::isinf(fp8e5m2BitsToFloat(0xfc)));
}

// Every float whose bits are near a rounding boundary of one of the formats: for each sign and
// exponent, mantissas with the bits around each format's rounding position set or clear.
TEST(Numeric, FloatToNarrowAtRoundingBoundariesMatchesCuda) {
  NarrowChecker checker;
  std::vector<uint32_t> mantissas;
  for (int k = 0; k < 23; k++) {
    const uint32_t bit = 1u << k;
    for (uint32_t m : {bit, bit - 1, bit + 1, bit | (bit << 1), (bit << 1) - 1, bit ^ 0x7fffffu, 0x7fffffu & ~bit,
                       (bit - 1) | (bit << 1)})
      mantissas.push_back(m & 0x7fffffu);
  }
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t e = 0; e < 256; e++)
      for (uint32_t m : mantissas) checker.check(sign | (e << 23) | m);
  EXPECT_EQ(checker.bad, 0);
}

// A strided sweep over all 2^32 floats (about 1/1000 of them) plus random patterns.
TEST(Numeric, FloatToNarrowSampledMatchesCuda) {
  NarrowChecker checker;
  for (uint64_t u = 0; u < (1ull << 32); u += 4099) checker.check(uint32_t(u));
  uint64_t state = 12345;
  for (int i = 0; i < 1000000; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    checker.check(uint32_t(state >> 32));
  }
  EXPECT_EQ(checker.bad, 0);
}

// The whole space; about 45 s, so not on CI: --gtest_also_run_disabled_tests.
TEST(Numeric, DISABLED_FloatToNarrowExhaustiveMatchesCuda) {
  NarrowChecker checker;
  for (uint64_t u = 0; u < (1ull << 32); u++) checker.check(uint32_t(u));
  EXPECT_EQ(checker.bad, 0);
}

TEST(Numeric, HandPickedRounding) {
  const auto p2 = [](int e) { return std::ldexp(1.0f, e); };
  // fp16: ties to even, subnormals, overflow, NaN.
  EXPECT_EQ(floatToHalfBits(1.0f + p2(-11)), 0x3c00);             // tie, even below
  EXPECT_EQ(floatToHalfBits(1.0f + 3 * p2(-11)), 0x3c02);         // tie, even above
  EXPECT_EQ(floatToHalfBits(1.0f + p2(-11) + p2(-20)), 0x3c01);   // above the tie
  EXPECT_EQ(floatToHalfBits(p2(-24)), 0x0001);                    // smallest subnormal
  EXPECT_EQ(floatToHalfBits(p2(-25)), 0x0000);                    // tie with zero: even
  EXPECT_EQ(floatToHalfBits(3 * p2(-25)), 0x0002);                // 1.5 ulp: even (2)
  EXPECT_EQ(floatToHalfBits(-p2(-25) - p2(-40)), 0x8001);
  EXPECT_EQ(floatToHalfBits(p2(-14) - p2(-25)), 0x0400);          // rounds up to the smallest normal
  EXPECT_EQ(floatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalfBits(65519.996f), 0x7bff);
  EXPECT_EQ(floatToHalfBits(65520.0f), 0x7c00);                   // tie: even is inf
  EXPECT_EQ(floatToHalfBits(-1e30f), 0xfc00);
  EXPECT_EQ(floatToHalfBits(-INFINITY), 0xfc00);
  EXPECT_EQ(floatToHalfBits(-NAN), 0x7fff);
  EXPECT_EQ(floatToHalfBits(bitsToFloat(0x7f800001u)), 0x7fff);   // signalling NaN
  // bf16
  EXPECT_EQ(floatToBf16Bits(1.0f + p2(-8)), 0x3f80);
  EXPECT_EQ(floatToBf16Bits(1.0f + 3 * p2(-8)), 0x3f82);
  EXPECT_EQ(floatToBf16Bits(bitsToFloat(0x7f7fffffu)), 0x7f80);   // FLT_MAX rounds to inf
  EXPECT_EQ(floatToBf16Bits(bitsToFloat(0x00008000u)), 0x0000);   // subnormal tie: even
  EXPECT_EQ(floatToBf16Bits(bitsToFloat(0x00018000u)), 0x0002);
  EXPECT_EQ(floatToBf16Bits(bitsToFloat(0xffc00001u)), 0x7fff);
  // e4m3: saturation (no inf), subnormals, NaN.
  EXPECT_EQ(floatToFp8e4m3Bits(448.0f), 0x7e);
  EXPECT_EQ(floatToFp8e4m3Bits(464.0f), 0x7e);                    // tie: even is 448
  EXPECT_EQ(floatToFp8e4m3Bits(465.0f), 0x7e);                    // saturates
  EXPECT_EQ(floatToFp8e4m3Bits(-1e9f), 0xfe);
  EXPECT_EQ(floatToFp8e4m3Bits(INFINITY), 0x7e);
  EXPECT_EQ(floatToFp8e4m3Bits(-INFINITY), 0xfe);
  EXPECT_EQ(floatToFp8e4m3Bits(NAN), 0x7f);
  EXPECT_EQ(floatToFp8e4m3Bits(-NAN), 0x7f);
  EXPECT_EQ(floatToFp8e4m3Bits(p2(-10)), 0x00);                   // half the smallest: even
  EXPECT_EQ(floatToFp8e4m3Bits(p2(-10) * 1.0001f), 0x01);
  EXPECT_EQ(floatToFp8e4m3Bits(3 * p2(-10)), 0x02);
  EXPECT_EQ(floatToFp8e4m3Bits(p2(-6)), 0x08);                    // smallest normal
  EXPECT_EQ(floatToFp8e4m3Bits(1.0625f), 0x38);                   // 1 + half ulp: even
  EXPECT_EQ(floatToFp8e4m3Bits(1.1875f), 0x3a);                   // 1.125 + half ulp: even
  // e5m2
  EXPECT_EQ(floatToFp8e5m2Bits(57344.0f), 0x7b);
  EXPECT_EQ(floatToFp8e5m2Bits(61439.0f), 0x7b);
  EXPECT_EQ(floatToFp8e5m2Bits(61440.0f), 0x7b);                  // would be inf: saturates
  EXPECT_EQ(floatToFp8e5m2Bits(INFINITY), 0x7b);
  EXPECT_EQ(floatToFp8e5m2Bits(-INFINITY), 0xfb);
  EXPECT_EQ(floatToFp8e5m2Bits(NAN), 0x7f);
  EXPECT_EQ(floatToFp8e5m2Bits(p2(-17)), 0x00);
  EXPECT_EQ(floatToFp8e5m2Bits(p2(-16)), 0x01);
  EXPECT_EQ(floatToFp8e5m2Bits(1.125f), 0x3c);                    // tie: even
  EXPECT_EQ(floatToFp8e5m2Bits(1.375f), 0x3e);
  // The storage types.
  EXPECT_EQ(Half::fromFloat(1.5f).bits, 0x3e00);
  EXPECT_EQ(Half{0x3e00}.toFloat(), 1.5f);
  EXPECT_EQ(Bf16::fromFloat(-2.0f).bits, 0xc000);
  EXPECT_EQ(Fp8E4M3::fromFloat(0.5f).toFloat(), 0.5f);
  EXPECT_EQ(Fp8E5M2::fromFloat(-3.0f).toFloat(), -3.0f);
}

TEST(Numeric, TypeFacts) {
  const size_t sizes[12] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  for (int t = 0; t < 12; t++) EXPECT_EQ(sizeOfType(ncclDataType_t(t)), sizes[t]) << t;
  EXPECT_EQ(sizeOfType(ncclDataType_t(12)), 0u);
  EXPECT_EQ(sizeOfType(ncclDataType_t(-1)), 0u);
  EXPECT_STREQ(typeName(ncclFloat16), "half");
  EXPECT_STREQ(typeName(ncclBfloat16), "bfloat16");
  EXPECT_STREQ(typeName(ncclFloat8e5m2), "f8e5m2");
  EXPECT_STREQ(typeName(ncclDataType_t(12)), "invalid");
  EXPECT_TRUE(isFloatType(ncclFloat8e4m3));
  EXPECT_FALSE(isFloatType(ncclUint64));
  EXPECT_TRUE(isSignedIntType(ncclInt8));
  EXPECT_FALSE(isSignedIntType(ncclUint8));
  EXPECT_FALSE(isSignedIntType(ncclFloat32));
}

}  // namespace
}  // namespace braid
