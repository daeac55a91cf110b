// Communicator init time: from ncclGetUniqueId to the end of the last rank's
// ncclCommInitRank, for N host-only ranks as processes on this machine (forked before any
// CUDA call, so no exec is needed). Prints the median and range of `runs` repetitions.
//   braid-init-time [runs] [N...] [--idle C] [--idle-wait MS]
// default: 10 runs of 2, 4 and 8 ranks. --idle C opens C idle TCP connections to the
// bootstrap root before the ranks start (issue 12: the root must not wait for strays); the
// time then starts once they are open, and --idle-wait MS waits that long before the ranks
// start, so that the root has taken them in (without it, the ranks meet the burst).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nccl.h"

namespace {

double nowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // one clock for all processes of the machine
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// C idle connections to the root named in a braid unique id (its address lies at byte 16,
// src/core/unique_id.h); false when the id is not braid's or a connect fails.
bool openIdle(const ncclUniqueId& id, int count, std::vector<int>* fds) {
  sockaddr_storage addr{};
  std::memcpy(&addr, id.internal + 16, sizeof(sockaddr_in6));
  if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) {
    std::fprintf(stderr, "--idle: the unique id does not hold a braid root address\n");
    return false;
  }
  socklen_t len = addr.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  for (int i = 0; i < count; ++i) {
    int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
      std::perror("--idle: connect to the root");
      if (fd >= 0) close(fd);
      return false;
    }
    fds->push_back(fd);
  }
  return true;
}

// One measurement; negative on failure.
double measure(int n, int idle, int idleWaitMs) {
  double start = nowMs();
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return -1;
  std::vector<int> idleFds;
  if (idle > 0) {
    if (!openIdle(id, idle, &idleFds)) return -1;
    if (idleWaitMs > 0) usleep(idleWaitMs * 1000);
    start = nowMs();
  }
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
  for (int fd : idleFds) close(fd);
  return last - start;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 10, idle = 0, idleWaitMs = 0;
  bool haveRuns = false;
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--idle" || a == "--idle-wait") && i + 1 < argc) {
      (a == "--idle" ? idle : idleWaitMs) = std::atoi(argv[++i]);
    } else if (!a.empty() && a[0] != '-') {
      if (haveRuns) sizes.push_back(std::atoi(a.c_str()));
      else runs = std::atoi(a.c_str());
      haveRuns = true;
    } else {
      std::fprintf(stderr, "usage: braid-init-time [runs] [N...] [--idle C] [--idle-wait MS]\n");
      return 2;
    }
  }
  if (runs < 1 || idle < 0 || idleWaitMs < 0) {
    std::fprintf(stderr, "braid-init-time: runs must be positive, --idle and --idle-wait not negative\n");
    return 2;
  }
  if (sizes.empty()) sizes = {2, 4, 8};
  std::printf("# ncclGetUniqueId -> last rank's ncclCommInitRank, host-only ranks as processes\n");
  if (idle > 0)
    std::printf("# with %d idle connections at the root, opened %d ms before the ranks start (timed from then)\n",
                idle, idleWaitMs);
  std::printf("# %6s %10s %10s %10s\n", "ranks", "median_ms", "min_ms", "max_ms");
  for (int n : sizes) {
    std::vector<double> t;
    for (int i = 0; i < runs; ++i) {
      double ms = measure(n, idle, idleWaitMs);
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
