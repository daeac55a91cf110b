// The schedule interpreter: one CUDA block runs one lane's steps. It decodes each step,
// dispatches the reduction op (at run time, outside the element loop), polls for abort and
// reports errors; how bytes and readiness travel on a connection is the protocol's business.
// Templated on the protocol (proto_simple.cuh, proto_ll.cuh, proto_ll128.cuh), never copied:
// executor_<type>.cu instantiates it per element type x protocol (instances.h).
//
// A protocol P is a struct with
//   kId                      its algo::Protocol
//   kThreadWaitsForData      thread 0 waits for a recv slice before the block reads it
//                            (Simple: the tail counter); otherwise every thread waits for
//                            its own lines (LL, LL128: the flags in them)
//   move<E, Op>(a, f, c, p)  all threads: one slice of any step shape -- send (src -> send),
//                            recv (recv -> dst), recv-reduce (recv op src -> dst),
//                            recv-reduce-send and recv-copy-send (-> send, and dst when
//                            present); false when it gave up waiting because of an abort
//   post(p, out, in, s, r)   thread 0, after the slice: tell the peers (the slot is full;
//                            the slot is free again), s and r being the steps now done
// and slices cut by protoSliceElems (proto_layout.h). Thread 0 waits for room to send
// (waitRoom) and keeps each connection's steps, for every protocol alike.
#pragma once
#include <cstdint>

#include "algo/schedule.h"
#include "kernels/elementwise.cuh"
#include "kernels/proto_layout.h"
#include "kernels/proto_sync.cuh"
#include "kernels/work_layout.h"

namespace braid::kernels::device {

constexpr int kMaxThreads = 512;

// The most buffers of an op a block keeps in shared memory (a collective has 2 or 3; a group
// of sends and receives 2 per peer); an op with more reads its buffer table in global memory.
constexpr uint32_t kSharedBuffers = 32;

// Block-wide state that thread 0 publishes to the others between barriers.
struct BlockShared {
  uint64_t sendStep, recvStep;  // where the step's connections stand (slice 0 only)
  uint64_t seenHead;            // thread 0's: the send connection's head as last read
  int abort;                    // thread 0 gave up waiting (abort flag)
  // The ends of the connections thread 0 holds (ConnCache), copied from the launch's tables
  // when a step names another connection: a step then reads them from shared memory, not
  // through a chain of global loads (a ring step cost ~0.3 us more per such load on the H200,
  // tests/gpu/step_probe.cu).
  DevSendEnd send;
  DevRecvEnd recv;
  void* buffers[kSharedBuffers];  // the op's buffer table, when it fits
};

// Thread 0's copy of where the lane's current send and recv connections stand (their own
// steps, and the head last seen): loaded when a step names another connection, written back
// when it changes and when the lane ends. Lanes run most of their steps on one pair of
// connections (every step of a ring), so such a step loads and stores none of these words; no
// other lane uses the same connection, and the next kernel reads them only after this one ends.
// Keyed by index, not by pointer: holding pointers into the kernel parameters here made CUDA
// 13.0's cicc crash (segmentation fault).
struct ConnCache {
  int sendConn, recvConn;  // indices into the launch's tables (kNoConn: none held)
  uint64_t sendStep, seenHead, recvStep;
};

__device__ inline void flushSend(const ConnCache& k, const DevSendEnd* sends) {
  if (k.sendConn == kNoConn) return;
  uint64_t* head = sends[k.sendConn].head;
  *ownStep(head) = k.sendStep;
  *lastSeen(head) = k.seenHead;
}
__device__ inline void flushRecv(const ConnCache& k, const DevRecvEnd* recvs) {
  if (k.recvConn != kNoConn) *ownStep(recvs[k.recvConn].tail) = k.recvStep;
}
// Makes `k` hold the step's connections (either may be kNoConn), writing back the ones it
// drops, and `sh` their ends. Thread 0, before the step's first barrier.
__device__ inline void useConns(ConnCache& k, BlockShared& sh, const DevSendEnd* sends, const DevRecvEnd* recvs,
                                int sendConn, int recvConn) {
  if (sendConn != k.sendConn) {
    flushSend(k, sends);
    k.sendConn = sendConn;
    if (sendConn != kNoConn) {
      sh.send = sends[sendConn];
      k.sendStep = *ownStep(sh.send.head);
      k.seenHead = *lastSeen(sh.send.head);
    }
  }
  if (recvConn != k.recvConn) {
    flushRecv(k, recvs);
    k.recvConn = recvConn;
    if (recvConn != kNoConn) {
      sh.recv = recvs[recvConn];
      k.recvStep = *ownStep(sh.recv.tail);
    }
  }
}

struct LaneContext {
  const KernelParams* params;
  const DevSendEnd* sends;
  const DevRecvEnd* recvs;
  void* const* buffers;
  DevOp op;
};

// LL's flags are 32 bits: a line whose slot has not been written for 2^32 steps could carry
// the current flag again. So once every 2^30 steps of a connection the sender rewrites every
// line of each slot (the nSlots steps before a multiple of 2^30): no line is ever older.
__device__ inline bool llCleanStep(uint64_t step, uint32_t nSlots) {
  constexpr uint64_t kPeriod = uint64_t(1) << 30;
  return (step % kPeriod) >= kPeriod - nSlots;
}

// A step through connections: slice by slice, thread 0 waits (room to send; data, for a
// protocol that waits by counter), the block moves the slice, thread 0 posts.
template <class P, class E, class Op>
__device__ bool runConnectedStep(const LaneContext& c, const DevStep& s, SliceArgs a, const Combiner<E, Op>& combine,
                                 BlockShared& sh, ConnCache& cache) {
  using Raw = typename E::Raw;
  const KernelParams& p = *c.params;
  // The ends as thread 0 copied them (useConns, below): valid after the first barrier for
  // every thread, at once for thread 0.
  const DevSendEnd* out = s.sendConn != kNoConn ? &sh.send : nullptr;
  const DevRecvEnd* in = s.recvConn != kNoConn ? &sh.recv : nullptr;
  Raw* src = static_cast<Raw*>(const_cast<void*>(a.src));
  Raw* dst = static_cast<Raw*>(a.dst);
  const uint64_t sliceElems = protoSliceElems(P::kId, s.count, sizeof(Raw), p.slotBytes, p.slicesPerStep);
  // Every thread follows the steps itself (from thread 0's reading of them at slice 0);
  // thread 0 alone also keeps the head it last saw (in shared memory: fewer registers).
  uint64_t sendStep = 0, recvStep = 0;
  const char* recvFifo = nullptr;
  const char* sendFifo = nullptr;
  if (threadIdx.x == 0) {
    useConns(cache, sh, c.sends, c.recvs, s.sendConn, s.recvConn);
    sendStep = cache.sendStep;
    recvStep = cache.recvStep;
    sh.seenHead = cache.seenHead;
  }
  for (uint64_t off = 0; off < s.count; off += sliceElems) {
    const bool first = off == 0;
    // A barrier here when thread 0 has something to say: the steps (first slice), room to
    // send, or data (Simple). An LL or LL128 receive needs none after the first slice.
    const bool waits = first || out != nullptr || P::kThreadWaitsForData;
    if (threadIdx.x == 0 && waits) {
      bool ok = true;
      if (in != nullptr && P::kThreadWaitsForData) ok = waitAtLeast(p, in->tail, recvStep + 1);
      if (ok && out != nullptr) ok = waitRoom(p, out->head, sendStep, sh.seenHead);
      sh.sendStep = sendStep;
      sh.recvStep = recvStep;
      sh.abort = ok ? 0 : 1;
    }
    if (waits) {
      __syncthreads();
      if (sh.abort) return false;
      if (first) {
        sendStep = sh.sendStep;
        recvStep = sh.recvStep;
      }
    }
    if (first) {
      recvFifo = in != nullptr ? in->fifo : nullptr;
      sendFifo = out != nullptr ? out->fifo : nullptr;
    }
    a.n = s.count - off < sliceElems ? s.count - off : sliceElems;
    a.recv = in != nullptr ? slotOf(recvFifo, recvStep, p) : nullptr;
    a.send = out != nullptr ? const_cast<char*>(slotOf(sendFifo, sendStep, p)) : nullptr;
    a.src = src != nullptr ? src + off : nullptr;
    a.dst = dst != nullptr ? dst + off : nullptr;
    LineFlags f;
    f.recv = recvStep + 1;
    f.send = sendStep + 1;
    f.cleanSend = out != nullptr && P::kId == Protocol::LL && llCleanStep(sendStep, p.nSlots);
    // The barrier also tells every thread whether any gave up (abort): all leave together. (A
    // flag in shared memory could be set by a fast thread's next slice before a slow one read it.)
    const bool moved = P::template move<E, Op>(a, f, combine, p);
    if (__syncthreads_or(!moved)) return false;
    // A network end's proxy sends only the bytes the slice wrote (Simple only crosses hosts);
    // post's fence orders this word before the tail, as it does the slot.
    if (threadIdx.x == 0 && out != nullptr && out->sizes != nullptr)
      out->sizes[slotIndex(sendStep, p)] = uint32_t(a.n * sizeof(Raw));
    if (out != nullptr) ++sendStep;
    if (in != nullptr) ++recvStep;
    if (threadIdx.x == 0) P::post(p, out, in, sendStep, recvStep);
  }
  if (threadIdx.x == 0) {
    if (out != nullptr) {
      cache.sendStep = sendStep;
      cache.seenHead = sh.seenHead;
    }
    if (in != nullptr) cache.recvStep = recvStep;
  }
  return true;
}

// Runs one step. Returns false when the lane must stop (abort).
template <class P, class E, class Op>
__device__ bool runStep(const LaneContext& c, const DevStep& s, const Combiner<E, Op>& combine, BlockShared& sh,
                        ConnCache& cache) {
  using Raw = typename E::Raw;
  Raw* src = s.src != kNoBufIndex ? static_cast<Raw*>(c.buffers[s.src]) + s.srcOff : nullptr;
  Raw* dst = s.dst != kNoBufIndex ? static_cast<Raw*>(c.buffers[s.dst]) + s.dstOff : nullptr;
  const bool hasRecv = s.recvConn != kNoConn;
  const bool hasSend = s.sendConn != kNoConn;

  SliceArgs a{};
  a.reduce = hasRecv && src != nullptr && (s.flags & algo::kReduce);
  // Reading a rank's own contribution (kInput, or an even P2P index) applies PreMulSum.
  a.premul = c.op.reduces && c.op.kind == uint8_t(RedKind::PreMulSum) && src != nullptr &&
             (s.src % 2 == 0) && (!hasRecv || a.reduce);
  a.final = (s.flags & algo::kFinal) && c.op.kind == uint8_t(RedKind::SumPostDiv);
  a.src = src;
  a.dst = dst;

  if (!hasRecv && !hasSend) {  // a local copy: no protocol involved
    if (src == dst && !a.premul && !a.final) return true;  // a copy onto itself
    a.n = s.count;
    runSlice(a, combine);
    __syncthreads();
    return true;
  }
  return runConnectedStep<P>(c, s, a, combine, sh, cache);
}

// A DevStep as the five 64-bit words it is made of (work_layout.h), and back.
struct StepWords {
  uint64_t srcOff, dstOff, count, indices, flags;
};
static_assert(sizeof(DevStep) == sizeof(StepWords));
__device__ inline StepWords loadStepWords(const DevStep* p) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  return StepWords{w[0], w[1], w[2], w[3], w[4]};
}
__device__ inline DevStep decodeStep(const StepWords& w) {
  DevStep s;
  s.srcOff = w.srcOff;
  s.dstOff = w.dstOff;
  s.count = w.count;
  s.src = uint16_t(w.indices);
  s.dst = uint16_t(w.indices >> 16);
  s.recvConn = int16_t(uint16_t(w.indices >> 32));
  s.sendConn = int16_t(uint16_t(w.indices >> 48));
  s.flags = uint8_t(w.flags);
  return s;
}

template <class P, class E, class Op>
__device__ bool runLane(const LaneContext& lane, const DevStep* steps, uint32_t nSteps, BlockShared& sh) {
  LaneContext c = lane;
  if (c.op.nBuffers <= kSharedBuffers) {  // read by every step: from shared memory, not the work
    for (uint32_t i = threadIdx.x; i < c.op.nBuffers; i += blockDim.x) sh.buffers[i] = c.buffers[i];
    __syncthreads();
    c.buffers = sh.buffers;
  }
  Combiner<E, Op> combine{};
  combine.nRanks = c.op.nRanks;
  if (c.op.kind == uint8_t(RedKind::PreMulSum)) {
    using Raw = typename E::Raw;
    Raw bits;
    if (c.op.deviceScalar != nullptr) {
      bits = *static_cast<const volatile Raw*>(c.op.deviceScalar);
    } else {
      const uint64_t word = c.op.scalarBits;
      memcpy(&bits, &word, sizeof(Raw));
    }
    combine.scalar = E::load(bits);
  }
  ConnCache cache{kNoConn, kNoConn, 0, 0, 0};  // thread 0's
  bool ok = true;
  // Each step is loaded while the one before runs: the load is not on the step's path. It is
  // carried as whole words: carried as a DevStep, its 16-bit fields lived in local memory (three
  // stores and four loads a step in the SASS, with the steps pointer).
  StepWords next = nSteps > 0 ? loadStepWords(steps) : StepWords{};
  for (uint32_t i = 0; i < nSteps; ++i) {
    const DevStep s = decodeStep(next);
    if (i + 1 < nSteps) next = loadStepWords(steps + i + 1);
    if (s.count == 0) continue;
    if (!runStep<P>(c, s, combine, sh, cache)) {
      ok = false;
      break;
    }
  }
  // Also after an abort: the words then say where each connection stopped.
  if (threadIdx.x == 0) {
    flushSend(cache, c.sends);
    flushRecv(cache, c.recvs);
  }
  return ok;
}

template <ElemType T, class P>
__global__ void __launch_bounds__(kMaxThreads, 1) executorKernel(const __grid_constant__ KernelParams p) {
  using E = Elem<T>;
  __shared__ BlockShared sh;
  const unsigned char* blob = p.spilledWork != nullptr ? p.spilledWork : p.inlineWork;
  const DevLane lane = reinterpret_cast<const DevLane*>(blob + p.index.lanes)[blockIdx.x];
  setLaneWords(lane.words == 0 ? DevRankWords{nullptr, nullptr}
                                : reinterpret_cast<const DevRankWords*>(blob + p.index.words)[lane.words - 1]);
  LaneContext c;
  c.params = &p;
  c.op = reinterpret_cast<const DevOp*>(blob + p.index.ops)[lane.op];
  c.sends = reinterpret_cast<const DevSendEnd*>(blob + p.index.sends);
  c.recvs = reinterpret_cast<const DevRecvEnd*>(blob + p.index.recvs);
  c.buffers = reinterpret_cast<void* const*>(blob + p.index.buffers) + c.op.firstBuffer;
  const DevStep* steps = reinterpret_cast<const DevStep*>(blob + p.index.steps) + lane.firstStep;

  bool ok = true;
  switch (static_cast<RedKind>(c.op.kind)) {
    case RedKind::Sum:
    case RedKind::PreMulSum:
    case RedKind::SumPostDiv: ok = runLane<P, E, OpSum>(c, steps, lane.nSteps, sh); break;
    case RedKind::Prod: ok = runLane<P, E, OpProd>(c, steps, lane.nSteps, sh); break;
    case RedKind::Max: ok = runLane<P, E, OpMax>(c, steps, lane.nSteps, sh); break;
    case RedKind::Min: ok = runLane<P, E, OpMin>(c, steps, lane.nSteps, sh); break;
    default: ok = false; break;
  }
  if (!ok && threadIdx.x == 0) reportError(p, abortRequested(p) ? kDeviceAborted : kDeviceBadWork);
}

}  // namespace braid::kernels::device
