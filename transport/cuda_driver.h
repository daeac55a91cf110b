// Driver calls the CUDA runtime lacks, found through cudaGetDriverEntryPointByVersion, so that
// braid links no libcuda and still loads where there is no driver: stream memory operations
// (a stream waits for, or writes, a 32-bit word) and the identity of an allocation.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace braid::transport {

// The stream waits until (int32_t)(*word - value) >= 0: a cyclic comparison, so counters
// may wrap. `word` is a device address (device memory, or mapped pinned host memory).
cudaError_t streamWaitAtLeast(cudaStream_t stream, const uint32_t* word, uint32_t value);
// The stream writes `value` to `word` once its earlier work is done and visible.
cudaError_t streamWrite(cudaStream_t stream, uint32_t* word, uint32_t value);
// The same for an 8-byte aligned 64-bit word; cudaErrorNotSupported where the driver has none.
cudaError_t streamWrite64(cudaStream_t stream, uint64_t* word, uint64_t value);

// The allocation that holds device pointer `p`: its base and size (cuMemGetAddressRange) and
// its process-wide unique id (CU_POINTER_ATTRIBUTE_BUFFER_ID), which changes when a range is
// freed and allocated again.
struct Allocation {
  void* base = nullptr;
  size_t bytes = 0;
  uint64_t bufferId = 0;
};
cudaError_t allocationOf(const void* p, Allocation* out);

}  // namespace braid::transport
