// Templates behind selectElemwise (reduce.h): one loop per (type, op, step shape), written
// so that g++ -O3 vectorises it. Included only by reduce_*.cc, each of which instantiates a
// group of types.
//
// Each element is loaded into its compute type (float for fp16/bf16/fp8), combined, and
// stored back, which rounds (narrow types) or canonicalises NaN (float, double). There is
// no per-element switch: the op, the pre-multiply and the post-divide are template
// parameters, and the loops take restrict pointers (with separate loops for dst == recv and
// dst == src, so that in-place steps vectorise too).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/numeric.h"
#include "host/reduce.h"

namespace braid::host::kernels {

// ---- Storage type <-> compute type --------------------------------------------------------

template <class S>
struct Domain {  // integers: computed in their own type
  using C = S;
  static C load(S x) { return x; }
  static S store(C x) { return x; }
};
template <>
struct Domain<float> {
  using C = float;
  static C load(float x) { return x; }
  // The GPU gives the canonical NaN for any NaN result; x86 would keep a payload.
  static float store(float x) { return x != x ? bitsToFloat(kCanonicalNanF32) : x; }
};
template <>
struct Domain<double> {  // fp64 NaN results keep a payload on the GPU too: no canonical NaN
  using C = double;
  static C load(double x) { return x; }
  static double store(double x) { return x; }
};
template <>
struct Domain<Half> {
  using C = float;
  static C load(Half x) { return halfBitsToFloat(x.bits); }
  static Half store(C x) { return Half{floatToHalfBits(x)}; }
};
template <>
struct Domain<Bf16> {
  using C = float;
  static C load(Bf16 x) { return bf16BitsToFloat(x.bits); }
  static Bf16 store(C x) { return Bf16{floatToBf16Bits(x)}; }
};
template <>
struct Domain<Fp8E4M3> {
  using C = float;
  static C load(Fp8E4M3 x) { return fp8e4m3BitsToFloat(x.bits); }
  static Fp8E4M3 store(C x) { return Fp8E4M3{floatToFp8e4m3Bits(x)}; }
};
template <>
struct Domain<Fp8E5M2> {
  using C = float;
  static C load(Fp8E5M2 x) { return fp8e5m2BitsToFloat(x.bits); }
  static Fp8E5M2 store(C x) { return Fp8E5M2{floatToFp8e5m2Bits(x)}; }
};

// Storage types whose values are rounded when stored (computed in a wider float).
template <class S>
constexpr bool kNarrow = std::is_same_v<S, Half> || std::is_same_v<S, Bf16> ||
                         std::is_same_v<S, Fp8E4M3> || std::is_same_v<S, Fp8E5M2>;

// ---- Binary ops on the compute type -------------------------------------------------------

// Integer sums and products wrap: compute them unsigned (signed overflow would be undefined).
template <class C>
C wrapAdd(C a, C b) {
  using U = std::make_unsigned_t<C>;
  return C(U(a) + U(b));
}
template <class C>
C wrapMul(C a, C b) {
  using U = std::make_unsigned_t<C>;
  // Promote to unsigned int at least, so that uint16-like promotion to int cannot overflow.
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  return C(U(W(U(a)) * W(U(b))));
}

template <class C>
C floatBitsAnd(C a, C b) {  // the bitwise AND (or OR) of two equal values picks the zero sign
  if constexpr (sizeof(C) == 4) {
    return bitsToFloat(floatToBits(a) & floatToBits(b));
  } else {
    uint64_t x, y;
    std::memcpy(&x, &a, 8);
    std::memcpy(&y, &b, 8);
    x &= y;
    C r;
    std::memcpy(&r, &x, 8);
    return r;
  }
}
template <class C>
C floatBitsOr(C a, C b) {
  if constexpr (sizeof(C) == 4) {
    return bitsToFloat(floatToBits(a) | floatToBits(b));
  } else {
    uint64_t x, y;
    std::memcpy(&x, &a, 8);
    std::memcpy(&y, &b, 8);
    x |= y;
    C r;
    std::memcpy(&r, &x, 8);
    return r;
  }
}

struct SumOp {
  template <class C>
  static C apply(C a, C b) {
    if constexpr (std::is_integral_v<C>) return wrapAdd(a, b);
    else return a + b;
  }
};
struct ProdOp {
  template <class C>
  static C apply(C a, C b) {
    if constexpr (std::is_integral_v<C>) return wrapMul(a, b);
    else return a * b;
  }
};
// Floating max/min as on the GPU (fmaxf, __hmax): a NaN operand is ignored (NaN only when
// both are: then the second, which the store makes canonical except for fp64), and -0 < +0.
struct MaxOp {
  template <class C>
  static C apply(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      return a < b ? b : a;
    } else {
      C r = a < b ? b : a;
      r = a == b ? floatBitsAnd(a, b) : r;
      r = b != b ? a : r;
      return a != a ? b : r;  // both NaN: b, as the GPU's fmax does for fp64
    }
  }
};
struct MinOp {
  template <class C>
  static C apply(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      return b < a ? b : a;
    } else {
      C r = b < a ? b : a;
      r = a == b ? floatBitsOr(a, b) : r;
      r = b != b ? a : r;
      return a != a ? b : r;
    }
  }
};

// ---- Pre-multiply and post-divide ---------------------------------------------------------

template <class S>
struct PreMul {
  using D = Domain<S>;
  using C = typename D::C;
  C scalar;
  explicit PreMul(const HostOp& op) {
    S s;
    std::memcpy(&s, &op.scalar, sizeof s);  // the low bytes (little-endian)
    scalar = D::load(s);
  }
  C apply(C x) const {
    if constexpr (std::is_integral_v<C>) return wrapMul(x, scalar);
    // NCCL multiplies in the type (__hmul for fp16/bf16, half then fp8 for fp8): the product
    // is rounded to the type before it is added.
    else if constexpr (kNarrow<S>) return D::load(D::store(x * scalar));
    else return x * scalar;
  }
};

// NCCL's kernels (as NVIDIA builds them) fuse the PreMulSum product of a rank's own input
// into the sum with what it received: FFMA, DFMA, HFMA2 for fp32, fp64, fp16 and bf16, one
// rounding for x*s + r. (fp8 rounds the product to fp8 first, so nothing fuses there.)
// Without relying on an FMA unit, x*s + r is formed exactly or rounded to odd in double,
// then rounded once more: rounding to odd first and to nearest after, at a precision at least
// two bits narrower, gives the correctly rounded result.
template <class S>
constexpr bool kFusedPreMul = std::is_same_v<S, Half> || std::is_same_v<S, Bf16> ||
                              std::is_same_v<S, float> || std::is_same_v<S, double>;

inline uint64_t doubleToBits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}
inline double bitsToDouble(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

// p + r rounded to odd in double: the sum rounded to nearest, moved one ulp toward the exact
// value when it was inexact and came out even. Finite operands that cannot overflow.
inline double sumRoundedToOdd(double p, double r) {
  const double sum = p + r;
  const double v = sum - p;  // TwoSum: err is exactly (p + r) - sum
  const double err = (p - (sum - v)) + (r - v);
  const uint64_t bits = doubleToBits(sum);
  const bool inexact = err < 0.0 || err > 0.0;  // false for NaN (inf or NaN operands)
  const bool away = (err > 0.0) == (sum > 0.0);  // the exact value is farther from zero
  const uint64_t nudge = (inexact && (bits & 1) == 0) ? (away ? 1ull : ~0ull) : 0ull;
  return bitsToDouble(bits + nudge);
}

// d rounded to odd in float.
inline float roundToOddFloat(double d) {
  const float f = float(d);
  const double back = double(f);
  const uint32_t bits = floatToBits(f);
  const bool inexact = back < d || back > d;
  const bool away = d > 0.0 ? d > back : d < back;
  const uint32_t nudge = (inexact && (bits & 1) == 0) ? (away ? 1u : ~0u) : 0u;
  return bitsToFloat(bits + nudge);
}

// x*s + r with one rounding to S; x, s, r are values of S in the compute type.
template <class S>
S fusedMulAdd(typename Domain<S>::C x, typename Domain<S>::C s, typename Domain<S>::C r) {
  if constexpr (std::is_same_v<S, double>) {
    return r != r ? r : std::fma(x, s, r);  // a NaN addend wins, as in the GPU's DFMA
  } else {
    // x*s is exact in double (at most 48 significant bits).
    const double sum = sumRoundedToOdd(double(x) * double(s), double(r));
    if constexpr (std::is_same_v<S, float>) return Domain<float>::store(float(sum));
    else return Domain<S>::store(roundToOddFloat(sum));
  }
}

template <class S>
struct PostDiv {  // integer average: truncate toward zero, like NCCL's SumPostDiv
  int64_t n;      // nRanks, which need not fit S (int8 with 200 ranks)
  double nd;
  explicit PostDiv(const HostOp& op) : n(op.nRanks), nd(op.nRanks) {}
  S apply(S x) const {
    if constexpr (!std::is_integral_v<S>) {
      return x;
    } else if constexpr (sizeof(S) < 4 || std::is_same_v<S, int32_t>) {
      // Exact: |x| < 2^32, so x/n rounded to double is never within rounding distance of
      // the next integer; and a double division vectorises where an integer one does not.
      return S(int32_t(double(x) / nd));
    } else if constexpr (std::is_same_v<S, uint32_t>) {
      return S(int64_t(double(x) / nd));
    } else if constexpr (std::is_signed_v<S>) {
      return S(x / n);
    } else {
      return S(x / uint64_t(n));
    }
  }
};

// ---- Loops --------------------------------------------------------------------------------

template <class S, class F>
inline void loopBinary(S* __restrict d, const S* __restrict x, const S* __restrict y, size_t n, F f) {
  for (size_t i = 0; i < n; i++) d[i] = f(x[i], y[i]);
}
template <class S, class F>
inline void loopBinaryIntoX(S* __restrict d, const S* __restrict y, size_t n, F f) {  // d == x
  for (size_t i = 0; i < n; i++) d[i] = f(d[i], y[i]);
}
template <class S, class F>
inline void loopBinaryIntoY(S* __restrict d, const S* __restrict x, size_t n, F f) {  // d == y
  for (size_t i = 0; i < n; i++) d[i] = f(x[i], d[i]);
}
template <class S, class F>
inline void loopBinarySelf(S* __restrict d, size_t n, F f) {  // d == x == y
  for (size_t i = 0; i < n; i++) d[i] = f(d[i], d[i]);
}
template <class S, class F>
inline void loopUnary(S* __restrict d, const S* __restrict x, size_t n, F f) {
  for (size_t i = 0; i < n; i++) d[i] = f(x[i]);
}
template <class S, class F>
inline void loopUnarySelf(S* __restrict d, size_t n, F f) {
  for (size_t i = 0; i < n; i++) d[i] = f(d[i]);
}

// ---- The kernels (ElemwiseFn) -------------------------------------------------------------

// dst = post(recv (Op) pre(src))
template <class S, class Op, bool kPre, bool kPost>
void binaryKernel(void* dstv, const void* recvv, const void* srcv, size_t n, const HostOp& op) {
  using D = Domain<S>;
  const PreMul<S> pre(op);
  const PostDiv<S> post(op);
  auto f = [pre, post](S a, S b) {
    if constexpr (kPre && kFusedPreMul<S>) {
      static_assert(std::is_same_v<Op, SumOp> && !kPost);
      return fusedMulAdd<S>(D::load(b), pre.scalar, D::load(a));
    } else {
      auto y = D::load(b);
      if constexpr (kPre) y = pre.apply(y);
      auto v = Op::apply(D::load(a), y);
      if constexpr (kPost) v = post.apply(v);
      return D::store(v);
    }
  };
  S* dst = static_cast<S*>(dstv);
  const S* recv = static_cast<const S*>(recvv);
  const S* src = static_cast<const S*>(srcv);
  if (dst == recv && dst == src) loopBinarySelf(dst, n, f);
  else if (dst == recv) loopBinaryIntoX(dst, src, n, f);
  else if (dst == src) loopBinaryIntoY(dst, recv, n, f);
  else loopBinary(dst, recv, src, n, f);
}

// dst = post(pre(x)), x being src (kFromSrc) or recv
template <class S, bool kPre, bool kPost, bool kFromSrc>
void unaryKernel(void* dstv, const void* recvv, const void* srcv, size_t n, const HostOp& op) {
  using D = Domain<S>;
  const PreMul<S> pre(op);
  const PostDiv<S> post(op);
  auto f = [pre, post](S a) {
    auto v = D::load(a);
    if constexpr (kPre) v = pre.apply(v);
    if constexpr (kPost) v = post.apply(v);
    return D::store(v);
  };
  S* dst = static_cast<S*>(dstv);
  const S* x = static_cast<const S*>(kFromSrc ? srcv : recvv);
  if (dst == x) loopUnarySelf(dst, n, f);
  else loopUnary(dst, x, n, f);
}

// dst = x, bits unchanged
template <size_t kSize, bool kFromSrc>
void copyKernel(void* dst, const void* recv, const void* src, size_t n, const HostOp&) {
  const void* x = kFromSrc ? src : recv;
  if (dst != x && n != 0) std::memcpy(dst, x, n * kSize);
}

// The kernel for storage type S. pre/post are already reduced to what applies: pre only for
// PreMulSum reading an input, post only for SumPostDiv on a final step.
template <class S>
ElemwiseFn selectTyped(HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post) {
  constexpr bool kInt = std::is_integral_v<S>;
  if (post && !kInt) return nullptr;  // no post-op for floating types
  if (hasRecv && hasSrc) {
    switch (kind) {
      case HostOpKind::Sum: return binaryKernel<S, SumOp, false, false>;
      case HostOpKind::Prod: return binaryKernel<S, ProdOp, false, false>;
      case HostOpKind::Max: return binaryKernel<S, MaxOp, false, false>;
      case HostOpKind::Min: return binaryKernel<S, MinOp, false, false>;
      case HostOpKind::PreMulSum:
        return pre ? binaryKernel<S, SumOp, true, false> : binaryKernel<S, SumOp, false, false>;
      case HostOpKind::SumPostDiv:
        if constexpr (kInt) {
          return post ? binaryKernel<S, SumOp, false, true> : binaryKernel<S, SumOp, false, false>;
        }
        return nullptr;
    }
    return nullptr;
  }
  if (pre) return unaryKernel<S, true, false, true>;  // pre applies only to src
  if constexpr (kInt) {
    if (post) return hasSrc ? unaryKernel<S, false, true, true> : unaryKernel<S, false, true, false>;
  }
  return hasSrc ? copyKernel<sizeof(S), true> : copyKernel<sizeof(S), false>;
}

// Per type group (reduce_int.cc, reduce_float.cc, reduce_narrow.cc).
ElemwiseFn selectIntElemwise(ncclDataType_t type, HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post);
ElemwiseFn selectFloatElemwise(ncclDataType_t type, HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post);
ElemwiseFn selectNarrowElemwise(ncclDataType_t type, HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post);

}  // namespace braid::host::kernels
