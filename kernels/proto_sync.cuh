// The synchronisation every protocol shares: counter loads and posts at the right scope,
// whole-word volatile line accesses, abort polling, and each side's own copy of its step.
//
// Who writes what, where (transport/p2p_fifo.h): the receiver's memory holds the FIFO and the
// tail counter, the sender's memory holds the head counter; each side keeps its own step (and,
// the sender, the head it last saw) beside its local counter. Only thread 0 of a block touches
// counters and steps; all threads touch slots.
//
// Scope: counters are read with acquire and posted with relaxed stores after a fence, at GPU
// scope when every peer runs on this GPU and no FIFO is host-staged (KernelParams::flags), at
// system scope otherwise. LL and LL128 lines are volatile accesses (relaxed, system scope), so
// they are right for every peer; they need no fence, because each word or line carries its
// own flag.
#pragma once
#include <cstdint>

#include "kernels/work_layout.h"
#include "transport/p2p_fifo.h"

namespace braid::kernels::device {

constexpr uint32_t kSpinsPerAbortCheck = 1000;

__device__ inline uint64_t loadAcquire(const uint64_t* p, bool gpuScope) {
  uint64_t v;
  if (gpuScope) asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// fence.acq_rel (not the stronger fence.sc of __threadfence): orders the block's slot reads
// and writes, which the barrier before it gathered, before the relaxed store of a counter.
__device__ inline void fenceAcqRel(bool gpuScope) {
  if (gpuScope) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  else asm volatile("fence.acq_rel.sys;" ::: "memory");
}
__device__ inline void storeRelaxed(uint64_t* p, uint64_t v, bool gpuScope) {
  if (gpuScope) asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Two 8-byte words at a 16-byte aligned address, loaded or stored by one instruction. The PTX
// memory model makes each aligned 8-byte word of a vector access single-copy atomic (the
// vector as a whole is not): LL relies on exactly that, one flag per word. `volatile` keeps
// the load out of L1 (the writer is another SM or GPU) and in the loop that polls it.
struct Words2 {
  uint64_t lo, hi;
};
__device__ inline Words2 loadVolatile2(const void* p) {
  Words2 w;
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(w.lo), "=l"(w.hi) : "l"(p) : "memory");
  return w;
}
__device__ inline void storeVolatile2(void* p, uint64_t lo, uint64_t hi) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
}

// The block's lane's own abort and error words when they are not the launch's (DevLane::words:
// a merged launch, pack.h), else null. Every kernel that waits sets them first (setLaneWords).
static __shared__ DevRankWords laneWords;

__device__ inline void setLaneWords(const DevRankWords& words) {
  if (threadIdx.x == 0) laneWords = words;
  __syncthreads();
}

// A lane stops when its rank's abort word or the launch's is raised: the launch's owner
// aborting ends every lane (its stream must drain), a served rank's abort ends its own.
__device__ inline bool abortRequested(const KernelParams& p) {
  return (p.abortFlag != nullptr && *p.abortFlag != 0) || (laneWords.abortFlag != nullptr && *laneWords.abortFlag != 0);
}

__device__ inline void reportError(const KernelParams& p, uint32_t code) {
  volatile uint32_t* out = laneWords.errorOut != nullptr ? laneWords.errorOut : p.errorOut;
  if (out == nullptr) return;
  if (*out == kDeviceOk) *out = code;
}

// A thread's budget of polls between two looks at the abort flag (a read of host memory).
struct Spinner {
  uint32_t spins = 0;
  // Call once per unsuccessful poll. True when the abort flag is raised: stop waiting.
  __device__ bool aborted(const KernelParams& p) {
    if (++spins < kSpinsPerAbortCheck) return false;
    spins = 0;
    return abortRequested(p);
  }
};

// This side's own step of a connection, and beside it the local counter it last saw, kept in
// its own memory next to its local counter (transport/p2p_fifo.h). Thread 0 only.
__device__ inline volatile uint64_t* ownStep(uint64_t* localCounter) { return localCounter + transport::kOwnStepWords; }
__device__ inline volatile uint64_t* lastSeen(uint64_t* localCounter) {
  return localCounter + transport::kOwnStepWords + 1;
}

// Thread 0 only: spin until *counter >= target. False when the abort flag was raised.
__device__ inline bool waitAtLeast(const KernelParams& p, const uint64_t* counter, uint64_t target) {
  const bool gpuScope = p.flags & kPeersOnThisGpu;
  Spinner spin;
  while (loadAcquire(counter, gpuScope) < target)
    if (spin.aborted(p)) return false;
  return true;
}

// Thread 0 only: wait until slice `step` may be written into the receiver's FIFO, i.e. the
// receiver has consumed all but nSlots - 1 of the slices before it. `seenHead` is the head
// this side last read (acquired then; a stale value only makes it wait more), so that a
// sender with room left reads nothing. False on abort.
__device__ inline bool waitRoom(const KernelParams& p, const uint64_t* head, uint64_t step, uint64_t& seenHead) {
  if (step < seenHead + p.nSlots) return true;
  const bool gpuScope = p.flags & kPeersOnThisGpu;
  Spinner spin;
  for (;;) {
    seenHead = loadAcquire(head, gpuScope);
    if (step < seenHead + p.nSlots) return true;
    if (spin.aborted(p)) return false;
  }
}

// The flags of one slice, for the protocols that carry them in the lines (LL, LL128): the
// connection's step of the slice plus one, on each side.
struct LineFlags {
  uint64_t recv = 0;
  uint64_t send = 0;
  bool cleanSend = false;  // LL: also rewrite the send slot's remaining lines (wrap-around)
};

// Every FIFO braid makes has a power-of-two slot count (kernels/proto_layout.h defaultFifo), so
// the slot is a mask of the step: a 64-bit `%` by a run-time count is a call of ~70 instructions
// (the LL kernel's SASS: 8 call sites, twice a slice). Other counts keep the division.
__device__ inline uint64_t slotIndex(uint64_t step, const KernelParams& p) {
  return (p.nSlots & (p.nSlots - 1)) == 0 ? step & (p.nSlots - 1) : step % p.nSlots;
}
__device__ inline const char* slotOf(const char* fifo, uint64_t step, const KernelParams& p) {
  return fifo + slotIndex(step, p) * uint64_t(p.slotBytes);
}

}  // namespace braid::kernels::device
