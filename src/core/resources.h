// Per-communicator resources beyond the bootstrap: topology, ring order, host and device
// transports. Created at init, torn down at destroy/abort.
#pragma once
#include "nccl.h"

struct ncclComm;

namespace braid {

ncclResult_t createResources(ncclComm* comm);
void destroyResources(ncclComm* comm, bool abort);

}  // namespace braid
