// One direction of a host connection: a ring of slots owned by the receiver, in memory both
// ranks map (shared memory between processes, plain memory within one process).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

namespace braid {

constexpr int kFifoSlots = 8;
constexpr size_t kFifoSlotBytes = 128 * 1024;

// The CPU engine's slice: what one slot carries, and so (x kFifoSlots) the most a step may have
// in flight, which the plan's chunks are cut to. A communicator with ranks on other hosts cuts
// finer, so that a step's slices pipeline through the hops of a network path whose every byte
// costs ~2.4 ns (UCX/TCP over veth, 0.42 GB/s): 2 nodes x 2 ranks, all-reduce, 32 KB against
// 128 KB slices (two runs, medians of 3 each, loaded 2-core VM): 64 KB 144/143 vs 217/143 us,
// 1 MB 1.44/1.47 vs 2.73/1.59 ms, 16 MB 26.7/31.5 vs 40.1/59.0 ms. One host keeps 128 KB (32 KB measured no better there, 8-19% slower at
// 4-16 MB). Every rank of a communicator agrees: each has the network transport or none.
constexpr size_t kNetSliceBytes = 32 * 1024;
constexpr size_t hostSliceBytes(bool network) { return network ? kNetSliceBytes : kFifoSlotBytes; }

// The most bytes of the call check's message (api/call_check.cc) that a slot carries, and the
// signature of a slot that carries only that (host/engine.h CheckLane).
constexpr size_t kSlotCheckBytes = 144;
constexpr uint64_t kCheckSlotSignature = 0x636865636b6d7367ull;
// The same, sent late by a stalled run (host/engine.h CheckLane): its receiver may have
// finished that call, so one from an earlier call is dropped.
constexpr uint64_t kLateCheckSlotSignature = 0x6c6174656368656bull;
constexpr bool isCheckSlot(uint64_t signature) {
  return signature == kCheckSlotSignature || signature == kLateCheckSlotSignature;
}

// Each slot says what it carries, so that a receiver running another collective, or the
// same one with another count or type, detects the mismatch instead of reading garbage.
struct SlotHeader {
  uint64_t bytes;
  uint64_t signature;
  // Across hosts only: the sender's consumed count of the FIFO that comes back from the same
  // peer on the same channel (a credit riding on the data, transport/ucx_conn.h); the UCX
  // proxy writes it as the slot leaves. 0 within a host.
  uint64_t credit;
  // The call check's message of the sender's group whose first collective is number
  // `checkSeq` (host/engine.h CheckLane); 0: none.
  uint64_t checkSeq;
  unsigned char check[kSlotCheckBytes];
};

struct alignas(64) FifoControl {
  alignas(64) std::atomic<uint64_t> tail;   // slots posted by the sender
  alignas(64) std::atomic<uint64_t> head;   // slots consumed by the receiver
  alignas(64) SlotHeader headers[kFifoSlots];
};

struct FifoLayout {
  static constexpr size_t kDataOffset = (sizeof(FifoControl) + 4095) & ~size_t(4095);
  static constexpr size_t kBytes = kDataOffset + kFifoSlots * kFifoSlotBytes;
  static FifoControl* control(void* base) { return static_cast<FifoControl*>(base); }
  static char* slot(void* base, uint64_t index) {
    return static_cast<char*>(base) + kDataOffset + (index % kFifoSlots) * kFifoSlotBytes;
  }
};

// A FIFO in this process's own memory, its control block initialised (nullptr: out of
// memory): a same-process receiver's, and each end's of a connection to another host.
inline void* newHostFifo() {
  void* base = ::operator new(FifoLayout::kBytes, std::align_val_t(4096), std::nothrow);
  if (base) new (base) FifoControl();
  return base;
}
inline void freeHostFifo(void* base) { ::operator delete(base, std::align_val_t(4096)); }

}  // namespace braid
