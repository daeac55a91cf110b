// What a communicator needs for device-memory collectives: GPU FIFO connections (created
// batch by batch, as collectives first need them), and host-mapped abort and error words
// that the kernels poll and write.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/comm.h"
#include "kernels/executor.h"
#include "kernels/work_cache.h"
#include "transport/p2p.h"

namespace braid::api {

class GpuResources final : public DeviceResources {
 public:
  static constexpr uint32_t kSlotBytes = 256 * 1024;
  static constexpr uint32_t kSlots = 8;

  ~GpuResources() override;
  static ncclResult_t create(ncclComm* comm, GpuResources** out);

  // (channel, peer) links, sorted and without repeats.
  using Links = std::vector<std::pair<int, int>>;
  // Connects the links that are not connected yet (pairwise with the peers concerned; the
  // peers ask for the matching links in the same call).
  ncclResult_t ensureLinks(const Links& sends, const Links& recvs);
  // The ends of these links, in order, for a launch; false (and `launch` untouched) when one
  // is not connected yet.
  bool linkEnds(const Links& sends, const Links& recvs, kernels::Launch* launch) const;

  volatile uint32_t* abortWord() const { return abortHost_; }
  const volatile uint32_t* abortWordDevice() const { return abortDev_; }
  uint32_t* errorWordDevice() const { return errorDev_; }
  uint32_t errorWord() const { return errorHost_ ? *errorHost_ : 0; }
  // Whether `peer`'s kernels run on this rank's GPU (same host, same PCI bus id).
  bool peerOnThisGpu(int peer) const { return sameGpu_[peer]; }
  // Whether any connection stages through host memory (then fences stay at system scope:
  // the processes map the pages at different addresses).
  bool anyHostStaged() const;
  size_t bytesAllocated() const;
  // Device copies of large launches' work, reused by calls that repeat them.
  kernels::WorkCache* workCache() const { return workCache_.get(); }
  void close(bool abort) override;
  void signalAbort() override {
    if (abortHost_) *abortHost_ = 1;
  }
  void stopInFlight() override;
  ncclResult_t asyncError() const override { return errorWord() ? ncclRemoteError : ncclSuccess; }

 private:
  explicit GpuResources(ncclComm* comm) : comm_(comm) {}
  ncclComm* comm_;
  std::vector<std::unique_ptr<transport::P2pTransport>> transports_;
  // The connected links' ends, by (channel, peer): found per launch without asking each transport.
  std::map<std::pair<int, int>, transport::FifoSendEnd> sendEnds_;
  std::map<std::pair<int, int>, transport::FifoRecvEnd> recvEnds_;
  uint32_t* words_ = nullptr;  // pinned, mapped: [0] abort, [1] error
  volatile uint32_t* abortHost_ = nullptr;
  const volatile uint32_t* abortDev_ = nullptr;
  volatile uint32_t* errorHost_ = nullptr;
  uint32_t* errorDev_ = nullptr;
  std::vector<bool> sameGpu_;  // by rank
  std::unique_ptr<kernels::WorkCache> workCache_;
};

}  // namespace braid::api
