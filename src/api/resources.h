// What src/api adds to a communicator after the core half of its init (bootstrap, peers,
// liveness): the ring order from the topology, the tuner's view, the host transport and the
// plan caches; and their teardown. Core never calls these: src/api's init and close do.
#pragma once
#include "nccl.h"

struct ncclComm;

namespace braid::api {

ncclResult_t createResources(ncclComm* comm);
// Closes the GPU and host transports (`abort`: without waiting on peers).
void destroyResources(ncclComm* comm, bool abort);

}  // namespace braid::api
