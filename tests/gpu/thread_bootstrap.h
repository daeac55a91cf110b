// An in-process Bootstrap for ranks that are threads of one process: messages go through a
// shared mailbox, so the GPU tests can set up transports without a communicator.
#pragma once
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/bootstrap.h"

namespace braid::gputest {

class ThreadBootstrapHub {
 public:
  explicit ThreadBootstrapHub(int nRanks) : nRanks_(nRanks), gather_(nRanks) {}
  int nRanks() const { return nRanks_; }

  void post(int from, int to, uint32_t tag, const void* data, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& q = boxes_[{from, to, tag}];
    q.emplace_back(static_cast<const char*>(data), static_cast<const char*>(data) + size);
    cv_.notify_all();
  }
  bool take(int from, int to, uint32_t tag, void* data, size_t size) {
    std::unique_lock<std::mutex> lock(mu_);
    auto key = std::make_tuple(from, to, tag);
    cv_.wait(lock, [&] { return !boxes_[key].empty(); });
    auto& q = boxes_[key];
    std::vector<char> msg = std::move(q.front());
    q.erase(q.begin());
    if (msg.size() != size) return false;
    if (size > 0) std::memcpy(data, msg.data(), size);
    return true;
  }
  void barrier() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = generation_;
    if (++arrived_ == nRanks_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
  }
  void allGather(int rank, void* data, size_t bytesPerRank) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      gather_[rank].assign(static_cast<char*>(data) + rank * bytesPerRank,
                           static_cast<char*>(data) + (rank + 1) * bytesPerRank);
    }
    barrier();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int r = 0; r < nRanks_; ++r) std::memcpy(static_cast<char*>(data) + r * bytesPerRank, gather_[r].data(), bytesPerRank);
    }
    barrier();
  }

 private:
  int nRanks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, uint32_t>, std::vector<std::vector<char>>> boxes_;
  std::vector<std::vector<char>> gather_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

class ThreadBootstrap : public Bootstrap {
 public:
  ThreadBootstrap(ThreadBootstrapHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int nRanks() const override { return hub_.nRanks(); }
  ncclResult_t allGather(void* data, size_t bytesPerRank) override {
    hub_.allGather(rank_, data, bytesPerRank);
    return ncclSuccess;
  }
  ncclResult_t send(int peer, uint32_t tag, const void* data, size_t size) override {
    hub_.post(rank_, peer, tag, data, size);
    return ncclSuccess;
  }
  ncclResult_t recv(int peer, uint32_t tag, void* data, size_t size) override {
    return hub_.take(peer, rank_, tag, data, size) ? ncclSuccess : ncclInternalError;
  }
  ncclResult_t barrier() override {
    hub_.barrier();
    return ncclSuccess;
  }

 private:
  ThreadBootstrapHub& hub_;
  int rank_;
};

}  // namespace braid::gputest
