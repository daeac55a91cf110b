// The hang report's text: one line per rank that says which call it waits in, for whom, and
// where every rank stands, grouped ("ranks 0-2 wait in #42 ncclBroadcast ... root 0; rank 3 is
// idle after #41 ncclAllReduce ..."). Pure, so that a unit test pins it down.
#pragma once
#include <string>
#include <vector>

#include "core/call_state.h"

namespace braid {

// A status whose rank is this: that rank has left (said goodbye); -1: it did not answer.
constexpr int kRankLeft = -2;

// `all[r]` is rank r's status; a status with rank == -1 means that rank did not answer.
// `me` is the reporting rank, `stalledSeconds` how long its call has made no progress (0 when
// the report was asked for on demand).
std::string hangReport(int me, const std::vector<CallStatus>& all, double stalledSeconds);

// "0-2,5,7-9"
std::string rankRanges(const std::vector<int>& ranks);

}  // namespace braid
