// braid's Bootstrap over TCP: one listener per rank, lazily opened peer connections (one per
// ordered pair, only between ranks that actually talk), ring all-gather.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <deque>
#include <vector>

#include "core/bootstrap.h"
#include "core/peer_info.h"
#include "core/unique_id.h"

namespace braid {

class TcpBootstrap final : public Bootstrap {
 public:
  // Rendezvous through the root named in the id; fills `peers` (one PeerInfo per rank).
  // `self` carries this rank's info; its listen address is filled in here.
  // `abortFlag` (may be null) ends the wait early: ncclCommAbort of a communicator whose
  // non-blocking init is still waiting for its peers.
  static ncclResult_t connectViaRoot(const UniqueIdContent& id, PeerInfo self, double timeoutSeconds,
                                     const std::atomic<bool>* abortFlag, std::unique_ptr<TcpBootstrap>* out,
                                     std::vector<PeerInfo>* peers);
  // A bootstrap for a communicator derived from another (split, shrink): the caller has
  // already exchanged the listeners through `parent`. `listenFd` is this rank's own listener.
  static std::unique_ptr<TcpBootstrap> fromPeers(int rank, std::vector<PeerInfo> peers, uint64_t secret,
                                                 int listenFd);
  // A listener on the bootstrap interface, for a derived communicator.
  static ncclResult_t openListener(SocketAddress* addr, int* fd);

  ~TcpBootstrap() override;
  int rank() const override { return rank_; }
  int nRanks() const override { return static_cast<int>(peers_.size()); }
  ncclResult_t allGather(void* data, size_t bytesPerRank) override;
  ncclResult_t send(int peer, uint32_t tag, const void* data, size_t size) override;
  ncclResult_t recv(int peer, uint32_t tag, void* data, size_t size) override;
  ncclResult_t barrier() override;
  // Every wait then ends when `abortFlag` is set (the communicator's: ncclCommAbort from any
  // thread), and a wait for rank r when peerStates[r] says it is gone (the liveness monitor's
  // PeerState per rank). Called
  // once, before other threads can use the bootstrap; both outlive it.
  void watch(const std::atomic<bool>* abortFlag, const std::atomic<uint8_t>* peerStates) {
    abort_ = abortFlag;
    lost_ = peerStates;
  }

  // Ring all-gather among `members` only (sorted ranks that include this one).
  ncclResult_t allGatherAmong(const std::vector<int>& members, void* data, size_t bytesPerRank);
  uint64_t secret() const { return secret_; }
  void setTimeout(double seconds) { timeout_ = seconds; }

 private:
  TcpBootstrap(int rank, std::vector<PeerInfo> peers, uint64_t secret, int listenFd);
  ncclResult_t sendLocked(int peer, uint32_t tag, const void* data, size_t size);
  ncclResult_t recvLocked(int peer, uint32_t tag, void* data, size_t size);
  ncclResult_t acceptOne(Deadline deadline, int waitingFor);
  ncclResult_t explain(ncclResult_t rc, const char* what, int peer);

  int rank_;
  std::vector<PeerInfo> peers_;
  uint64_t secret_;
  int listenFd_;
  double timeout_;
  std::atomic<bool> neverAborted_{false};
  const std::atomic<bool>* abort_ = &neverAborted_;
  const std::atomic<uint8_t>* lost_ = nullptr;
  const std::atomic<uint8_t>* lostFlag(int peer) const { return lost_ ? &lost_[peer] : nullptr; }
  std::mutex mutex_;
  std::vector<int> sendFd_, recvFd_;
  std::map<std::pair<int, uint32_t>, std::deque<std::vector<char>>> unexpected_;
};

}  // namespace braid
