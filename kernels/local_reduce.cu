// local_reduce.h's pass: one kernel per element type, the op dispatched outside the element loop
// (as the executor does). It folds the ranks' inputs as a ring would, rounding to the type after
// every operation (narrow floats reduce in float), so its results match the executor's kind.
#include <algorithm>

#include "kernels/elementwise.cuh"
#include "kernels/instances.h"
#include "kernels/kernel_entry.h"
#include "kernels/local_reduce.h"

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
  __device__ Raw take(Raw x, uint32_t r) const { return scalars == nullptr ? x : E::store(wrapMul(E::load(x), scalars[r])); }
  __device__ Raw add(Raw acc, Raw x) const { return E::store(Op::apply(E::load(acc), E::load(x))); }
  __device__ Raw finish(Raw acc) const { return divisor == 0 ? acc : E::store(postDivide(E::load(acc), divisor)); }
};

template <class E, class Op>
__device__ void foldAll(const LocalAllReduce& w, const Fold<E, Op>& f) {
  using Raw = typename E::Raw;
  using P = Pack<Raw>;
  bool vec = true;
  for (uint32_t r = 0; r < w.nRanks; ++r) vec = vec && aligned16(w.ranks[r].in) && aligned16(w.ranks[r].out);
  const uint64_t nPacks = vec ? w.count / P::kElems : 0;
  const uint64_t first = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = first; i < nPacks; i += stride) {
    P acc, x;
    acc.v = static_cast<const uint4*>(w.ranks[0].in)[i];
#pragma unroll
    for (int k = 0; k < P::kElems; ++k) acc.e[k] = f.take(acc.e[k], 0);
    for (uint32_t r = 1; r < w.nRanks; ++r) {
      x.v = static_cast<const uint4*>(w.ranks[r].in)[i];
#pragma unroll
      for (int k = 0; k < P::kElems; ++k) acc.e[k] = f.add(acc.e[k], f.take(x.e[k], r));
    }
#pragma unroll
    for (int k = 0; k < P::kElems; ++k) acc.e[k] = f.finish(acc.e[k]);
    for (uint32_t r = 0; r < w.nRanks; ++r) static_cast<uint4*>(w.ranks[r].out)[i] = acc.v;
  }
  for (uint64_t i = nPacks * P::kElems + first; i < w.count; i += stride) {
    Raw acc = f.take(static_cast<const Raw*>(w.ranks[0].in)[i], 0);
    for (uint32_t r = 1; r < w.nRanks; ++r) acc = f.add(acc, f.take(static_cast<const Raw*>(w.ranks[r].in)[i], r));
    acc = f.finish(acc);
    for (uint32_t r = 0; r < w.nRanks; ++r) static_cast<Raw*>(w.ranks[r].out)[i] = acc;
  }
}

template <ElemType T>
__global__ void __launch_bounds__(kThreads) localAllReduceKernel(const __grid_constant__ LocalAllReduce w) {
  using E = Elem<T>;
  using Raw = typename E::Raw;
  __shared__ typename E::Acc scalars[kMostLocalRanks];
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
  const int32_t divisor = w.kind == RedKind::SumPostDiv ? w.divisor : 0;
  switch (w.kind) {
    case RedKind::Sum:
    case RedKind::SumPostDiv: foldAll(w, Fold<E, OpSum>{nullptr, divisor}); break;
    case RedKind::PreMulSum: foldAll(w, Fold<E, OpSum>{scalars, 0}); break;
    case RedKind::Prod: foldAll(w, Fold<E, OpProd>{nullptr, 0}); break;
    case RedKind::Max: foldAll(w, Fold<E, OpMax>{nullptr, 0}); break;
    case RedKind::Min: foldAll(w, Fold<E, OpMin>{nullptr, 0}); break;
  }
}

using Kernel = void (*)(LocalAllReduce);
#define BRAID_LOCAL_KERNEL(T, NCCL) &localAllReduceKernel<ElemType::T>,
constexpr Kernel kKernels[kNumElemTypes] = {BRAID_ELEM_TYPES(BRAID_LOCAL_KERNEL)};
#define BRAID_ELEM_BYTES(T, NCCL) uint32_t(sizeof(Elem<ElemType::T>::Raw)),
constexpr uint32_t kElemBytes[kNumElemTypes] = {BRAID_ELEM_TYPES(BRAID_ELEM_BYTES)};
#undef BRAID_LOCAL_KERNEL
#undef BRAID_ELEM_BYTES

}  // namespace

cudaError_t localAllReduceAsync(const LocalAllReduce& w, cudaStream_t stream) {
  if (w.count == 0 || w.nRanks == 0) return cudaSuccess;
  if (size_t(w.type) >= size_t(kNumElemTypes) || w.nRanks > kMostLocalRanks) return cudaErrorInvalidValue;
  // A 16-byte pack per thread (the shortest kernel for a small call); from a full GPU's worth of
  // threads on, each thread loops.
  const uint64_t items = (w.count * kElemBytes[size_t(w.type)] + 15) / 16;
  uint64_t blocks = std::max<uint64_t>(1, (items + kThreads - 1) / kThreads);
  if (blocks > kBlocksPerSm * 64) {
    int dev = 0, sms = 0;
    if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
    if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
    blocks = std::min<uint64_t>(blocks, uint64_t(sms) * kBlocksPerSm);
  }
  kKernels[size_t(w.type)]<<<unsigned(blocks), kThreads, 0, stream>>>(w);
  return cudaGetLastError();
}

cudaError_t preloadLocalReduceKernels() {
  cudaFuncAttributes attributes;
  for (Kernel k : kKernels)
    if (cudaError_t e = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(k)); e != cudaSuccess) return e;
  return cudaSuccess;
}

}  // namespace braid::kernels
