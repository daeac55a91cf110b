// BRAID_SHADOW's kernels (shadow_compare.cu), launched on the caller's stream: the comparison
// of braid's output with the real NCCL's (shadow_compare.h's rule over every element), and the
// test-only perturbation of one element of the real NCCL's output.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/shadow_compare.h"

namespace braid::kernels {

// Compares n elements of `mine` with `ref` into *result (device memory): it is reset, then
// holds the number that differ, the first index that differs and both values' bits.
cudaError_t launchShadowCompare(const void* mine, const void* ref, size_t n, const CompareSpec& spec,
                                ShadowResult* result, cudaStream_t stream);

// XORs `mask` into element `index` (of elemBytes bytes) of `data`.
cudaError_t launchShadowPerturb(void* data, size_t index, int elemBytes, unsigned long long mask, cudaStream_t stream);

}  // namespace braid::kernels
