// The fallback's pure rules: which library serves a call under each BRAID_BACKEND, which
// communicators may have a real NCCL communicator, BRAID_SHADOW's settings and mismatch text,
// and the shadow's element comparison (kernels/shadow_compare.h, its host instantiation)
// against hand-made cases: ulps at zero, denormals, NaN, infinities, sign changes, each format.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/numeric.h"
#include "fallback/backend.h"
#include "fallback/real_comm.h"
#include "fallback/shadow_settings.h"
#include "kernels/shadow_compare.h"

using namespace braid::fallback;
using braid::kernels::CompareSpec;
using braid::kernels::compareSpecFor;
using braid::kernels::elementsAgree;
using braid::kernels::ulpsBetween;

namespace {

TEST(Route, EachBackend) {
  EXPECT_EQ(routeFor(Backend::Auto, true), Route::Braid);
  EXPECT_EQ(routeFor(Backend::Auto, false), Route::Real);
  EXPECT_EQ(routeFor(Backend::Braid, true), Route::Braid);
  EXPECT_EQ(routeFor(Backend::Braid, false), Route::BraidRefuses);
  EXPECT_EQ(routeFor(Backend::Nccl, true), Route::Real);
  EXPECT_EQ(routeFor(Backend::Nccl, false), Route::Real);
  EXPECT_EQ(routeFor(Backend::Invalid, true), Route::Invalid);
  EXPECT_EQ(routeFor(Backend::Invalid, false), Route::Invalid);
  EXPECT_NE(std::string(routeReason(Backend::Auto, false)).find("BRAID_BACKEND=auto"), std::string::npos);
  EXPECT_NE(std::string(routeReason(Backend::Braid, false)).find("no fallback"), std::string::npos);
}

braid::PeerInfo peer(int rank, uint64_t host, int dev, uint64_t process = 1) {
  braid::PeerInfo p;
  p.rank = rank;
  p.hostHash = host;
  p.cudaDev = dev;
  p.processHash = process;
  return p;
}

TEST(RealComm, OneRankPerGpuRule) {
  EXPECT_EQ(realCommRefusal({peer(0, 7, 0), peer(1, 7, 1)}), "");
  EXPECT_EQ(realCommRefusal({peer(0, 7, 0), peer(1, 8, 0)}), "");  // device 0 of two hosts
  std::string two = realCommRefusal({peer(0, 7, 0), peer(1, 7, 1), peer(2, 7, 0)});
  EXPECT_NE(two.find("ranks 0 and 2 share CUDA device 0"), std::string::npos) << two;
  EXPECT_NE(two.find("Duplicate GPU"), std::string::npos) << two;
  EXPECT_EQ(realCommRefusal({peer(0, 7, -1), peer(1, 7, -1)}), "");  // host-only: the real NCCL decides
  EXPECT_NE(realCommRefusal({peer(0, 7, -1), peer(1, 7, 0)}).find("1 of its 2 ranks have no GPU"), std::string::npos);
}

TEST(RealComm, SharesProcess) {
  EXPECT_TRUE(sharesProcess({peer(0, 7, 0, 1), peer(1, 7, 1, 1)}, 0));
  EXPECT_FALSE(sharesProcess({peer(0, 7, 0, 1), peer(1, 7, 1, 2)}, 0));
  EXPECT_FALSE(sharesProcess({peer(0, 7, 0, 1)}, 0));
}

TEST(ShadowSettings, Parse) {
  auto off = parseShadowSettings(nullptr, nullptr, nullptr);
  EXPECT_EQ(off.every, 0u);
  EXPECT_FALSE(off.strict);
  EXPECT_EQ(off.perturbIndex, -1);
  EXPECT_EQ(off.error, "");
  auto every = parseShadowSettings("1", "1", "5");
  EXPECT_EQ(every.every, 1u);
  EXPECT_TRUE(every.strict);
  EXPECT_EQ(every.perturbIndex, 5);
  EXPECT_EQ(parseShadowSettings("16", "0", nullptr).every, 16u);
  auto bad = parseShadowSettings("yes", "2", "-1");
  EXPECT_EQ(bad.every, 0u);
  EXPECT_NE(bad.error.find("BRAID_SHADOW='yes'"), std::string::npos) << bad.error;
  EXPECT_NE(bad.error.find("BRAID_SHADOW_STRICT='2'"), std::string::npos) << bad.error;
  EXPECT_NE(bad.error.find("BRAID_SHADOW_TEST_PERTURB='-1'"), std::string::npos) << bad.error;
  EXPECT_EQ(parseShadowSettings("4x", nullptr, nullptr).every, 0u);
}

TEST(ShadowSettings, EveryNthCall) {
  ShadowSettings s;
  s.every = 3;
  EXPECT_FALSE(shadowThisCall(s, 1));
  EXPECT_FALSE(shadowThisCall(s, 2));
  EXPECT_TRUE(shadowThisCall(s, 3));
  EXPECT_TRUE(shadowThisCall(s, 6));
  s.every = 1;
  EXPECT_TRUE(shadowThisCall(s, 1));
  s.every = 0;
  EXPECT_FALSE(shadowThisCall(s, 1));
}

TEST(ShadowSettings, MismatchTextNamesEverything) {
  std::string t = mismatchText(7, "ncclAllReduce", 1024, ncclFloat32, ncclSum, true, 3, 2, 1024, 5,
                               braid::floatToBits(1.5f), braid::floatToBits(1.25f));
  EXPECT_EQ(t, "shadow check #7 ncclAllReduce count 1024 float sum rank 3: 2 of 1024 elements differ from the real "
               "NCCL's; the first at index 5: braid 1.5 (0x3fc00000), NCCL 1.25 (0x3fa00000)");
  std::string copy = mismatchText(1, "ncclBroadcast", 4, ncclInt32, ncclSum, false, 0, 1, 4, 0, 0xffffffffu, 2);
  EXPECT_NE(copy.find("ncclBroadcast count 4 int32 rank 0"), std::string::npos) << copy;
  EXPECT_NE(copy.find("braid -1, NCCL 2"), std::string::npos) << copy;
  EXPECT_NE(valueText(ncclFloat16, 0x3c00).find("1 (0x3c00)"), std::string::npos);
  EXPECT_NE(valueText(ncclBfloat16, 0xbf80).find("-1 (0xbf80)"), std::string::npos);
}

unsigned long long f32(float v) { return braid::floatToBits(v); }
unsigned long long f64(double v) {
  unsigned long long b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

TEST(ShadowCompare, Tolerances) {
  // Integers and copies: exact, whatever the op or ranks.
  CompareSpec i32 = compareSpecFor(ncclInt32, ncclSum, true, 8, 4);
  EXPECT_FALSE(i32.isFloat);
  EXPECT_TRUE(elementsAgree(5, 5, i32));
  EXPECT_FALSE(elementsAgree(5, 6, i32));
  CompareSpec copy = compareSpecFor(ncclFloat32, ncclSum, false, 8, 4);
  EXPECT_TRUE(copy.exactFloat);
  EXPECT_FALSE(elementsAgree(f32(1.0f), f32(std::nextafter(1.0f, 2.0f)), copy));
  // Min/max: exact; sum over 1 or 2 ranks: exact (one rounding of one value); n ranks: n-1.
  EXPECT_TRUE(compareSpecFor(ncclFloat32, ncclMax, true, 8, 4).exactFloat);
  EXPECT_EQ(compareSpecFor(ncclFloat32, ncclSum, true, 1, 4).maxUlps, 0u);
  EXPECT_EQ(compareSpecFor(ncclFloat32, ncclSum, true, 2, 4).maxUlps, 0u);
  EXPECT_EQ(compareSpecFor(ncclFloat32, ncclSum, true, 3, 4).maxUlps, 2u);
  EXPECT_EQ(compareSpecFor(ncclFloat16, ncclProd, true, 8, 2).maxUlps, 7u);
  EXPECT_EQ(compareSpecFor(ncclBfloat16, ncclAvg, true, 8, 2).maxUlps, 8u);  // + the scaling
  EXPECT_EQ(compareSpecFor(ncclFloat32, ncclAvg, true, 1, 4).maxUlps, 1u);
}

TEST(ShadowCompare, UlpsAcrossZeroDenormalsAndSigns) {
  const CompareSpec s = compareSpecFor(ncclFloat32, ncclSum, true, 3, 4);  // 2 ulps
  const auto& f = s.format;
  EXPECT_EQ(ulpsBetween(f32(0.0f), f32(-0.0f), f), 0u);
  EXPECT_TRUE(elementsAgree(f32(0.0f), f32(-0.0f), s));
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(ulpsBetween(f32(tiny), f32(0.0f), f), 1u);
  EXPECT_EQ(ulpsBetween(f32(tiny), f32(-tiny), f), 2u);  // a sign change across zero
  EXPECT_TRUE(elementsAgree(f32(tiny), f32(-tiny), s));
  EXPECT_FALSE(elementsAgree(f32(2 * tiny), f32(-tiny), s));  // 3 ulps
  // Denormal to the smallest normal: consecutive patterns.
  const float minNormal = std::numeric_limits<float>::min();
  EXPECT_EQ(ulpsBetween(f32(std::nextafter(minNormal, 0.0f)), f32(minNormal), f), 1u);
  float one = 1.0f, up2 = std::nextafter(std::nextafter(one, 2.0f), 2.0f);
  EXPECT_TRUE(elementsAgree(f32(one), f32(up2), s));
  EXPECT_FALSE(elementsAgree(f32(one), f32(std::nextafter(up2, 2.0f)), s));
  EXPECT_FALSE(elementsAgree(f32(1.0f), f32(-1.0f), s));
  // Doubles the same way.
  const CompareSpec d = compareSpecFor(ncclFloat64, ncclSum, true, 3, 8);
  EXPECT_TRUE(elementsAgree(f64(1.0), f64(std::nextafter(1.0, 2.0)), d));
  EXPECT_FALSE(elementsAgree(f64(1.0), f64(1.0 + 1e-12), d));
}

TEST(ShadowCompare, NanAndInfinity) {
  const CompareSpec s = compareSpecFor(ncclFloat32, ncclSum, true, 16, 4);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float maxFinite = std::numeric_limits<float>::max();
  EXPECT_TRUE(elementsAgree(f32(nan), f32(nan), s));
  EXPECT_TRUE(elementsAgree(f32(nan), 0x7f800001u, s));  // NaNs of other payloads agree
  EXPECT_FALSE(elementsAgree(f32(nan), f32(1.0f), s));
  EXPECT_FALSE(elementsAgree(f32(1.0f), f32(nan), s));
  EXPECT_TRUE(elementsAgree(f32(inf), f32(inf), s));
  EXPECT_FALSE(elementsAgree(f32(inf), f32(-inf), s));
  EXPECT_FALSE(elementsAgree(f32(inf), f32(maxFinite), s));  // 1 ulp apart as patterns: no
  EXPECT_FALSE(elementsAgree(f32(inf), f32(nan), s));
}

TEST(ShadowCompare, NarrowFormats) {
  // fp16: 1.0 = 0x3c00, next 0x3c01; inf 0x7c00; NaN 0x7e00.
  const CompareSpec h = compareSpecFor(ncclFloat16, ncclSum, true, 2, 2);  // exact
  EXPECT_TRUE(elementsAgree(0x3c00, 0x3c00, h));
  EXPECT_FALSE(elementsAgree(0x3c00, 0x3c01, h));
  EXPECT_TRUE(elementsAgree(0x8000, 0x0000, h));
  EXPECT_TRUE(elementsAgree(0x7e00, 0x7c01, h));
  EXPECT_FALSE(elementsAgree(0x7c00, 0x7bff, h));
  // e4m3: no infinity; 0x7f is NaN, 0x7e (448) is finite and 0x7e vs 0x7d is one ulp.
  CompareSpec e4 = compareSpecFor(ncclFloat8e4m3, ncclSum, true, 3, 1);
  EXPECT_TRUE(braid::kernels::isNan(0x7f, e4.format));
  EXPECT_FALSE(braid::kernels::isNan(0x7e, e4.format));
  EXPECT_FALSE(braid::kernels::isInf(0x7e, e4.format));
  EXPECT_TRUE(elementsAgree(0x7e, 0x7d, e4));
  EXPECT_TRUE(elementsAgree(0xff, 0x7f, e4));
  EXPECT_FALSE(elementsAgree(0x7f, 0x7e, e4));
  // e5m2: IEEE-like, inf 0x7c.
  CompareSpec e5 = compareSpecFor(ncclFloat8e5m2, ncclSum, true, 3, 1);
  EXPECT_TRUE(braid::kernels::isInf(0x7c, e5.format));
  EXPECT_TRUE(braid::kernels::isNan(0x7d, e5.format));
  EXPECT_FALSE(elementsAgree(0x7c, 0x7b, e5));
  // bf16: 1.0 = 0x3f80.
  CompareSpec b = compareSpecFor(ncclBfloat16, ncclSum, true, 4, 2);  // 3 ulps
  EXPECT_TRUE(elementsAgree(0x3f80, 0x3f83, b));
  EXPECT_FALSE(elementsAgree(0x3f80, 0x3f84, b));
}

TEST(ShadowCompare, PerturbationIsAlwaysCaught) {
  // The test hook's flip, applied to values of every kind, is never forgiven.
  for (ncclDataType_t t : {ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64, ncclFloat16,
                           ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2}) {
    const int bytes = static_cast<int>(braid::sizeOfType(t));
    const CompareSpec s = compareSpecFor(t, ncclSum, true, 64, bytes);
    const unsigned long long mask = braid::kernels::perturbMask(s);
    const unsigned long long all = bytes == 8 ? ~0ull : (1ull << (8 * bytes)) - 1;
    for (unsigned long long v : {0ull, 1ull, 0x3cull, all >> 2, all >> 1, all})
      EXPECT_FALSE(elementsAgree(v & all, (v ^ mask) & all, s)) << braid::typeName(t) << " value 0x" << std::hex << v;
  }
}

}  // namespace
