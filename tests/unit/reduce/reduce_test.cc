// The host element-wise kernels against a reference written independently here: values are
// decoded with the CUDA toolkit's conversions, combined in double (or exactly, in 128-bit
// integers, where one rounding of x*s + r must be checked), and rounded once to the type.
// Every type x op x step shape x aliasing is compared bit for bit.
#include "host/reduce.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/numeric.h"
#include "host/reduce_isa.h"
#include "nccl_vectors.h"

namespace braid::host {
namespace {

namespace bv = braid_vectors;

// ---- The reference -----------------------------------------------------------------------

bool isInt(ncclDataType_t t) { return int(t) <= ncclUint64; }
bool isSigned(ncclDataType_t t) { return t == ncclInt8 || t == ncclInt32 || t == ncclInt64; }
size_t sizeOf(ncclDataType_t t) { return bv::kTypeSize[int(t)]; }
uint64_t maskOf(ncclDataType_t t) { return sizeOf(t) == 8 ? ~0ull : (1ull << (8 * sizeOf(t))) - 1; }

int64_t signExtend(ncclDataType_t t, uint64_t bits) {
  const int shift = 64 - 8 * int(sizeOf(t));
  return int64_t(bits << shift) >> shift;
}

double toDouble(ncclDataType_t t, uint64_t bits) {
  switch (t) {
    case ncclFloat16: return __half2float(__ushort_as_half(uint16_t(bits)));
    case ncclBfloat16: {
      __nv_bfloat16_raw r;
      r.x = uint16_t(bits);
      return __bfloat162float(__nv_bfloat16(r));
    }
    case ncclFloat8e4m3: {
      __nv_fp8_e4m3 v;
      v.__x = uint8_t(bits);
      return float(v);
    }
    case ncclFloat8e5m2: {
      __nv_fp8_e5m2 v;
      v.__x = uint8_t(bits);
      return float(v);
    }
    case ncclFloat32: {
      float f;
      uint32_t u = uint32_t(bits);
      std::memcpy(&f, &u, 4);
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
  }
}

// Rounds to the type once (to nearest even; fp8 saturating); NaN gives the canonical NaN.
uint64_t fromDouble(ncclDataType_t t, double d) {
  switch (t) {
    case ncclFloat16: return __half_as_ushort(__double2half(d));
    case ncclBfloat16: return static_cast<__nv_bfloat16_raw>(__double2bfloat16(d)).x;
    // From double a NaN would keep payload bits in e5m2; from float (what NCCL converts,
    // after half arithmetic that makes NaN canonical) it is always 0x7f.
    case ncclFloat8e4m3: return std::isnan(d) ? 0x7f : __nv_cvt_double_to_fp8(d, __NV_SATFINITE, __NV_E4M3);
    case ncclFloat8e5m2: return std::isnan(d) ? 0x7f : __nv_cvt_double_to_fp8(d, __NV_SATFINITE, __NV_E5M2);
    case ncclFloat32: {
      if (std::isnan(d)) return 0x7fffffffu;
      float f = float(d);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      return u;
    }
    default: {
      uint64_t u;
      std::memcpy(&u, &d, 8);
      return u;
    }
  }
}

double refMax(double a, double b, bool isMax) {
  if (std::isnan(a)) return b;  // NaN when both are
  if (std::isnan(b)) return a;
  if (a == b) {  // equal: only zeros can differ, by sign; -0 < +0
    if (a != 0) return a;
    const bool negative = isMax ? std::signbit(a) && std::signbit(b) : std::signbit(a) || std::signbit(b);
    return negative ? -0.0 : 0.0;
  }
  return (a > b) == isMax ? a : b;
}

// x*s + r rounded once to fp16 or bf16, exactly. Each operand is m * 2^e with an integer m
// of at most 11 bits; the sum is formed as a 128-bit integer (a term more than 60 binades
// below the other only decides ties, so it is kept as a sticky unit), then rounded by hand.
int bitLength(unsigned __int128 v) {
  int n = 0;
  while (v) {
    v >>= 1;
    n++;
  }
  return n;
}
uint64_t fusedExact(ncclDataType_t t, double x, double s, double r) {
  if (!std::isfinite(x) || !std::isfinite(s) || !std::isfinite(r)) return fromDouble(t, x * s + r);  // inf/NaN rules
  const int precision = t == ncclFloat16 ? 11 : 8, eMin = t == ncclFloat16 ? -14 : -126;
  int ex, es, er;
  const __int128 mx = __int128(std::ldexp(std::frexp(x, &ex), precision));  // x = mx * 2^(ex - precision)
  const __int128 ms = __int128(std::ldexp(std::frexp(s, &es), precision));
  const __int128 mr = __int128(std::ldexp(std::frexp(r, &er), precision));
  const __int128 mp = mx * ms;
  const int ep = ex + es - 2 * precision, eR = er - precision;
  __int128 v;
  int e0;
  if (mp == 0 && mr == 0) {  // exact zero: -0 only when both terms are -0 (round to nearest)
    const bool negProduct = std::signbit(x) != std::signbit(s);
    return fromDouble(t, negProduct && std::signbit(r) ? -0.0 : 0.0);
  } else if (mp == 0 || mr == 0) {
    v = mp == 0 ? mr : mp;
    e0 = mp == 0 ? eR : ep;
  } else if (ep - eR > 60 || eR - ep > 60) {
    const bool productBig = ep > eR;
    const __int128 big = productBig ? mp : mr, small = productBig ? mr : mp;
    v = big * 4 + (small > 0 ? 1 : -1);
    e0 = (productBig ? ep : eR) - 2;
  } else {
    e0 = std::min(ep, eR);
    v = (mp << (ep - e0)) + (mr << (eR - e0));
  }
  if (v == 0) return fromDouble(t, 0.0);
  const bool neg = v < 0;
  unsigned __int128 a = neg ? -v : v;
  const int exponent = bitLength(a) - 1 + e0;                     // of the leading bit
  const int quantum = std::max(exponent, eMin) - (precision - 1);  // of the last kept bit
  const int shift = quantum - e0;
  double rounded;
  if (shift > 0) {
    const unsigned __int128 one = 1, rem = a & ((one << shift) - 1), half = one << (shift - 1);
    a >>= shift;
    if (rem > half || (rem == half && (a & 1))) a++;
    rounded = std::ldexp(double(uint64_t(a)), quantum);
  } else {
    rounded = std::ldexp(double(uint64_t(a)), e0);  // representable: at most 11 bits
  }
  return fromDouble(t, neg ? -rounded : rounded);  // exact, or past the largest value: inf
}

struct Case {
  ncclDataType_t type;
  int op;  // nccl_vectors.h numbering: 0..4 ncclSum..ncclAvg, 5 PreMulSum
  bool hasRecv, hasSrc, premulSrc, final;
};

HostOp hostOpFor(const Case& c, int nRanks) {
  uint64_t scalar = bv::premulScalarBits(int(c.type));
  return c.op < 5 ? *makeHostOp(ncclRedOp_t(c.op), c.type, nRanks) : *makePreMulSumOp(c.type, &scalar, nRanks);
}

// The expected bits of one element.
uint64_t expected(const Case& c, int nRanks, uint64_t recv, uint64_t src) {
  const ncclDataType_t t = c.type;
  const bool avg = c.op == 4, premul = c.op == 5 || (avg && !isInt(t));
  const bool pre = premul && c.hasSrc && c.premulSrc;
  const bool post = avg && isInt(t) && c.final;
  uint64_t scalar = bv::premulScalarBits(int(t));
  if (avg && !isInt(t))  // NCCL: 1/n in double, then float, then the type (fp64: the double)
    scalar = fromDouble(t, t == ncclFloat64 ? 1.0 / nRanks : double(float(1.0 / nRanks)));

  if (isInt(t)) {
    const uint64_t m = maskOf(t);
    uint64_t value;
    if (c.hasRecv && c.hasSrc) {
      const uint64_t b = pre ? (src * scalar) & m : src;
      switch (c.op) {
        case 1: value = (recv * b) & m; break;
        case 2: case 3: {
          const bool aLess = isSigned(t) ? signExtend(t, recv) < signExtend(t, b) : recv < b;
          value = (aLess == (c.op == 2)) ? b : recv;
          break;
        }
        default: value = (recv + b) & m;
      }
    } else {
      value = c.hasSrc ? (pre ? (src * scalar) & m : src) : recv;
    }
    if (post) {
      value = isSigned(t) ? uint64_t(signExtend(t, value) / nRanks) & m : (value / uint64_t(nRanks)) & m;
    }
    return value;
  }

  if (!(c.hasRecv && c.hasSrc)) {
    if (!pre) return c.hasSrc ? src : recv;  // a copy keeps every bit, NaN payloads too
    return fromDouble(t, toDouble(t, src) * toDouble(t, scalar));
  }
  const double a = toDouble(t, recv), x = toDouble(t, src), s = toDouble(t, scalar);
  if (pre && t != ncclFloat8e4m3 && t != ncclFloat8e5m2) {  // fused: one rounding of x*s + a
    if (t == ncclFloat32) return fromDouble(t, std::fmaf(float(x), float(s), float(a)));
    if (t == ncclFloat64) return fromDouble(t, std::fma(x, s, a));
    return fusedExact(t, x, s, a);
  }
  const double b = pre ? toDouble(t, fromDouble(t, x * s)) : x;
  switch (c.op) {
    case 1: return fromDouble(t, a * b);
    case 2: return fromDouble(t, refMax(a, b, true));
    case 3: return fromDouble(t, refMax(a, b, false));
    default: return fromDouble(t, a + b);
  }
}

bool sameResult(ncclDataType_t t, uint64_t got, uint64_t want) {
  if (t == ncclFloat64 && std::isnan(toDouble(t, got)) && std::isnan(toDouble(t, want))) return true;  // payload free
  return got == want;
}

// ---- Running a kernel ----------------------------------------------------------------------

uint64_t loadBits(const std::vector<char>& v, size_t i, size_t size) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v[i * size], size);
  return bits;
}

std::string describe(const Case& c) {
  return std::string(typeName(c.type)) + " " + bv::kOpNames[c.op] + (c.hasRecv ? " recv" : "") +
         (c.hasSrc ? " src" : "") + (c.premulSrc ? " premul" : "") + (c.final ? " final" : "");
}

enum class Alias { None, DstIsRecv, DstIsSrc };

// Runs one case over recv/src vectors (element offset `offset`, to test unaligned starts)
// and compares every element. Returns the number of mismatches.
int runCase(KernelIsa isa, const Case& c, int nRanks, const std::vector<char>& recvIn, const std::vector<char>& srcIn,
            size_t n, size_t offset, Alias alias) {
  const size_t size = sizeOf(c.type);
  const HostOp op = hostOpFor(c, nRanks);
  ElemwiseFn fn = selectElemwiseFor(isa, op, c.hasRecv, c.hasSrc, c.premulSrc, c.final);
  EXPECT_NE(fn, nullptr) << describe(c);
  if (fn == nullptr) return 1;
  std::vector<char> recv(recvIn), src(srcIn), dst((n + offset + 1) * size, 0x5a);
  char* recvP = recv.data() + offset * size;
  char* srcP = src.data() + offset * size;
  char* dstP = alias == Alias::DstIsRecv ? recvP : alias == Alias::DstIsSrc ? srcP : dst.data() + offset * size;
  fn(dstP, c.hasRecv ? recvP : nullptr, c.hasSrc ? srcP : nullptr, n, op);
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t got = 0;
    std::memcpy(&got, dstP + i * size, size);
    const uint64_t r = loadBits(recvIn, offset + i, size), s = loadBits(srcIn, offset + i, size);
    const uint64_t want = expected(c, nRanks, r, s);
    if (!sameResult(c.type, got, want) && bad++ < 5) {
      ADD_FAILURE() << kernelIsaName(isa) << " " << describe(c) << " n=" << n << " offset=" << offset << " alias=" << int(alias) << " [" << i
                    << "] recv=" << formatValue(c.type, &r) << " src=" << formatValue(c.type, &s)
                    << " got=" << formatValue(c.type, &got) << " want=" << formatValue(c.type, &want);
    }
  }
  // Nothing outside [offset, offset + n) was written.
  const std::vector<char>& whole = alias == Alias::DstIsRecv ? recvIn : alias == Alias::DstIsSrc ? srcIn : dst;
  const char* base = alias == Alias::DstIsRecv ? recv.data() : alias == Alias::DstIsSrc ? src.data() : dst.data();
  for (size_t i : {size_t(0), offset + n}) {
    if (i == 0 && offset == 0) continue;
    EXPECT_EQ(std::memcmp(base + i * size, alias == Alias::None ? std::string(size, 0x5a).data() : &whole[i * size], size), 0)
        << describe(c) << ": element " << i << " outside the range was written";
  }
  return bad;
}

// Test vectors of a type: nccl_vectors.h's rank 0 / rank 1 inputs, as recv / src.
struct Vectors {
  std::vector<char> a, b;
  size_t n;
  explicit Vectors(ncclDataType_t t) : n(bv::vectorCount(int(t))) {
    a.resize(n * sizeOf(t));
    b.resize(n * sizeOf(t));
    bv::fillInputs(int(t), a.data(), b.data());
  }
  // Every stride-th element, keeping the variety of each quarter of the vectors.
  Vectors subset(ncclDataType_t t, size_t stride) const {
    Vectors v = *this;
    const size_t size = sizeOf(t), m = n / stride;
    for (size_t i = 0; i < m; i++) {
      std::memcpy(&v.a[i * size], &a[i * stride * size], size);
      std::memcpy(&v.b[i * size], &b[i * stride * size], size);
    }
    v.n = m;
    v.a.resize(m * size);
    v.b.resize(m * size);
    return v;
  }
};

class ReduceTypes : public ::testing::TestWithParam<std::tuple<int, KernelIsa>> {
 protected:
  void SetUp() override {
    if (!kernelIsaSupported(isa())) GTEST_SKIP() << "this CPU cannot run the " << kernelIsaName(isa()) << " kernels";
  }
  ncclDataType_t type() const { return ncclDataType_t(std::get<0>(GetParam())); }
  KernelIsa isa() const { return std::get<1>(GetParam()); }
};

// The full reduction of two ranks' vectors (recv pre-multiplied by its sender, src by us),
// over every element, for every op.
TEST_P(ReduceTypes, EveryOpOverAllVectors) {
  const auto t = type();
  const Vectors v(t);
  for (int op = 0; op < bv::kOps; op++) {
    for (int nRanks : {2, 3}) {
      const Case c{t, op, true, true, true, true};
      EXPECT_EQ(runCase(isa(), c, nRanks, v.a, v.b, v.n, 0, Alias::None), 0) << describe(c) << " nRanks " << nRanks;
    }
  }
}

// Every step shape (recv and/or src, pre-multiplied or not, final or not) and aliasing, on a
// subset of the vectors, with unaligned starts and odd lengths.
TEST_P(ReduceTypes, EveryStepShapeAndAliasing) {
  const auto t = type();
  const Vectors v = Vectors(t).subset(t, 37);
  for (int op = 0; op < bv::kOps; op++) {
    for (int shape = 0; shape < 3; shape++) {
      for (int flags = 0; flags < 4; flags++) {
        const Case c{t, op, shape != 1, shape != 2, bool(flags & 1), bool(flags & 2)};
        for (size_t offset : {size_t(0), size_t(1)}) {
          const size_t n = v.n - 1 - offset;
          EXPECT_EQ(runCase(isa(), c, 5, v.a, v.b, n, offset, Alias::None), 0);
          if (c.hasRecv) {
            EXPECT_EQ(runCase(isa(), c, 5, v.a, v.b, n, offset, Alias::DstIsRecv), 0);
          }
          if (c.hasSrc) {
            EXPECT_EQ(runCase(isa(), c, 5, v.a, v.b, n, offset, Alias::DstIsSrc), 0);
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReduceTypes,
                         ::testing::Combine(::testing::Range(0, 12), ::testing::Values(KernelIsa::Base, KernelIsa::Avx2)),
                         [](const ::testing::TestParamInfo<std::tuple<int, KernelIsa>>& info) {
                           return std::string(typeName(ncclDataType_t(std::get<0>(info.param)))) + "_" +
                                  kernelIsaName(std::get<1>(info.param));
                         });

// ---- Ops, selection, special cases -----------------------------------------------------------

TEST(Reduce, MakeHostOpMapsLikeNccl) {
  auto avgInt = makeHostOp(ncclAvg, ncclInt32, 4);
  ASSERT_TRUE(avgInt);
  EXPECT_EQ(avgInt->kind, HostOpKind::SumPostDiv);
  EXPECT_EQ(avgInt->nRanks, 4);
  auto avgHalf = makeHostOp(ncclAvg, ncclFloat16, 3);
  EXPECT_EQ(avgHalf->kind, HostOpKind::PreMulSum);
  EXPECT_EQ(avgHalf->scalar, 0x3555u);  // 1/3 in fp16
  EXPECT_EQ(makeHostOp(ncclAvg, ncclFloat32, 3)->scalar, 0x3eaaaaabu);
  EXPECT_EQ(makeHostOp(ncclAvg, ncclFloat64, 3)->scalar, 0x3fd5555555555555u);
  EXPECT_EQ(makeHostOp(ncclAvg, ncclBfloat16, 3)->scalar, 0x3eabu);
  EXPECT_EQ(makeHostOp(ncclAvg, ncclFloat8e4m3, 3)->scalar, 0x2bu);   // 0.34375
  EXPECT_EQ(makeHostOp(ncclAvg, ncclFloat8e5m2, 3)->scalar, 0x35u);   // 0.3125
  EXPECT_EQ(makeHostOp(ncclAvg, ncclFloat8e4m3, 1000)->scalar, 0x01u);  // 0.001: the smallest subnormal
  EXPECT_EQ(makeHostOp(ncclAvg, ncclFloat8e4m3, 2000)->scalar, 0x00u);  // 0.0005 underflows to 0
  EXPECT_EQ(makeHostOp(ncclMax, ncclUint8, 2)->kind, HostOpKind::Max);
  EXPECT_FALSE(makeHostOp(ncclRedOp_t(5), ncclFloat32, 2));
  EXPECT_FALSE(makeHostOp(ncclSum, ncclDataType_t(12), 2));
  EXPECT_FALSE(makeHostOp(ncclSum, ncclFloat32, 0));
  const uint16_t two = 0x4000;
  auto user = makePreMulSumOp(ncclFloat16, &two, 8);
  ASSERT_TRUE(user);
  EXPECT_EQ(user->kind, HostOpKind::PreMulSum);
  EXPECT_EQ(user->scalar, 0x4000u);
  EXPECT_FALSE(makePreMulSumOp(ncclFloat16, nullptr, 8));
}

TEST(Reduce, SelectRejectsWhatIsNotAStep) {
  HostOp sum = *makeHostOp(ncclSum, ncclFloat32, 2);
  EXPECT_EQ(selectElemwise(sum, false, false, false, false), nullptr);
  HostOp bogus = sum;
  bogus.type = ncclDataType_t(42);
  EXPECT_EQ(selectElemwise(bogus, true, true, false, false), nullptr);
  HostOp postOnFloat = sum;
  postOnFloat.kind = HostOpKind::SumPostDiv;
  EXPECT_EQ(selectElemwise(postOnFloat, true, true, false, true), nullptr);  // SumPostDiv is for integers
  EXPECT_EQ(selectElemwise(postOnFloat, false, true, false, false), nullptr);
}

template <class T>
std::vector<T> run(ncclRedOp_t op, ncclDataType_t type, int nRanks, std::vector<T> recv, std::vector<T> src,
                   bool final = true) {
  HostOp h = *makeHostOp(op, type, nRanks);
  std::vector<T> out(recv.size());
  selectElemwise(h, true, true, true, final)(out.data(), recv.data(), src.data(), out.size(), h);
  return out;
}

TEST(Reduce, IntegersWrapAndCompareBySignedness) {
  EXPECT_EQ(run<int8_t>(ncclSum, ncclInt8, 2, {127, -128}, {1, -1}), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(run<uint8_t>(ncclProd, ncclUint8, 2, {16, 255}, {16, 255}), (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(run<int8_t>(ncclMax, ncclInt8, 2, {-1, 5}, {1, -128}), (std::vector<int8_t>{1, 5}));
  EXPECT_EQ(run<uint8_t>(ncclMax, ncclUint8, 2, {255, 5}, {1, 128}), (std::vector<uint8_t>{255, 128}));
  EXPECT_EQ(run<int64_t>(ncclMin, ncclInt64, 2, {INT64_MIN, 0}, {INT64_MAX, -1}), (std::vector<int64_t>{INT64_MIN, -1}));
  EXPECT_EQ(run<uint64_t>(ncclSum, ncclUint64, 2, {~0ull}, {2}), (std::vector<uint64_t>{1}));
  EXPECT_EQ(run<int32_t>(ncclProd, ncclInt32, 2, {65536}, {65536}), (std::vector<int32_t>{0}));
}

TEST(Reduce, IntegerAverageTruncatesTowardZero) {
  // The final step divides the (wrapped) sum by nRanks, as NCCL's SumPostDiv does.
  EXPECT_EQ(run<int32_t>(ncclAvg, ncclInt32, 2, {-3, 3, -4}, {0, 0, 1}), (std::vector<int32_t>{-1, 1, -1}));
  EXPECT_EQ(run<int8_t>(ncclAvg, ncclInt8, 200, {-128, 100}, {0, 27}), (std::vector<int8_t>{0, 0}));
  EXPECT_EQ(run<int8_t>(ncclAvg, ncclInt8, 128, {-128}, {0}), (std::vector<int8_t>{-1}));
  EXPECT_EQ(run<uint32_t>(ncclAvg, ncclUint32, 3, {0xffffffffu}, {0}), (std::vector<uint32_t>{0x55555555u}));
  EXPECT_EQ(run<uint32_t>(ncclAvg, ncclUint32, 1, {0xffffffffu}, {0}), (std::vector<uint32_t>{0xffffffffu}));
  EXPECT_EQ(run<int64_t>(ncclAvg, ncclInt64, 3, {INT64_MIN}, {0}), (std::vector<int64_t>{INT64_MIN / 3}));
  // Not final: just the sum.
  EXPECT_EQ(run<int32_t>(ncclAvg, ncclInt32, 2, {-3}, {0}, false), (std::vector<int32_t>{-3}));
}

TEST(Reduce, FloatMaxMinIgnoreNanAndOrderZeros) {
  const float nan = NAN;
  auto mx = run<float>(ncclMax, ncclFloat32, 2, {nan, 1.0f, nan, -0.0f, 0.0f}, {2.0f, nan, nan, 0.0f, -0.0f});
  EXPECT_EQ(mx[0], 2.0f);
  EXPECT_EQ(mx[1], 1.0f);
  EXPECT_EQ(floatToBits(mx[2]), kCanonicalNanF32);
  EXPECT_EQ(floatToBits(mx[3]), 0u);
  EXPECT_EQ(floatToBits(mx[4]), 0u);
  auto mn = run<float>(ncclMin, ncclFloat32, 2, {-0.0f, 0.0f}, {0.0f, -0.0f});
  EXPECT_EQ(floatToBits(mn[0]), 0x80000000u);
  EXPECT_EQ(floatToBits(mn[1]), 0x80000000u);
  // Arithmetic NaNs are canonical for fp32 (as on the GPU); inf - inf too.
  auto sum = run<float>(ncclSum, ncclFloat32, 2, {bitsToFloat(0xffc00001u), INFINITY}, {1.0f, -INFINITY});
  EXPECT_EQ(floatToBits(sum[0]), kCanonicalNanF32);
  EXPECT_EQ(floatToBits(sum[1]), kCanonicalNanF32);
}

TEST(Reduce, NarrowTypesRoundAfterEveryOperation) {
  // fp16: 2048 + 1 is a tie; even is 2048. bf16: 256 + 1 likewise.
  EXPECT_EQ(run<uint16_t>(ncclSum, ncclFloat16, 2, {0x6800}, {0x3c00})[0], 0x6800);
  EXPECT_EQ(run<uint16_t>(ncclSum, ncclBfloat16, 2, {0x4380}, {0x3f80})[0], 0x4380);
  // fp16 overflow gives inf; fp8 saturates: e4m3 448 + 448 = 448, e5m2 57344 * 2 = 57344.
  EXPECT_EQ(run<uint16_t>(ncclSum, ncclFloat16, 2, {0x7bff}, {0x7bff})[0], 0x7c00);
  EXPECT_EQ(run<uint8_t>(ncclSum, ncclFloat8e4m3, 2, {0x7e}, {0x7e})[0], 0x7e);
  EXPECT_EQ(run<uint8_t>(ncclProd, ncclFloat8e5m2, 2, {0x7b}, {0x40})[0], 0x7b);
  // e5m2 inf is saturated by any arithmetic, as NCCL's saturating conversion does.
  EXPECT_EQ(run<uint8_t>(ncclMax, ncclFloat8e5m2, 2, {0x7c}, {0x3c})[0], 0x7b);
  // NaN: canonical per type.
  EXPECT_EQ(run<uint16_t>(ncclSum, ncclFloat16, 2, {0xfe01}, {0x3c00})[0], 0x7fff);
  EXPECT_EQ(run<uint8_t>(ncclMin, ncclFloat8e4m3, 2, {0xff}, {0xff})[0], 0x7f);
}

TEST(Reduce, PreMulSumFusesTheOwnProductLikeNccl) {
  // fp32: 1/3 as the scalar; x*s rounds differently from fma(x, s, r) for these values.
  const float s = 1.0f / 3.0f;
  HostOp op = *makePreMulSumOp(ncclFloat32, &s, 3);
  std::vector<float> recv = {0.1f, 1e8f}, src = {0.7f, 3.0f}, out(2);
  selectElemwise(op, true, true, true, false)(out.data(), recv.data(), src.data(), 2, op);
  EXPECT_EQ(floatToBits(out[0]), floatToBits(std::fmaf(0.7f, s, 0.1f)));
  EXPECT_EQ(floatToBits(out[1]), floatToBits(std::fmaf(3.0f, s, 1e8f)));
  // Without premulSrc (src is not an input buffer) it is a plain sum.
  selectElemwise(op, true, true, false, false)(out.data(), recv.data(), src.data(), 2, op);
  EXPECT_EQ(out[0], 0.1f + 0.7f);
  // src alone: the rounded product (what NCCL sends first).
  selectElemwise(op, false, true, true, false)(out.data(), nullptr, src.data(), 2, op);
  EXPECT_EQ(out[0], 0.7f * s);
}

TEST(Reduce, FormatValue) {
  const int8_t i8 = -3;
  const uint64_t u64 = 18446744073709551615ull;
  const float f = 1.5f;
  const uint16_t h = 0x3555;
  const uint8_t e = 0x7f;
  EXPECT_EQ(formatValue(ncclInt8, &i8), "-3");
  EXPECT_EQ(formatValue(ncclUint64, &u64), "18446744073709551615");
  EXPECT_EQ(formatValue(ncclFloat32, &f), "1.5");
  EXPECT_EQ(formatValue(ncclFloat16, &h), "0.333252 (0x3555)");
  EXPECT_EQ(formatValue(ncclFloat8e4m3, &e), "nan (0x7f)");
  EXPECT_EQ(formatValue(ncclDataType_t(99), &e), "?");
  EXPECT_STREQ(redOpName(ncclAvg), "avg");
  EXPECT_STREQ(redOpName(ncclRedOp_t(7)), "mulsum");
  EXPECT_STREQ(hostOpKindName(HostOpKind::SumPostDiv), "SumPostDiv");
}

}  // namespace
}  // namespace braid::host
