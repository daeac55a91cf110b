// The two kernels of the P2P measurement: a GPU reading a (peer's) buffer and writing one, with
// 16-byte loads and stores, one grid sized by the SM count. Defined in measure_kernels.cu, or by
// measure_kernels_absent.cc (returns cudaErrorNotSupported) in a tree built without CUDA kernels.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace braid::doctor::measure {

// True when the kernels were compiled into this binary.
bool peerKernelsBuilt();
// Reads `bytes` (a multiple of 16) from `src`; `sink` (16 bytes on the launching GPU) receives a
// value only so that the loads cannot be dropped.
cudaError_t launchPeerRead(const void* src, size_t bytes, void* sink, int smCount, cudaStream_t stream);
// Writes `bytes` (a multiple of 16) to `dst`.
cudaError_t launchPeerWrite(void* dst, size_t bytes, int smCount, cudaStream_t stream);

}  // namespace braid::doctor::measure
