// Host connections to ranks on other hosts: a FIFO at each end, in that process's own memory,
// which the communicator's UCX proxy joins (ucx_net.h); nothing is offered (transport.h).
#include "core/comm.h"
#include "core/log.h"
#include "transport/host_fifo.h"
#include "transport/net_fifo.h"
#include "transport/select.h"
#include "transport/ucx_net.h"

namespace braid::transport {
namespace {

class NetHostTransport final : public HostLinkTransport {
 public:
  const char* name() const override { return "UCX"; }
  bool canConnect(const PeerInfo& me, const PeerInfo& peer) const override {
    return localityOf(me, peer) == Locality::OtherHost;
  }
  bool offers() const override { return false; }
  ncclResult_t makeReceiver(ncclComm* comm, const ConnKey& key, HostSegment* seg, HostOffer*) const override {
    return makeEnd(comm, key, /*send=*/false, seg);
  }
  ncclResult_t attachSender(ncclComm* comm, const ConnKey& key, const HostOffer&, HostSegment* seg) const override {
    return makeEnd(comm, key, /*send=*/true, seg);
  }
  void release(ncclComm*, const ConnKey&, bool, HostSegment* seg) const override {
    if (seg->base) freeHostFifo(seg->base);  // the proxy stopped before the engine's connections close
    seg->base = nullptr;
  }

 private:
  static ncclResult_t makeEnd(ncclComm* comm, const ConnKey& key, bool send, HostSegment* seg) {
    auto [channel, peer] = key;
    if (!comm->net) return fail(ncclInternalError, "rank %d: no network transport to rank %d", comm->rank, peer);
    seg->base = newHostFifo();
    if (!seg->base) return fail(ncclSystemError, "host transport: out of memory (%zu bytes)", FifoLayout::kBytes);
    const NetFifo fifo = hostNetFifo(seg->base);
    return send ? comm->net->addSender(channel, peer, fifo) : comm->net->addReceiver(channel, peer, fifo);
  }
};

}  // namespace

const HostLinkTransport& netHostTransport() {
  static const NetHostTransport t;
  return t;
}

}  // namespace braid::transport
