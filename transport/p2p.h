// P2P transport: the Simple-protocol FIFOs between ranks on one node, reached by direct
// pointers (ranks in one process), CUDA IPC (ranks in other processes, on the same GPU or
// another one), or pinned host memory (ranks in one process on GPUs without P2P access).
//
// Each rank makes one allocation of its own (cudaMalloc, rounded up to 2 MiB, so that an
// importer never maps a neighbour's memory) holding, per incoming connection, the FIFO
// slots and the tail counter, and per outgoing connection the head counter. Handles and
// offsets travel over the bootstrap. Peers in other processes on GPUs without P2P access
// are not supported yet: connect() says so and fails.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/bootstrap.h"
#include "nccl.h"
#include "transport/p2p_fifo.h"

namespace braid::transport {

// What this transport needs to know about every rank (the communicator fills it in).
struct P2pPeerInfo {
  int32_t rank = -1;
  int32_t cudaDev = -1;   // the device ordinal as seen by the process that owns the rank
  int64_t pid = 0;
  uint64_t hostHash = 0;  // ranks with equal hostHash and pid share an address space
  int64_t busId = -1;     // PCI bus id of the GPU as a number; tells GPUs apart across processes
};

struct P2pOptions {
  uint32_t slotBytes = 512 * 1024;  // a multiple of 16
  uint32_t nSlots = 8;
};

// One connection seen from this rank: (channel, the other rank).
struct P2pLink {
  int channel = 0;
  int peer = 0;
};

class P2pTransport {
 public:
  // Collective over `boot` (all ranks that share a link call it). A send link (c, p) on
  // rank r needs the recv link (c, r) on rank p. `peers` is indexed by rank.
  static ncclResult_t connect(Bootstrap& boot, const std::vector<P2pPeerInfo>& peers, const P2pOptions& options,
                              const std::vector<P2pLink>& sendTo, const std::vector<P2pLink>& recvFrom,
                              std::unique_ptr<P2pTransport>* out);
  // Frees without the teardown barrier when close() was not called (abort paths).
  ~P2pTransport();
  P2pTransport(const P2pTransport&) = delete;
  P2pTransport& operator=(const P2pTransport&) = delete;

  // Collective: closes imported handles, waits for every peer to do the same, then frees.
  ncclResult_t close();

  // False when connect() was not asked for that link.
  bool sendEnd(int channel, int peer, FifoSendEnd* out) const;
  bool recvEnd(int channel, int peer, FifoRecvEnd* out) const;
  const std::vector<P2pLink>& sendLinks() const { return sendTo_; }
  const std::vector<P2pLink>& recvLinks() const { return recvFrom_; }

  // This rank's FIFO region (device memory, or pinned host memory when staged).
  size_t bytesAllocated() const { return regionBytes_; }
  bool hostStaged() const { return hostStaged_; }

 private:
  P2pTransport() = default;
  void releaseLocal();

  Bootstrap* boot_ = nullptr;
  int rank_ = -1;
  int cudaDev_ = -1;
  char* region_ = nullptr;
  size_t regionBytes_ = 0;
  bool hostStaged_ = false;
  std::vector<P2pLink> sendTo_, recvFrom_;
  std::vector<FifoSendEnd> sendEnds_;
  std::vector<FifoRecvEnd> recvEnds_;
  std::vector<void*> imported_;  // cudaIpcOpenMemHandle results, to close
  bool closed_ = false;
  bool crossProcess_ = false;    // a linked peer lives in another process (close() then waits for it)
};

}  // namespace braid::transport
