// What a round trip between two processes on one GPU costs, five ways (issue 16's probe): the
// numbers that decide how ranks of separate processes sharing a GPU should talk when MPS is off
// (the GPU then runs one process's work at a time, switching between them).
//   gpu_timeslice_probe [ROUNDS]      (default 1000; exit 77 without a GPU)
// The parent forks before touching CUDA; both processes use GPU 0. The parent's cudaMalloc'd
// flag words reach the child by CUDA IPC; the pipes only start each mode and carry the child's
// result. Modes, per round trip i (A = parent, B = child):
//   spin     each side runs one kernel that stores its flag and spins on the other's
//   stream   both only order their streams: A writes flagA=i then waits flagB>=i
//            (cuStreamWriteValue32 / cuStreamWaitValue32); B waits, then writes
//   +kernel  the same, plus a one-thread kernel in each process per round trip
//   +copy    the same, plus a 4 KiB cudaMemcpyAsync in each process per round trip
//   leader   A waits flagB>=i, runs the kernel, writes flagA=i; B writes flagB=i and waits
//            flagA>=i: only A's context does GPU work
// Each mode is bounded (the spin kernels give up after 20 s of clock, the host waits at most
// 30 s per mode); a mode that times out says so. Prints a table, and MPS's state.
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
#include <string>
#include <thread>

#include "gpu_present.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kModes = 5;
const char* const kModeNames[kModes] = {"spin", "stream", "stream+kernel", "stream+copy", "leader"};
constexpr double kHostLimitSeconds = 30;

#define CK(call)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::_Exit(1);                                                                    \
    }                                                                                   \
  } while (0)
#define CU(call)                                                                        \
  do {                                                                                  \
    CUresult r_ = (call);                                                               \
    if (r_ != CUDA_SUCCESS) {                                                           \
      std::fprintf(stderr, "FAIL %s:%d %s: CUresult %d\n", __FILE__, __LINE__, #call, int(r_)); \
      std::_Exit(1);                                                                    \
    }                                                                                   \
  } while (0)

// The driver's stream memory operations, found through the runtime: the program links no
// libcuda, so that it loads (and skips) where there is no driver.
using WriteValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
WriteValue32 streamWriteValue32 = nullptr;
WaitValue32 streamWaitValue32 = nullptr;
void findDriverCalls() {
  void* w = nullptr;
  void* v = nullptr;
  cudaDriverEntryPointQueryResult q1, q2;
  CK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &w, 12000, cudaEnableDefault, &q1));
  CK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &v, 12000, cudaEnableDefault, &q2));
  if (q1 != cudaDriverEntryPointSuccess || q2 != cudaDriverEntryPointSuccess || !w || !v) {
    std::fprintf(stderr, "FAIL: the driver has no cuStreamWriteValue32/cuStreamWaitValue32\n");
    std::_Exit(1);
  }
  streamWriteValue32 = reinterpret_cast<WriteValue32>(w);
  streamWaitValue32 = reinterpret_cast<WaitValue32>(v);
}

// The pipe messages: the IPC handle once, then per mode a start (mode, rounds) and a result.
struct Start {
  int mode;
  int rounds;
};
struct Result {
  double usPerRoundTrip;  // < 0: timed out
};

void writeAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = write(fd, c, n);
    if (k <= 0) {
      std::perror("timeslice_probe: write to the other process");
      std::_Exit(1);
    }
    c += k;
    n -= size_t(k);
  }
}
bool readAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = read(fd, c, n);
    if (k <= 0) return false;  // the other process is gone
    c += k;
    n -= size_t(k);
  }
  return true;
}

__device__ bool timedOut(long long start) { return clock64() - start > 20LL * 2000 * 1000 * 1000; }  // ~20 s

// spin: A stores, then waits; B waits, then stores. Gives up (and says so in *failed) after ~20 s.
__global__ void spinKernel(volatile unsigned* mine, volatile unsigned* theirs, int rounds, bool first, int* failed) {
  const long long t0 = clock64();
  for (int i = 1; i <= rounds; ++i) {
    if (first) {
      *mine = unsigned(i);
      __threadfence_system();
    }
    while (*theirs < unsigned(i))
      if (timedOut(t0)) {
        *failed = 1;
        return;
      }
    if (!first) {
      *mine = unsigned(i);
      __threadfence_system();
    }
  }
}

__global__ void tinyKernel(unsigned* sink) { *sink += 1; }

// Waits up to kHostLimitSeconds for the stream; false on a timeout or an error.
bool drain(cudaStream_t s) {
  const auto t0 = Clock::now();
  cudaError_t q;
  while ((q = cudaStreamQuery(s)) == cudaErrorNotReady &&
         std::chrono::duration<double>(Clock::now() - t0).count() < kHostLimitSeconds)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  if (q != cudaSuccess && q != cudaErrorNotReady) std::fprintf(stderr, "timeslice_probe: stream: %s\n", cudaGetErrorString(q));
  return q == cudaSuccess;
}

struct Side {
  bool leader;  // A
  unsigned* flags;  // two words per mode: [2m] written by A, [2m + 1] by B
  unsigned* scratch;  // 4 KiB x 2 for the copies, then the tiny kernel's counter
  int* failed;
  cudaStream_t stream;
};

// Enqueues one mode's round trips on this side and waits for them; microseconds per round
// trip, or -1 on a timeout.
double runMode(const Side& s, int mode, int rounds) {
  unsigned* a = s.flags + 2 * mode;
  unsigned* b = a + 1;
  unsigned* mine = s.leader ? a : b;
  unsigned* theirs = s.leader ? b : a;
  CUstream cs = reinterpret_cast<CUstream>(s.stream);
  const auto ptr = [](unsigned* p) { return reinterpret_cast<CUdeviceptr>(p); };
  const auto t0 = Clock::now();
  if (mode == 0) {
    spinKernel<<<1, 1, 0, s.stream>>>(mine, theirs, rounds, s.leader, s.failed);
    CK(cudaGetLastError());
  } else {
    for (int i = 1; i <= rounds; ++i) {
      const unsigned v = unsigned(i);
      auto signal = [&] { CU(streamWriteValue32(cs, ptr(mine), v, CU_STREAM_WRITE_VALUE_DEFAULT)); };
      auto wait = [&] { CU(streamWaitValue32(cs, ptr(theirs), v, CU_STREAM_WAIT_VALUE_GEQ)); };
      auto work = [&] {
        if (mode == 2 || (mode == 4 && s.leader)) tinyKernel<<<1, 1, 0, s.stream>>>(s.scratch + 2048);
        if (mode == 3) CK(cudaMemcpyAsync(s.scratch + 1024, s.scratch, 4096, cudaMemcpyDeviceToDevice, s.stream));
      };
      if (mode == 4) {  // only A works: A waits, works, signals; B signals and waits
        if (s.leader) {
          wait();
          work();
          signal();
        } else {
          signal();
          wait();
        }
      } else if (s.leader) {
        signal();
        wait();
        work();
      } else {
        wait();
        work();
        signal();
      }
    }
    CK(cudaGetLastError());
  }
  if (!drain(s.stream)) return -1;
  int failed = 0;
  CK(cudaMemcpy(&failed, s.failed, sizeof(int), cudaMemcpyDeviceToHost));
  if (failed) return -1;
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / rounds;
}

bool mpsRunning() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string pipe = std::string(dir ? dir : "/tmp/nvidia-mps") + "/control";
  return access(pipe.c_str(), F_OK) == 0;
}

int child(int fromParent, int toParent) {
  CK(cudaSetDevice(0));
  findDriverCalls();
  cudaIpcMemHandle_t handle;
  if (!readAll(fromParent, &handle, sizeof(handle))) return 1;
  void* flags = nullptr;
  CK(cudaIpcOpenMemHandle(&flags, handle, cudaIpcMemLazyEnablePeerAccess));
  Side s{false, static_cast<unsigned*>(flags), nullptr, nullptr, nullptr};
  CK(cudaMalloc(&s.scratch, 3 * 4096));
  CK(cudaMalloc(&s.failed, sizeof(int)));
  CK(cudaMemset(s.failed, 0, sizeof(int)));
  CK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  Start st;
  while (readAll(fromParent, &st, sizeof(st))) {
    if (st.mode < 0) break;
    Result r{runMode(s, st.mode, st.rounds)};
    writeAll(toParent, &r, sizeof(r));
  }
  CK(cudaIpcCloseMemHandle(flags));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (rounds < 1) {
    std::fprintf(stderr, "usage: gpu_timeslice_probe [ROUNDS >= 1]\n");
    return 2;
  }
  // Fork before CUDA is touched (a forked CUDA context is unusable); the parent's check of
  // the GPU comes after. A pipe whose other end is gone (the child, without a GPU, exits at
  // once) must give an error, not SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) {
    std::perror("timeslice_probe: pipe");
    return 1;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("timeslice_probe: fork");
    return 1;
  }
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    if (braid::gputest::gpuCount() == 0) std::_Exit(0);
    std::_Exit(child(down[0], up[1]));
  }
  close(down[0]);
  close(up[1]);
  auto finish = [&](int rc) {
    const Start stop{-1, 0};
    (void)!write(down[1], &stop, sizeof(stop));
    close(down[1]);
    int status = 0;
    for (int i = 0; i < 50 && waitpid(pid, &status, WNOHANG) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (waitpid(pid, &status, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      (void)waitpid(pid, &status, 0);
    }
    std::fflush(stdout);
    std::_Exit(rc);  // a timed-out mode may leave a stream waiting: do not wait for it at exit
    return rc;
  };
  if (braid::gputest::skipWithoutGpu()) return finish(braid::gputest::kSkipExit);
  CK(cudaSetDevice(0));
  findDriverCalls();
  void* flags = nullptr;
  CK(cudaMalloc(&flags, 4096));
  CK(cudaMemset(flags, 0, 4096));
  Side s{true, static_cast<unsigned*>(flags), nullptr, nullptr, nullptr};
  CK(cudaMalloc(&s.scratch, 3 * 4096));
  CK(cudaMalloc(&s.failed, sizeof(int)));
  CK(cudaMemset(s.failed, 0, sizeof(int)));
  CK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  CK(cudaDeviceSynchronize());
  cudaIpcMemHandle_t handle;
  CK(cudaIpcGetMemHandle(&handle, flags));
  writeAll(down[1], &handle, sizeof(handle));

  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# timeslice probe: 2 processes on GPU 0 (%s), MPS %s, %d round trips a mode (spin: at most 200)\n",
              prop.name, mpsRunning() ? "running" : "off", rounds);
  std::printf("%-14s %14s %14s\n", "mode", "A us/round", "B us/round");
  bool ok = true;
  for (int m = 0; m < kModes; ++m) {
    const int n = m == 0 ? std::min(rounds, 200) : rounds;
    const Start st{m, n};
    writeAll(down[1], &st, sizeof(st));
    const double mine = runMode(s, m, n);
    Result theirs{-1};
    if (!readAll(up[0], &theirs, sizeof(theirs))) {
      std::printf("%-14s the other process is gone\n", kModeNames[m]);
      return finish(1);
    }
    auto cell = [](double us) { return us < 0 ? std::string("timed out") : std::to_string(us).substr(0, 10); };
    std::printf("%-14s %14s %14s\n", kModeNames[m], cell(mine).c_str(), cell(theirs.usPerRoundTrip).c_str());
    ok = ok && mine >= 0 && theirs.usPerRoundTrip >= 0;
    if (mine < 0 || theirs.usPerRoundTrip < 0) break;  // the flags of a broken mode are not to be trusted
  }
  std::printf("SUMMARY timeslice %s\n", ok ? "ok" : "TIMED OUT");
  return finish(ok ? 0 : 1);
}
