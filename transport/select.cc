#include "transport/select.h"

#include <atomic>
#include <cstring>

#include "core/env.h"
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

DeviceTransport deviceTransportOf(const PeerInfo& me, const PeerInfo& peer) {
  return localityOf(me, peer) == Locality::OtherHost ? DeviceTransport::NetStaged : DeviceTransport::P2p;
}

bool carriesLL(DeviceTransport t) { return t == DeviceTransport::P2p; }
bool carriesLL128(DeviceTransport t) { return t == DeviceTransport::P2p; }

bool netSlotsInDeviceMemory(bool ucxCudaMemory, const char* setting) {
  return ucxCudaMemory && !(setting != nullptr && std::strcmp(setting, "0") == 0);
}

bool netSlotsInDeviceMemory(bool ucxCudaMemory) {
  return netSlotsInDeviceMemory(ucxCudaMemory, env::get("BRAID_GPUDIRECT"));
}

std::string describeChoice(const std::vector<PeerInfo>& peers, int me, int peer, bool ucxCudaMemory, bool gpuDirect) {
  std::string text;
  switch (localityOf(peers[me], peers[peer])) {
    case Locality::SameProcess: text = "same process: plain memory (host), pointers (device)"; break;
    case Locality::SameHost: text = "same host: shared memory (host), CUDA IPC or staged FIFOs (device)"; break;
    case Locality::OtherHost:
      text = std::string("other host: UCX (host memory: the CPU engine's FIFOs; device memory: Simple FIFOs ") +
             (gpuDirect ? "in device memory handed to UCX (GPUDirect)"
                        : ucxCudaMemory ? "staged in pinned host memory (GPUDirect off: BRAID_GPUDIRECT=0)"
                                        : "staged in pinned host memory") +
             ", no LL/LL128)";
      break;
  }
  return "rank " + std::to_string(me) + " -> rank " + std::to_string(peer) + ": " + text;
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
