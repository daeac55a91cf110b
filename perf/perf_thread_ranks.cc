#include "perf/perf_thread_ranks.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>

#include "nccl.h"
#include "perf/perf_errors.h"
#include "perf/perf_rank_layout.h"
#include "perf/perf_runner.h"

namespace braid::perf {

// Why ncclCommInitRank from each thread rather than one ncclCommInitAll: the per-rank loop stays
// the one a rank process runs (each thread sets its own CUDA device, then creates its
// communicator), and it works with every library: the real NCCL refuses ncclCommInitAll with a
// GPU listed twice, and braid's host-only ranks come from a NULL device list, which the real
// NCCL reads as GPUs 0..n-1.
int runThreadRanks(const PerfOptions& options, int nRanks, const std::vector<std::string>& commandLine) {
  ncclUniqueId id{};
  const ncclResult_t result = ncclGetUniqueId(&id);
  if (result != ncclSuccess) {
    std::fprintf(stderr, "braid-perf: ncclGetUniqueId failed: %s\n", ncclGetErrorString(result));
    return kExitFailure;
  }
  // Rank 0's lines go out as soon as they are printed, also through a pipe.
  if (setvbuf(stdout, nullptr, _IOLBF, 0) != 0) std::fprintf(stderr, "braid-perf: cannot line-buffer stdout\n");

  std::vector<RankSetup> setups(static_cast<size_t>(nRanks));
  for (int r = 0; r < nRanks; ++r) {
    setups[r].rank = r;
    setups[r].nRanks = nRanks;
    setups[r].localRank = r;  // GPU r % count
    setups[r].id = id;
    setups[r].commandLine = commandLine;
    setups[r].threads = true;
  }
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int> exits(static_cast<size_t>(nRanks), -1);  // -1: still running
  int running = nRanks;
  bool failed = false;  // a rank ended with usage or failure (not just wrong results)

  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(nRanks));
  try {
    for (int r = 0; r < nRanks; ++r) {
      threads.emplace_back([&, r] {
        const int status = runRank(options, setups[r]);
        std::lock_guard<std::mutex> lock(mutex);
        exits[r] = status;
        --running;
        if (status != 0 && status != kExitWrongResults) failed = true;
        changed.notify_all();
      });
    }
  } catch (const std::exception& e) {
    // The ranks started wait for the missing ones in ncclCommInitRank: nothing to join.
    std::fprintf(stderr, "braid-perf: cannot start the thread of rank %zu of %d: %s\n", threads.size(), nRanks,
                 e.what());
    std::fflush(stderr);
    _exit(kExitFailure);
  }

  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return running == 0 || failed; });
    if (running > 0 &&
        !changed.wait_for(lock, std::chrono::seconds(kFailureGraceSeconds), [&] { return running == 0; })) {
      std::string stuck;
      for (int r = 0; r < nRanks; ++r)
        if (exits[r] < 0) stuck += (stuck.empty() ? "" : ", ") + std::to_string(r);
      std::fprintf(stderr, "braid-perf: a rank failed and rank(s) %s did not finish within %d s after it; giving up\n",
                   stuck.c_str(), kFailureGraceSeconds);
      std::fflush(stderr);
      std::fflush(stdout);
      _exit(kExitFailure);  // the stuck threads cannot be joined
    }
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < nRanks; ++r)
    if (exits[r] != 0) std::fprintf(stderr, "braid-perf: rank %d exited with status %d\n", r, exits[r]);
  return combineRankExits(exits);
}

}  // namespace braid::perf
