// local_collective.h's pass: one kernel per element type, one grid row (blockIdx.y) per job, the
// op dispatched outside the element loop (as the executor does). A fold rounds to the type after
// every operation (narrow floats reduce in float), as a ring's hops do.
#include <algorithm>

#include "core/numeric.h"
#include "kernels/elementwise.cuh"
#include "kernels/instances.h"
#include "kernels/kernel_entry.h"
#include "kernels/local_collective.h"

namespace braid::kernels {
namespace {
using namespace device;

constexpr unsigned kThreads = 512;
constexpr unsigned kBlocksPerSm = 4;  // 2048 threads an SM: enough loads in flight to stream HBM

template <class E, class Op> struct Fold {
  using Raw = typename E::Raw;
  using Acc = typename E::Acc;
  const Acc* scalars;  // PreMulSum: each rank's; null otherwise
  int32_t divisor;     // SumPostDiv: the final division; 0: none
  // Rank r's element as it enters the sum (a PreMulSum product is rounded to the type, as NCCL does).
  __device__ Raw take(Raw x, int r) const { return scalars == nullptr ? x : E::store(wrapMul(E::load(x), scalars[r])); }
  __device__ Raw add(Raw acc, Raw x) const { return E::store(Op::apply(E::load(acc), E::load(x))); }
  __device__ Raw finish(Raw acc) const { return divisor == 0 ? acc : E::store(postDivide(E::load(acc), divisor)); }
};

// Job `job`'s elements [first, count) in steps of `stride`: 16-byte packs where every buffer is
// aligned, then element by element.
template <class E, class Op>
__device__ void runJob(const LocalCollective& w, const LocalJob& job, const Fold<E, Op>& f) {
  using Raw = typename E::Raw;
  using P = Pack<Raw>;
  const int lowest = __ffs(job.from) - 1;
  bool vec = true;
  for (uint32_t m = job.from; m != 0; m &= m - 1) vec = vec && aligned16(static_cast<const Raw*>(w.ranks[__ffs(m) - 1].in) + job.srcOff);
  for (uint32_t m = job.to; m != 0; m &= m - 1) vec = vec && aligned16(static_cast<Raw*>(w.ranks[__ffs(m) - 1].out) + job.dstOff);
  auto in = [&](int r) { return static_cast<const Raw*>(w.ranks[r].in) + job.srcOff; };
  auto out = [&](int r) { return static_cast<Raw*>(w.ranks[r].out) + job.dstOff; };
  const uint64_t nPacks = vec ? w.count / P::kElems : 0;
  const uint64_t first = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = first; i < nPacks; i += stride) {
    P acc, x;
    acc.v = reinterpret_cast<const uint4*>(in(lowest))[i];
#pragma unroll
    for (int k = 0; k < P::kElems; ++k) acc.e[k] = f.take(acc.e[k], lowest);
    for (uint32_t m = job.from & (job.from - 1); m != 0; m &= m - 1) {
      const int r = __ffs(m) - 1;
      x.v = reinterpret_cast<const uint4*>(in(r))[i];
#pragma unroll
      for (int k = 0; k < P::kElems; ++k) acc.e[k] = f.add(acc.e[k], f.take(x.e[k], r));
    }
#pragma unroll
    for (int k = 0; k < P::kElems; ++k) acc.e[k] = f.finish(acc.e[k]);
    for (uint32_t m = job.to; m != 0; m &= m - 1) reinterpret_cast<uint4*>(out(__ffs(m) - 1))[i] = acc.v;
  }
  for (uint64_t i = nPacks * P::kElems + first; i < w.count; i += stride) {
    Raw acc = f.take(in(lowest)[i], lowest);
    for (uint32_t m = job.from & (job.from - 1); m != 0; m &= m - 1) {
      const int r = __ffs(m) - 1;
      acc = f.add(acc, f.take(in(r)[i], r));
    }
    acc = f.finish(acc);
    for (uint32_t m = job.to; m != 0; m &= m - 1) out(__ffs(m) - 1)[i] = acc;
  }
}

template <ElemType T>
__global__ void __launch_bounds__(kThreads) localCollectiveKernel(const __grid_constant__ LocalCollective w) {
  using E = Elem<T>;
  using Raw = typename E::Raw;
  __shared__ typename E::Acc scalars[kMostLocalRanks];
  const LocalJob& job = w.jobs[blockIdx.y];
  const bool premul = w.kind == RedKind::PreMulSum;
  if (premul && threadIdx.x < w.nRanks) {
    const LocalRank& rank = w.ranks[threadIdx.x];
    Raw bits;
    if (rank.deviceScalar != nullptr) {
      bits = *static_cast<const volatile Raw*>(rank.deviceScalar);
    } else {
      const uint64_t word = rank.scalarBits;
      memcpy(&bits, &word, sizeof(Raw));
    }
    scalars[threadIdx.x] = E::load(bits);
  }
  if (premul) __syncthreads();
  switch (w.kind) {
    case RedKind::Sum:
    case RedKind::SumPostDiv: runJob(w, job, Fold<E, OpSum>{nullptr, w.divisor}); break;
    case RedKind::PreMulSum: runJob(w, job, Fold<E, OpSum>{scalars, 0}); break;
    case RedKind::Prod: runJob(w, job, Fold<E, OpProd>{nullptr, 0}); break;
    case RedKind::Max: runJob(w, job, Fold<E, OpMax>{nullptr, 0}); break;
    case RedKind::Min: runJob(w, job, Fold<E, OpMin>{nullptr, 0}); break;
  }
}

using Kernel = void (*)(LocalCollective);
#define BRAID_LOCAL_KERNEL(T, NCCL) &localCollectiveKernel<ElemType::T>,
constexpr Kernel kKernels[kNumElemTypes] = {BRAID_ELEM_TYPES(BRAID_LOCAL_KERNEL)};
#undef BRAID_LOCAL_KERNEL

}  // namespace

cudaError_t localCollectiveAsync(const LocalCollective& w, cudaStream_t stream) {
  if (w.count == 0 || w.nJobs == 0) return cudaSuccess;
  if (size_t(w.type) >= size_t(kNumElemTypes) || w.nRanks > kMostLocalRanks || w.nJobs > kMostLocalRanks)
    return cudaErrorInvalidValue;
  // A 16-byte pack per thread (the shortest kernel for a small call); from a full GPU's worth of
  // threads on, each thread loops.
  const uint64_t packs = (w.count * sizeOfType(ncclDataType_t(w.type)) + 15) / 16;  // ElemType is ncclDataType_t's code
  uint64_t blocks = std::max<uint64_t>(1, (packs + kThreads - 1) / kThreads);
  if (blocks * w.nJobs > kBlocksPerSm * 64) {
    int dev = 0, sms = 0;
    if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
    if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
    blocks = std::max<uint64_t>(1, std::min<uint64_t>(blocks, uint64_t(sms) * kBlocksPerSm / w.nJobs));
  }
  kKernels[size_t(w.type)]<<<dim3(unsigned(blocks), w.nJobs), kThreads, 0, stream>>>(w);
  return cudaGetLastError();
}

cudaError_t preloadLocalCollectiveKernels() {
  cudaFuncAttributes attributes;
  for (Kernel k : kKernels)
    if (cudaError_t e = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(k)); e != cudaSuccess) return e;
  return cudaSuccess;
}

}  // namespace braid::kernels
