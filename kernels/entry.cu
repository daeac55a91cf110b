// The kernels' host entry points: the table of per-type executor launchers, and the
// upload kernel. Work blobs too large for the executor kernel's parameters travel in the
// parameters of the upload kernel instead, one chunk a launch, into stream-ordered device
// memory. Unlike a cudaMemcpyAsync from host memory, this is safe to capture in a CUDA
// graph: the data is part of the kernel node.
#include "kernels/kernel_entry.h"

namespace braid::kernels {

#define BRAID_ELEM_TYPES(X) \
  X(Int8) X(Uint8) X(Int32) X(Uint32) X(Int64) X(Uint64) X(Float16) X(Float32) X(Float64) X(Bfloat16) X(Fp8E4M3) X(Fp8E5M2)
#define BRAID_DECLARE(T) \
  cudaError_t launchExecutor##T(const KernelParams&, unsigned, unsigned, cudaStream_t);
BRAID_ELEM_TYPES(BRAID_DECLARE)
#define BRAID_ENTRY(T) &launchExecutor##T,
const ExecutorLauncher kExecutorLaunchers[kNumElemTypes] = {BRAID_ELEM_TYPES(BRAID_ENTRY)};
#define BRAID_DECLARE_PRELOAD(T) cudaError_t preloadExecutor##T();
BRAID_ELEM_TYPES(BRAID_DECLARE_PRELOAD)

namespace {
__global__ void uploadKernel(const __grid_constant__ UploadParams p) {
  const uint4* from = reinterpret_cast<const uint4*>(p.data);
  uint4* to = reinterpret_cast<uint4*>(p.dst);
  for (uint32_t i = threadIdx.x; i < p.bytes / 16; i += blockDim.x) to[i] = from[i];
}
}  // namespace

cudaError_t preloadAllKernels() {
  using Preload = cudaError_t (*)();
#define BRAID_PRELOAD_ENTRY(T) &preloadExecutor##T,
  static const Preload preloads[] = {BRAID_ELEM_TYPES(BRAID_PRELOAD_ENTRY)};
  for (Preload p : preloads) {
    cudaError_t e = p();
    if (e != cudaSuccess) return e;
  }
  cudaFuncAttributes attributes;
  cudaError_t e = cudaFuncGetAttributes(&attributes, uploadKernel);
  return e == cudaSuccess ? preloadCopyKernels() : e;
}

cudaError_t launchUpload(const UploadParams& params, cudaStream_t stream) {
  uploadKernel<<<1, 256, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace braid::kernels
