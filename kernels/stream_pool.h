// A stream-ordered memory pool that never makes one stream wait for another.
//
// The device's default pool may reuse a block freed on stream A for an allocation on stream B by
// making B wait for A's work (cudaMemPoolReuseAllowInternalDependencies, on by default). When
// A's work is a kernel that waits for B's next kernel -- ranks on one GPU, whose kernels wait for
// each other -- neither ever finishes. braid's own stream-ordered allocations (kept launch work,
// scratch copies) come from pools made here, with that reuse off; a block freed on another stream
// is then reused only once its free has completed.
// Plain C++ header.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace braid::kernels {

// A pool on device `dev` that keeps up to `keepBytes` of freed memory mapped between
// synchronisations (UINT64_MAX: all of it). Destroy it with cudaMemPoolDestroy once its
// allocations are freed.
cudaError_t makeIsolatedPool(int dev, uint64_t keepBytes, cudaMemPool_t* pool);

}  // namespace braid::kernels
