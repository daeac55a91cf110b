// ncclCommGetAsyncError reports a CUDA error from the stream's work (issue 4 item 3): a kernel
// on the communicator's device writes to an invalid address; the error must come back as
// ncclUnhandledCudaError with a message naming the rank and the CUDA error, and
// ncclCommAbort must still return. A faulted context is unusable, so this is a process of
// its own. Exit 0: passed, 1: failed, 77: no GPU.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "gpu_present.h"
#include "nccl.h"

namespace {

__global__ void writeToNowhere(int* p) { p[threadIdx.x] = 1; }

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (braid::gputest::skipWithoutGpu()) return braid::gputest::kSkipExit;
  ncclComm_t comm = nullptr;
  int dev = 0;
  if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess) {
    std::printf("FAIL ncclCommInitAll: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  cudaStream_t s;
  float* buf = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess || cudaMalloc(&buf, 2 * 1024 * sizeof(float)) != cudaSuccess) {
    std::printf("FAIL stream or buffer\n");
    return 1;
  }
  ncclResult_t before = ncclInternalError;
  if (ncclAllReduce(buf, buf + 1024, 1024, ncclFloat32, ncclSum, comm, s) != ncclSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess || ncclCommGetAsyncError(comm, &before) != ncclSuccess ||
      before != ncclSuccess) {
    std::printf("FAIL a healthy all-reduce: async error %d, %s\n", before, ncclGetLastError(comm));
    return 1;
  }
  writeToNowhere<<<1, 32, 0, s>>>(reinterpret_cast<int*>(uintptr_t(16)));
  ncclResult_t async = ncclSuccess;
  auto t0 = std::chrono::steady_clock::now();
  while (async == ncclSuccess && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    if (ncclCommGetAsyncError(comm, &async) != ncclSuccess) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const char* why = ncclGetLastError(comm);
  std::printf("ncclCommGetAsyncError after the fault: %d (%s): %s\n", async, ncclGetErrorString(async), why);
  bool ok = async == ncclUnhandledCudaError && std::strstr(why, "rank 0") != nullptr;
  auto a0 = std::chrono::steady_clock::now();
  ncclResult_t ra = ncclCommAbort(comm);
  double abortSecs = std::chrono::duration<double>(std::chrono::steady_clock::now() - a0).count();
  std::printf("ncclCommAbort: %d after %.3f s\n", ra, abortSecs);
  ok = ok && abortSecs < 5;
  std::printf("SUMMARY async-error %s (reported %d, abort %.3f s)\n", ok ? "ok" : "FAILED", async, abortSecs);
  return ok ? 0 : 1;
}
