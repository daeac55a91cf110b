// What the CUDA calls on a collective's host path cost on this machine: host time per call of
// each runtime call that braid's enqueue path may make, and the GPU time of the two ways to
// run a tiny copy (cudaMemcpyAsync, a one-block kernel), timed alone and back to back.
// It explains the 1-rank latency and CPU-per-call numbers of gpu_nccl_compare.
//   gpu_call_cost            (exit 77 without a GPU)
//   gpu_call_cost --procs N [--big-params]
//                            N processes (forked before CUDA starts) launch 20000 empty kernels
//                            (or kernels with 4000 B of parameters, as braid's) each on GPU 0 at
//                            the same moment: host time per launch, and launches
//                            per us until each stream drains. Under MPS every process's launches go
//                            through one server: if the time per launch grows with N, they queue
//                            there (the suspect for nccl-tests' 4- and 8-rank small calls taking
//                            ~N x 2.5-3 us without graphs, session 14).
#include <cuda_runtime.h>

#include <algorithm>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpu_present.h"

namespace {

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::printf("FAIL %s: %s\n", #x, cudaGetErrorString(e_));                            \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

__global__ void emptyKernel() {}

// Kernels whose parameters are as large as the executor's (4 KiB: kernels/work_layout.h
// KernelParams) or an eighth of that: what the parameters' size adds to a launch.
template <size_t N>
struct Params {
  unsigned char bytes[N];
};
template <size_t N>
__global__ void paramsKernel(const __grid_constant__ Params<N> p) {
  if (threadIdx.x == 0 && p.bytes[0] == 255 && p.bytes[N - 1] == 255) asm volatile("trap;");
}

__global__ void copyKernel(const uint4* src, uint4* dst, size_t n16) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) dst[i] = src[i];
}

template <class F>
double hostUsPerCall(int calls, F&& f) {
  for (int i = 0; i < 100; ++i) f();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e6 / calls;
}

// GPU time (us) of `per` back-to-back enqueues of f, between two events; median of 15, per enqueue.
template <class F>
double gpuUs(cudaStream_t s, int per, F&& f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<double> v;
  for (int i = -3; i < 15; ++i) {
    CK(cudaStreamSynchronize(s));
    CK(cudaEventRecord(a, s));
    for (int k = 0; k < per; ++k) f();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 0) v.push_back(ms * 1000.0 / per);
  }
  std::sort(v.begin(), v.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return v[v.size() / 2];
}

// --procs: one child's launches, after every child has started CUDA (`ready`) and the parent
// says go (`go`).
int launchTogether(int index, int readyFd, int goFd, bool bigParams) {
  const int launches = 20000;
  if (braid::gputest::skipWithoutGpu()) return braid::gputest::kSkipExit;
  CK(cudaSetDevice(0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Params<4000> p4k{};
  auto launch = [&] {
    if (bigParams) paramsKernel<4000><<<1, 32, 0, s>>>(p4k);
    else emptyKernel<<<1, 32, 0, s>>>();
  };
  for (int i = 0; i < 200; ++i) launch();
  CK(cudaStreamSynchronize(s));
  char byte = 1;
  if (write(readyFd, &byte, 1) != 1 || read(goFd, &byte, 1) != 1) return 1;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i) launch();
  const auto t1 = std::chrono::steady_clock::now();
  CK(cudaStreamSynchronize(s));
  const auto t2 = std::chrono::steady_clock::now();
  auto us = [&](auto a, auto b) { return std::chrono::duration<double>(b - a).count() * 1e6 / launches; };
  std::printf("proc %d: host %.3f us a launch; %.3f us a launch until its stream drained\n", index, us(t0, t1), us(t0, t2));
  CK(cudaGetLastError());
  return 0;
}

int runTogether(int n, bool bigParams) {
  int ready[2], go[2];
  if (pipe(ready) != 0 || pipe(go) != 0) return std::perror("pipe"), 1;
  std::vector<pid_t> children;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid < 0) return std::perror("fork"), 1;
    if (pid == 0) {
      close(ready[0]);
      close(go[1]);
      std::exit(launchTogether(i, ready[1], go[0], bigParams));
    }
    children.push_back(pid);
  }
  close(ready[1]);
  close(go[0]);
  int started = 0;
  char byte = 0;
  while (started < n && read(ready[0], &byte, 1) == 1) ++started;  // a child that failed closes its end
  for (int i = 0; i < started; ++i)
    if (write(go[1], &byte, 1) != 1) break;
  close(go[1]);
  int worst = started == n ? 0 : 1;
  for (pid_t pid : children) {
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) worst = 1;
    else if (WEXITSTATUS(status) != 0) worst = WEXITSTATUS(status);
  }
  if (worst == 0)  // the control daemon's name, as the kernel keeps it (15 characters)
    std::printf("SUMMARY call-cost %d processes launched together, %s (MPS %s)\n", n,
                bigParams ? "4000 B of parameters" : "empty kernels",
                std::system("pgrep -x nvidia-cuda-mps >/dev/null 2>&1") == 0 ? "on" : "off");
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc >= 3 && std::strcmp(argv[1], "--procs") == 0)  // before CUDA starts
    return runTogether(std::atoi(argv[2]), argc == 4 && std::strcmp(argv[3], "--big-params") == 0);
  if (braid::gputest::skipWithoutGpu()) return braid::gputest::kSkipExit;
  CK(cudaSetDevice(0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *d0 = nullptr, *d1 = nullptr;
  CK(cudaMalloc(&d0, 1 << 20));
  CK(cudaMalloc(&d1, 1 << 20));
  std::vector<char> host(4096);
  const int calls = 20000;
  std::printf("host time per call (us, %d calls):\n", calls);
  cudaPointerAttributes attr;
  std::printf("  cudaPointerGetAttributes(device)   %.3f\n", hostUsPerCall(calls, [&] { (void)cudaPointerGetAttributes(&attr, d0); }));
  std::printf("  cudaPointerGetAttributes(host)     %.3f\n", hostUsPerCall(calls, [&] { (void)cudaPointerGetAttributes(&attr, host.data()); }));
  cudaStreamCaptureStatus cs;
  std::printf("  cudaStreamIsCapturing              %.3f\n", hostUsPerCall(calls, [&] { (void)cudaStreamIsCapturing(s, &cs); }));
  int dev = 0;
  std::printf("  cudaStreamGetDevice                %.3f\n", hostUsPerCall(calls, [&] { (void)cudaStreamGetDevice(s, &dev); }));
  std::printf("  cudaGetDevice                      %.3f\n", hostUsPerCall(calls, [&] { (void)cudaGetDevice(&dev); }));
  std::printf("  cudaSetDevice(current)             %.3f\n", hostUsPerCall(calls, [&] { (void)cudaSetDevice(0); }));
  std::printf("  cudaGetLastError                   %.3f\n", hostUsPerCall(calls, [&] { (void)cudaGetLastError(); }));
  CK(cudaStreamSynchronize(s));
  std::printf("  cudaMemcpyAsync 8 B D2D            %.3f\n", hostUsPerCall(calls, [&] { (void)cudaMemcpyAsync(d1, d0, 8, cudaMemcpyDeviceToDevice, s); }));
  CK(cudaStreamSynchronize(s));
  std::printf("  empty kernel <<<1,32>>>            %.3f\n", hostUsPerCall(calls, [&] { emptyKernel<<<1, 32, 0, s>>>(); }));
  CK(cudaStreamSynchronize(s));
  auto src = static_cast<const uint4*>(d0);
  auto dst = static_cast<uint4*>(d1);
  Params<512> p512{};
  Params<4000> p4k{};
  std::printf("  kernel, 512 B of parameters        %.3f\n", hostUsPerCall(calls, [&] { paramsKernel<512><<<1, 32, 0, s>>>(p512); }));
  CK(cudaStreamSynchronize(s));
  std::printf("  kernel, 4000 B of parameters       %.3f\n", hostUsPerCall(calls, [&] { paramsKernel<4000><<<1, 32, 0, s>>>(p4k); }));
  CK(cudaStreamSynchronize(s));
  std::printf("  copy kernel <<<1,64>>>             %.3f\n", hostUsPerCall(calls, [&] { copyKernel<<<1, 64, 0, s>>>(src, dst, 1); }));
  CK(cudaStreamSynchronize(s));
  cudaEvent_t ev;
  CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  std::printf("  cudaEventRecord                    %.3f\n", hostUsPerCall(calls, [&] { (void)cudaEventRecord(ev, s); }));
  CK(cudaStreamSynchronize(s));

  std::printf("GPU time per op (us): alone (event pair around one op) | back to back (200 ops)\n");
  for (size_t bytes : {size_t(16), size_t(2048), size_t(131072)}) {
    size_t n16 = bytes / 16;
    unsigned blocks = unsigned(std::min<size_t>(132, (n16 + 511) / 512));
    double m1 = gpuUs(s, 1, [&] { (void)cudaMemcpyAsync(d1, d0, bytes, cudaMemcpyDeviceToDevice, s); });
    double mN = gpuUs(s, 200, [&] { (void)cudaMemcpyAsync(d1, d0, bytes, cudaMemcpyDeviceToDevice, s); });
    double k1 = gpuUs(s, 1, [&] { copyKernel<<<blocks, 512, 0, s>>>(src, dst, n16); });
    double kN = gpuUs(s, 200, [&] { copyKernel<<<blocks, 512, 0, s>>>(src, dst, n16); });
    std::printf("  %7zu B  cudaMemcpyAsync %6.2f | %6.2f    copy kernel %6.2f | %6.2f\n", bytes, m1, mN, k1, kN);
  }
  CK(cudaGetLastError());
  std::printf("SUMMARY call-cost measured\n");
  return 0;
}
