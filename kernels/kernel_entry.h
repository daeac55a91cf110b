// Host entry points of the kernels (defined in the generated executor_<type>.cu files and
// entry.cu), so that executor.cc stays plain C++.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/work_layout.h"

namespace braid::kernels {

using ExecutorLauncher = cudaError_t (*)(const KernelParams& params, unsigned blocks, unsigned threads,
                                         cudaStream_t stream);
// Indexed by ElemType.
extern const ExecutorLauncher kExecutorLaunchers[kNumElemTypes];

// Loads every kernel's module on the current device (see preloadKernels in executor.h).
cudaError_t preloadAllKernels();

// Loads copy.cu's kernels (called by preloadAllKernels).
cudaError_t preloadCopyKernels();

// Copies params.bytes bytes of params.data to params.dst, in stream order.
cudaError_t launchUpload(const UploadParams& params, cudaStream_t stream);

}  // namespace braid::kernels
