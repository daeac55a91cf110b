// The device-visible ends of one connection: what a kernel needs to send or receive through
// a FIFO of slots guarded by two 64-bit step counters.
//
// The receiver owns the FIFO and the tail counter (the sender writes both remotely, so the
// receiver polls local memory); the sender owns the head counter (the receiver writes it).
// Counters only grow: `tail` counts slots written, `head` counts slots consumed. Slot k of
// the stream lives at fifo + (k % nSlots) * slotBytes.
//
// Each side also keeps its own position (the sender's tail, the receiver's head) in its own
// memory, kOwnStepWords words past its local counter (same 128-byte line, another sector), so
// that a kernel learns where a connection stands without a read across NVLink. The word after
// it holds the last value of the local counter that side has seen (the sender: the head), so
// that a sender with room left need not read the counter at all.
//
// The same ends serve every protocol (kernels/proto_layout.h says what a slot holds); each
// protocol has FIFOs of its own, with counters of their own, connected on its first use.
#pragma once
#include <cstdint>

namespace braid::transport {

constexpr uint32_t kOwnStepWords = 8;  // 64 bytes; then [0] own step, [1] local counter last seen

struct FifoSendEnd {
  char* peerFifo = nullptr;        // the receiver's slots
  uint64_t* peerTail = nullptr;    // in the receiver's memory; written by this side
  uint64_t* localHead = nullptr;   // in this side's memory; written by the receiver (own tail copy at +kOwnStepWords)
  uint32_t slotBytes = 0;
  uint32_t nSlots = 0;
  // 128-byte stores of one warp instruction reach the receiver's FIFO whole and in order
  // (both ends on one GPU or joined by NVLink, FIFO in device memory): what LL128 needs.
  bool ordered128 = false;
  // Network ends only (net_device.h): per slot, the bytes the Simple slice wrote, for the proxy.
  uint32_t* slotSizes = nullptr;
};

struct FifoRecvEnd {
  const char* localFifo = nullptr;
  uint64_t* localTail = nullptr;   // written by the sender (own head copy at +kOwnStepWords)
  uint64_t* peerHead = nullptr;    // in the sender's memory; written by this side
  uint32_t slotBytes = 0;
  uint32_t nSlots = 0;
  bool ordered128 = false;         // as FifoSendEnd::ordered128, for this connection
};

}  // namespace braid::transport
