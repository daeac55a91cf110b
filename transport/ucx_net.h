// FIFOs to ranks on other hosts, over UCX (UCP tag messages), for both engines. The CPU
// engine keeps writing and reading the same FIFOs (transport/host_fifo.h) as for a peer on
// this host, the GPU kernels the same Simple FIFOs as for a host-staged peer
// (transport/net_device.h); here both ends hold their own copy in local memory and one proxy
// thread per communicator moves the slots (transport/net_fifo.h): it sends each slot the
// engine posts (the CPU engine's: header and data as one two-part message; the GPU's: the
// whole slot), posts receives straight into free slots, and returns the receiver's
// consumption to the sender as credits, so that no side writes a slot its peer has not freed.
//   sender FIFO: tail = slots the engine posted; head = slots whose send completed.
//   receiver FIFO: tail = slots received; head = slots the engine consumed (sent back as credit).
// The UCP worker is used by one thread at a time after init: the proxy thread, or the CPU
// engine's thread inside progress(); the proxy sleeps on the worker's event file descriptor
// when idle. A GPU cannot wake it: after kick() it polls the GPU's counters instead (below).
#pragma once
#include <memory>

#include "nccl.h"
#include "transport/net_fifo.h"

struct ncclComm;

namespace braid::transport {

class UcxNet {
 public:
  static constexpr int kPollWindowMs = 200;
  static constexpr int kAllChannels = 1 << 30;  // kick(): every proxy
  // Collective over the communicator's bootstrap, on every rank when some rank is on another
  // host (transport/select.h needsNetwork): UCX
  // opened (libucp.so.0 at run time), a worker whose address every rank receives, endpoints
  // to the ranks on other hosts, the proxy thread. A rank that cannot start UCX still joins
  // the exchange, so every rank fails together, naming it and why.
  static ncclResult_t create(ncclComm* comm, std::shared_ptr<UcxNet>* out);
  virtual ~UcxNet() = default;
  // One direction of a (channel, peer) connection, its FIFO in this rank's memory; it must
  // outlive close() (keep() hands memory over that close() releases). `fifo.space` keeps the
  // two engines' connections on one (channel, peer) apart.
  virtual ncclResult_t addSender(int channel, int peer, const NetFifo& fifo) = 0;
  virtual ncclResult_t addReceiver(int channel, int peer, const NetFifo& fifo) = 0;
  // Held until the proxy has stopped (close()), then released: memory that the proxy may
  // touch until then, such as the GPU connections' pinned FIFOs.
  virtual void keep(std::shared_ptr<void> memory) = 0;
  // Work may have been enqueued on the GPU for polled connections (NetFifo::polled) on channels
  // below `channels`: the proxies of those channels (ucx_proxies.h) wake and poll their
  // counters, without sleeping, until none has moved for kPollWindowMs; after that they look
  // at them at least every millisecond. A proxy with none of those channels stays asleep.
  virtual void kick(int channels) = 0;
  // Whether this UCX reports CUDA memory support (UCS_MEMORY_TYPE_CUDA in its context's
  // memory types): what handing device buffers to UCX directly (GPUDirect RDMA) needs.
  virtual bool cudaMemory() const = 0;
  // From the engine's thread while it runs a call on this communicator, and once as the call
  // ends (`flush`): the proxy's work done on that thread, so that a slot the engine posted
  // leaves at once and an arrival lands while the engine looks, instead of after the proxy
  // thread is scheduled (two handoffs per hop, each a scheduler wake on a busy machine).
  // Without `flush` it skips when the proxy is in the middle of a round; with it, it waits for
  // that round. True when something moved.
  virtual bool progress(bool flush) = 0;
  // Stops the proxy: outstanding sends are flushed (abort: dropped), receives cancelled,
  // endpoints closed. Bounded in time. Idempotent.
  virtual void close(bool abort) = 0;
};

}  // namespace braid::transport
