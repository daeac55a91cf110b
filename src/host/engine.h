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

// The steps one lane runs, possibly from several ops of a group, in order.
struct LaneProgram {
  ncclComm* comm = nullptr;
  int channel = 0;
  std::vector<std::pair<const OpContext*, const algo::Step*>> steps;
  // Runs when the lane's last step is done; an error ends the whole run at once (the call
  // check: a mismatch must not wait for data lanes that may never finish).
  std::function<ncclResult_t()> onFinish;
};

// Connects what the programs need (in phases across communicators), then runs them all to
// completion. On failure the error names the rank, the call and the peer it waited for. A
// stalled run ends when its communicator fails (a dead peer, a mismatch seen by another rank),
// when a rank it waits for has left, or at ncclCommAbort.
ncclResult_t runPrograms(std::vector<LaneProgram>& programs);

}  // namespace braid::host
