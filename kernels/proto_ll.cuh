// LL (low latency): every 8 data bytes travel in a 16-byte line {data, flag, data, flag}, as
// two 8-byte words (data in the low 4 bytes, the flag in the high 4). A receiving thread polls
// its own lines until both flags are the slice's flag; nothing else says the data is there.
// Half the bytes moved are flags, so LL is for small calls, where latency rules.
//
// Ordering, for slice k on a connection S -> R (the slot lives in R's memory):
//   S: thread 0 waits for room (head >= k + 1 - nSlots, acquire), barrier; each thread stores
//      its lines with one st.volatile.v2.u64 each, flag = k + 1. No fence, no tail: each
//      8-byte word is single-copy atomic (PTX memory model, aligned 8-byte accesses), so a
//      reader that sees the flag in a word sees the data written with it.
//   R: each thread loads its lines (ld.volatile.v2.u64, so from L2 or the peer, never a stale
//      L1) until both words carry flag k + 1, then uses the data; barrier; thread 0 stores
//      head = k + 1 (relaxed, into S's memory). No fence before it: every read of the slot
//      has returned its value (the thread compared its flag and used its data before the
//      barrier), so S's later writes into the slot cannot be what those reads saw.
// The flag is the step, which only grows, so a line from an earlier use of the slot has an
// older flag and the FIFO never needs clearing. Flags are 32 bits: the interpreter has the
// sender rewrite whole slots once every 2^30 steps (llCleanStep), so no line gets 2^32 old.
// Volatile accesses are system scope: LL works to any peer, host-staged FIFOs included.
#pragma once
#include <cstdint>

#include "kernels/elementwise.cuh"
#include "kernels/proto_layout.h"
#include "kernels/proto_sync.cuh"

namespace braid::kernels::device {

struct ProtoLL {
  static constexpr Protocol kId = Protocol::LL;
  static constexpr bool kThreadWaitsForData = false;
  static constexpr int kUnroll = 4;  // lines in flight per thread: a default slot (2048 lines) in one round

  // The 8 data bytes of one line.
  template <typename Raw> union Chunk {
    static constexpr uint32_t kElems = kLLLineDataBytes / sizeof(Raw);
    uint64_t u;
    uint32_t w[2];
    Raw e[kElems];
  };

  // k elements at q (all of a chunk, or fewer at the end of the slice); a single 8-byte load
  // when q is 8-byte aligned and the chunk is whole.
  template <typename Raw> __device__ static Chunk<Raw> load(const Raw* q, uint32_t k, bool aligned) {
    Chunk<Raw> c;
    c.u = 0;
    if (aligned && k == Chunk<Raw>::kElems) {
      c.u = *reinterpret_cast<const uint64_t*>(q);
    } else {
#pragma unroll
      for (uint32_t i = 0; i < Chunk<Raw>::kElems; ++i)
        if (i < k) c.e[i] = q[i];
    }
    return c;
  }
  template <typename Raw> __device__ static void store(Raw* q, const Chunk<Raw>& c, uint32_t k, bool aligned) {
    if (aligned && k == Chunk<Raw>::kElems) {
      *reinterpret_cast<uint64_t*>(q) = c.u;
    } else {
#pragma unroll
      for (uint32_t i = 0; i < Chunk<Raw>::kElems; ++i)
        if (i < k) q[i] = c.e[i];
    }
  }

  __device__ static bool current(const Words2& w, uint32_t flag) {
    return uint32_t(w.lo >> 32) == flag && uint32_t(w.hi >> 32) == flag;
  }

  template <class E, class Op>
  __device__ __forceinline__ static bool move(const SliceArgs& a, const LineFlags f, const Combiner<E, Op>& combine,
                              const KernelParams& p) {
    using Raw = typename E::Raw;
    using C = Chunk<Raw>;
    constexpr uint32_t kPer = C::kElems;
    const char* recv = static_cast<const char*>(a.recv);
    char* send = static_cast<char*>(a.send);
    const Raw* src = (recv == nullptr || a.reduce) ? static_cast<const Raw*>(a.src) : nullptr;
    Raw* dst = static_cast<Raw*>(a.dst);
    const bool transform = a.premul || a.final || (recv != nullptr && a.reduce);
    const bool srcAligned = (reinterpret_cast<uintptr_t>(src) & 7) == 0;
    const bool dstAligned = (reinterpret_cast<uintptr_t>(dst) & 7) == 0;
    const uint64_t nLines = (a.n + kPer - 1) / kPer;
    const uint32_t recvFlag = uint32_t(f.recv);
    const uint64_t sendFlag = uint64_t(uint32_t(f.send)) << 32;
    const uint64_t stride = blockDim.x;
    Spinner spin;
    for (uint64_t base = threadIdx.x; base < nLines; base += kUnroll * stride) {
      // All loads first (the source and the first look at each line), then the waits.
      C s[kUnroll], r[kUnroll];
      Words2 w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint64_t line = base + u * stride;
        s[u].u = r[u].u = 0;
        w[u].lo = w[u].hi = 0;
        if (line >= nLines) continue;
        const uint64_t left = a.n - line * kPer;
        const uint32_t k = left < kPer ? uint32_t(left) : kPer;
        if (src != nullptr) s[u] = load(src + line * kPer, k, srcAligned);
        if (recv != nullptr) w[u] = loadVolatile2(recv + line * kLLLineBytes);
      }
      if (recv != nullptr) {
        // Poll every line still missing, round after round, until all are current.
        bool ready[kUnroll];
        bool all = true;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          ready[u] = base + u * stride >= nLines || current(w[u], recvFlag);
          all = all && ready[u];
        }
        while (!all) {
          if (spin.aborted(p)) return false;
          all = true;
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            if (!ready[u]) {
              w[u] = loadVolatile2(recv + (base + u * stride) * kLLLineBytes);
              ready[u] = current(w[u], recvFlag);
            }
            all = all && ready[u];
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          r[u].w[0] = uint32_t(w[u].lo);
          r[u].w[1] = uint32_t(w[u].hi);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint64_t line = base + u * stride;
        if (line >= nLines) continue;
        const uint64_t left = a.n - line * kPer;
        const uint32_t k = left < kPer ? uint32_t(left) : kPer;
        C o;
        if (transform) {
          // Elements past k (the end of the slice) are computed too and never stored.
#pragma unroll
          for (uint32_t i = 0; i < kPer; ++i) o.e[i] = combine(a, r[u].e[i], s[u].e[i]);
        } else {
          o.u = recv != nullptr ? r[u].u : s[u].u;  // bytes as they are (no round trip through float)
        }
        if (dst != nullptr) store(dst + line * kPer, o, k, dstAligned);
        if (send != nullptr)
          storeVolatile2(send + line * kLLLineBytes, uint64_t(o.w[0]) | sendFlag, uint64_t(o.w[1]) | sendFlag);
      }
    }
    if (f.cleanSend && send != nullptr) {
      const uint64_t slotLines = p.slotBytes / kLLLineBytes;
      for (uint64_t line = nLines + threadIdx.x; line < slotLines; line += stride)
        storeVolatile2(send + line * kLLLineBytes, sendFlag, sendFlag);
    }
    return true;
  }

  __device__ static void post(const KernelParams& p, const DevSendEnd*, const DevRecvEnd* in, uint64_t,
                              uint64_t recvDone) {
    if (in != nullptr) storeRelaxed(in->head, recvDone, p.flags & kPeersOnThisGpu);
  }
};

}  // namespace braid::kernels::device
