// What a communicator needs for device-memory collectives: GPU FIFO connections (created
// batch by batch, as collectives first need them), and host-mapped abort and error words
// that the kernels poll and write.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "algo/protocol.h"
#include "api/launch_replay.h"
#include "api/served.h"
#include "core/comm.h"
#include "kernels/executor.h"
#include "kernels/graph_work.h"
#include "kernels/work_cache.h"
#include "transport/p2p_fifo.h"
#include "transport/transport.h"

namespace braid::api {

class GpuResources final : public DeviceResources {
 public:
  ~GpuResources() override;
  static ncclResult_t create(ncclComm* comm, GpuResources** out);

  // A connection's FIFO in protocol `p` (kernels/proto_layout.h says why these sizes).
  static kernels::FifoShape fifoShape(algo::Protocol p) { return kernels::defaultFifo(p); }
  // The protocol a call asked to run with `asked` runs: LL128 falls back to Simple (logged
  // once) unless every pair of ranks is on one GPU or joined by NVLink and nothing is
  // staged in host memory; LL falls back to Simple where some pair is on two hosts
  // (transport/select.h carriesLL) -- the same answer on every rank.
  algo::Protocol usableProtocol(algo::Protocol asked);

  // (channel, peer) links, sorted and without repeats.
  using Links = std::vector<std::pair<int, int>>;
  // Connects the links that are not connected yet in protocol `p` (pairwise with the peers
  // concerned; the peers ask for the matching links in the same call). Each protocol has
  // FIFOs of its own, made on its first use on a link.
  ncclResult_t ensureLinks(algo::Protocol p, const Links& sends, const Links& recvs);
  // The ends of these links in protocol `p`, in order, for a launch (launch->protocol set);
  // false (and `launch` untouched) when one is not connected yet.
  bool linkEnds(algo::Protocol p, const Links& sends, const Links& recvs, kernels::Launch* launch) const;

  volatile uint32_t* abortWord() const { return abortHost_; }
  const volatile uint32_t* abortWordDevice() const { return abortDev_; }
  uint32_t* errorWordDevice() const { return errorDev_; }
  uint32_t errorWord() const { return errorHost_ ? *errorHost_ : 0; }
  // Whether `peer`'s kernels run on this rank's GPU (same host, same PCI bus id).
  bool peerOnThisGpu(int peer) const { return sameGpu_[peer]; }
  // Whether something besides GPUs reaches a connection's FIFOs (host-staged pages, which the
  // processes map at different addresses; the UCX proxy): the kernels' fences stay at system scope.
  bool systemScope() const;
  // A launch over channels 0..channels-1 was enqueued: connections to other hosts are polled by
  // the UCX proxies of those channels, which no kernel can wake (UcxNet::kick).
  void launched(int channels) const;
  size_t bytesAllocated() const;
  // Device copies of large launches' work, reused by calls that repeat them.
  kernels::WorkCache* workCache() const { return workCache_.get(); }
  kernels::GraphWork* graphWork() const { return graphWork_.get(); }
  // Launches kept for calls that repeat them (launch_replay.h); the communicator's caller only.
  LaunchReplay& replay() { return replay_; }
  // `bytes` of stream-ordered scratch on `stream`, from a pool that never makes one stream wait
  // for another (kernels/stream_pool.h); free it with cudaFreeAsync. The caller's device is current.
  cudaError_t scratch(size_t bytes, cudaStream_t stream, void** out);
  void close(bool abort) override;
  void signalAbort() override {
    if (abortHost_) *abortHost_ = 1;
    if (served_) served_->release();
    if (comm_->served) comm_->served->release();  // a leader's streams stop waiting for served ranks
  }
  // Set when another process runs this rank's GPU work (served.h): launches are posted to it.
  ServedMember* served() const { return served_.get(); }
  void stopInFlight() override;
  ncclResult_t asyncError() const override { return errorWord() ? ncclRemoteError : ncclSuccess; }

 private:
  explicit GpuResources(ncclComm* comm) : comm_(comm) {}
  ncclResult_t allocateWords();  // the pinned, mapped abort and error words
  ncclComm* comm_;
  std::vector<std::unique_ptr<transport::DeviceLinks>> links_;  // each transport's, per connect call
  // The connected links' ends, by protocol and (channel, peer): found per launch without
  // asking each transport.
  std::map<std::pair<int, int>, transport::FifoSendEnd> sendEnds_[algo::kNumProtocols];
  std::map<std::pair<int, int>, transport::FifoRecvEnd> recvEnds_[algo::kNumProtocols];
  bool ordered128_ = false;               // LL128 may run (transport::ll128Everywhere)
  std::atomic<bool> saidNoLL128_{false};  // the fallback was logged
  bool llEverywhere_ = true;              // LL may run (no pair of ranks across hosts)
  std::atomic<bool> saidNoLL_{false};
  uint32_t* words_ = nullptr;  // pinned, mapped: [0] abort, [1] error
  volatile uint32_t* abortHost_ = nullptr;
  const volatile uint32_t* abortDev_ = nullptr;
  volatile uint32_t* errorHost_ = nullptr;
  uint32_t* errorDev_ = nullptr;
  std::vector<bool> sameGpu_;  // by rank
  std::unique_ptr<ServedMember> served_;  // its control words replace words_
  std::unique_ptr<kernels::WorkCache> workCache_;
  std::unique_ptr<kernels::GraphWork> graphWork_;
  LaunchReplay replay_;
  cudaMemPool_t scratchPool_ = nullptr;  // made on first use
  std::mutex scratchMutex_;
};

}  // namespace braid::api
