// The GPU API tests' checks: a failed CUDA or NCCL call prints where and why, then ends the
// program at once (exit status 1), so that no rank goes on with a broken communicator.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include "nccl.h"

#define CUDA_OK(call)                                                                        \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      std::printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::fflush(stdout);                                                                   \
      std::_Exit(1);                                                                         \
    }                                                                                        \
  } while (0)

#define NCCL_OK(call)                                                                                   \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    if (r_ != ncclSuccess) {                                                                            \
      std::printf("FAIL %s:%d %s: %d %s | %s\n", __FILE__, __LINE__, #call, r_, ncclGetErrorString(r_), \
                  ncclGetLastError(nullptr));                                                           \
      std::fflush(stdout);                                                                              \
      std::_Exit(1);                                                                                    \
    }                                                                                                   \
  } while (0)
