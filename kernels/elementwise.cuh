// The element loop of one step slice, run by all threads of a block:
//   value = recv            (hasRecv)       | pre(src)  (no recv)
//   value = op(recv, pre(src))               (reduce)
//   value = post(value)                      (final)
//   dst = value; send = value                (where present)
// 16-byte packs when every pointer is 16-byte aligned, one element at a time otherwise.
// FIFO slots are read with ld.global.cg: another SM or GPU wrote them, so L1 may be stale.
#pragma once
#include <cstdint>

#include "kernels/elem_ops.cuh"

namespace braid::kernels::device {

struct SliceArgs {
  const void* recv;   // FIFO slot, or null
  const void* src;    // user/scratch buffer, or null (ignored when recv is set and !reduce)
  void* dst;          // or null
  void* send;         // FIFO slot of the next hop, or null
  uint64_t n;         // elements
  bool reduce;        // op(recv, src)
  bool premul;        // multiply src by the PreMulSum scalar when reading it
  bool final;         // apply the post-op (SumPostDiv)
};

template <typename Raw> union Pack {
  static constexpr int kElems = 16 / sizeof(Raw);
  uint4 v;
  Raw e[kElems];
};

template <class E, class Op> struct Combiner {
  using Raw = typename E::Raw;
  using Acc = typename E::Acc;
  Acc scalar;
  int32_t nRanks;

  __device__ Raw operator()(const SliceArgs& a, Raw r, Raw s) const {
    Acc v;
    if (a.recv != nullptr) {
      v = E::load(r);
      if (a.reduce) {
        Acc x = E::load(s);
        if (a.premul) x = E::load(E::store(wrapMul(x, scalar)));
        v = Op::apply(v, x);
      }
    } else {
      v = E::load(s);
      if (a.premul) v = wrapMul(v, scalar);
    }
    if (a.final) v = postDivide(v, nRanks);
    return E::store(v);
  }
};

__device__ inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// A plain copy (no op to apply) of nPacks 16-byte packs from one stream, into dst and/or
// send. It loads one stream, not two, so it keeps twice the packs in flight per thread: one
// block then moves as many bytes per memory latency as a reducing one.
__device__ inline void copyPacks(const uint4* from, bool fromFifo, uint4* dst, uint4* send, uint64_t nPacks) {
  constexpr int kUnroll = 8;
  const uint64_t stride = blockDim.x;
  uint64_t i = threadIdx.x;
  for (; i + (kUnroll - 1) * stride < nPacks; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = fromFifo ? __ldcg(from + i + u * stride) : from[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (dst != nullptr) dst[i + u * stride] = v[u];
      if (send != nullptr) send[i + u * stride] = v[u];
    }
  }
  for (; i < nPacks; i += stride) {
    uint4 v = fromFifo ? __ldcg(from + i) : from[i];
    if (dst != nullptr) dst[i] = v;
    if (send != nullptr) send[i] = v;
  }
}

template <class E, class Op>
__device__ void runSlice(const SliceArgs& a, const Combiner<E, Op>& combine) {
  using Raw = typename E::Raw;
  using P = Pack<Raw>;
  constexpr int kUnroll = 4;
  const bool transform = a.premul || a.final || (a.recv != nullptr && a.reduce);
  const Raw* recv = static_cast<const Raw*>(a.recv);
  const Raw* src = (a.recv == nullptr || a.reduce) ? static_cast<const Raw*>(a.src) : nullptr;
  Raw* dst = static_cast<Raw*>(a.dst);
  Raw* send = static_cast<Raw*>(a.send);

  const bool vec = aligned16(recv) && aligned16(src) && aligned16(dst) && aligned16(send);
  const uint64_t nPacks = vec ? a.n / P::kElems : 0;
  const uint64_t stride = blockDim.x;

  if (!transform) {
    const void* from = recv != nullptr ? static_cast<const void*>(recv) : static_cast<const void*>(src);
    copyPacks(static_cast<const uint4*>(from), recv != nullptr, reinterpret_cast<uint4*>(dst),
              reinterpret_cast<uint4*>(send), nPacks);
  } else {
    // Whole rounds first (every thread has kUnroll packs: loads issue back to back), then
    // the remaining packs one at a time.
    auto finish = [&](const P& r, const P& s, uint64_t i) {
      P out;
#pragma unroll
      for (int k = 0; k < P::kElems; ++k) out.e[k] = combine(a, r.e[k], s.e[k]);
      if (dst != nullptr) reinterpret_cast<uint4*>(dst)[i] = out.v;
      if (send != nullptr) reinterpret_cast<uint4*>(send)[i] = out.v;
    };
    const uint64_t round = stride * kUnroll;
    const uint64_t fullRounds = nPacks / round;
    for (uint64_t base = threadIdx.x; base < fullRounds * round; base += round) {
      P r[kUnroll], s[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        r[u].v = s[u].v = make_uint4(0, 0, 0, 0);
        if (recv != nullptr) r[u].v = __ldcg(reinterpret_cast<const uint4*>(recv) + base + u * stride);
        if (src != nullptr) s[u].v = reinterpret_cast<const uint4*>(src)[base + u * stride];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) finish(r[u], s[u], base + u * stride);
    }
    for (uint64_t i = fullRounds * round + threadIdx.x; i < nPacks; i += stride) {
      P r, s;
      r.v = s.v = make_uint4(0, 0, 0, 0);
      if (recv != nullptr) r.v = __ldcg(reinterpret_cast<const uint4*>(recv) + i);
      if (src != nullptr) s.v = reinterpret_cast<const uint4*>(src)[i];
      finish(r, s, i);
    }
  }

  for (uint64_t i = nPacks * P::kElems + threadIdx.x; i < a.n; i += stride) {
    Raw r = recv != nullptr ? __ldcg(recv + i) : Raw{};
    Raw s = src != nullptr ? src[i] : Raw{};
    Raw out = transform ? combine(a, r, s) : (recv != nullptr ? r : s);
    if (dst != nullptr) dst[i] = out;
    if (send != nullptr) send[i] = out;
  }
}

}  // namespace braid::kernels::device
