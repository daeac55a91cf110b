// braid-perf's ranks as threads of this process: one thread per rank, each running the same
// per-rank loop as a rank process (perf_runner), with its own communicator from
// ncclCommInitRank on one unique id.
#pragma once
#include <string>
#include <vector>

#include "perf/perf_args.h"

namespace braid::perf {

// Runs nRanks ranks as threads (rank r on GPU r % GPU count with device memory) and returns
// the run's exit status (combineRankExits). When a rank fails, the others get kFailureGrace
// to finish (their calls fail once the library sees the peer gone); then the process gives up.
int runThreadRanks(const PerfOptions& options, int nRanks, const std::vector<std::string>& commandLine);

inline constexpr int kFailureGraceSeconds = 30;

}  // namespace braid::perf
