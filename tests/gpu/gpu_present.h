// Whether a CUDA device is there, for the GPU test programs. Without one (CI) they print why
// and exit with kSkipExit, the SKIP_RETURN_CODE that ctest and tests/gpu/run.sh read as
// "skipped". Header-only: the standalone .cu tools use it too.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdio>

namespace braid::gputest {

constexpr int kSkipExit = 77;

// The number of usable GPUs, or 0 (no driver, no device).
inline int gpuCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

// True, after printing the reason, when there is no CUDA device: main then returns kSkipExit.
inline bool skipWithoutGpu() {
  if (gpuCount() > 0) return false;
  std::printf("SKIP: no CUDA device\n");
  return true;
}

}  // namespace braid::gputest
