// Simple: a slot is raw data; the tail counter says a slot is full, the head counter that it
// is free again. For full bandwidth: plain 16-byte loads and stores, a fence per slice.
//
// Ordering, for slice k on a connection S -> R (R's memory holds the slots and the tail):
//   S: every thread writes its part of the slot; barrier; thread 0: fence.acq_rel, then a
//      relaxed store tail = k + 1 (into R's memory). The barrier gathers the block's writes
//      at thread 0 and the fence is cumulative, so they are visible before the tail moves.
//   R: thread 0 spins on an acquire load of tail until it is >= k + 1; barrier; every
//      thread reads the slot (ld.global.cg: another SM or GPU wrote it, L1 may be stale);
//      barrier; thread 0: fence.acq_rel, relaxed store head = k + 1 (into S's memory), so
//      the reads are done before S may reuse the slot.
//   S waits for head >= k + 1 - nSlots before writing slice k (waitRoom, proto_sync.cuh).
#pragma once
#include "kernels/elementwise.cuh"
#include "kernels/proto_layout.h"
#include "kernels/proto_sync.cuh"

namespace braid::kernels::device {

struct ProtoSimple {
  static constexpr Protocol kId = Protocol::Simple;
  static constexpr bool kThreadWaitsForData = true;

  template <class E, class Op>
  __device__ static bool move(const SliceArgs& a, const LineFlags&, const Combiner<E, Op>& combine, const KernelParams&) {
    runSlice(a, combine);
    return true;
  }

  __device__ static void post(const KernelParams& p, const DevSendEnd* out, const DevRecvEnd* in, uint64_t sendDone,
                              uint64_t recvDone) {
    const bool gpuScope = p.flags & kPeersOnThisGpu;
    fenceAcqRel(gpuScope);
    if (out != nullptr) storeRelaxed(out->tail, sendDone, gpuScope);
    if (in != nullptr) storeRelaxed(in->head, recvDone, gpuScope);
  }
};

}  // namespace braid::kernels::device
