// How this braid-perf process was started, read from its environment:
//   Parent    nobody started it as a rank: it starts -np N ranks itself;
//   Launched  by braid-launch or braid-perf -np (BRAID_LAUNCH_RANK, ..._NRANKS, BRAID_UNIQUE_ID);
//   Mpi       by mpirun: OMPI_COMM_WORLD_RANK/SIZE (Open MPI) or PMI_RANK/PMI_SIZE (MPICH, Slurm).
#pragma once
#include <functional>
#include <string>

namespace braid::perf {

enum class LaunchMode { Parent, Launched, Mpi };

struct LaunchContext {
  LaunchMode mode = LaunchMode::Parent;
  int rank = 0;
  int nRanks = 1;
  int localRank = 0;     // picks the GPU: localRank % device count
  std::string source;    // the variable the rank came from, for messages
};

using EnvLookup = std::function<const char*(const char*)>;

// False, with a reason, when the variables are present but malformed.
bool detectLaunch(const EnvLookup& env, LaunchContext* context, std::string* error);

}  // namespace braid::perf
