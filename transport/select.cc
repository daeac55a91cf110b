#include "transport/select.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>

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

namespace {

// Whether UCX_TLS leaves UCX a transport that can reach GPU memory over a NIC: unset, an
// exclusion list ("^..."), "all", or a name of the InfiniBand family (rc, dc, ud, ib...).
bool tlsAllowsRdma(const char* tls) {
  if (tls == nullptr || tls[0] == '^') return true;
  const std::string list(tls);
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string t = list.substr(start, end - start);
    if (t == "all" || t.rfind("rc", 0) == 0 || t.rfind("dc", 0) == 0 || t.rfind("ud", 0) == 0 || t.rfind("ib", 0) == 0)
      return true;
    start = end + 1;
  }
  return false;
}

bool rdmaDeviceHere() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
  return !ec && it != std::filesystem::directory_iterator();
}

}  // namespace

GpuDirect gpuDirectChoice(bool ucxCudaMemory, const char* setting, const char* ucxTls, bool rdmaDevice) {
  if (!ucxCudaMemory) return GpuDirect::NoCudaUcx;
  if (setting != nullptr && std::strcmp(setting, "0") == 0) return GpuDirect::TurnedOff;
  if (setting != nullptr && std::strcmp(setting, "1") == 0) return GpuDirect::On;
  return rdmaDevice && tlsAllowsRdma(ucxTls) ? GpuDirect::On : GpuDirect::NoRdma;
}

GpuDirect gpuDirectChoice(bool ucxCudaMemory) {
  return gpuDirectChoice(ucxCudaMemory, env::get("BRAID_GPUDIRECT"), env::get("UCX_TLS"), rdmaDeviceHere());
}

namespace {

const char* slotsIn(GpuDirect g) {
  switch (g) {
    case GpuDirect::On: return "in device memory handed to UCX (GPUDirect)";
    case GpuDirect::TurnedOff: return "staged in pinned host memory (GPUDirect off: BRAID_GPUDIRECT=0)";
    case GpuDirect::NoRdma: return "staged in pinned host memory (GPUDirect off: no RDMA device or transport)";
    case GpuDirect::NoCudaUcx: break;
  }
  return "staged in pinned host memory";
}

const char* whyGpuDirect(GpuDirect g) {
  switch (g) {
    case GpuDirect::On:
      return "UCX reports CUDA memory support (UCS_MEMORY_TYPE_CUDA): device-memory connections to other hosts hand "
             "their FIFO slots to UCX in device memory (GPUDirect)";
    case GpuDirect::TurnedOff:
      return "UCX reports CUDA memory support (UCS_MEMORY_TYPE_CUDA), but BRAID_GPUDIRECT=0: device-memory "
             "connections to other hosts stage through pinned host memory";
    case GpuDirect::NoRdma:
      return "UCX reports CUDA memory support (UCS_MEMORY_TYPE_CUDA), but no RDMA device is here (/sys/class/"
             "infiniband) or UCX_TLS names no RDMA transport: device-memory connections to other hosts stage through "
             "pinned host memory, since UCX would copy each device slot through host memory itself (15-70x slower "
             "over TCP); BRAID_GPUDIRECT=1 hands device memory to UCX anyway";
    case GpuDirect::NoCudaUcx: break;
  }
  return "UCX here has no CUDA memory support (UCS_MEMORY_TYPE_CUDA), so no GPUDirect RDMA: device-memory connections "
         "to other hosts stage through pinned host memory (a UCX built with CUDA, e.g. the libucx-cu13 wheel, through "
         "BRAID_UCX_LIBRARY, would take device memory where an RDMA device is)";
}

}  // namespace

std::string describeChoice(const std::vector<PeerInfo>& peers, int me, int peer, GpuDirect gpuDirect) {
  const PeerInfo &a = peers[me], &b = peers[peer];
  const Locality where = localityOf(a, b);
  std::string detail;
  switch (where) {
    case Locality::SameProcess: detail = "pointers"; break;
    case Locality::SameHost: detail = "CUDA IPC, or FIFOs staged in pinned shared memory"; break;
    case Locality::OtherHost: detail = std::string("Simple FIFOs ") + slotsIn(gpuDirect) + ", no LL/LL128"; break;
  }
  static const char* const kWhere[] = {"same process", "same host", "other host"};
  return "rank " + std::to_string(me) + " -> rank " + std::to_string(peer) + ": " + kWhere[int(where)] + ": " +
         hostTransportOf(a, b).name() + " for host memory, " + deviceTransportOf(a, b).name() +
         " for device memory (" + detail + ")";
}

void logChoices(const std::vector<PeerInfo>& peers, int me, GpuDirect gpuDirect) {
  if (!logEnabled(LogLevel::Info, kNet | kP2p)) return;
  for (int p = 0; p < static_cast<int>(peers.size()); ++p)
    if (p != me) BRAID_INFO(kNet | kP2p, "transport: %s", describeChoice(peers, me, p, gpuDirect).c_str());
  static std::atomic<bool> said{false};
  if (needsNetwork(peers, me) && !said.exchange(true)) BRAID_INFO(kNet | kP2p, "rank %d: %s", me, whyGpuDirect(gpuDirect));
}

}  // namespace braid::transport
