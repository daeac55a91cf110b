// Device copies of spilled work blobs, kept for the next launch with the same bytes.
//
// A launch whose work does not fit the kernel parameters needs it in device memory. Uploading
// it every call cost 21-33 us of host time per rank for a 32-64-lane launch on the H200 VM
// (cudaMallocAsync, a 16 KiB-parameter upload kernel, cudaFreeAsync), more than packing and
// launching together. Training loops repeat the same calls on the same buffers, so the same
// blob comes back: it is compared byte for byte with the kept ones and, when equal, reused.
//
// Order: the device copy is read by kernels on any stream. Each entry keeps an event after its
// latest use; a launch on another stream waits for it (so for the upload too), and an entry
// is freed stream-ordered after that event. Not for work captured into a CUDA graph (the graph
// may replay after the entry is gone): graph_work.h keeps those.
//
// The copies come from a pool of the cache's own that never makes one stream wait for another
// (stream_pool.h).
// Plain C++ header.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace braid::kernels {

class WorkCache {
 public:
  struct Stats {
    uint64_t hits = 0, misses = 0, evictions = 0;
    size_t entries = 0, deviceBytes = 0;
  };

  // Keeps at most maxEntries blobs and maxBytes of device memory (the least recently used go).
  // maxEntries 0 keeps nothing: each copy is freed after the kernel that used it.
  explicit WorkCache(size_t maxEntries = 32, size_t maxBytes = size_t(8) << 20);
  ~WorkCache();  // frees the device copies: the work that reads them must be done or aborted
  WorkCache(const WorkCache&) = delete;
  WorkCache& operator=(const WorkCache&) = delete;

  // A device copy of `blob`, readable by work enqueued next on `stream`: kept, or uploaded now
  // (on `stream`, evicting what no longer fits). Call used() once the kernel is enqueued.
  cudaError_t get(const std::vector<unsigned char>& blob, cudaStream_t stream, const unsigned char** device);
  // Marks the end of the latest use of `device` (from get) on `stream`.
  cudaError_t used(const unsigned char* device, cudaStream_t stream);

  Stats stats() const;

 private:
  struct Entry {
    std::vector<unsigned char> bytes;  // the host copy, to compare
    unsigned char* device = nullptr;
    cudaEvent_t lastUse = nullptr;     // recorded after the latest kernel that reads it
    cudaStream_t stream = nullptr;     // where lastUse was recorded
    uint64_t tick = 0;                 // for least-recently-used eviction
  };
  cudaError_t evictFor(size_t bytes, cudaStream_t stream);
  cudaError_t makePool();  // on the current device, at the first upload
  cudaError_t freeEntry(Entry& e, cudaStream_t stream);

  mutable std::mutex mutex_;
  cudaMemPool_t pool_ = nullptr;
  std::vector<Entry> entries_;
  size_t maxEntries_, maxBytes_, deviceBytes_ = 0;
  uint64_t tick_ = 0;
  Stats stats_;
};

}  // namespace braid::kernels
