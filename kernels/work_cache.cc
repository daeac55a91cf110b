#include "kernels/work_cache.h"

#include <algorithm>
#include <cstring>

#include "kernels/kernel_entry.h"
#include "kernels/stream_pool.h"

namespace braid::kernels {

WorkCache::WorkCache(size_t maxEntries, size_t maxBytes) : maxEntries_(maxEntries), maxBytes_(maxBytes) {}

WorkCache::~WorkCache() {
  // The owner has drained or aborted the work (GpuResources::close synchronises the device
  // first), so nothing reads the copies any more. The caller's device is current.
  for (Entry& e : entries_) {
    (void)cudaFree(e.device);
    (void)cudaEventDestroy(e.lastUse);
  }
  if (pool_ != nullptr) (void)cudaMemPoolDestroy(pool_);
  (void)cudaGetLastError();
}

cudaError_t WorkCache::makePool() {
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  // Keep what it frees mapped: the cache bounds the bytes, and unmapping at each sync only costs.
  return makeIsolatedPool(dev, UINT64_MAX, &pool_);
}

cudaError_t WorkCache::get(const std::vector<unsigned char>& blob, cudaStream_t stream, const unsigned char** device) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Entry& e : entries_) {
    if (e.bytes.size() != blob.size() || std::memcmp(e.bytes.data(), blob.data(), blob.size()) != 0) continue;
    // Its upload, or a kernel reading it, may be on another stream: come after them.
    if (e.stream != stream)
      if (cudaError_t err = cudaStreamWaitEvent(stream, e.lastUse, 0); err != cudaSuccess) return err;
    e.tick = ++tick_;
    ++stats_.hits;
    *device = e.device;
    return cudaSuccess;
  }
  ++stats_.misses;
  if (cudaError_t err = evictFor(blob.size(), stream); err != cudaSuccess) return err;
  Entry e;
  cudaError_t err = cudaEventCreateWithFlags(&e.lastUse, cudaEventDisableTiming);
  if (err != cudaSuccess) return err;
  if (pool_ == nullptr) err = makePool();
  if (err == cudaSuccess) err = cudaMallocFromPoolAsync(reinterpret_cast<void**>(&e.device), blob.size(), pool_, stream);
  if (err == cudaSuccess) err = uploadBlob(e.device, blob.data(), blob.size(), stream);
  // Recorded now too, so that another stream waits for the upload even if the kernel that
  // follows is never enqueued.
  if (err == cudaSuccess) err = cudaEventRecord(e.lastUse, stream);
  if (err != cudaSuccess) {
    if (e.device != nullptr) (void)cudaFreeAsync(e.device, stream);
    (void)cudaEventDestroy(e.lastUse);
    return err;
  }
  e.bytes = blob;
  e.stream = stream;
  e.tick = ++tick_;
  deviceBytes_ += blob.size();
  *device = e.device;
  entries_.push_back(std::move(e));
  return cudaSuccess;
}

cudaError_t WorkCache::used(const unsigned char* device, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->device == device) {
      it->stream = stream;
      if (maxEntries_ > 0) return cudaEventRecord(it->lastUse, stream);
      const cudaError_t err = cudaFreeAsync(it->device, stream);  // after the kernel, in its stream
      (void)cudaEventDestroy(it->lastUse);
      deviceBytes_ -= it->bytes.size();
      entries_.erase(it);
      return err;
    }
  return cudaSuccess;
}

WorkCache::Stats WorkCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Stats s = stats_;
  s.entries = entries_.size();
  s.deviceBytes = deviceBytes_;
  return s;
}

cudaError_t WorkCache::evictFor(size_t bytes, cudaStream_t stream) {
  while (!entries_.empty() && (entries_.size() >= maxEntries_ || deviceBytes_ + bytes > maxBytes_)) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const Entry& a, const Entry& b) { return a.tick < b.tick; });
    // Gone from the table even when CUDA refuses the free (its event is destroyed either way).
    const cudaError_t err = freeEntry(*oldest, stream);
    deviceBytes_ -= oldest->bytes.size();
    entries_.erase(oldest);
    ++stats_.evictions;
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// Freed in `stream`'s order once the entry's latest use is done (that stream may be gone by
// now, so the free does not go there).
cudaError_t WorkCache::freeEntry(Entry& e, cudaStream_t stream) {
  cudaError_t err = e.stream != stream ? cudaStreamWaitEvent(stream, e.lastUse, 0) : cudaSuccess;
  // Without that wait the free could come before the last kernel that reads it: keep the
  // memory (a leak) rather than risk it.
  if (err == cudaSuccess) err = cudaFreeAsync(e.device, stream);
  (void)cudaEventDestroy(e.lastUse);  // its pending record completes on its own
  return err;
}

}  // namespace braid::kernels
