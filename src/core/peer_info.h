// What each rank tells the others at init: enough to pick transports and detect topology.
#pragma once
#include <cstdint>

#include "core/socket.h"

namespace braid {

struct PeerInfo {
  int32_t rank = -1;
  int32_t nRanks = 0;
  int32_t cudaDev = -1;      // -1: host-only rank
  int32_t pid = 0;
  uint64_t hostHash = 0;     // same value for ranks on the same host (see hostHash())
  uint64_t machineHash = 0;  // the machine's, which BRAID_HOSTID does not change (machineHash())
  uint64_t processHash = 0;  // same value for ranks in the same process
  SocketAddress listen{};    // this rank's bootstrap listener
  SocketAddress monitor{};   // this rank's liveness listener (core/liveness.h)
  char busId[16] = {};       // PCI bus id of the GPU, "0000:18:00.0"; empty for host-only
  int32_t libraryVersion = 0;
  int32_t initTimeoutMs = 0;  // the rank's BRAID_INIT_TIMEOUT: the root (maybe another process) uses it
};

// Host identity: the hostname and the boot id, so that containers on one host that share
// /dev/shm agree and different hosts differ. BRAID_HOSTID overrides it (tests emulate nodes).
uint64_t hostHash();
// The same without BRAID_HOSTID: ranks of emulated hosts on one machine share its cores.
uint64_t machineHash();
uint64_t processHash();

}  // namespace braid
