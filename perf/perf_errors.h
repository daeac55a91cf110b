// How braid-perf fails: a PerfError carries the message and the exit status.
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "nccl.h"

namespace braid::perf {

inline constexpr int kExitWrongResults = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitFailure = 3;

struct PerfError : std::runtime_error {
  PerfError(const std::string& message, int exitCode, ncclResult_t ncclCode = ncclSuccess)
      : std::runtime_error(message), exitCode(exitCode), ncclCode(ncclCode) {}
  int exitCode;
  ncclResult_t ncclCode;  // what the failing NCCL call returned, if it was one
};

// Throw a PerfError (kExitFailure) naming the call, the error and, for NCCL, its last error.
void checkCuda(cudaError_t result, const char* call);
void checkNccl(ncclResult_t result, const char* call);

}  // namespace braid::perf

#define PERF_CUDA(call) ::braid::perf::checkCuda((call), #call)
#define PERF_NCCL(call) ::braid::perf::checkNccl((call), #call)
