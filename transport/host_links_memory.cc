// Host connections between ranks of one process: the receiver's FIFO in its heap, its address
// offered to the sender (transport.h).
#include "core/comm.h"
#include "core/log.h"
#include "transport/host_fifo.h"
#include "transport/select.h"

namespace braid::transport {
namespace {

class MemoryHostTransport final : public HostLinkTransport {
 public:
  const char* name() const override { return "memory"; }
  bool canConnect(const PeerInfo& me, const PeerInfo& peer) const override {
    return localityOf(me, peer) == Locality::SameProcess;
  }
  bool offers() const override { return true; }
  ncclResult_t makeReceiver(ncclComm*, const ConnKey&, HostSegment* seg, HostOffer* offer) const override {
    seg->base = newHostFifo();
    if (!seg->base) return fail(ncclSystemError, "host transport: out of memory (%zu bytes)", FifoLayout::kBytes);
    offer->inProcessAddress = reinterpret_cast<uint64_t>(seg->base);
    return ncclSuccess;
  }
  ncclResult_t attachSender(ncclComm* comm, const ConnKey& key, const HostOffer& offer, HostSegment* seg) const override {
    if (offer.inProcessAddress == 0)
      return fail(ncclInternalError, "host transport (rank %d): rank %d sent a malformed offer", comm->rank, key.second);
    seg->base = reinterpret_cast<void*>(offer.inProcessAddress);
    return ncclSuccess;
  }
  void release(ncclComm*, const ConnKey&, bool send, HostSegment* seg) const override {
    // Only the receiver, its owner, frees it. A same-process sender may still hold the pointer
    // until its own communicator closes; the communicators of one process are destroyed
    // together in practice.
    if (!send && seg->base) freeHostFifo(seg->base);
    seg->base = nullptr;
  }
};

}  // namespace

const HostLinkTransport& memoryHostTransport() {
  static const MemoryHostTransport t;
  return t;
}

}  // namespace braid::transport
