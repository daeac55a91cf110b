#include "perf/perf_rank_layout.h"

#include <sys/stat.h>

#include <set>
#include <utility>

#include "perf/perf_errors.h"

namespace braid::perf {

RankLayout chooseRankLayout(int launchRanks, RanksAs ranksAs, MemoryKind memory, int gpuCount) {
  RankLayout layout;
  layout.nRanks = launchRanks > 0 ? launchRanks : kDefaultLocalRanks;
  if (ranksAs != RanksAs::Auto) {
    layout.threads = ranksAs == RanksAs::Threads;
    layout.why = std::string("--ranks ") + ranksAsName(ranksAs);
    return layout;
  }
  const bool device = memory == MemoryKind::Device || (memory == MemoryKind::Auto && gpuCount > 0);
  if (!device) {
    layout.why = "host memory";
  } else if (gpuCount <= 0) {
    layout.why = "no GPU visible";  // the ranks will say so; as processes, as before
  } else if (gpuCount < layout.nRanks) {
    layout.threads = true;
    layout.why = std::to_string(layout.nRanks) + " ranks on " + std::to_string(gpuCount) +
                 (gpuCount == 1 ? " GPU" : " GPUs") + ": threads share a GPU without MPS";
  } else {
    layout.why = "a GPU per rank";
  }
  return layout;
}

bool mpsControlPipePresent(const EnvLookup& env) {
  const char* dir = env("CUDA_MPS_PIPE_DIRECTORY");
  const std::string path = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp/nvidia-mps") + "/control";
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return false;
  return S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
}

std::optional<std::string> sharedGpuWithoutMpsWarning(const std::vector<RankInfo>& ranks, const std::string& host,
                                                      bool mpsRunning) {
  if (mpsRunning) return std::nullopt;
  // Per GPU of this host, the processes on it.
  std::set<std::pair<std::string, int>> seen;  // (bus id, pid)
  std::set<std::string> shared;
  for (const RankInfo& r : ranks) {
    if (r.host != host || r.device < 0) continue;
    for (const auto& [bus, pid] : seen)
      if (bus == r.busId && pid != r.pid) shared.insert(bus);
    seen.insert({r.busId, r.pid});
  }
  if (shared.empty()) return std::nullopt;
  std::string gpus;
  for (const std::string& bus : shared) gpus += (gpus.empty() ? "" : ", ") + bus;
  return "# WARNING: ranks in separate processes share GPU " + gpus +
         " and MPS is not running: one process runs the collectives' GPU work for all (served ranks: tens of us a "
         "small call), but other kernels of the processes take turns on the GPU, and with BRAID_SERVED=0 or "
         "NCCL_P2P_DISABLE=1 so do braid's (~2.3 ms per collective on an H200). Fix: start MPS "
         "(nvidia-cuda-mps-control -d) or run the ranks as threads (braid-perf --ranks threads).";
}

std::string ranksLine(const std::vector<RankInfo>& ranks, bool threads) {
  std::set<std::string> gpus, hosts;
  for (const RankInfo& r : ranks) {
    if (r.device >= 0) gpus.insert(r.host + "/" + r.busId);
    hosts.insert(r.host);
  }
  const int n = static_cast<int>(ranks.size());
  std::string line = "# ranks: " + std::to_string(n) + (threads ? " threads of one process" : n == 1 ? " process" : " processes");
  if (!threads && hosts.size() > 1) line += " on " + std::to_string(hosts.size()) + " hosts";
  if (gpus.empty()) return line + ", host memory";
  return line + " on " + std::to_string(gpus.size()) + (gpus.size() == 1 ? " GPU" : " GPUs");
}

int combineRankExits(const std::vector<int>& exits) {
  bool allGood = true, wrongOnly = true, usageOnly = true;
  for (int e : exits) {
    if (e == 0) continue;
    allGood = false;
    wrongOnly = wrongOnly && e == kExitWrongResults;
    usageOnly = usageOnly && e == kExitUsage;
  }
  if (allGood) return 0;
  if (wrongOnly) return kExitWrongResults;
  return usageOnly ? kExitUsage : kExitFailure;
}

}  // namespace braid::perf
