// The grid-stride loop of a plain device-to-device copy in 16-byte packs, shared by the
// 1-rank copy kernel (copy.cu) and the copy probe that chose its shape
// (tests/gpu/copy_probe.cu). CUDA only.
#pragma once
#include <cstddef>
#include <cstdint>

namespace braid::kernels {

// This thread's packs of [0, packs): from `first`, every `stride`, Unroll loads in flight,
// then the rest one at a time. Streaming: evict-first loads and stores (__ldcs/__stcs), for
// copies larger than L2 whose source and destination would otherwise evict each other.
template <int Unroll, bool Streaming>
__device__ inline void copyPacksStrided(uint4* dst, const uint4* src, size_t packs, size_t first, size_t stride) {
  size_t i = first;
  for (; i + (Unroll - 1) * stride < packs; i += Unroll * stride) {
    uint4 v[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) v[u] = Streaming ? __ldcs(src + i + u * stride) : src[i + u * stride];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      if constexpr (Streaming) __stcs(dst + i + u * stride, v[u]);
      else dst[i + u * stride] = v[u];
    }
  }
  for (; i < packs; i += stride) dst[i] = src[i];
}

}  // namespace braid::kernels
