// Every rank checks that it called the same collectives as the others, so that a mismatch
// (another root, count, type, op or collective on one rank) is an error on every rank, never
// wrong data with success.
//
// Each rank sends what its group's collectives on a communicator are (CheckMessage) to its
// successor in rank order and compares what its predecessor sent: if any two ranks differ,
// some rank's predecessor differs from it. That rank fails its call with ncclInvalidUsage
// naming both sides, and its liveness monitor floods the news so that every other rank's call
// fails too (stalled host calls at their next stall check, kernels at the abort word).
//
// Host memory: always, as a lane of its own beside the data lanes (no extra hop in series; the
// call cannot return before the check is done), on channel 0 with the data, its message in a
// slot of its own or riding in the header of the group's first data slot where that goes to
// the successor first (host/engine.h CheckLane). Across hosts, where the group's data checks it
// (all-reduce, all-gather, reduce-scatter, all-to-all with a count: every rank receives data that
// depends on every rank's, each slot signed with its call), the message goes only if the run
// stalls, so that a mismatch whose data never flows is still named (a late edge, CheckLane):
// that saves a network message per call and host. Device memory: with BRAID_CHECK_CALLS=1, on
// the host before the kernels are enqueued (the enqueue then waits for the other ranks).
// Send/recv are not ring-checked (ranks legitimately differ); the receiver checks every slot.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "api/task.h"
#include "core/call_state.h"
#include "host/engine.h"

namespace braid::api {

// A task as the fault machinery describes it (seq is filled by CallState::begin).
CallDesc callDescOf(const Task& t);

// BRAID_CHECK_CALLS (read once): 1 checks device-memory calls too; -1 checks nothing, not even
// host calls (for measuring what the check costs: a mismatch may then return wrong data).
bool checkDeviceCalls();
bool checkHostCalls();

// The host connection channel of the check lanes: the host collectives' first, so that a
// rank's check messages and its data reach the successor in call order (host/engine.h CheckLane).
constexpr int kCheckChannel = 0;

// The check lanes of one run: keeps their messages and contexts alive while the engine runs.
class CallCheck {
 public:
  CallCheck();
  ~CallCheck();
  // Adds the check of `descs` (one communicator's collectives of this group, numbered) to
  // `programs`; nothing for a 1-rank communicator or when descs holds no collective.
  void add(ncclComm* comm, std::span<const CallDesc> descs, std::vector<host::LaneProgram>* programs);

 private:
  struct Lane;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace braid::api
