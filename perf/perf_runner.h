// One rank of braid-perf: init the communicator, time every size, check the results,
// aggregate across ranks and (rank 0) print the table and write the JSON report.
#pragma once
#include <string>
#include <vector>

#include "nccl.h"
#include "perf/perf_args.h"

namespace braid::perf {

struct RankSetup {
  int rank = 0;
  int nRanks = 1;
  int localRank = 0;
  ncclUniqueId id{};
  std::vector<std::string> commandLine;  // for the JSON report
  bool threads = false;  // this rank is one of nRanks threads of this process (else a process)
};

// Returns the exit status (0, kExitWrongResults, kExitUsage, kExitFailure); never throws.
// Several threads may run it at once, one rank each: all state is the rank's own, and the CUDA
// device is set in the calling thread.
int runRank(const PerfOptions& options, const RankSetup& setup);

}  // namespace braid::perf
