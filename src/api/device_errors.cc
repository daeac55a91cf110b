#include "api/device_errors.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "core/comm.h"
#include "core/cuda_scope.h"
#include "core/log.h"

namespace braid::api {
namespace {

// A stream of braid's own per device, never given work: querying it returns the context's
// sticky error, if any, and cudaSuccess otherwise.
cudaError_t probeDevice(int dev) {
  static std::mutex mutex;
  static std::map<int, cudaStream_t> probes;
  std::lock_guard<std::mutex> lock(mutex);
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess) return cudaGetLastError(), cudaSuccess;  // no driver
  DeviceScope scope(dev);
  cudaError_t e = scope.error();
  auto it = probes.find(dev);
  if (e == cudaSuccess && it == probes.end()) {
    cudaStream_t s = nullptr;
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e == cudaSuccess) it = probes.emplace(dev, s).first;
  }
  if (e == cudaSuccess) {
    RelaxedCapture relaxed;  // a global-mode capture elsewhere would forbid the query
    e = cudaStreamQuery(it->second);
  }
  return e;
}

}  // namespace

ncclResult_t deviceAsyncError(ncclComm* comm) {
  if (comm->cudaDev < 0) return ncclSuccess;
  cudaError_t e = probeDevice(comm->cudaDev);
  if (e == cudaSuccess || e == cudaErrorNotReady) return ncclSuccess;
  cudaGetLastError();
  return fail(ncclUnhandledCudaError,
              "rank %d: CUDA device %d reports an error from work on its streams: %s (%s). The CUDA context is "
              "unusable: call ncclCommAbort and restart the process.",
              comm->rank, comm->cudaDev, cudaGetErrorName(e), cudaGetErrorString(e));
}

}  // namespace braid::api
