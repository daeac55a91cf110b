// LL128: 128-byte lines of 120 data bytes and an 8-byte flag (the line's last word). Eight
// consecutive threads of a warp own a line, 16 bytes each; the eighth holds the last 8 data
// bytes and the flag. A warp stores 4 whole lines with one st.volatile.v2.u64 instruction and
// loads them alike, and it polls until every line's flag is the slice's flag.
//
// Why only on one GPU or over NVLink: a reader trusts a line's 120 data bytes once it sees
// the flag, which the writer stored in the same warp instruction as the data. That holds only
// where the 128-byte store of one instruction arrives whole and in order -- in one GPU's L2,
// and over NVLink, which carries it as one write. Over PCIe (peer GPUs without NVLink, and
// FIFOs staged in host memory) a line can arrive in pieces or out of order, and across hosts
// nothing orders it; there, LL128 would hand over stale data. The transport marks which
// connections qualify (transport/p2p_fifo.h ordered128); the packer refuses LL128 elsewhere.
//
// Ordering, for slice k on a connection S -> R (the slot lives in R's memory):
//   S: thread 0 waits for room (head >= k + 1 - nSlots), barrier; each line is written by
//      its eight threads in one instruction, flag = k + 1. No fence, no tail.
//   R: each warp loads its lines until every flag is k + 1 (__any_sync over the warp), then
//      loads them once more and uses that: the first load of a data word may have been
//      served before the line arrived even when the flag load of the same instruction was
//      served after it, but once the flag has been seen the whole line is there. Barrier;
//      thread 0 stores head = k + 1 (relaxed; the reads have all returned, as in LL).
// Flags are the 64-bit step plus one: they never repeat, so FIFOs never need clearing.
#pragma once
#include <cstdint>

#include "kernels/elementwise.cuh"
#include "kernels/proto_layout.h"
#include "kernels/proto_sync.cuh"

namespace braid::kernels::device {

struct ProtoLL128 {
  static constexpr Protocol kId = Protocol::LL128;
  static constexpr bool kThreadWaitsForData = false;
  // Lines in flight per thread (a 16-warp block: 128 lines a round). 4 spilled registers.
  static constexpr int kUnroll = 2;
  static constexpr unsigned kFullWarp = 0xffffffffu;

  // One thread's 16 bytes of a line: all data, or (the eighth thread) 8 data bytes and the flag.
  template <typename Raw> union Chunk {
    static constexpr uint32_t kElems = 16 / sizeof(Raw);
    uint64_t u[2];
    Raw e[kElems];
  };

  // k elements at q (the thread's part of the line, or fewer at the end of the slice); 8-byte
  // loads when q is 8-byte aligned and the part is whole. Parts start at multiples of 8 bytes.
  template <typename Raw> __device__ static Chunk<Raw> load(const Raw* q, uint32_t k, uint32_t whole, bool aligned) {
    Chunk<Raw> c;
    c.u[0] = c.u[1] = 0;
    constexpr uint32_t kPerWord = 8 / sizeof(Raw);
    if (aligned && k == whole) {
      c.u[0] = reinterpret_cast<const uint64_t*>(q)[0];
      if (whole > kPerWord) c.u[1] = reinterpret_cast<const uint64_t*>(q)[1];
    } else {
#pragma unroll
      for (uint32_t i = 0; i < Chunk<Raw>::kElems; ++i)
        if (i < k) c.e[i] = q[i];
    }
    return c;
  }
  template <typename Raw>
  __device__ static void store(Raw* q, const Chunk<Raw>& c, uint32_t k, uint32_t whole, bool aligned) {
    constexpr uint32_t kPerWord = 8 / sizeof(Raw);
    if (aligned && k == whole) {
      reinterpret_cast<uint64_t*>(q)[0] = c.u[0];
      if (whole > kPerWord) reinterpret_cast<uint64_t*>(q)[1] = c.u[1];
    } else {
#pragma unroll
      for (uint32_t i = 0; i < Chunk<Raw>::kElems; ++i)
        if (i < k) q[i] = c.e[i];
    }
  }

  template <class E, class Op>
  __device__ __forceinline__ static bool move(const SliceArgs& a, const LineFlags f, const Combiner<E, Op>& combine,
                              const KernelParams& p) {
    using Raw = typename E::Raw;
    using C = Chunk<Raw>;
    const char* recv = static_cast<const char*>(a.recv);
    char* send = static_cast<char*>(a.send);
    const Raw* src = (recv == nullptr || a.reduce) ? static_cast<const Raw*>(a.src) : nullptr;
    Raw* dst = static_cast<Raw*>(a.dst);
    const bool transform = a.premul || a.final || (recv != nullptr && a.reduce);
    const bool srcAligned = (reinterpret_cast<uintptr_t>(src) & 7) == 0;
    const bool dstAligned = (reinterpret_cast<uintptr_t>(dst) & 7) == 0;

    const unsigned lane = threadIdx.x & 31;
    const unsigned part = lane % kLL128ThreadsPerLine;       // which 16 bytes of its line
    const unsigned flagLane = lane | (kLL128ThreadsPerLine - 1);  // the lane holding its line's flag
    const bool holdsFlag = part == kLL128ThreadsPerLine - 1;
    const uint32_t partBytes = holdsFlag ? 8 : 16;
    const uint32_t whole = partBytes / sizeof(Raw);
    constexpr uint32_t kLinesPerWarp = 32 / kLL128ThreadsPerLine;  // lines one warp instruction covers
    const uint64_t nBytes = a.n * sizeof(Raw);
    const uint64_t nLines = (nBytes + kLL128LineDataBytes - 1) / kLL128LineDataBytes;
    const uint64_t nGroups = (nLines + kLinesPerWarp - 1) / kLinesPerWarp;
    const uint64_t nWarps = blockDim.x / 32;
    Spinner spin;  // the same count on every lane: the loops below are warp-uniform

    for (uint64_t g = threadIdx.x / 32; g < nGroups; g += nWarps * kUnroll) {
      auto lineOf = [&](int u) { return (g + u * nWarps) * kLinesPerWarp + lane / kLL128ThreadsPerLine; };
      auto elemsOf = [&](uint64_t line) {  // this thread's elements of `line` (0 past the end)
        const uint64_t at = line * kLL128LineDataBytes + part * 16;
        const uint64_t left = line < nLines && at < nBytes ? nBytes - at : 0;
        return uint32_t((left < partBytes ? left : partBytes) / sizeof(Raw));
      };
      // All loads first (the source and a first look at each line), then the waits. After
      // the waits w holds the received part.
      C s[kUnroll], w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint64_t line = lineOf(u);
        const uint32_t k = elemsOf(line);
        s[u].u[0] = s[u].u[1] = w[u].u[0] = w[u].u[1] = 0;
        if (src != nullptr && k > 0) s[u] = load(src + (line * kLL128LineDataBytes + part * 16) / sizeof(Raw), k, whole, srcAligned);
        if (recv != nullptr && line < nLines) {
          const Words2 v = loadVolatile2(recv + line * kLL128LineBytes + part * 16);
          w[u].u[0] = v.lo;
          w[u].u[1] = v.hi;
        }
      }
      if (recv != nullptr) {
        // A line is missing while its flag (held by its eighth thread) is not the slice's;
        // the warp polls the missing ones, round after round, until none is.
        bool need[kUnroll];
        bool any = false;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          // Every lane takes part in the shuffle (a lane past the end skipping it, as a short
          // circuit would, leaves the full-mask shuffle waiting: a 4-byte call hung).
          const bool flagSeen = __shfl_sync(kFullWarp, w[u].u[1] == f.recv, flagLane);
          need[u] = lineOf(u) < nLines && !flagSeen;
          any = any || need[u];
        }
        while (__any_sync(kFullWarp, any)) {
          if (__any_sync(kFullWarp, spin.aborted(p))) return false;  // the whole warp stops
          any = false;
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            if (need[u]) {
              const Words2 v = loadVolatile2(recv + lineOf(u) * kLL128LineBytes + part * 16);
              w[u].u[0] = v.lo;
              w[u].u[1] = v.hi;
            }
            const bool flagSeen = __shfl_sync(kFullWarp, w[u].u[1] == f.recv, flagLane);
            need[u] = lineOf(u) < nLines && !flagSeen;
            any = any || need[u];
          }
        }
        // Every flag is seen: read the lines again, and use that (the first read of a data
        // word may predate the line's arrival even where the flag's read did not).
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if (lineOf(u) < nLines) {
            const Words2 v = loadVolatile2(recv + lineOf(u) * kLL128LineBytes + part * 16);
            w[u].u[0] = v.lo;
            w[u].u[1] = v.hi;
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint64_t line = lineOf(u);
        const uint32_t k = elemsOf(line);
        C o;
        if (transform) {
          // Elements past k (the flag's bytes, the end of the slice) are computed, never stored.
#pragma unroll
          for (uint32_t i = 0; i < C::kElems; ++i) o.e[i] = combine(a, w[u].e[i], s[u].e[i]);
        } else {
          o = recv != nullptr ? w[u] : s[u];
        }
        if (dst != nullptr && k > 0) store(dst + (line * kLL128LineDataBytes + part * 16) / sizeof(Raw), o, k, whole, dstAligned);
        // The eight threads of a line store it in one instruction: converge the warp first
        // (the dst stores above may have split it), and let every thread of a line store,
        // also past the end of the data.
        __syncwarp();
        if (send != nullptr && line < nLines)
          storeVolatile2(send + line * kLL128LineBytes + part * 16, o.u[0], holdsFlag ? f.send : o.u[1]);
      }
    }
    return true;
  }

  __device__ static void post(const KernelParams& p, const DevSendEnd*, const DevRecvEnd* in, uint64_t,
                              uint64_t recvDone) {
    if (in != nullptr) storeRelaxed(in->head, recvDone, p.flags & kPeersOnThisGpu);
  }
};

}  // namespace braid::kernels::device
