// A device-to-device copy on a stream: what a collective on one rank is (with a built-in op).
// Below 64 MiB a kernel, not cudaMemcpyAsync: on the H200 VM its launch costs the host
// 0.3-1 us less and it starts sooner (tests/gpu/call_cost.cu measures both), and from 16 MiB
// it streams; above, the copy's own bandwidth matters more, and cudaMemcpyAsync has more
// (tests/gpu/copy_probe.cu compares the shapes). Plain C++ header.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace braid::kernels {

// Enqueues the copy of `bytes` bytes (dst and src on the stream's device, not overlapping).
// Returns the launch's CUDA error.
cudaError_t copyAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream);

}  // namespace braid::kernels
