// Host-memory FIFOs to ranks on other hosts, over UCX (UCP tag messages). The CPU engine keeps
// writing and reading the same FIFOs (transport/host_fifo.h) as for a peer on this host; here
// both ends hold their own copy in local memory and one proxy thread per communicator moves
// the slots: it sends each slot the engine posts (header and data as one two-part message),
// posts receives straight into free slots, and returns the receiver's consumption to the
// sender as credits, so that no side writes a slot its peer has not freed.
//   sender FIFO: tail = slots the engine posted; head = slots whose send completed.
//   receiver FIFO: tail = slots received; head = slots the engine consumed (sent back as credit).
// The UCP worker and every call into UCX stay on the proxy thread after init.
#pragma once
#include <memory>

#include "nccl.h"

struct ncclComm;

namespace braid::transport {

class UcxNet {
 public:
  // Collective over the communicator's bootstrap, on every rank when some rank is on another
  // host (transport/select.h needsNetwork): UCX
  // opened (libucp.so.0 at run time), a worker whose address every rank receives, endpoints
  // to the ranks on other hosts, the proxy thread. A rank that cannot start UCX still joins
  // the exchange, so every rank fails together, naming it and why.
  static ncclResult_t create(ncclComm* comm, std::shared_ptr<UcxNet>* out);
  virtual ~UcxNet() = default;
  // One direction of a (channel, peer) connection, its FIFO (FifoLayout) in this rank's
  // memory; it must outlive close().
  virtual ncclResult_t addSender(int channel, int peer, void* fifo) = 0;
  virtual ncclResult_t addReceiver(int channel, int peer, void* fifo) = 0;
  // Stops the proxy: outstanding sends are flushed (abort: dropped), receives cancelled,
  // endpoints closed. Bounded in time. Idempotent.
  virtual void close(bool abort) = 0;
};

}  // namespace braid::transport
