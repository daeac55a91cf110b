#include <algorithm>
#include <cstdint>

#include "kernels/copy.h"
#include "kernels/copy_loop.cuh"
#include "kernels/kernel_entry.h"

namespace braid::kernels {
namespace {

constexpr unsigned kThreads = 512;
constexpr int kUnroll = 4;
constexpr unsigned kMaxBlocks = 1024;  // grid-stride beyond: enough to fill any current GPU
// From here the copy streams (evict-first loads and stores, 2 blocks per SM): the buffers do
// not stay in L2 anyway, and the hints keep them from evicting each other.
constexpr size_t kStreamFromBytes = size_t(16) << 20;
constexpr unsigned kStreamBlocksPerSm = 2;
constexpr size_t kMemcpyFromBytes = size_t(64) << 20;

// 16-byte packs over the grid (copy_loop.cuh), then the bytes that do not fill a pack.
template <bool Streaming>
__global__ void __launch_bounds__(kThreads) copyKernel(uint4* dst, const uint4* src, size_t packs, char* dstTail,
                                                       const char* srcTail, unsigned tailBytes) {
  copyPacksStrided<kUnroll, Streaming>(dst, src, packs, size_t(blockIdx.x) * blockDim.x + threadIdx.x,
                                       size_t(gridDim.x) * blockDim.x);
  if (blockIdx.x == 0 && threadIdx.x < tailBytes) dstTail[threadIdx.x] = srcTail[threadIdx.x];
}

// Unaligned buffers: one byte per thread and step (rare; NCCL users pass aligned buffers).
__global__ void __launch_bounds__(kThreads) copyBytesKernel(char* dst, const char* src, size_t bytes) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes; i += stride) dst[i] = src[i];
}

// A pack per thread for small copies (the shortest kernel); large ones are capped and each
// thread loops with kUnroll loads in flight.
unsigned blocksFor(size_t items) {
  size_t blocks = (items + kThreads - 1) / kThreads;
  return unsigned(blocks < 1 ? 1 : blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

}  // namespace

cudaError_t copyAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  // From 64 MiB cudaMemcpyAsync copies 4-8% faster than any kernel shape tried on the H200
  // (tests/gpu/copy_probe.cu: 504.8 vs 531.6 us at 1 GiB at best); below, the kernel starts
  // sooner and, streaming, copies 32 MiB 10% faster.
  if (bytes >= kMemcpyFromBytes) return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
    const size_t packs = bytes / 16;
    const size_t done = packs * 16;
    auto* d = static_cast<uint4*>(dst);
    auto* s = static_cast<const uint4*>(src);
    auto* dTail = static_cast<char*>(dst) + done;
    auto* sTail = static_cast<const char*>(src) + done;
    if (bytes >= kStreamFromBytes) {
      int dev = 0, sms = 0;
      if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
      if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
      const unsigned blocks = std::min(blocksFor(packs), unsigned(sms) * kStreamBlocksPerSm);
      copyKernel<true><<<blocks, kThreads, 0, stream>>>(d, s, packs, dTail, sTail, unsigned(bytes - done));
    } else {
      copyKernel<false><<<blocksFor(packs), kThreads, 0, stream>>>(d, s, packs, dTail, sTail, unsigned(bytes - done));
    }
  } else {
    copyBytesKernel<<<blocksFor(bytes), kThreads, 0, stream>>>(static_cast<char*>(dst), static_cast<const char*>(src),
                                                                bytes);
  }
  return cudaGetLastError();
}

cudaError_t preloadCopyKernels() {
  cudaFuncAttributes attributes;
  for (const void* kernel : {reinterpret_cast<const void*>(copyKernel<false>), reinterpret_cast<const void*>(copyKernel<true>),
                             reinterpret_cast<const void*>(copyBytesKernel)})
    if (cudaError_t e = cudaFuncGetAttributes(&attributes, kernel); e != cudaSuccess) return e;
  return cudaSuccess;
}

}  // namespace braid::kernels
