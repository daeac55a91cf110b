// Host conversions between double and the narrow float types (fp16, bf16, fp8 e4m3/e5m2),
// taken from the CUDA toolkit's headers on purpose: the reference must not share code with
// braid's own src/core/numeric.h, which it checks. Round to nearest even; fp8 saturates to
// the largest finite value (__NV_SATFINITE), as NCCL stores it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace braid::check {

inline uint16_t doubleToHalfBits(double v) {
  return static_cast<__half_raw>(__double2half(v)).x;
}

inline double halfBitsToDouble(uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return static_cast<double>(__half2float(__half(raw)));
}

inline uint16_t doubleToBf16Bits(double v) {
  return static_cast<__nv_bfloat16_raw>(__double2bfloat16(v)).x;
}

inline double bf16BitsToDouble(uint16_t bits) {
  __nv_bfloat16_raw raw;
  raw.x = bits;
  return static_cast<double>(__bfloat162float(__nv_bfloat16(raw)));
}

inline uint8_t doubleToFp8Bits(double v, bool e4m3) {
  return __nv_cvt_double_to_fp8(v, __NV_SATFINITE, e4m3 ? __NV_E4M3 : __NV_E5M2);
}

inline double fp8BitsToDouble(uint8_t bits, bool e4m3) {
  __half_raw raw = __nv_cvt_fp8_to_halfraw(bits, e4m3 ? __NV_E4M3 : __NV_E5M2);
  return halfBitsToDouble(raw.x);
}

}  // namespace braid::check
