#include "transport/select.h"

#include <atomic>
#include <cstring>

#include "core/env.h"
#include "core/log.h"
#include "transport/p2p.h"

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

const std::vector<const DeviceTransport*>& deviceTransports() {
  static const std::vector<const DeviceTransport*> all{&p2pDeviceTransport(), &netDeviceTransport()};
  return all;
}

const DeviceTransport& deviceTransportOf(const PeerInfo& me, const PeerInfo& peer) {
  for (const DeviceTransport* t : deviceTransports())
    if (t->canConnect(me, peer)) return *t;
  return netDeviceTransport();  // not reached: the two cover every pair
}

bool llEverywhere(const std::vector<PeerInfo>& peers) {
  for (const PeerInfo& a : peers)
    for (const PeerInfo& b : peers)
      if (!deviceTransportOf(a, b).carriesLL()) return false;
  return true;
}

bool ll128Everywhere(const std::vector<PeerInfo>& peers, int me) {
  std::vector<P2pPeerInfo> p2pPeers;
  for (const PeerInfo& a : peers) {
    for (const PeerInfo& b : peers)
      if (!deviceTransportOf(a, b).carriesLL128()) return false;
    p2pPeers.push_back(p2pPeerInfo(a));
  }
  return ordered128Everywhere(p2pPeers, me, env::getInt("NCCL_P2P_DISABLE", 0) != 0, cudaGpuQueries());
}

const HostLinkTransport& hostTransportOf(const PeerInfo& me, const PeerInfo& peer) {
  for (const HostLinkTransport* t : {&memoryHostTransport(), &shmHostTransport(), &netHostTransport()})
    if (t->canConnect(me, peer)) return *t;
  return netHostTransport();  // not reached: the three cover every pair
}

bool netSlotsInDeviceMemory(bool ucxCudaMemory, const char* setting) {
  return ucxCudaMemory && !(setting != nullptr && std::strcmp(setting, "0") == 0);
}

bool netSlotsInDeviceMemory(bool ucxCudaMemory) {
  return netSlotsInDeviceMemory(ucxCudaMemory, env::get("BRAID_GPUDIRECT"));
}

std::string describeChoice(const std::vector<PeerInfo>& peers, int me, int peer, bool ucxCudaMemory, bool gpuDirect) {
  const PeerInfo &a = peers[me], &b = peers[peer];
  const Locality where = localityOf(a, b);
  std::string detail;
  switch (where) {
    case Locality::SameProcess: detail = "pointers"; break;
    case Locality::SameHost: detail = "CUDA IPC, or FIFOs staged in pinned shared memory"; break;
    case Locality::OtherHost:
      detail = std::string("Simple FIFOs ") +
               (gpuDirect ? "in device memory handed to UCX (GPUDirect)"
                          : ucxCudaMemory ? "staged in pinned host memory (GPUDirect off: BRAID_GPUDIRECT=0)"
                                          : "staged in pinned host memory") +
               ", no LL/LL128";
      break;
  }
  static const char* const kWhere[] = {"same process", "same host", "other host"};
  return "rank " + std::to_string(me) + " -> rank " + std::to_string(peer) + ": " + kWhere[int(where)] + ": " +
         hostTransportOf(a, b).name() + " for host memory, " + deviceTransportOf(a, b).name() +
         " for device memory (" + detail + ")";
}

void logChoices(const std::vector<PeerInfo>& peers, int me, bool ucxCudaMemory, bool gpuDirect) {
  if (!logEnabled(LogLevel::Info, kNet | kP2p)) return;
  for (int p = 0; p < static_cast<int>(peers.size()); ++p)
    if (p != me) BRAID_INFO(kNet | kP2p, "transport: %s", describeChoice(peers, me, p, ucxCudaMemory, gpuDirect).c_str());
  static std::atomic<bool> said{false};
  if (needsNetwork(peers, me) && !said.exchange(true))
    BRAID_INFO(kNet | kP2p,
               "rank %d: %s", me,
               gpuDirect ? "UCX reports CUDA memory support (UCS_MEMORY_TYPE_CUDA): device-memory connections to "
                           "other hosts hand their FIFO slots to UCX in device memory (GPUDirect)"
               : ucxCudaMemory ? "UCX reports CUDA memory support (UCS_MEMORY_TYPE_CUDA), but BRAID_GPUDIRECT=0: "
                                 "device-memory connections to other hosts stage through pinned host memory"
                               : "UCX here has no CUDA memory support (UCS_MEMORY_TYPE_CUDA), so no GPUDirect RDMA: "
                                 "device-memory connections to other hosts stage through pinned host memory (a UCX "
                                 "built with CUDA, e.g. the libucx-cu13 wheel, through BRAID_UCX_LIBRARY, would take "
                                 "device memory)");
}

}  // namespace braid::transport
