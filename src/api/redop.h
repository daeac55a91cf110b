// Reduction ops: built-in ones and those from ncclRedOpCreatePreMulSum.
#pragma once
#include "host/reduce.h"
#include "nccl.h"

struct ncclComm;

namespace braid::api {

// The op as the engines apply it (avg and user PreMulSum resolved; a device-resident scalar
// is read now, for host-memory calls).
ncclResult_t hostOpFor(ncclComm* comm, ncclRedOp_t op, ncclDataType_t type, const char* caller, host::HostOp* out);

}  // namespace braid::api
