// Element-wise kernels for the six integer types (see reduce_kernels.h).
#include "host/reduce_kernels.h"

namespace braid::host::kernels {

ElemwiseFn selectIntElemwise(ncclDataType_t type, HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post) {
  switch (type) {
    case ncclInt8: return selectTyped<int8_t>(kind, hasRecv, hasSrc, pre, post);
    case ncclUint8: return selectTyped<uint8_t>(kind, hasRecv, hasSrc, pre, post);
    case ncclInt32: return selectTyped<int32_t>(kind, hasRecv, hasSrc, pre, post);
    case ncclUint32: return selectTyped<uint32_t>(kind, hasRecv, hasSrc, pre, post);
    case ncclInt64: return selectTyped<int64_t>(kind, hasRecv, hasSrc, pre, post);
    case ncclUint64: return selectTyped<uint64_t>(kind, hasRecv, hasSrc, pre, post);
    default: return nullptr;
  }
}

}  // namespace braid::host::kernels
