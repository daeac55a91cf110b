#include "api/memory_kind.h"

#include <cuda_runtime.h>

namespace braid::api {

MemoryKind memoryKindOf(const void* ptr, int* device) {
  *device = -1;
  if (!ptr) return MemoryKind::Host;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();  // no driver, or a pointer CUDA never saw: host memory
    return MemoryKind::Host;
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) {
    *device = attr.device;
    return MemoryKind::Device;
  }
  return MemoryKind::Host;
}

}  // namespace braid::api
