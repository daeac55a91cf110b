// The kernels' host entry points: the table of executor launchers (per type, per protocol), and the
// upload kernel. Work blobs too large for the executor kernel's parameters travel in the
// parameters of the upload kernel instead, one chunk a launch, into stream-ordered device
// memory. Unlike a cudaMemcpyAsync from host memory, this is safe to capture in a CUDA
// graph: the data is part of the kernel node.
#include "kernels/kernel_entry.h"

#include <algorithm>
#include <cstring>

#include "kernels/instances.h"

namespace braid::kernels {

// The per-type launcher arrays (executor_<type>.cu), each indexed by algo::Protocol in
// BRAID_PROTOCOLS order, which must be algo::Protocol's.
#define BRAID_PROTOCOL_ID(PROTO) algo::Protocol::PROTO,
constexpr algo::Protocol kInstanceOrder[] = {BRAID_PROTOCOLS(BRAID_PROTOCOL_ID)};
constexpr bool instancesInProtocolOrder() {
  for (int i = 0; i < algo::kNumProtocols; ++i)
    if (int(kInstanceOrder[i]) != i) return false;
  return sizeof(kInstanceOrder) / sizeof(kInstanceOrder[0]) == algo::kNumProtocols;
}
static_assert(instancesInProtocolOrder(), "instances.h: BRAID_PROTOCOLS must list algo::Protocol in its order");

#define BRAID_DECLARE(T, NCCL) extern const ExecutorLauncher kExecutorLaunchers##T[algo::kNumProtocols];
BRAID_ELEM_TYPES(BRAID_DECLARE)
#define BRAID_ENTRY(T, NCCL) kExecutorLaunchers##T,
const ExecutorLauncher* const kExecutorLaunchers[kNumElemTypes] = {BRAID_ELEM_TYPES(BRAID_ENTRY)};
#define BRAID_DECLARE_PRELOAD(T, NCCL) cudaError_t preloadExecutor##T();
BRAID_ELEM_TYPES(BRAID_DECLARE_PRELOAD)

namespace {
// Threads of a warp that read different words of the parameters take turns (they sit in the
// constant bank), and one block's misses queue up on one SM. So each block copies only 256
// bytes, one 16-byte word per thread, and a chunk's reads spread over many SMs: on 2 H200s a
// 64-lane all-reduce of 8 MiB went from 182 to 95 us when one block of 256 threads did it all.
constexpr unsigned kUploadThreads = 16;
__global__ void uploadKernel(const __grid_constant__ UploadParams p) {
  const uint32_t i = blockIdx.x * kUploadThreads + threadIdx.x;
  if (i < p.bytes / 16) reinterpret_cast<uint4*>(p.dst)[i] = reinterpret_cast<const uint4*>(p.data)[i];
}
}  // namespace

cudaError_t preloadAllKernels() {
  using Preload = cudaError_t (*)();
#define BRAID_PRELOAD_ENTRY(T, NCCL) &preloadExecutor##T,
  static const Preload preloads[] = {BRAID_ELEM_TYPES(BRAID_PRELOAD_ENTRY)};
  for (Preload p : preloads) {
    cudaError_t e = p();
    if (e != cudaSuccess) return e;
  }
  cudaFuncAttributes attributes;
  cudaError_t e = cudaFuncGetAttributes(&attributes, uploadKernel);
  if (e == cudaSuccess) e = preloadCopyKernels();
  return e == cudaSuccess ? preloadLocalCollectiveKernels() : e;
}

cudaError_t uploadBlob(unsigned char* dst, const unsigned char* data, size_t bytes, cudaStream_t stream) {
  UploadParams up;
  for (size_t off = 0; off < bytes; off += kUploadChunkBytes) {
    up.dst = dst + off;
    up.bytes = uint32_t(std::min(kUploadChunkBytes, bytes - off));
    std::memcpy(up.data, data + off, up.bytes);
    const unsigned words = up.bytes / 16;
    uploadKernel<<<(words + kUploadThreads - 1) / kUploadThreads, kUploadThreads, 0, stream>>>(up);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace braid::kernels
