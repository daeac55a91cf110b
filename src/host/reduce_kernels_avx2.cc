// The element-wise kernels again, compiled for AVX2 with FMA and F16C (every x86 CPU since
// about 2013): twice the vector width, fused multiply-adds for PreMulSum, and fp16
// conversions in hardware. reduce.cc uses them when the CPU has all three.
//
// Everything included before the target pragma stays baseline code; the kernel templates come
// after it, in their own namespace (avx2), so no AVX instruction can reach a baseline caller.
// Built with GCC on x86-64 only; elsewhere this build is absent (kBuilt) and the baseline
// kernels serve.
#include "host/reduce.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/numeric.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define BRAID_KERNEL_ISA avx2
#define BRAID_KERNEL_FMA_F16C 1
#include "host/reduce_kernels.h"

namespace braid::host::kernels::avx2 {

extern const bool kBuilt = true;

ElemwiseFn selectKernel(ncclDataType_t type, HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post) {
  return selectAnyType(type, kind, hasRecv, hasSrc, pre, post);
}

}  // namespace braid::host::kernels::avx2

#pragma GCC pop_options

#else

namespace braid::host::kernels::avx2 {

extern const bool kBuilt = false;

ElemwiseFn selectKernel(ncclDataType_t, HostOpKind, bool, bool, bool, bool) { return nullptr; }

}  // namespace braid::host::kernels::avx2

#endif
