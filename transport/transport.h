// The transport seam (issue 15 item 1): one interface per engine over the ways two ranks'
// FIFOs are joined, and select.h, which picks an implementation per peer pair.
//
//   GPU connections (the executor's FIFOs, kernels/proto_*.cuh write and read them):
//     p2p  (p2p.h):        pointers within a process, CUDA IPC between processes of one host,
//                          or the region staged in pinned shared host memory where a linked
//                          GPU cannot reach this one (or NCCL_P2P_DISABLE=1). Staging is
//                          decided per region, for all of its links at once (planStaging), so
//                          it stays inside this transport rather than being one of its own.
//     ucx  (net_device.h): Simple FIFOs at each end that the UCX proxy moves, to other hosts.
//   host-memory connections (the CPU engine's FIFOs, host_fifo.h):
//     memory (host_links_memory.cc), shared memory (host_links_shm.cc), ucx (host_links_net.cc).
//
// A transport says whether it can join two ranks; select.cc asks each in order and takes the
// first that can.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/bootstrap.h"
#include "core/peer_info.h"
#include "nccl.h"
#include "transport/p2p_fifo.h"

struct ncclComm;

namespace braid::transport {

class UcxNet;

// One connection seen from this rank: (channel, the other rank).
struct P2pLink {
  int channel = 0;
  int peer = 0;
};

// ---- GPU connections ----

// What making GPU connections needs from the communicator.
struct DeviceConnectContext {
  Bootstrap* boot = nullptr;                    // the communicator's (p2p's connect is collective)
  const std::vector<PeerInfo>* peers = nullptr;  // by rank
  int rank = -1;
  int cudaDev = -1;
  UcxNet* net = nullptr;  // null when no rank is on another host
  uint32_t slotBytes = 0;  // the protocol's FIFO shape (kernels/proto_layout.h)
  uint32_t nSlots = 0;
};

// The GPU connections one transport made in one call: the FIFO ends the kernels use.
class DeviceLinks {
 public:
  virtual ~DeviceLinks() = default;
  // False when the connect call was not asked for that link.
  virtual bool sendEnd(int channel, int peer, FifoSendEnd* out) const = 0;
  virtual bool recvEnd(int channel, int peer, FifoRecvEnd* out) const = 0;
  virtual size_t bytesAllocated() const = 0;
  // Bytes of them in pinned host memory.
  virtual size_t hostBytes() const = 0;
  // Whether something other than this GPU's kernels and its peers' reads or writes the FIFOs:
  // host memory, or the UCX proxy (the kernels' fences then stay at system scope).
  virtual bool systemScope() const = 0;
  // Whether the UCX proxy moves them; a kernel cannot wake it, so each launch does (UcxNet::kick).
  virtual bool proxied() const = 0;
  // Orderly release (collective where connect was). The destructor frees without waiting for
  // peers (abort paths).
  virtual ncclResult_t close() = 0;
};

class DeviceTransport {
 public:
  virtual ~DeviceTransport() = default;
  virtual const char* name() const = 0;
  virtual bool canConnect(const PeerInfo& me, const PeerInfo& peer) const = 0;
  // Which protocols its FIFOs carry besides Simple (select.h says why).
  virtual bool carriesLL() const = 0;
  virtual bool carriesLL128() const = 0;
  // Connects these links, all to peers this transport can connect. A send link (c, p) on rank
  // r needs the recv link (c, r) on rank p in the same call there.
  virtual ncclResult_t connect(const DeviceConnectContext& ctx, const std::vector<P2pLink>& sends,
                               const std::vector<P2pLink>& recvs, std::unique_ptr<DeviceLinks>* out) const = 0;
};

const DeviceTransport& p2pDeviceTransport();  // p2p.cc
const DeviceTransport& netDeviceTransport();  // net_device.cc

// ---- host-memory connections ----

// (channel, peer) for one direction.
using ConnKey = std::pair<int, int>;

// One end of a host connection, as its transport made it.
struct HostSegment {
  void* base = nullptr;  // FifoLayout (host_fifo.h)
  std::string shmName;   // a shared-memory name still linked
};

// What a receiver tells its sender, over the bootstrap, about the FIFO it made.
struct HostOffer {
  uint64_t inProcessAddress = 0;  // memory: the FIFO's address
  char shmName[64] = {};          // shared memory: the segment's name
};

// A CPU engine connection is made in three phases, so that ranks handled by one thread
// (several communicators in a group) never wait on each other (transport/host_transport.h):
// the receiver makes its FIFO and offers it (never blocks), the sender attaches (waits for
// the offer, acknowledges), the receiver finishes (waits for the acknowledgement). A
// transport whose ends each have a FIFO of their own offers nothing.
class HostLinkTransport {
 public:
  virtual ~HostLinkTransport() = default;
  virtual const char* name() const = 0;
  virtual bool canConnect(const PeerInfo& me, const PeerInfo& peer) const = 0;
  // Whether the receiver offers its FIFO to the sender and waits for an acknowledgement.
  virtual bool offers() const = 0;
  // Receiver: makes this end's FIFO (its control block initialised) and, where offers(),
  // fills `offer`. On failure `seg` holds whatever was made, for release().
  virtual ncclResult_t makeReceiver(ncclComm* comm, const ConnKey& key, HostSegment* seg, HostOffer* offer) const = 0;
  // Sender: reaches the receiver's FIFO from its offer, or makes its own where !offers().
  virtual ncclResult_t attachSender(ncclComm* comm, const ConnKey& key, const HostOffer& offer,
                                    HostSegment* seg) const = 0;
  // Receiver: the sender acknowledged, so what only the handshake needed may go (a name).
  virtual void acknowledged(HostSegment* /*seg*/) const {}
  // After a failed phase: removes any name of this connection that may still exist, ours or
  // the peer's (names are derived, so a survivor removes what a dead peer made). `seg`: this
  // end's, or null where this side made none.
  virtual void abandon(ncclComm* /*comm*/, const ConnKey& /*key*/, bool /*send*/, HostSegment* /*seg*/) const {}
  // A rank of the communicator died: removes what it made as a receiver and never offered.
  virtual void peerDied(ncclComm* /*comm*/, int /*rank*/) const {}
  // Releases one end at close.
  virtual void release(ncclComm* comm, const ConnKey& key, bool send, HostSegment* seg) const = 0;
};

const HostLinkTransport& memoryHostTransport();  // host_links_memory.cc
const HostLinkTransport& shmHostTransport();     // host_links_shm.cc
const HostLinkTransport& netHostTransport();     // host_links_net.cc

}  // namespace braid::transport
