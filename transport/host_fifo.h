// One direction of a host connection: a ring of slots owned by the receiver, in memory both
// ranks map (shared memory between processes, plain memory within one process).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace braid {

constexpr int kFifoSlots = 8;
constexpr size_t kFifoSlotBytes = 128 * 1024;

// Each slot says what it carries, so that a receiver running another collective, or the
// same one with another count or type, detects the mismatch instead of reading garbage.
struct SlotHeader {
  uint64_t bytes;
  uint64_t signature;
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

}  // namespace braid
