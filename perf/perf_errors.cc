#include "perf/perf_errors.h"

namespace braid::perf {

void checkCuda(cudaError_t result, const char* call) {
  if (result == cudaSuccess) return;
  throw PerfError(std::string(call) + " failed: " + cudaGetErrorName(result) + " (" + cudaGetErrorString(result) + ")",
                  kExitFailure);
}

void checkNccl(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  throw PerfError(std::string(call) + " failed: " + ncclGetErrorString(result) +
                      (last && *last ? std::string(": ") + last : std::string()),
                  kExitFailure, result);
}

}  // namespace braid::perf
