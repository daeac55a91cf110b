// The element-wise kernels for the x86-64 baseline (SSE2), the fallback on any CPU.
#include "host/reduce_kernels.h"

namespace braid::host::kernels::base {

ElemwiseFn selectKernel(ncclDataType_t type, HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post) {
  return selectAnyType(type, kind, hasRecv, hasSrc, pre, post);
}

}  // namespace braid::host::kernels::base
