#include "transport/select.h"

#include "core/log.h"

namespace braid::transport {

Locality localityOf(const PeerInfo& me, const PeerInfo& peer) {
  if (peer.hostHash != me.hostHash) return Locality::OtherHost;
  return peer.processHash == me.processHash ? Locality::SameProcess : Locality::SameHost;
}

bool needsNetwork(const std::vector<PeerInfo>& peers, int me) {
  for (const PeerInfo& p : peers)
    if (localityOf(peers[me], p) == Locality::OtherHost) return true;
  return false;
}

std::string describeChoice(const std::vector<PeerInfo>& peers, int me, int peer) {
  const char* text = "";
  switch (localityOf(peers[me], peers[peer])) {
    case Locality::SameProcess: text = "same process: plain memory (host), pointers (device)"; break;
    case Locality::SameHost: text = "same host: shared memory (host), CUDA IPC or staged FIFOs (device)"; break;
    case Locality::OtherHost: text = "other host: UCX (host memory); device memory: not supported across hosts yet"; break;
  }
  return "rank " + std::to_string(me) + " -> rank " + std::to_string(peer) + ": " + text;
}

void logChoices(const std::vector<PeerInfo>& peers, int me) {
  if (!logEnabled(LogLevel::Info, kNet | kP2p)) return;
  for (int p = 0; p < static_cast<int>(peers.size()); ++p)
    if (p != me) BRAID_INFO(kNet | kP2p, "transport: %s", describeChoice(peers, me, p).c_str());
}

}  // namespace braid::transport
