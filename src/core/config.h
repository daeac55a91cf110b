// ncclConfig_t: validation, defaults and environment overrides, as NCCL 2.28 does them.
#pragma once
#include "nccl.h"

namespace braid {

// `user` may be NULL (all defaults). Reads `size` first so that older, smaller structs work.
// Errors name `caller` and the field.
ncclResult_t parseConfig(const ncclConfig_t* user, const char* caller, ncclConfig_t* out);

}  // namespace braid
