// N ranks as N threads of one process, all on one GPU (or spread over the GPUs present),
// connected all-to-all on every channel by the P2P transport (direct pointers). Used by the
// GPU tests and the benchmark; needs no communicator.
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "gpu_present.h"
#include "kernels/executor.h"
#include "kernels/graph_work.h"
#include "kernels/work_cache.h"
#include "thread_bootstrap.h"
#include "transport/p2p.h"

namespace braid::algo {
// gtest prints a protocol parameter by name.
inline void PrintTo(Protocol p, std::ostream* os) { *os << protocolName(p); }
}  // namespace braid::algo

namespace braid::gputest {

// Reports and returns false when a CUDA call fails.
bool cudaOk(cudaError_t e, const char* what);
#define GPU_OK(call) ::braid::gputest::cudaOk((call), #call)


struct GroupOptions {
  int nRanks = 2;
  int nChannels = 2;
  uint32_t slotBytes = 64 * 1024;  // Simple's slots
  uint32_t nSlots = 8;             // every protocol's
  // The protocols to connect (each has FIFOs of its own) and their slots (whole lines).
  std::vector<algo::Protocol> protocols = {algo::Protocol::Simple};
  uint32_t llSlotBytes = kernels::defaultFifo(algo::Protocol::LL).slotBytes;
  uint32_t ll128SlotBytes = kernels::defaultFifo(algo::Protocol::LL128).slotBytes;
  int nDevices = 1;  // ranks are spread round-robin over this many GPUs
  int threadsPerBlock = 512;
  int slicesPerStep = 2;  // kernels::Launch::slicesPerStep
  size_t workCacheEntries = 32;  // per rank, as the API keeps (kernels::WorkCache); 0: keep none
};

// One collective of one rank, as the test describes it.
struct CollCall {
  const algo::Algorithm* algorithm = nullptr;
  algo::CollArgs args;   // rank is filled in per rank
  ncclDataType_t type = ncclFloat32;
  kernels::RedOp red;
  void* input = nullptr;
  void* output = nullptr;
};

class RankGroup {
 public:
  ~RankGroup();
  // Creates streams, flags and the transports. Empty on failure (the message on stderr).
  static std::unique_ptr<RankGroup> create(const GroupOptions& options);

  int nRanks() const { return options_.nRanks; }
  int device(int rank) const { return rank % options_.nDevices; }
  cudaStream_t stream(int rank) const { return streams_[rank]; }
  const GroupOptions& options() const { return options_; }
  volatile uint32_t* abortFlag() { return abortFlag_; }
  uint32_t deviceError(int rank) const { return errors_[rank]; }
  void clearErrors();
  // The FIFO shape of protocol `p`'s connections.
  kernels::FifoShape fifoShape(algo::Protocol p) const;
  // Elements one step may carry for `type` (half the FIFO's data), for CollArgs::maxStepElems.
  uint64_t maxStepElems(ncclDataType_t type, algo::Protocol p = algo::Protocol::Simple) const;
  // What a launch asked to run with `asked` runs with, as the API decides it
  // (kernels::usableProtocol): LL128 only when every connection is ordered128.
  algo::Protocol usableProtocol(algo::Protocol asked);
  bool connected(algo::Protocol p) const { return !transports_[int(p)].empty(); }

  // Builds rank `rank`'s plan for `call` and enqueues it on the rank's stream (several calls
  // form a group sharing one launch) with protocol `protocol`, which must be connected.
  // Returns the executor's result.
  ncclResult_t enqueue(int rank, const std::vector<CollCall>& calls, algo::Protocol protocol = algo::Protocol::Simple);
  // Runs fn(rank) on one thread per rank, concurrently, and joins them.
  void onEachRank(const std::function<void(int rank)>& fn);
  // Waits for every rank's stream; false when one failed.
  bool synchronize();
  // Waits for all work on the group's devices, such as cudaMemcpy uploads from pageable
  // memory (which may still be in flight when cudaMemcpy returns).
  bool settle();
  // Waits up to `seconds` for every rank's stream. On a timeout, prints each connection's
  // counters (where the ranks stand), raises the abort flag, waits, and returns false.
  bool waitOrAbort(double seconds);
  size_t fifoBytesPerRank() const;  // every protocol's
  // Rank `rank`'s kept work.
  kernels::WorkCache* workCache(int rank) const { return caches_[rank].get(); }
  // Rank `rank`'s buffers for captured work.
  kernels::GraphWork* graphWork(int rank) const { return graphWork_[rank].get(); }

 private:
  RankGroup() = default;
  GroupOptions options_;
  std::vector<cudaStream_t> streams_;
  std::unique_ptr<ThreadBootstrapHub> hub_;
  std::vector<std::unique_ptr<ThreadBootstrap>> boots_;  // outlive the transports (teardown barrier)
  std::vector<std::unique_ptr<transport::P2pTransport>> transports_[algo::kNumProtocols];  // per rank
  bool ordered128_ = false;  // every rank's LL128 ends are ordered128
  std::atomic<bool> saidNoLL128_{false};
  volatile uint32_t* abortFlag_ = nullptr;
  uint32_t* errors_ = nullptr;
  std::vector<std::unique_ptr<kernels::WorkCache>> caches_;  // per rank
  std::vector<std::unique_ptr<kernels::GraphWork>> graphWork_;
};

}  // namespace braid::gputest
