#include "api/device_errors.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "core/comm.h"
#include "core/log.h"

namespace braid::api {
namespace {

// A stream of braid's own per device, never given work: querying it returns the context's
// sticky error, if any, and cudaSuccess otherwise.
cudaError_t probeDevice(int dev) {
  static std::mutex mutex;
  static std::map<int, cudaStream_t> probes;
  std::lock_guard<std::mutex> lock(mutex);
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) return cudaGetLastError(), cudaSuccess;  // no driver
  cudaError_t e = cudaSuccess;
  if (previous != dev) e = cudaSetDevice(dev);
  auto it = probes.find(dev);
  if (e == cudaSuccess && it == probes.end()) {
    cudaStream_t s = nullptr;
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e == cudaSuccess) it = probes.emplace(dev, s).first;
  }
  if (e == cudaSuccess) {
    // A global-mode capture elsewhere in the process forbids the query in this thread's
    // default mode; it captures nothing.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    e = cudaStreamQuery(it->second);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
  }
  if (previous >= 0 && previous != dev) (void)cudaSetDevice(previous);
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
