// What both engines do to turn a task into a schedule: the CollArgs (the same on every rank
// of the collective) and the algorithm's plan.
#pragma once
#include <cstddef>
#include <map>
#include <span>
#include <tuple>

#include "algo/algorithm.h"
#include "algo/schedule.h"
#include "api/task.h"

namespace braid::api {

// P2P lanes use channels from here on, so they never share a connection with collective lanes.
constexpr int kP2pChannelBase = 64;

// Bytes of the whole collective as every rank sees it (a root's buffer size would differ).
size_t collectiveBytes(const Task& t);

// The node structure comes from comm->nodeOf (made once at init, from the peers' hostHash).
// `fifoBytes` is a connection's capacity: a step may fill at most half of it, so that every
// ring neighbour can post its step before it must consume (otherwise all ranks block sending).
algo::CollArgs collArgsFor(const Task& t, int nChannels, size_t alignBytes, size_t fifoBytes);

// Whether a send's buffer overlaps a recv buffer of the same group (nccl-tests' in-place
// sendrecv uses one buffer for both). Sends and recvs run in separate lanes, so a recv could
// overwrite data before its send has read it: both engines send a copy then.
bool sendOverlapsARecv(const Task& send, std::span<const Task* const> p2p);

// A communicator's recent plans: the same call again reuses its schedule instead of building
// it (a host-memory call's cost is mostly allocation otherwise). References stay valid until
// the next startRun(); one communicator is driven by one thread at a time, as in NCCL.
class PlanCache {
 public:
  void startRun();  // may forget old plans (bounded size); never during a run
  // The plan of `algorithm` (the default one when null); built, and dumped when asked for,
  // the first time.
  const algo::RankPlan& get(const algo::CollArgs& args, const algo::Algorithm* algorithm = nullptr);

 private:
  using Key = std::tuple<int, uint64_t, int, int, uint32_t, uint64_t, const algo::Algorithm*>;
  std::map<Key, algo::RankPlan> plans_;
};

}  // namespace braid::api
