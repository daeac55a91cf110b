// How braid-perf runs the N ranks it starts itself (no mpirun): as threads of this process or as
// processes, and whether ranks that are processes share a GPU without MPS. Pure functions (no
// CUDA or NCCL call), unit-tested in tests/unit/launcher.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "perf/perf_args.h"
#include "perf/perf_launch_mode.h"
#include "perf/perf_table.h"

namespace braid::perf {

inline constexpr int kDefaultLocalRanks = 4;

struct RankLayout {
  int nRanks = kDefaultLocalRanks;
  bool threads = false;  // else one process per rank
  std::string why;       // one phrase, for the header
};

// launchRanks: -np (0 when not given). gpuCount: visible GPUs (0 without GPU or driver; only
// read when the choice depends on it). Without --ranks: threads when the ranks use device
// memory (--memory device, or auto with a GPU) and there are fewer GPUs than ranks, because
// processes sharing a GPU without MPS run their kernels in turns (ms per call); otherwise
// processes (host memory, or a GPU per rank).
RankLayout chooseRankLayout(int launchRanks, RanksAs ranksAs, MemoryKind memory, int gpuCount);

// Whether the MPS control daemon is running here: its control pipe, CUDA_MPS_PIPE_DIRECTORY
// (default /tmp/nvidia-mps) + "/control", exists as a FIFO or socket.
bool mpsControlPipePresent(const EnvLookup& env);

// The header's warning when separate processes on rank 0's host share a GPU and MPS is not
// running: the cost and the fix. Nothing when ranks are threads (one pid), on host memory, or
// each has its own GPU.
std::optional<std::string> sharedGpuWithoutMpsWarning(const std::vector<RankInfo>& ranks, const std::string& host,
                                                      bool mpsRunning);

// "# ranks: 4 threads of one process on 1 GPU", "# ranks: 2 processes on 2 GPUs",
// "# ranks: 3 threads of one process, host memory".
std::string ranksLine(const std::vector<RankInfo>& ranks, bool threads);

// The exit status of a run from its ranks' statuses: 0 when all are 0, 1 when every failing
// rank had wrong results, 2 when every failing rank saw bad usage, else 3.
int combineRankExits(const std::vector<int>& exits);

}  // namespace braid::perf
