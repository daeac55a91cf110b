// Which transport joins this rank to each peer, decided in one place from where the two run
// (issue 15 item 1): both engines and the init ask here.
//   host memory:   same process: plain memory; same host: shared memory; other host: UCX.
//   device memory: same process: pointers; same host: CUDA IPC (or FIFOs staged in pinned
//                  shared memory, transport/p2p.h); other host: none yet.
#pragma once
#include <string>
#include <vector>

#include "core/peer_info.h"

namespace braid::transport {

enum class Locality { SameProcess, SameHost, OtherHost };

Locality localityOf(const PeerInfo& me, const PeerInfo& peer);
// Whether some peer runs on another host (a communicator that needs UCX at init).
bool needsNetwork(const std::vector<PeerInfo>& peers, int me);
// "rank 0 -> rank 3: other host, UCX (host memory); device memory: not supported across hosts"
std::string describeChoice(const std::vector<PeerInfo>& peers, int me, int peer);
// One INFO line per peer (NCCL_DEBUG_SUBSYS=NET,P2P), at init.
void logChoices(const std::vector<PeerInfo>& peers, int me);

}  // namespace braid::transport
