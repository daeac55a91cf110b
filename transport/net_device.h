// GPU connections to ranks on other hosts (issue 15), host-staged: the kernels see the same
// Simple-protocol ends (transport/p2p_fifo.h) as for a host-staged peer on this host, and run
// unchanged; the UCX proxy (transport/ucx_net.h) joins the two hosts.
//
// Each end has its own FIFO in memory that both its CPU and its GPU reach (pinned, mapped:
// cudaHostAlloc), zero-filled; where UCX takes CUDA memory (GPUDirect, select.h
// netSlotsInDeviceMemory) the slots are in device memory instead (cudaMalloc), which the proxy
// hands to UCX without touching, and only the counters stay in pinned host memory:
//   send end:    an outbox of nSlots slots + the tail the kernel writes (as if it were the
//                receiver's), the head the proxy writes as slots leave (the kernel's own
//                step beside it, p2p_fifo.h), and the bytes each slot's slice wrote, which
//                the kernel stores before the tail and the proxy sends (not the whole slot).
//   receive end: the slots the proxy receives into + the tail it writes as they arrive (the
//                kernel's own step beside it), and the head the kernel writes as it consumes,
//                which the proxy returns to the sender as credit.
// The proxy reads and writes the counters as the kernel's fences order them (Simple: the tail
// moves after a system-scope fence.acq_rel, so a slot whose tail the proxy has seen is whole;
// the proxy stores the tail only after UCX finished writing the slot). A message carries the
// bytes the slice wrote (an 8-byte call moved 256 KiB per hop before). The kernel cannot
// wake the proxy, so the API calls UcxNet::kick() after each launch.
//
// The memory is handed to the UcxNet (keep()), which frees it after its proxy stopped: the
// communicator closes the GPU side first, then the network.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "nccl.h"
#include "transport/p2p.h"
#include "transport/p2p_fifo.h"
#include "transport/transport.h"

namespace braid::transport {

class UcxNet;

// Memory that this rank's CPU and GPU both reach. `host` is the CPU's address, `dev` the
// kernels'; zero-filled. free(host) releases it.
struct SharedMemory {
  std::function<ncclResult_t(size_t bytes, void** host, void** dev)> alloc;
  std::function<void(void* host)> free;
};
// Pinned, mapped host memory of `cudaDev` (cudaHostAlloc, portable).
SharedMemory cudaPinnedMemory(int rank, int cudaDev);
// Plain host memory, for tests without a GPU: `dev` == `host`.
SharedMemory plainHostMemory();

// Device memory for the slots that UCX takes directly (GPUDirect). free(dev) releases it.
struct DeviceMemory {
  std::function<ncclResult_t(size_t bytes, void** dev)> alloc;
  std::function<void(void* dev)> free;
};
// cudaMalloc on `cudaDev`.
DeviceMemory cudaDeviceMemory(int rank, int cudaDev);

// The ucx seam's GPU connections (transport.h); netDeviceTransport() makes them.
class NetDeviceLinks final : public DeviceLinks {
 public:
  // Not collective: each end sets itself up; the first slot a sender's proxy sends waits for
  // the receiver's posted receive (UCX's tag matching). slotBytes a multiple of 16, nSlots
  // at most kMaxNetSlots (net_fifo.h). Peers must be on other hosts, `net` connected to them.
  // `slotMemory`: where the slots go when UCX takes them in device memory (`net` must then
  // report cudaMemory()); nullptr: in `memory` with the counters.
  static ncclResult_t connect(UcxNet& net, int rank, const SharedMemory& memory, const DeviceMemory* slotMemory,
                              uint32_t slotBytes, uint32_t nSlots,
                              const std::vector<P2pLink>& sendTo, const std::vector<P2pLink>& recvFrom,
                              std::unique_ptr<NetDeviceLinks>* out);

  // False when connect() was not asked for that link. Never ordered128 (select.h carriesLL128).
  bool sendEnd(int channel, int peer, FifoSendEnd* out) const override;
  bool recvEnd(int channel, int peer, FifoRecvEnd* out) const override;
  size_t bytesAllocated() const override { return bytes_; }
  size_t hostBytes() const override { return hostBytes_; }
  bool systemScope() const override { return true; }  // the proxy reads and writes them
  bool proxied() const override { return true; }
  ncclResult_t close() override { return ncclSuccess; }  // the memory is the UcxNet's (keep())

 private:
  NetDeviceLinks() = default;
  std::vector<P2pLink> sendTo_, recvFrom_;
  std::vector<FifoSendEnd> sendEnds_;
  std::vector<FifoRecvEnd> recvEnds_;
  size_t bytes_ = 0;
  size_t hostBytes_ = 0;  // the counters, and the slots unless they are in device memory
};

}  // namespace braid::transport
