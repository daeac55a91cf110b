// Per-communicator resources: ring order from the topology, and the transports, which
// connect lazily on first use.
#include "core/resources.h"

#include <numeric>

#include "core/comm.h"
#include "host/host_transport.h"

ncclComm::ncclComm() = default;
ncclComm::~ncclComm() {
  if (initThread.joinable()) initThread.join();
}

namespace braid {

ncclResult_t createResources(ncclComm* comm) {
  comm->ring.resize(comm->nRanks);
  std::iota(comm->ring.begin(), comm->ring.end(), 0);
  comm->host = std::make_unique<HostTransport>(comm);
  return ncclSuccess;
}

void destroyResources(ncclComm* comm, bool abort) {
  if (comm->device) comm->device->close(abort);
  comm->device.reset();
  if (comm->host) comm->host->close(abort);
  comm->host.reset();
}

}  // namespace braid
