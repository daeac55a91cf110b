// Element-wise kernels for fp16, bf16, fp8 e4m3 and fp8 e5m2: computed in float, rounded to
// the type after every operation (see reduce_kernels.h).
#include "host/reduce_kernels.h"

namespace braid::host::kernels {

ElemwiseFn selectNarrowElemwise(ncclDataType_t type, HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post) {
  switch (type) {
    case ncclFloat16: return selectTyped<Half>(kind, hasRecv, hasSrc, pre, post);
    case ncclBfloat16: return selectTyped<Bf16>(kind, hasRecv, hasSrc, pre, post);
    case ncclFloat8e4m3: return selectTyped<Fp8E4M3>(kind, hasRecv, hasSrc, pre, post);
    case ncclFloat8e5m2: return selectTyped<Fp8E5M2>(kind, hasRecv, hasSrc, pre, post);
    default: return nullptr;
  }
}

}  // namespace braid::host::kernels
