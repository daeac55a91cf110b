// BRAID_SHADOW's kernels: a grid-stride comparison that counts differing elements and keeps
// the lowest differing index (atomics on device memory), then one thread that fetches both
// values at that index. No host memory is touched by the kernels (atomics across PCIe are
// not available everywhere): the caller copies the result out on the same stream.
#include "kernels/shadow_launch.h"

namespace braid::kernels {
namespace {

__device__ unsigned long long loadBits(const void* data, size_t i, int bytes) {
  switch (bytes) {
    case 1: return static_cast<const unsigned char*>(data)[i];
    case 2: return static_cast<const unsigned short*>(data)[i];
    case 4: return static_cast<const unsigned int*>(data)[i];
    default: return static_cast<const unsigned long long*>(data)[i];
  }
}

__global__ void resetResult(ShadowResult* r) {
  r->mismatches = 0;
  r->firstIndex = ~0ull;
  r->mineBits = 0;
  r->refBits = 0;
}

__global__ void compareElements(const void* mine, const void* ref, size_t n, CompareSpec spec, ShadowResult* r) {
  unsigned long long count = 0, first = ~0ull;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if (!elementsAgree(loadBits(mine, i, spec.elemBytes), loadBits(ref, i, spec.elemBytes), spec)) {
      ++count;
      if (first == ~0ull) first = i;  // a thread's indices rise: its first is its lowest
    }
  }
  if (count > 0) {
    atomicAdd(&r->mismatches, count);
    atomicMin(&r->firstIndex, first);
  }
}

__global__ void fetchFirst(const void* mine, const void* ref, int bytes, ShadowResult* r) {
  if (r->firstIndex == ~0ull) return;
  r->mineBits = loadBits(mine, r->firstIndex, bytes);
  r->refBits = loadBits(ref, r->firstIndex, bytes);
}

__global__ void xorElement(void* data, size_t index, int bytes, unsigned long long mask) {
  switch (bytes) {
    case 1: static_cast<unsigned char*>(data)[index] ^= static_cast<unsigned char>(mask); break;
    case 2: static_cast<unsigned short*>(data)[index] ^= static_cast<unsigned short>(mask); break;
    case 4: static_cast<unsigned int*>(data)[index] ^= static_cast<unsigned int>(mask); break;
    default: static_cast<unsigned long long*>(data)[index] ^= mask; break;
  }
}

}  // namespace

cudaError_t launchShadowCompare(const void* mine, const void* ref, size_t n, const CompareSpec& spec,
                                ShadowResult* result, cudaStream_t stream) {
  resetResult<<<1, 1, 0, stream>>>(result);
  if (n > 0) {
    constexpr int kThreads = 256;
    // Enough blocks to fill an H200 several times over; more only adds atomics.
    size_t blocks = (n + kThreads - 1) / kThreads;
    if (blocks > 1024) blocks = 1024;
    compareElements<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(mine, ref, n, spec, result);
    fetchFirst<<<1, 1, 0, stream>>>(mine, ref, spec.elemBytes, result);
  }
  return cudaGetLastError();
}

cudaError_t launchShadowPerturb(void* data, size_t index, int elemBytes, unsigned long long mask, cudaStream_t stream) {
  xorElement<<<1, 1, 0, stream>>>(data, index, elemBytes, mask);
  return cudaGetLastError();
}

}  // namespace braid::kernels
