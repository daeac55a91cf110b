// N ranks as N threads of one process, all on one GPU (or spread over the GPUs present),
// connected all-to-all on every channel by the P2P transport (direct pointers). Used by the
// GPU tests and the benchmark; needs no communicator.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "gpu_present.h"
#include "kernels/executor.h"
#include "kernels/work_cache.h"
#include "thread_bootstrap.h"
#include "transport/p2p.h"

namespace braid::gputest {

// Reports and returns false when a CUDA call fails.
bool cudaOk(cudaError_t e, const char* what);
#define GPU_OK(call) ::braid::gputest::cudaOk((call), #call)


struct GroupOptions {
  int nRanks = 2;
  int nChannels = 2;
  uint32_t slotBytes = 64 * 1024;
  uint32_t nSlots = 8;
  int nDevices = 1;  // ranks are spread round-robin over this many GPUs
  int threadsPerBlock = 512;
  int slicesPerStep = 2;  // kernels::Launch::slicesPerStep
  size_t workCacheEntries = 32;  // per rank, as the API keeps (kernels::WorkCache); 0: none
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
  // Elements one step may carry for `type` (half the FIFO), for CollArgs::maxStepElems.
  uint64_t maxStepElems(ncclDataType_t type) const;

  // Builds rank `rank`'s plan for `call` and enqueues it on the rank's stream (several calls
  // form a group sharing one launch). Returns the executor's result.
  ncclResult_t enqueue(int rank, const std::vector<CollCall>& calls);
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
  size_t fifoBytesPerRank() const;
  // Rank `rank`'s kept work (null without one).
  kernels::WorkCache* workCache(int rank) const { return caches_.empty() ? nullptr : caches_[rank].get(); }

 private:
  RankGroup() = default;
  GroupOptions options_;
  std::vector<cudaStream_t> streams_;
  std::unique_ptr<ThreadBootstrapHub> hub_;
  std::vector<std::unique_ptr<ThreadBootstrap>> boots_;  // outlive the transports (teardown barrier)
  std::vector<std::unique_ptr<transport::P2pTransport>> transports_;
  volatile uint32_t* abortFlag_ = nullptr;
  uint32_t* errors_ = nullptr;
  std::vector<std::unique_ptr<kernels::WorkCache>> caches_;
};

}  // namespace braid::gputest
