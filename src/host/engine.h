// The CPU engine: runs schedule lanes on host memory. One progress loop drives every lane
// of every communicator in a group, so ranks that share a thread never wait on each other.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "algo/schedule.h"
#include "core/call_state.h"
#include "host/reduce.h"
#include "nccl.h"

struct ncclComm;

namespace braid::host {

// One collective (or the P2P ops of a group) as the engine sees it.
struct OpContext {
  const char* caller = "";
  CallDesc desc;                // the call, numbered (error messages, the mismatch flood)
  HostOp op;
  bool reduces = false;         // apply op/pre/post; otherwise steps only move data
  size_t elemSize = 1;
  std::vector<char*> bufs;      // by schedule buffer index
  std::vector<bool> bufIsInput; // reading it reads a raw contribution (pre-multiply)
  uint64_t signature = 0;       // carried by every slot, checked by the receiver
  std::vector<char> staging;    // a private copy of the input when the schedule cannot run in place
};

// The call check's lane (api/call_check.h): this rank's message to its successor and its
// predecessor's, both on channel 0 beside the group's data, so that each rank's messages stay
// in call order whichever way they go. A message goes in a slot of its own (no data, the
// message in the header) or, where the group's first data slot goes to the successor anyway,
// in that slot's header (SlotHeader::check): one message fewer per call, across hosts one
// network message fewer. The predecessor's is taken from the head of its FIFO, or by a data
// lane that reaches it first.
//
// A late edge (api/call_check.cc lateEdge): the group's data checks it (every rank receives data
// that depends on every rank's input, and every slot's signature names its call: a mismatch is
// refused by a receiver or stalls), so the message on that edge goes only once the sender's run
// has made no progress for 1 ms (a mismatch whose data never flows), in a slot marked late, and
// the receiver's run does not wait for it: a rank that finishes never reads it, so a receiver
// drops a late message of an earlier call.
struct CheckLane {
  int pred = -1, succ = -1;
  uint64_t seq = 0;      // the group's first collective (SlotHeader::checkSeq)
  const void* mine = nullptr;
  void* theirs = nullptr;
  size_t bytes = 0;      // at most kSlotCheckBytes
  bool rides = false;    // this rank's message rides on the first slot of the lane that `carries` it
  bool lateToSucc = false, lateFromPred = false;  // late edges, see above
  bool arrived = false;  // `theirs` holds the predecessor's message
};

// The steps one lane runs, possibly from several ops of a group, in order.
struct LaneProgram {
  ncclComm* comm = nullptr;
  int channel = 0;
  std::vector<std::pair<const OpContext*, const algo::Step*>> steps;
  // Runs when the lane's last step is done, on a check lane when the predecessor's message has
  // arrived; an error ends the whole run at once (a mismatch must not wait for data lanes that
  // may never finish).
  std::function<ncclResult_t()> onFinish;
  CheckLane* check = nullptr;          // on the call check's lane
  const CheckLane* carries = nullptr;  // on the data lane whose first slot carries that check's message
};

// Connects what the programs need (in phases across communicators), then runs them all to
// completion. On failure the error names the rank, the call and the peer it waited for. A
// stalled run ends when its communicator fails (a dead peer, a mismatch seen by another rank),
// when a rank it waits for has left, or at ncclCommAbort.
ncclResult_t runPrograms(std::vector<LaneProgram>& programs);

}  // namespace braid::host
