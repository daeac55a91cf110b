// The floor of a collective call for N processes sharing GPU 0, with no library in between: the
// least time per call that any design could reach, to judge whether a latency target is reachable.
//   gpu_floor_probe rendezvous N [CALLS] [gpu]   (MPS on; default 20000 calls)
//     every call is one <<<1,32>>> kernel per process: it bumps its epoch, publishes an 8-byte
//     value, spins until every epoch has caught up and sums the N values (an 8-byte all-reduce).
//     The epochs live in memory, so the launch never changes: timed as plain launches, then as a
//     CUDA graph of 20 calls. `gpu`: gpu-scope fences instead of system-scope ones.
//   gpu_floor_probe leader N [CALLS] [3]         (MPS off; default 2000 calls)
//     process 0 waits (cuStreamWaitValue32) for every member's ready flag, runs one kernel summing
//     the N values into every output, writes every member's done flag; the members only write
//     ready and wait for done: no kernel, no copy, so no context switch to a member's context.
//     `3`: each member writes a second word before it waits (what one more stream operation
//     in a member's context costs).
// The parent forks N-1 children before CUDA starts; the shared words are its cudaMalloc, reached
// by CUDA IPC; pipes carry the handle, the start barriers and the results. Bounded: spinning
// kernels give up after ~20 s of clock, hosts wait at most 20 s for a stream, and a watchdog ends
// a process still running after 60 s + 1 ms a call. Exit 77 without a GPU.
#include <cuda.h>
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "gpu_present.h"

namespace {

using Clock = std::chrono::steady_clock;

// Every CUDA call checked; a failure ends the process at once (_Exit: a stream may still wait).
#define CK(call)                                                                                  \
  do {                                                                                            \
    if (cudaError_t e_ = (call); e_ != cudaSuccess)                                               \
      std::printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)), std::_Exit(1); \
  } while (0)
#define CU(call)                                                                                  \
  do {                                                                                            \
    if (CUresult r_ = (call); r_ != CUDA_SUCCESS)                                                 \
      std::printf("FAIL %s:%d %s: CUresult %d\n", __FILE__, __LINE__, #call, int(r_)), std::_Exit(1); \
  } while (0)

// Found through the runtime, as timeslice_probe does: linking libcuda would make the program
// fail to load (exit 127) where there is no driver, instead of skipping.
using StreamValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
StreamValue32 writeValue32 = nullptr, waitValue32 = nullptr;
StreamValue32 driverCall(const char* name) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || !f) std::printf("FAIL: the driver has no %s\n", name), std::_Exit(1);
  return reinterpret_cast<StreamValue32>(f);
}

constexpr long long kSpinCycles = 20LL * 2000 * 1000 * 1000;  // ~20 s at ~2 GHz
constexpr int kHostLimitSeconds = 20;

// rendezvous: one line per rank (its epoch, its kernels' error count, its value for odd and even
// epochs: a peer may already publish call e+1's value while we read call e's), line 8 the abort.
struct alignas(128) RLine {
  unsigned epoch, bad;
  unsigned long long value[2], out;
};
// leader: ready[r] at line r, done[r] at line 8 + r, value/out of rank r at line 16 + r, the
// leader kernel's run count and error count at line 24.
struct alignas(64) LLine {
  unsigned flag, bad;
  unsigned long long value, out;
};
constexpr int kReady = 0, kDone = 8, kValue = 16, kRuns = 24;

template <bool Sys>
__device__ unsigned loadAcquire(const unsigned* p) {
  unsigned v;
  if (Sys) asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ void countBad(volatile RLine* l) { l->bad = l->bad + 1; }

template <bool Sys>
__global__ void rendezvousKernel(RLine* lines, int n, int me) {
  if (threadIdx.x != 0) return;
  volatile RLine* mine = lines + me;
  volatile unsigned* abortFlag = &lines[8].epoch;
  if (*abortFlag) return countBad(mine);
  const unsigned e = mine->epoch + 1;  // only this stream writes it, one kernel after another
  mine->value[e & 1] = (unsigned long long)(me + 1) * e;
  if (Sys) __threadfence_system();  // the value before the epoch, for every reader
  else __threadfence();
  mine->epoch = e;
  const long long t0 = clock64();
  unsigned long long sum = 0;
  for (int r = 0; r < n; ++r) {
    while (loadAcquire<Sys>(&lines[r].epoch) < e)
      if (*abortFlag || clock64() - t0 > kSpinCycles) {  // a peer is gone: stop every rank's spins
        *abortFlag = 1;
        return countBad(mine);
      }
    sum += static_cast<volatile RLine*>(lines + r)->value[e & 1];
  }
  if (sum != (unsigned long long)e * n * (n + 1) / 2) countBad(mine);
  mine->out = sum;
}

// The leader's call: sums the values into every rank's output; counts a member whose ready flag
// is behind (the stream's wait did not hold the kernel back).
__global__ void leaderKernel(LLine* l, int n) {
  if (threadIdx.x != 0) return;
  volatile LLine* v = l;
  const unsigned run = v[kRuns].flag + 1;
  v[kRuns].flag = run;
  unsigned long long sum = 0;
  for (int r = 0; r < n; ++r) sum += v[kValue + r].value;
  for (int m = 1; m < n; ++m)
    if (v[kReady + m].flag < run) v[kRuns].bad = v[kRuns].bad + 1;
  for (int r = 0; r < n; ++r) v[kValue + r].out = sum;
}

struct Result {
  double hostUs = -1, drainedUs = -1, graphUs = -1;
  int ok = 0;
};

// The pipes between the parent (rank 0) and each child, by the child's rank. The parent holds
// the write ends of down and the read ends of up; a child only its own pair.
struct Link {
  int me, n;
  int down[8], up[8];
};

// Whole messages through a pipe; false when the other process is gone.
bool writeAll(int fd, const void* p, size_t n) {
  for (ssize_t k; n > 0; p = static_cast<const char*>(p) + k, n -= size_t(k))
    if ((k = write(fd, p, n)) <= 0) return false;
  return true;
}
bool readAll(int fd, void* p, size_t n) {
  for (ssize_t k; n > 0; p = static_cast<char*>(p) + k, n -= size_t(k))
    if ((k = read(fd, p, n)) <= 0) return false;
  return true;
}

// Every process ready, then the parent says go.
bool barrier(const Link& l) {
  char b = 1;
  if (l.me != 0) return writeAll(l.up[l.me], &b, 1) && readAll(l.down[l.me], &b, 1);
  for (int c = 1; c < l.n; ++c)
    if (!readAll(l.up[c], &b, 1)) return false;
  for (int c = 1; c < l.n; ++c)
    if (!writeAll(l.down[c], &b, 1)) return false;
  return true;
}

// Waits for the stream at most kHostLimitSeconds (a member's waits never end if the leader dies).
bool drain(cudaStream_t s) {
  const auto t0 = Clock::now();
  cudaError_t q;
  while ((q = cudaStreamQuery(s)) == cudaErrorNotReady && Clock::now() - t0 < std::chrono::seconds(kHostLimitSeconds))
    std::this_thread::yield();
  if (q != cudaSuccess) std::printf("FAIL stream: %s\n", q == cudaErrorNotReady ? "not drained after 20 s" : cudaGetErrorString(q));
  return q == cudaSuccess;
}

// The last resort: a host thread blocks for good in an enqueue once the stream's queue is full
// behind a wait that a dead peer never satisfies (seen: leader mode, a member killed).
void watchdog(int me, int seconds) {
  std::thread([me, seconds] {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    std::printf("FAIL rank %d: still running after %d s\n", me, seconds);
    std::_Exit(1);
  }).detach();
}

double usPer(Clock::time_point a, Clock::time_point b, int calls) {
  return std::chrono::duration<double, std::micro>(b - a).count() / calls;
}

Result rendezvous(const Link& l, void* buf, cudaStream_t s, int calls, bool sys) {
  const int n = l.n, me = l.me;
  auto lines = static_cast<RLine*>(buf);
  auto launch = [&] {
    if (sys) rendezvousKernel<true><<<1, 32, 0, s>>>(lines, n, me);
    else rendezvousKernel<false><<<1, 32, 0, s>>>(lines, n, me);
  };
  Result r;
  for (int i = 0; i < 200; ++i) launch();
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s));  // bounded: a stuck kernel gives up, and then every later one at once
  if (!barrier(l)) return r;
  const auto t0 = Clock::now();
  for (int i = 0; i < calls; ++i) launch();
  const auto t1 = Clock::now();
  CK(cudaStreamSynchronize(s));
  r.hostUs = usPer(t0, t1, calls), r.drainedUs = usPer(t0, Clock::now(), calls);
  cudaGraph_t g;  // the same calls as a graph of 20
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 20; ++i) launch();
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphUpload(ge, s));
  CK(cudaGraphLaunch(ge, s));  // warm-up: 20 calls
  CK(cudaStreamSynchronize(s));
  if (!barrier(l)) return Result{};  // the times above may include a peer's 20-s timeout
  const auto t3 = Clock::now();
  for (int i = 0; i < calls / 20; ++i) CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  r.graphUs = usPer(t3, Clock::now(), calls / 20 * 20);
  RLine h[9];
  CK(cudaMemcpy(h, lines, sizeof(h), cudaMemcpyDeviceToHost));
  const unsigned total = unsigned(200 + calls + 20 + calls / 20 * 20);
  r.ok = h[me].bad == 0 && h[me].out == (unsigned long long)total * n * (n + 1) / 2 && h[8].epoch == 0;
  for (int q = 0; q < n; ++q) r.ok = r.ok && h[q].epoch == total;
  if (!r.ok)
    std::printf("FAIL rank %d: epoch %u (want %u), %u bad calls, out %llu, abort %u\n", me, h[me].epoch, total,
                h[me].bad, h[me].out, h[8].epoch);
  return r;  // the graph lives until the process _Exits
}

Result leader(const Link& l, void* buf, cudaStream_t s, int calls, bool thirdOp) {
  const int n = l.n, me = l.me;
  auto lines = static_cast<LLine*>(buf);
  const CUstream cs = reinterpret_cast<CUstream>(s);
  auto at = [&](int line) { return reinterpret_cast<CUdeviceptr>(&lines[line].flag); };
  const unsigned long long mine = me + 1;  // this rank's input, in place before its first ready flag
  CK(cudaMemcpyAsync(&lines[kValue + me].value, &mine, 8, cudaMemcpyHostToDevice, s));
  CK(cudaStreamSynchronize(s));
  auto call = [&](unsigned i) {
    if (me == 0) {
      for (int m = 1; m < n; ++m) CU(waitValue32(cs, at(kReady + m), i, CU_STREAM_WAIT_VALUE_GEQ));
      leaderKernel<<<1, 32, 0, s>>>(lines, n);
      for (int m = 1; m < n; ++m) CU(writeValue32(cs, at(kDone + m), i, CU_STREAM_WRITE_VALUE_DEFAULT));
    } else {
      CU(writeValue32(cs, at(kReady + me), i, CU_STREAM_WRITE_VALUE_DEFAULT));
      if (thirdOp) CU(writeValue32(cs, reinterpret_cast<CUdeviceptr>(&lines[kReady + me].bad), i, CU_STREAM_WRITE_VALUE_DEFAULT));
      CU(waitValue32(cs, at(kDone + me), i, CU_STREAM_WAIT_VALUE_GEQ));
    }
  };
  Result r;
  const int warm = 50;
  for (int i = 1; i <= warm; ++i) call(unsigned(i));
  CK(cudaGetLastError());
  if (!drain(s) || !barrier(l)) return r;
  const auto t0 = Clock::now();
  for (int i = warm + 1; i <= warm + calls; ++i) call(unsigned(i));
  const auto t1 = Clock::now();
  CK(cudaGetLastError());
  if (!drain(s)) return r;
  r.hostUs = usPer(t0, t1, calls), r.drainedUs = usPer(t0, Clock::now(), calls);
  LLine h[kRuns + 1];
  CK(cudaMemcpy(h, lines, sizeof(h), cudaMemcpyDeviceToHost));
  const unsigned total = unsigned(warm + calls);
  r.ok = h[kValue + me].out == (unsigned long long)n * (n + 1) / 2;
  for (int m = 1; m < n; ++m)  // the leader checks every member's flags, a member its own
    if (me == 0 || m == me) r.ok = r.ok && h[kReady + m].flag == total && h[kDone + m].flag == total;
  if (me == 0) r.ok = r.ok && h[kRuns].flag == total && h[kRuns].bad == 0;
  if (!r.ok) std::printf("FAIL rank %d: out %llu, runs %u (want %u), %u early kernels\n", me, h[kValue + me].out, h[kRuns].flag, total, h[kRuns].bad);
  return r;
}

// One process's part: the shared buffer (made by rank 0, opened by the others), its mode, its line.
Result runRank(const Link& l, bool leaderMode, int calls, bool sys, bool thirdOp) {
  CK(cudaSetDevice(0));
  if (leaderMode)
    writeValue32 = driverCall("cuStreamWriteValue32"), waitValue32 = driverCall("cuStreamWaitValue32");
  void* buf = nullptr;
  cudaIpcMemHandle_t handle;
  if (l.me == 0) {
    CK(cudaMalloc(&buf, 4096));
    CK(cudaMemset(buf, 0, 4096));
    CK(cudaDeviceSynchronize());
    CK(cudaIpcGetMemHandle(&handle, buf));
    for (int c = 1; c < l.n; ++c)
      if (!writeAll(l.down[c], &handle, sizeof(handle))) return Result{};
  } else {
    if (!readAll(l.down[l.me], &handle, sizeof(handle))) return Result{};
    CK(cudaIpcOpenMemHandle(&buf, handle, cudaIpcMemLazyEnablePeerAccess));
  }
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const Result r = leaderMode ? leader(l, buf, s, calls, thirdOp) : rendezvous(l, buf, s, calls, sys);
  if (r.drainedUs < 0) std::printf("FAIL rank %d: did not finish (a peer gone, or a stream stuck)\n", l.me);
  else if (leaderMode)
    std::printf("rank %d (%s): host %.3f us a call; %.3f us a call until drained%s\n", l.me, l.me ? "member" : "leader",
                r.hostUs, r.drainedUs, r.ok ? "" : "  FAIL");
  else
    std::printf("rank %d: host %.3f us a launch; %.3f us a call until drained; graph %.3f us a call until drained%s\n",
                l.me, r.hostUs, r.drainedUs, r.graphUs, r.ok ? "" : "  FAIL");
  return r;  // no teardown: a failed rank's stream may still wait, and the process _Exits
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const bool leaderMode = argc > 1 && std::strcmp(argv[1], "leader") == 0;
  const int n = argc > 2 ? std::atoi(argv[2]) : 0;
  const int calls = argc > 3 ? std::atoi(argv[3]) : (leaderMode ? 2000 : 20000);
  const bool sys = !(argc > 4 && std::strcmp(argv[4], "gpu") == 0);
  const bool thirdOp = leaderMode && argc > 4 && std::strcmp(argv[4], "3") == 0;
  if (argc < 3 || (!leaderMode && std::strcmp(argv[1], "rendezvous") != 0) || n < 2 || n > 8 || calls < 20) {
    std::fprintf(stderr, "usage: gpu_floor_probe rendezvous N [CALLS >= 20] [gpu] | leader N [CALLS] [3]   (N in 2..8)\n");
    return 2;
  }
  const int watchdogSeconds = 60 + calls / 1000;  // a normal run takes seconds
  // Before CUDA starts: MPS's state (the daemon's name as the kernel keeps it), then the fork.
  const bool mps = std::system("pgrep -x nvidia-cuda-mps >/dev/null 2>&1") == 0;
  signal(SIGPIPE, SIG_IGN);  // a gone peer's pipe gives an error
  Link l{0, n, {}, {}};
  std::vector<pid_t> children;
  for (int c = 1; c < n; ++c) {
    int d[2], u[2];
    if (pipe(d) != 0 || pipe(u) != 0) return std::perror("floor_probe: pipe"), 1;
    const pid_t pid = fork();
    if (pid < 0) return std::perror("floor_probe: fork"), 1;
    if (pid == 0) {
      for (int k = 1; k < c; ++k) close(l.down[k]), close(l.up[k]);  // the earlier children's
      close(d[1]), close(u[0]);
      Link mine{c, n, {}, {}};
      mine.down[c] = d[0], mine.up[c] = u[1];
      if (braid::gputest::gpuCount() == 0) std::_Exit(0);  // the parent reports the skip
      watchdog(c, watchdogSeconds);
      const Result r = runRank(mine, leaderMode, calls, sys, thirdOp);
      const bool sent = writeAll(mine.up[c], &r, sizeof(r));
      std::fflush(stdout);
      std::_Exit(sent && r.ok ? 0 : 1);  // no CUDA teardown: a failed stream may still wait
    }
    close(d[0]), close(u[1]);
    l.down[c] = d[1], l.up[c] = u[0];
    children.push_back(pid);
  }
  auto finish = [&](int rc) {  // closes the pipes (a waiting child sees EOF), reaps, kills after 60 s
    for (int c = 1; c < n; ++c)
      if (l.down[c] >= 0) close(l.down[c]);
    const auto t0 = Clock::now();
    for (pid_t pid : children) {
      int status = 0;
      pid_t got;
      while ((got = waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() - t0 < std::chrono::seconds(60))
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (got == 0) {  // stuck (in an enqueue behind a wait that never ends)
        kill(pid, SIGKILL);
        (void)waitpid(pid, &status, 0);
      }
      if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) && rc == 0) rc = 1;
    }
    std::fflush(stdout);
    std::_Exit(rc);  // no CUDA teardown (as in the children)
    return rc;
  };
  if (braid::gputest::skipWithoutGpu()) return finish(braid::gputest::kSkipExit);
  watchdog(0, watchdogSeconds);
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# floor probe: %s, N=%d processes on GPU 0 (%s), MPS %s, %d calls%s\n", leaderMode ? "leader" : "rendezvous", n,
              prop.name, mps ? "running" : "off", calls,
              leaderMode ? (thirdOp ? ", 3 stream operations a member" : "") : sys ? ", system-scope fences" : ", gpu-scope fences");
  if (leaderMode == mps)
    std::printf("# note: the %s mode is meant for MPS %s\n", leaderMode ? "leader" : "rendezvous", leaderMode ? "off" : "on");
  const Result mine = runRank(l, leaderMode, calls, sys, thirdOp);
  for (int c = 1; c < n; ++c) close(l.down[c]), l.down[c] = -1;  // a child still in a barrier sees EOF
  bool ok = mine.ok;
  double worst = mine.drainedUs, worstGraph = mine.graphUs;
  for (int c = 1; c < n; ++c) {
    Result r;
    if (!readAll(l.up[c], &r, sizeof(r))) r = Result{};  // the child died
    ok = ok && r.ok;
    worst = std::max(worst, r.drainedUs), worstGraph = std::max(worstGraph, r.graphUs);
  }
  if (!ok) std::printf("SUMMARY floor-probe %s N=%d FAIL\n", leaderMode ? "leader" : "rendezvous", n);
  else if (leaderMode) std::printf("SUMMARY floor-probe leader N=%d worst %.3f us a call\n", n, worst);
  else std::printf("SUMMARY floor-probe rendezvous N=%d worst %.3f us a call, graph %.3f us a call\n", n, worst, worstGraph);
  return finish(ok ? 0 : 1);
}
