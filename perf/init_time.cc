// Communicator init time: from ncclGetUniqueId to the end of the last rank's
// ncclCommInitRank, for N host-only ranks as processes on this machine (forked before any
// CUDA call, so no exec is needed). Prints the median and range of `runs` repetitions.
//   braid-init-time [runs] [N...]      default: 10 runs of 2, 4 and 8 ranks
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "nccl.h"

namespace {

double nowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // one clock for all processes of the machine
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// One measurement; negative on failure.
double measure(int n) {
  double start = nowMs();
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return -1;
  int fds[2];
  if (pipe(fds) != 0) return -1;
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      ncclComm_t comm;
      double end = ncclCommInitRank(&comm, n, id, r) == ncclSuccess ? nowMs() : -1e9;
      if (write(fds[1], &end, sizeof(end)) != sizeof(end)) _exit(2);
      ncclCommDestroy(comm);
      _exit(0);
    }
    pids.push_back(pid);
  }
  close(fds[1]);
  double last = 0;
  for (int r = 0; r < n; ++r) {
    double end = 0;
    if (read(fds[0], &end, sizeof(end)) != sizeof(end) || end < 0) last = -1e9;
    last = std::max(last, end);
  }
  close(fds[0]);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  return last - start;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::atoi(argv[1]) : 10;
  std::vector<int> sizes;
  for (int i = 2; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {2, 4, 8};
  std::printf("# ncclGetUniqueId -> last rank's ncclCommInitRank, host-only ranks as processes\n");
  std::printf("# %6s %10s %10s %10s\n", "ranks", "median_ms", "min_ms", "max_ms");
  for (int n : sizes) {
    std::vector<double> t;
    for (int i = 0; i < runs; ++i) {
      double ms = measure(n);
      if (ms < 0) {
        std::fprintf(stderr, "init of %d ranks failed: %s\n", n, ncclGetLastError(nullptr));
        return 1;
      }
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    std::printf("  %6d %10.2f %10.2f %10.2f\n", n, t[t.size() / 2], t.front(), t.back());
  }
  return 0;
}
