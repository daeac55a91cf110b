#include "api/memory_kind.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "core/log.h"

namespace braid::api {
namespace {

using GetAddressRange = CUresult (*)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr);

// cuMemGetAddressRange through the runtime (braid does not link libcuda); null without a driver.
GetAddressRange addressRangeFn() {
  static GetAddressRange fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return GetAddressRange{nullptr};
    }
    return reinterpret_cast<GetAddressRange>(p);
  }();
  return fn;
}

bool pageMapped(uintptr_t address) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  unsigned char resident = 0;
  return mincore(reinterpret_cast<void*>(address & ~(page - 1)), 1, &resident) == 0 || errno != ENOMEM;
}

// Host ranges found mapped lately: a loop over the same buffers pays the two system calls once.
struct CheckedRange {
  uintptr_t begin = 0, end = 0;
};
thread_local CheckedRange tlsChecked[4];
thread_local unsigned tlsNext = 0;

}  // namespace

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

ncclResult_t checkExtent(const char* caller, int rank, const char* what, const void* ptr, size_t bytes,
                         MemoryKind kind) {
  if (bytes == 0) return ncclSuccess;
  uintptr_t begin = reinterpret_cast<uintptr_t>(ptr), last = 0;
  if (__builtin_add_overflow(begin, bytes - 1, &last))
    return fail(ncclInvalidArgument, "%s (rank %d): %s %p + %zu bytes runs past the end of the address space. Fix: "
                "check the count (it is far larger than any buffer).", caller, rank, what, ptr, bytes);
  if (kind == MemoryKind::Device) {
    GetAddressRange range = addressRangeFn();
    CUdeviceptr base = 0;
    size_t size = 0;
    if (!range || range(&base, &size, static_cast<CUdeviceptr>(begin)) != CUDA_SUCCESS) return ncclSuccess;  // unknowable
    if (last >= base + size)
      return fail(ncclInvalidArgument, "%s (rank %d): the call needs %zu bytes at %s %p, but its allocation (%p, %zu "
                  "bytes) ends %zu bytes after it. Fix: pass a count that fits the buffer.", caller, rank, bytes, what,
                  ptr, reinterpret_cast<void*>(base), size, static_cast<size_t>(base + size - begin));
    return ncclSuccess;
  }
  for (const CheckedRange& r : tlsChecked)
    if (begin >= r.begin && last < r.end) return ncclSuccess;
  if (!pageMapped(begin) || !pageMapped(last))
    return fail(ncclInvalidArgument, "%s (rank %d): the call needs %zu bytes at %s %p, but %s is not mapped memory. "
                "Fix: pass a count that fits the buffer (and a valid pointer).", caller, rank, bytes, what, ptr,
                pageMapped(begin) ? "its last byte" : "its first byte");
  tlsChecked[tlsNext++ % 4] = {begin, last + 1};
  return ncclSuccess;
}

}  // namespace braid::api
