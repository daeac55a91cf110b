// Templates behind selectElemwise (reduce.h): one loop per (type, op, step shape), written
// so that g++ -O3 vectorises it. Compiled twice, by reduce_kernels_base.cc (x86-64 baseline)
// and reduce_kernels_avx2.cc (AVX2, FMA, F16C), each in its own namespace (BRAID_KERNEL_ISA)
// so that the two builds of every template and inline function never mix at link time.
//
// Each element is loaded into its compute type (float for fp16/bf16/fp8), combined, and
// stored back, which rounds (narrow types) or canonicalises NaN (float). There is no
// per-element switch: the op, the pre-multiply and the post-divide are template parameters,
// and the loops take restrict pointers (with separate loops for dst == recv and dst == src,
// so that in-place steps vectorise too).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#if BRAID_KERNEL_FMA_F16C  // set by reduce_kernels_avx2.cc (a target pragma defines no __FMA__)
#include <immintrin.h>
#endif

#include "core/numeric.h"
#include "host/reduce.h"

#ifndef BRAID_KERNEL_ISA
#define BRAID_KERNEL_ISA base
#define BRAID_KERNEL_FMA_F16C 0
#endif

namespace braid::host::kernels::BRAID_KERNEL_ISA {

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
// Where there is no FMA unit to do it, x*s + r is formed exactly and rounded to odd at a
// precision at least two bits wider than the type's, then to nearest even by the store:
// that gives the correctly rounded result (no double-rounding error).
template <class S>
constexpr bool kFusedPreMul = std::is_same_v<S, Half> || std::is_same_v<S, Bf16> ||
                              std::is_same_v<S, float> || std::is_same_v<S, double>;

template <class F, class U>
F fromBits(U u) {
  F f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
template <class U, class F>
U toBits(F f) {
  U u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// p + r rounded to odd (F = float or double; p, r finite and exact): the sum rounded to
// nearest, moved one ulp toward the exact value when it was inexact and came out even.
template <class F>
F sumRoundedToOdd(F p, F r) {
  using U = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  const F sum = p + r;
  const F v = sum - p;  // TwoSum: err is exactly (p + r) - sum
  const F err = (p - (sum - v)) + (r - v);
  const U bits = toBits<U>(sum);
  // Masks and '&', not '?:' and '&&', so that the compiler keeps it branch-free (vectorised).
  const U inexact = U(err < F(0)) | U(err > F(0));  // 0 for NaN (inf or NaN operands)
  const U away = U((err > F(0)) == (sum > F(0)));   // the exact value is farther from zero
  const U apply = U(0) - (inexact & ~bits & U(1));  // all ones when inexact and even
  const U step = away + away - U(1);                // +1 or -1
  return fromBits<F>(U(bits + (step & apply)));
}

// d rounded to odd in float.
inline float roundToOddFloat(double d) {
  const float f = float(d);
  const double back = double(f);
  const uint32_t bits = floatToBits(f);
  const uint32_t inexact = uint32_t(back < d) | uint32_t(back > d);
  const uint32_t away = uint32_t((d > back) == (d > 0.0));
  const uint32_t apply = 0u - (inexact & ~bits & 1u);
  const uint32_t step = away + away - 1u;
  return bitsToFloat(bits + (step & apply));
}

// x*s + r, where x, s, r are values of S in its compute type, as a compute-type value that
// S's store rounds correctly.
template <class S, class C>
C fusedMulAdd(C x, C s, C r) {
  if constexpr (std::is_same_v<S, double>) {
    return r != r ? r : std::fma(x, s, r);  // a NaN addend wins, as in the GPU's DFMA
  } else if constexpr (std::is_same_v<S, Half>) {
    return sumRoundedToOdd(x * s, r);  // fp16 products are exact in float
  } else if constexpr (std::is_same_v<S, float>) {
#if BRAID_KERNEL_FMA_F16C
    return std::fma(x, s, r);
#else
    return float(sumRoundedToOdd(double(x) * double(s), double(r)));  // exact product in double
#endif
  } else {  // bf16: the product may leave float's range, not double's
    return roundToOddFloat(sumRoundedToOdd(double(x) * double(s), double(r)));
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

// The value of one element in the compute type, before the store rounds it.
template <class S, class Op, bool kPre, bool kPost>
struct BinaryValue {
  PreMul<S> pre;
  PostDiv<S> post;
  explicit BinaryValue(const HostOp& op) : pre(op), post(op) {}
  auto operator()(typename Domain<S>::C a, typename Domain<S>::C b) const {
    if constexpr (kPre && kFusedPreMul<S>) {
      static_assert(std::is_same_v<Op, SumOp> && !kPost);
      return fusedMulAdd<S>(b, pre.scalar, a);
    } else {
      if constexpr (kPre) b = pre.apply(b);
      auto v = Op::apply(a, b);
      if constexpr (kPost) v = post.apply(v);
      return v;
    }
  }
};

template <class S, bool kPre, bool kPost>
struct UnaryValue {
  PreMul<S> pre;
  PostDiv<S> post;
  explicit UnaryValue(const HostOp& op) : pre(op), post(op) {}
  auto operator()(typename Domain<S>::C v) const {
    if constexpr (kPre) v = pre.apply(v);
    if constexpr (kPost) v = post.apply(v);
    return v;
  }
};

#if BRAID_KERNEL_FMA_F16C
// fp16 through F16C: 8 conversions per instruction, rounding exactly as numeric.h does, except
// that a NaN keeps payload bits (loads: harmless, the result's store makes NaN canonical).
inline void halfToFloats(const Half* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; i++) dst[i] = halfBitsToFloat(src[i].bits);
}
inline void floatsToHalf(const float* src, Half* dst, size_t n) {
  const __m128i magMask = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, magMask), inf);
    h = _mm_or_si128(_mm_andnot_si128(nan, h), _mm_and_si128(nan, magMask));  // canonical NaN 0x7fff
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; i++) dst[i] = Half{floatToHalfBits(src[i])};
}

// fp16 in blocks: convert, compute in float, convert back. Blocks are read whole before the
// result is written, so dst may be recv or src.
constexpr size_t kHalfBlock = 512;
template <class F>
void halfBinaryBlocks(Half* dst, const Half* recv, const Half* src, size_t n, F value) {
  float a[kHalfBlock], b[kHalfBlock];
  for (size_t base = 0; base < n; base += kHalfBlock) {
    const size_t m = n - base < kHalfBlock ? n - base : kHalfBlock;
    halfToFloats(recv + base, a, m);
    halfToFloats(src + base, b, m);
    for (size_t j = 0; j < m; j++) a[j] = value(a[j], b[j]);
    floatsToHalf(a, dst + base, m);
  }
}
template <class F>
void halfUnaryBlocks(Half* dst, const Half* x, size_t n, F value) {
  float a[kHalfBlock];
  for (size_t base = 0; base < n; base += kHalfBlock) {
    const size_t m = n - base < kHalfBlock ? n - base : kHalfBlock;
    halfToFloats(x + base, a, m);
    for (size_t j = 0; j < m; j++) a[j] = value(a[j]);
    floatsToHalf(a, dst + base, m);
  }
}
#endif

// dst = post(recv (Op) pre(src))
template <class S, class Op, bool kPre, bool kPost>
void binaryKernel(void* dstv, const void* recvv, const void* srcv, size_t n, const HostOp& op) {
  using D = Domain<S>;
  const BinaryValue<S, Op, kPre, kPost> value(op);
  S* dst = static_cast<S*>(dstv);
  const S* recv = static_cast<const S*>(recvv);
  const S* src = static_cast<const S*>(srcv);
#if BRAID_KERNEL_FMA_F16C
  if constexpr (std::is_same_v<S, Half>) return halfBinaryBlocks(dst, recv, src, n, value);
#endif
  auto f = [value](S a, S b) { return D::store(value(D::load(a), D::load(b))); };
  if (dst == recv && dst == src) loopBinarySelf(dst, n, f);
  else if (dst == recv) loopBinaryIntoX(dst, src, n, f);
  else if (dst == src) loopBinaryIntoY(dst, recv, n, f);
  else loopBinary(dst, recv, src, n, f);
}

// dst = post(pre(x)), x being src (kFromSrc) or recv
template <class S, bool kPre, bool kPost, bool kFromSrc>
void unaryKernel(void* dstv, const void* recvv, const void* srcv, size_t n, const HostOp& op) {
  using D = Domain<S>;
  const UnaryValue<S, kPre, kPost> value(op);
  S* dst = static_cast<S*>(dstv);
  const S* x = static_cast<const S*>(kFromSrc ? srcv : recvv);
#if BRAID_KERNEL_FMA_F16C
  if constexpr (std::is_same_v<S, Half>) return halfUnaryBlocks(dst, x, n, value);
#endif
  auto f = [value](S a) { return D::store(value(D::load(a))); };
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

// The kernel for any type (defined by each ISA's translation unit).
ElemwiseFn selectKernel(ncclDataType_t type, HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post);

// The switch over types, for that definition.
inline ElemwiseFn selectAnyType(ncclDataType_t type, HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post) {
  switch (type) {
    case ncclInt8: return selectTyped<int8_t>(kind, hasRecv, hasSrc, pre, post);
    case ncclUint8: return selectTyped<uint8_t>(kind, hasRecv, hasSrc, pre, post);
    case ncclInt32: return selectTyped<int32_t>(kind, hasRecv, hasSrc, pre, post);
    case ncclUint32: return selectTyped<uint32_t>(kind, hasRecv, hasSrc, pre, post);
    case ncclInt64: return selectTyped<int64_t>(kind, hasRecv, hasSrc, pre, post);
    case ncclUint64: return selectTyped<uint64_t>(kind, hasRecv, hasSrc, pre, post);
    case ncclFloat16: return selectTyped<Half>(kind, hasRecv, hasSrc, pre, post);
    case ncclFloat32: return selectTyped<float>(kind, hasRecv, hasSrc, pre, post);
    case ncclFloat64: return selectTyped<double>(kind, hasRecv, hasSrc, pre, post);
    case ncclBfloat16: return selectTyped<Bf16>(kind, hasRecv, hasSrc, pre, post);
    case ncclFloat8e4m3: return selectTyped<Fp8E4M3>(kind, hasRecv, hasSrc, pre, post);
    case ncclFloat8e5m2: return selectTyped<Fp8E5M2>(kind, hasRecv, hasSrc, pre, post);
    default: return nullptr;
  }
}

}  // namespace braid::host::kernels::BRAID_KERNEL_ISA
