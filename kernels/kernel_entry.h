// Host entry points of the kernels (defined in the generated executor_<type>.cu files and
// entry.cu), so that executor.cc stays plain C++.
#pragma once
#include <cuda_runtime_api.h>

#include "algo/protocol.h"
#include "kernels/work_layout.h"

namespace braid::kernels {

using ExecutorLauncher = cudaError_t (*)(const KernelParams& params, unsigned blocks, unsigned threads,
                                         cudaStream_t stream);
// Indexed by ElemType, then by algo::Protocol.
extern const ExecutorLauncher* const kExecutorLaunchers[kNumElemTypes];

// Loads every kernel's module on the current device (see preloadKernels in executor.h).
cudaError_t preloadAllKernels();

// Loads copy.cu's and local_collective.cu's kernels (called by preloadAllKernels).
cudaError_t preloadCopyKernels();
cudaError_t preloadLocalCollectiveKernels();

// Copies `bytes` (a multiple of 16) of host memory at `data` to device memory at `dst`, in
// stream order, through the parameters of upload kernels (graph-capturable, unlike a copy from
// pageable memory). The host memory may be reused once this returns.
cudaError_t uploadBlob(unsigned char* dst, const unsigned char* data, size_t bytes, cudaStream_t stream);

}  // namespace braid::kernels
