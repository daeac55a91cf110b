// Enqueues one rank's launch: packs it (pack.cc), loads the kernels, uploads large work.
#include "kernels/executor.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "core/cuda_scope.h"
#include "core/log.h"
#include "kernels/graph_work.h"
#include "kernels/kernel_entry.h"
#include "kernels/pack.h"
#include "kernels/work_cache.h"

namespace braid::kernels {
namespace {

ncclResult_t deviceFail(int dev, cudaError_t e) {
  return fail(ncclUnhandledCudaError, "executor: cudaSetDevice(%d): %s", dev, cudaGetErrorString(e));
}

// True when `stream` is being captured into a graph (or the capture broke): such work must
// not point at device memory that a later launch may free.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;  // unsure: take the path that is safe either way
  }
  return status != cudaStreamCaptureStatusNone;
}

// Enqueues one packed kernel (and its upload, when the work does not fit the parameters).
ncclResult_t enqueueKernel(const Launch& w, const PackedLaunch& p, const PackedKernel& k) {
  const std::vector<unsigned char>& blob = k.blob;
  KernelParams params;
  std::memset(&params, 0, sizeof(params));
  params.index = k.index;
  params.abortFlag = w.abortFlag;
  params.errorOut = w.errorOut;
  params.slotBytes = p.slotBytes;
  params.nSlots = p.nSlots;
  params.flags = w.peersOnThisGpu ? kPeersOnThisGpu : 0;
  params.slicesPerStep = effectiveSlicesPerStep(uint32_t(w.slicesPerStep), p.nSlots);

  const ExecutorLauncher launcher = kExecutorLaunchers[int(k.type)][int(p.protocol)];
  auto launchKernel = [&] { return launcher(params, k.nBlocks, unsigned(w.threadsPerBlock), w.stream); };
  cudaError_t e = cudaSuccess;
  if (blob.size() <= kInlineWorkBytes) {
    std::memcpy(params.inlineWork, blob.data(), blob.size());
    e = launchKernel();
  } else if (capturing(w.stream)) {  // the graph may replay long after this call: graph_work.h
    if (w.graphWork == nullptr) return fail(ncclInternalError, "executor: %zu bytes of work to capture, and no GraphWork to keep them", blob.size());
    e = w.graphWork->capture(blob, w.stream, &params.spilledWork);
    if (e != cudaSuccess) return fail(ncclUnhandledCudaError, "executor: keeping %zu bytes of work for the graph being captured: %s", blob.size(), cudaGetErrorString(e));
    e = launchKernel();
  } else {
    if (w.workCache == nullptr) return fail(ncclInternalError, "executor: %zu bytes of work, and no WorkCache to upload them", blob.size());
    e = w.workCache->get(blob, w.stream, &params.spilledWork);
    if (e == cudaSuccess) e = launchKernel();
    if (e == cudaSuccess) e = w.workCache->used(params.spilledWork, w.stream);
  }
  if (e != cudaSuccess) return fail(ncclUnhandledCudaError, "executor: kernel launch (%u lanes, %zu work bytes): %s", k.nBlocks, blob.size(), cudaGetErrorString(e));
  return ncclSuccess;
}

}  // namespace

size_t inlineWorkCapacity() { return kInlineWorkBytes; }

Launch settingsOf(const Launch& w) {
  Launch s;
  s.cudaDev = w.cudaDev;
  s.stream = w.stream;
  s.protocol = w.protocol;
  s.abortFlag = w.abortFlag;
  s.errorOut = w.errorOut;
  s.threadsPerBlock = w.threadsPerBlock;
  s.peersOnThisGpu = w.peersOnThisGpu;
  s.slicesPerStep = w.slicesPerStep;
  s.workCache = w.workCache;
  s.graphWork = w.graphWork;
  return s;
}

algo::Protocol usableProtocol(algo::Protocol asked, bool ordered128, int rank, std::atomic<bool>* said) {
  if (asked != algo::Protocol::LL128 || ordered128) return asked;
  if (said == nullptr || !said->exchange(true))
    BRAID_INFO(kColl | kTuning | kP2p,
               "rank %d: LL128 asked, but not every connection carries 128-byte stores whole and in order (peers "
               "on another GPU without NVLink, or FIFOs staged in host memory, e.g. NCCL_P2P_DISABLE=1): such "
               "calls run with Simple",
               rank);
  return algo::Protocol::Simple;
}

ncclResult_t preloadKernels(int cudaDev) {
  // Every launch asks: once loaded, a device is one atomic load away (devices 0..63).
  static std::atomic<uint64_t> loadedMask{0};
  const uint64_t bit = cudaDev >= 0 && cudaDev < 64 ? uint64_t(1) << cudaDev : 0;
  if (bit != 0 && (loadedMask.load(std::memory_order_acquire) & bit) != 0) return ncclSuccess;
  static std::mutex mutex;
  static std::set<int> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded.count(cudaDev) > 0) return ncclSuccess;
  DeviceScope scope(cudaDev);
  if (scope.error() != cudaSuccess) return deviceFail(cudaDev, scope.error());
  cudaError_t e = preloadAllKernels();
  if (e != cudaSuccess) return fail(ncclUnhandledCudaError, "executor: loading the kernels on device %d: %s", cudaDev, cudaGetErrorString(e));
  loaded.insert(cudaDev);
  loadedMask.fetch_or(bit, std::memory_order_release);
  return ncclSuccess;
}

ncclResult_t launch(const Launch& w, unsigned* widestKernel, PackedLaunch* kept) {
  if (w.threadsPerBlock < 32 || w.threadsPerBlock > 512 || w.threadsPerBlock % 32 != 0)
    return fail(ncclInvalidArgument, "executor: threadsPerBlock %d; need a multiple of 32 in [32, 512]", w.threadsPerBlock);
  if (w.slicesPerStep < 1 || w.slicesPerStep > 64)
    return fail(ncclInvalidArgument, "executor: slicesPerStep %d; need 1..64", w.slicesPerStep);
  PackedLaunch packed;
  BRAID_CHECK(packLaunch(w, &packed));
  BRAID_CHECK(enqueuePacked(w, packed, widestKernel));
  if (kept != nullptr) *kept = std::move(packed);
  return ncclSuccess;
}

ncclResult_t enqueuePacked(const Launch& w, const PackedLaunch& packed, unsigned* widestKernel) {
  if (packed.kernels.empty()) return ncclSuccess;
  BRAID_CHECK(preloadKernels(w.cudaDev));
  DeviceScope scope(w.cudaDev);
  if (scope.error() != cudaSuccess) return deviceFail(w.cudaDev, scope.error());
  for (const PackedKernel& k : packed.kernels) {
    BRAID_CHECK(enqueueKernel(w, packed, k));
    if (widestKernel != nullptr) *widestKernel = std::max(*widestKernel, k.nBlocks);
  }
  return ncclSuccess;
}

}  // namespace braid::kernels
