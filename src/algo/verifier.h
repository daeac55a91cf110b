// The schedule verifier: runs all ranks' plans together, symbolically, and proves that the
// collective's result is exactly right and that the plans cannot deadlock.
//
// Model (what "proves" means here):
//  - Memory: every element holds a symbolic value: "rank r's input element i" (raw), "the sum
//    of the ranks in S at input index i, kFinal applied f times", or "never written". Reading
//    an input buffer yields rank r's pre-multiplied contribution {r}; reading any other
//    buffer yields what is stored. In-place runs alias input and output as NCCL defines.
//  - Connections: FIFOs keyed by (channel, sender, receiver), matched statically: the k-th
//    send and the k-th recv must have equal counts, and each end has one lane.
//  - Progress: each lane runs its steps in order; lanes run independently. A message is cut
//    into ceil(count / sliceElems) slices (one slice when sliceElems is 0), a connection holds
//    at most fifoSlices slices, and a step advances slice by slice: each slice needs its
//    incoming slice present and room for its outgoing slice at the same time. A state
//    where no lane can advance and some lane isn't finished is a deadlock.
//  - Races: two lanes of one rank that touch overlapping memory (one of them writing) are
//    reported, since nothing orders lanes of a rank.
// Checked: every output element holds exactly what the collective defines (each rank's
// contribution once, at the right index, kFinal applied once; the right origin block for
// copies), inputs are never written and read only while unmodified, nothing is read or
// written outside a buffer, steps are well formed (no count 0), every message is received,
// and there is no deadlock (the error names the cycle of waits).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "algo/schedule.h"

namespace braid::algo {

struct VerifyOptions {
  bool inPlace = false;         // alias the buffers as in NCCL's in-place form of the collective
  uint32_t fifoSlices = 2;      // capacity of one connection, in slices
  uint64_t sliceElems = 0;      // elements per slice; 0 = a whole message is one slice
  size_t maxErrors = 10;        // stop collecting after this many
};

struct VerifyResult {
  bool ok = true;
  std::vector<std::string> errors;
  uint64_t steps = 0;           // over all ranks
  uint64_t messages = 0;        // sends over all ranks
  uint64_t elementsSent = 0;    // total count of all sends
  int maxLanes = 0;             // the most lanes one rank uses
  // "ok: 4 ranks, 56 steps, ..." or the errors, one per line.
  std::string summary() const;
};

// Whether NCCL defines an in-place form of the collective (AlltoAll and SendRecv: no).
bool collHasInPlace(Coll c);

// Builds every rank's plan with algo (base.rank is ignored) and verifies them.
VerifyResult verify(const CollArgs& base, const Algorithm& algo, const VerifyOptions& options = {});
// Verifies given plans, plans[r] being rank r's (for hand-made or modified plans).
VerifyResult verifyPlans(const CollArgs& base, const std::vector<RankPlan>& plans,
                         const VerifyOptions& options = {});
// P2P groups: opsPerRank[r] are rank r's sends and recvs in call order; checks buildP2p's
// plans (or the given ones) against NCCL's matching of the k-th send to the k-th recv.
VerifyResult verifyP2p(int nRanks, const std::vector<std::vector<P2pOp>>& opsPerRank,
                       const VerifyOptions& options = {});
VerifyResult verifyP2pPlans(int nRanks, const std::vector<std::vector<P2pOp>>& opsPerRank,
                            const std::vector<RankPlan>& plans, const VerifyOptions& options = {});

}  // namespace braid::algo
