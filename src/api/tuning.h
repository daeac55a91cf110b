// A communicator's tuning: what NCCL_ALGO and NCCL_PROTO allow (read once, at init: a bad
// value fails the init with ncclInvalidUsage), the facts about its links the tuner needs
// (api/tuner_inputs.h), and asking the tuner (algo/tuner.h) for a task's choice. Each distinct
// choice is logged once per communicator at NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING, with its
// estimate; a constraint that leaves nothing possible is a WARN, once per collective.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <tuple>

#include "algo/tuner.h"
#include "api/task.h"
#include "api/tuner_inputs.h"
#include "nccl.h"

struct ncclComm;

namespace braid::api {

class CommTuning {
 public:
  // After the ring order is known (it reads comm->peers, comm->ring and the topology).
  static ncclResult_t create(ncclComm* comm, std::unique_ptr<CommTuning>* out);

  // The tuner's choice for `t`: a collective, or one send or recv (to or from t.root), on device
  // or host memory. The same on every rank of the collective (and on both ends of a send/recv).
  // On device memory it is made for the protocol t's launch runs (api::deviceTaskProtocols):
  // `launch` where the caller knows it (the launch's plans), else a send/recv's p2pLaunchProtocol.
  // Host memory (the CPU engine) ignores `launch`.
  algo::TunerResult choose(const Task& t, std::optional<algo::Protocol> launch = std::nullopt);

  // The protocol of a launch of sends and receives alone: api::p2pLaunchProtocol of this
  // communicator's settings, the same on every rank whatever its tasks.
  algo::Protocol p2pLaunchProtocol() const;

  // The protocol a device launch of `tasks` (this communicator's share of a group, in order)
  // asks, before the transport's fallback (GpuResources::usableProtocol), the same on every rank:
  // the first collective's choice, since every rank's group holds the same collectives in the
  // same order whatever sends and receives it holds besides; a group of sends and receives alone
  // (which differ between ranks) p2pLaunchProtocol. Taking p2pLaunchProtocol whenever a group
  // held a send would part a rank whose group has none (it took its collective's choice) from
  // its peers. The launch (device_tasks.cc) and ncclGroupSimulateEnd's estimate take it here.
  algo::Protocol launchProtocol(std::span<const Task* const> tasks);

  // A kernel of `blocks` CUDA blocks a rank, whose blocks wait for the other ranks' blocks:
  // when all the ranks on the busiest GPU cannot have that many resident at once (one per SM
  // is what the kernels are built for), WARN once per communicator with the numbers and the fix.
  void noteBlocks(size_t blocks);

 private:
  explicit CommTuning(ncclComm* comm) : comm_(comm) {}
  void logOnce(const Task& t, const algo::TunerInput& in, const algo::TunerResult& r);

  ncclComm* comm_;
  algo::TuningConstraints constraints_;
  LinkFacts links_;
  int sms_ = 0;
  int nNodes_ = 1, ranksPerNode_ = 0;  // from comm->nodeOf, for the tree's depth
  algo::ProtocolSet protocols_ = 0;  // api::deviceProtocols (fixed at create)
  std::mutex loggedMutex_;
  std::atomic<bool> warnedBlocks_{false};
  // (collective, device memory, algorithm, protocol, channels, slices); protocol -1: a warning.
  std::set<std::tuple<int, bool, const algo::Algorithm*, int, int, int>> logged_;
};

}  // namespace braid::api
