#include "transport/ucx_proxies.h"

#include <sched.h>

#include <algorithm>
#include <mutex>
#include <utility>

#include "core/bootstrap.h"
#include "core/comm.h"
#include "core/env.h"
#include "core/log.h"

namespace braid::transport {

int wantedNetProxies(const ncclComm* comm) {
  const int64_t set = env::getInt("BRAID_NET_PROXIES", 0);
  if (set > 0) return static_cast<int>(std::min<int64_t>(set, kMaxNetProxies));
  int cores = 1;
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) cores = std::max(1, CPU_COUNT(&mask));
  // Ranks on this machine (emulated hosts included: they share its cores).
  int here = 0;
  for (int r = 0; r < comm->nRanks; ++r)
    if (comm->peers[r].machineHash == comm->peers[comm->rank].machineHash) ++here;
  return std::clamp(cores / 2 / std::max(1, here), 1, 4);
}

ncclResult_t agreeNetProxies(ncclComm* comm, int wanted, int* count) {
  *count = 1;
  std::vector<int32_t> all(comm->nRanks, 0);
  all[comm->rank] = wanted;
  BRAID_CHECK(comm->bootstrap->allGather(all.data(), sizeof(int32_t)));
  *count = std::clamp(*std::min_element(all.begin(), all.end()), 1, kMaxNetProxies);
  return ncclSuccess;
}

namespace {

class ProxiedNet final : public UcxNet {
 public:
  explicit ProxiedNet(std::vector<std::shared_ptr<UcxNet>> proxies) : proxies_(std::move(proxies)) {}
  ~ProxiedNet() override { close(true); }

  ncclResult_t addSender(int channel, int peer, const NetFifo& fifo) override {
    return of(channel, fifo).addSender(channel, peer, fifo);
  }
  ncclResult_t addReceiver(int channel, int peer, const NetFifo& fifo) override {
    return of(channel, fifo).addReceiver(channel, peer, fifo);
  }
  void keep(std::shared_ptr<void> memory) override {
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.push_back(std::move(memory));
  }
  // Channels 0..channels-1 are on proxies 0..min(channels, K)-1: a small call (one channel)
  // keeps the others asleep instead of spinning on counters that will not move.
  void kick(int channels) override {
    const size_t n = std::min(proxies_.size(), static_cast<size_t>(std::max(channels, 1)));
    for (size_t k = 0; k < n; ++k) proxies_[k]->kick(channels);
  }
  bool cudaMemory() const override { return proxies_[0]->cudaMemory(); }
  // The CPU engine's connections are all on proxy 0.
  bool progress(bool flush) override { return proxies_[0]->progress(flush); }
  void close(bool abort) override {
    for (auto& p : proxies_) p->close(abort);
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.clear();  // every proxy has stopped: nothing touches that memory any more
  }

 private:
  UcxNet& of(int channel, const NetFifo& fifo) {
    return *proxies_[proxyOf(channel, fifo.space, static_cast<int>(proxies_.size()))];
  }

  std::vector<std::shared_ptr<UcxNet>> proxies_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<void>> kept_;
};

}  // namespace

ncclResult_t startProxies(ncclComm* comm, int count, const std::function<ncclResult_t(std::shared_ptr<UcxNet>*)>& startOne,
                          std::shared_ptr<UcxNet>* out) {
  std::vector<std::shared_ptr<UcxNet>> proxies;
  for (int k = 0; k < count; ++k) {
    ncclResult_t rc = startOne(&proxies.emplace_back());
    if (rc != ncclSuccess) {
      for (auto& p : proxies)
        if (p) p->close(true);
      return rc;
    }
  }
  BRAID_INFO(kNet | kInit, "rank %d: %d UCX prox%s (a worker and a thread each; GPU connections on channel c use proxy "
             "c %% %d; BRAID_NET_PROXIES)", comm->rank, count, count == 1 ? "y" : "ies", count);
  if (count == 1) *out = std::move(proxies[0]);
  else *out = std::make_shared<ProxiedNet>(std::move(proxies));
  return ncclSuccess;
}

}  // namespace braid::transport
