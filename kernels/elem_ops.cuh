// Element types and reduction ops on the device. Each type has a raw storage type (what
// sits in memory and in 16-byte packs) and an arithmetic type: fp16, bf16 and fp8 reduce
// in float and round to nearest-even on the way back (fp8 saturates to the largest finite
// value, like NCCL), so that results match the host engine (src/host/reduce.h) bit for bit.
// A PreMulSum product is rounded to the type before it is added, as NCCL does.
#pragma once
#include <cstdint>
#include <type_traits>

#include "core/numeric.h"
#include "kernels/work_layout.h"

namespace braid::kernels::device {

template <ElemType E> struct Elem;

// Integers and native floats: raw == arithmetic type.
template <typename T> struct NativeElem {
  using Raw = T;
  using Acc = T;
  __device__ static Acc load(Raw x) { return x; }
  __device__ static Raw store(Acc a) { return a; }
};
template <> struct Elem<ElemType::Int8> : NativeElem<int8_t> {};
template <> struct Elem<ElemType::Uint8> : NativeElem<uint8_t> {};
template <> struct Elem<ElemType::Int32> : NativeElem<int32_t> {};
template <> struct Elem<ElemType::Uint32> : NativeElem<uint32_t> {};
template <> struct Elem<ElemType::Int64> : NativeElem<int64_t> {};
template <> struct Elem<ElemType::Uint64> : NativeElem<uint64_t> {};
template <> struct Elem<ElemType::Float32> : NativeElem<float> {};
template <> struct Elem<ElemType::Float64> : NativeElem<double> {};

// Narrow floats: core/numeric.h's conversions, shared with the host engine bit for bit.
#define BRAID_NARROW_ELEM(TYPE, RAW, TO_FLOAT, FROM_FLOAT)      \
  template <> struct Elem<ElemType::TYPE> {                      \
    using Raw = RAW;                                             \
    using Acc = float;                                           \
    __device__ static Acc load(Raw x) { return TO_FLOAT(x); }    \
    __device__ static Raw store(Acc a) { return FROM_FLOAT(a); } \
  };
BRAID_NARROW_ELEM(Float16, uint16_t, halfBitsToFloat, floatToHalfBits)
BRAID_NARROW_ELEM(Bfloat16, uint16_t, bf16BitsToFloat, floatToBf16Bits)
BRAID_NARROW_ELEM(Fp8E4M3, uint8_t, fp8e4m3BitsToFloat, floatToFp8e4m3Bits)
BRAID_NARROW_ELEM(Fp8E5M2, uint8_t, fp8e5m2BitsToFloat, floatToFp8e5m2Bits)
#undef BRAID_NARROW_ELEM

// Reductions on the arithmetic type. Integer sums and products wrap (two's complement),
// computed in unsigned arithmetic so that signed overflow is defined.
template <typename A> __device__ inline A wrapAdd(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename A> __device__ inline A wrapMul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::conditional_t<(sizeof(A) < sizeof(unsigned)), unsigned, std::make_unsigned_t<A>>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

struct OpSum {
  template <typename A> __device__ static A apply(A a, A b) { return wrapAdd(a, b); }
};
struct OpProd {
  template <typename A> __device__ static A apply(A a, A b) { return wrapMul(a, b); }
};
// Float min/max ignore a NaN operand (fmax/fmin), like NCCL.
struct OpMax {
  template <typename A> __device__ static A apply(A a, A b) {
    if constexpr (std::is_floating_point_v<A>) return fmax(a, b);
    else return a > b ? a : b;
  }
};
struct OpMin {
  template <typename A> __device__ static A apply(A a, A b) {
    if constexpr (std::is_floating_point_v<A>) return fmin(a, b);
    else return a < b ? a : b;
  }
};

// SumPostDiv's final step: integer division truncates toward zero, like C.
template <typename A> __device__ inline A postDivide(A a, int32_t n) {
  if constexpr (std::is_integral_v<A>) {
    using Wide = std::conditional_t<std::is_signed_v<A>, int64_t, uint64_t>;
    return static_cast<A>(static_cast<Wide>(a) / static_cast<Wide>(n));
  } else {
    return a / static_cast<A>(n);
  }
}

}  // namespace braid::kernels::device
