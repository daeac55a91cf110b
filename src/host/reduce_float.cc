// Element-wise kernels for fp32 and fp64 (see reduce_kernels.h).
#include "host/reduce_kernels.h"

namespace braid::host::kernels {

ElemwiseFn selectFloatElemwise(ncclDataType_t type, HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post) {
  switch (type) {
    case ncclFloat32: return selectTyped<float>(kind, hasRecv, hasSrc, pre, post);
    case ncclFloat64: return selectTyped<double>(kind, hasRecv, hasSrc, pre, post);
    default: return nullptr;
  }
}

}  // namespace braid::host::kernels
