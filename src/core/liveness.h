// Which peers of a communicator are alive, known to every rank within seconds.
//
// Each rank keeps one TCP connection to each of O(log n) neighbours (ranks r +- 2^k), opened at
// init. A connection that closes without a goodbye is a dead peer: the kernel closes a dead
// process's sockets at once, also for a child its parent has not reaped, so a death is seen in
// milliseconds (across hosts, TCP keepalive bounds it at a few seconds). The first rank that
// sees a death tells its neighbours, who pass it on: the neighbour graph stays connected when
// ranks fail, and news crosses it in O(log n) hops. The same connections carry a mismatch
// found by one rank and a hang report's start; a status query (where a rank stands, for the
// hang report) opens a short connection of its own to the rank's listener.
//
// A monitor thread per communicator owns every socket. It never takes a CommUse (teardown
// stops it before the communicator goes).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/call_state.h"
#include "core/socket.h"
#include "nccl.h"

struct ncclComm;

namespace braid {

// The ranks r +- 2^k (mod n), without r and without repeats, ascending.
std::vector<int> livenessNeighbours(int rank, int nRanks);

enum class PeerState : uint8_t { Alive = 0, Departed = 1, Dead = 2 };

class Liveness {
 public:
  // Opens this rank's listener before the rendezvous: its address travels in PeerInfo, so
  // that a peer that finds it closed knows this process is gone.
  static ncclResult_t open(SocketAddress* address, std::unique_ptr<Liveness>* out);
  ~Liveness();

  // After the rendezvous (comm->peers known): connects to the neighbours and starts the
  // monitor thread. Fails with ncclRemoteError naming a neighbour that is already gone.
  ncclResult_t start(ncclComm* comm);
  // Says goodbye (destroy) or that this rank aborted, and stops the thread.
  void stop(bool aborting);

  PeerState state(int rank) const { return static_cast<PeerState>(state_[rank].load(std::memory_order_acquire)); }
  bool lost(int rank) const { return state(rank) != PeerState::Alive; }
  // Every rank's PeerState, for bootstrap waits (core/socket.h): a wait for a dead rank ends.
  const std::atomic<uint8_t>* peerStates() const { return state_.get(); }
  // The first departed rank, or -1 (collectives cannot complete without it).
  int firstDeparted() const { return firstDeparted_.load(std::memory_order_acquire); }
  // What this rank knows of `rank`'s end ("died (seen by rank 2)", "destroyed its communicator").
  std::string lossReason(int rank) const;

  // A call of this rank differs from `other`'s: every rank's communicator fails with
  // ncclInvalidUsage naming both sides (the message is `text`).
  void announceMismatch(const CallDesc& mine, int other, const CallDesc& theirs);

  // Called at process exit for every live communicator: a goodbye, so that peers do not take a
  // normal exit for a death.
  void farewellAtExit();

 private:
  // One message on a neighbour connection (fixed size; every field is checked on arrival).
  struct Notice {
    uint32_t magic = 0;
    uint32_t kind = 0;     // NoticeKind (liveness.cc)
    int32_t subject = -1;  // the rank concerned: lost, or the other side of a mismatch
    int32_t origin = -1;   // the rank that saw it first
    uint32_t reason = 0;   // lost: why (PeerState, and whether by abort)
    uint32_t pad = 0;
    uint64_t epoch = 0;    // hang report: the origin's report number; lost (destroyed): the collectives the subject started
    CallDesc mine, theirs; // mismatch: the origin's call and the subject's
  };
  // An accepted connection whose hello has not arrived yet.
  struct Pending {
    int fd = -1;
    Clock::time_point deadline;
  };
  Liveness() = default;
  void run();
  void pollOnce(int timeoutMs);
  void acceptPending();
  void servePending(size_t index);
  void readNotice(int peer);
  void handleNotice(int from, const Notice& n);
  // Why a rank is gone (the wire's values): it said goodbye, it aborted, or it died.
 public:
  static constexpr uint32_t kDestroyed = 1, kAborted = 2, kDied = 3;

 private:
  // `started`: for a rank that destroyed its communicator, the collectives it had started.
  void peerLost(int rank, uint32_t why, const std::string& reason, bool tell, uint64_t started = 0);
  // A collective of this rank that a departed rank never started can never complete: the
  // communicator fails, naming that rank (else the call would wait for the hang report).
  void checkDeparted();
  void queue(const Notice& n);
  void sendQueued();
  void sendToAll(const Notice& n, int except);
  void checkHang();
  void startReport(const char* why);
  void closeAll();

  ncclComm* comm_ = nullptr;
  int rank_ = -1, n_ = 0;
  uint64_t secret_ = 0;
  int listenFd_ = -1;
  int wake_[2] = {-1, -1};
  std::vector<int> neighbours_;
  std::vector<int> out_, in_;            // by rank: our connection to a neighbour, and theirs to us
  std::vector<Clock::time_point> outClosedAt_;
  std::vector<Pending> pending_;         // accepted, hello not read yet
  std::unique_ptr<std::atomic<uint8_t>[]> state_;
  std::atomic<int> firstDeparted_{-1};
  std::vector<uint64_t> startedBy_;      // by departed rank: the collectives it had started (monitor thread)
  bool departureFailed_ = false;
  mutable std::mutex reasonMutex_;
  std::vector<std::string> reasons_;

  std::mutex queueMutex_;
  std::vector<Notice> queue_;
  std::mutex sendMutex_;                 // the monitor's sends against farewellAtExit
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
  bool aborting_ = false;
  bool mismatchSeen_ = false;
  std::thread thread_;

  // Hang reports.
  double hangTimeout_ = 0;
  uint64_t lastActivity_ = ~0ull;
  Clock::time_point lastMove_{}, lastReport_{};
  uint64_t myEpoch_ = 0;
  std::vector<uint64_t> seenEpoch_;      // by origin rank
  uint32_t seenSignals_ = 0;
  std::thread reporter_;
  std::atomic<bool> reporting_{false};
};

}  // namespace braid
