// What each protocol puts in a FIFO slot, and how a step is cut into slots: shared by the
// host (the API sizes steps and buffers with it, the packer checks shapes) and the kernels
// (proto_*.cuh). Plain C++.
//
//   Simple  a slot is raw data; readiness is the tail counter, room the head counter.
//   LL      16-byte lines {data 4 B, flag 4 B, data 4 B, flag 4 B}: 8 data bytes a line. The
//           line is stored and loaded as two 8-byte words (data low, flag high), each of which
//           is single-copy atomic, so a word whose flag is current holds current data.
//   LL128   128-byte lines of 120 data bytes; the last 8 bytes are the flag. Eight threads
//           write a line with one 16-byte store each, in one warp instruction, and read it so.
// A flag is the connection's step (slices sent so far) plus one, so a line left from an
// earlier use of its slot never carries the current flag and buffers never need clearing.
#pragma once
#include <cstdint>

#include "algo/protocol.h"
#include "kernels/work_layout.h"

namespace braid::kernels {

using algo::Protocol;

constexpr uint32_t kLLLineBytes = 16;
constexpr uint32_t kLLLineDataBytes = 8;
constexpr uint32_t kLL128LineBytes = 128;
constexpr uint32_t kLL128LineDataBytes = 120;
constexpr uint32_t kLL128ThreadsPerLine = 8;  // 16 bytes each; the last one's upper 8 bytes are the flag

struct FifoShape {
  uint32_t slotBytes = 0;  // bytes of a slot in the FIFO (lines included)
  uint32_t nSlots = 0;
};

// The data bytes one slot carries.
BRAID_HOST_DEVICE constexpr uint64_t slotDataBytes(Protocol p, uint32_t slotBytes) {
  return p == Protocol::LL      ? uint64_t(slotBytes / kLLLineBytes) * kLLLineDataBytes
         : p == Protocol::LL128 ? uint64_t(slotBytes / kLL128LineBytes) * kLL128LineDataBytes
                                : uint64_t(slotBytes);
}

// Whether `shape` can carry protocol `p`: whole lines in a slot, and at least one slot.
constexpr bool shapeFits(Protocol p, FifoShape shape) {
  const uint32_t unit = p == Protocol::LL ? kLLLineBytes : p == Protocol::LL128 ? kLL128LineBytes : 16;
  return shape.nSlots > 0 && shape.slotBytes > 0 && shape.slotBytes % unit == 0;
}

// The most bytes one step may carry on such a connection: the data of half its slots
// (CollArgs::maxStepElems times the element size). Schedules keep a step within that so
// that two ranks sending to each other both finish a step before either receives.
constexpr uint64_t maxStepBytes(Protocol p, FifoShape shape) {
  return uint64_t(shape.nSlots / 2 > 0 ? shape.nSlots / 2 : 1) * slotDataBytes(p, shape.slotBytes);
}

// Elements per slice of a step of `count` elements of `elemSize` bytes. Both ends of a
// connection see the same count and shape, so they cut a step alike.
//   Simple: sliceElemsFor (about slicesPerStep slices, so that the receiver starts on the
//           first while the sender writes the next).
//   LL, LL128: a whole slot per slice. The receiver already works line by line as lines
//           arrive, so smaller slices would only add handshakes. 8 and 120 are multiples of
//           every element size, so a slot holds whole elements.
BRAID_HOST_DEVICE inline uint64_t protoSliceElems(Protocol p, uint64_t count, uint32_t elemSize, uint32_t slotBytes,
                                                  uint32_t slicesPerStep) {
  if (p == Protocol::Simple) return sliceElemsFor(count, elemSize, slotBytes, slicesPerStep);
  return slotDataBytes(p, slotBytes) / elemSize;
}

// The FIFO of one connection as the API allocates it, per protocol (on first use of that
// protocol on that link). GPU memory per connection: Simple 2 MiB, LL 256 KiB, LL128 1 MiB.
//   Simple: 8 x 256 KiB. Steps of up to 1 MiB, cut into 2 slices (perf/NOTES.md).
//   LL: 8 x 32 KiB of lines = 16 KiB of data a slot, 2048 lines: 4 per thread of a 512-thread
//       block, which the LL loop keeps in flight at once, so a slot moves in one round. LL is
//       for small calls (it moves half its bytes as flags); a step carries up to 64 KiB, and
//       larger LL calls take more steps. NCCL keeps 512 KiB per connection for LL.
//   LL128: 8 x 128 KiB of lines = 120 KiB of data a slot (1024 lines; a block of 16 warps
//       moves 128 lines a round); steps of up to 480 KiB. LL128 covers medium sizes at near
//       Simple bandwidth; above that Simple's 1 MiB steps win. NCCL keeps ~4.7 MiB for LL128.
constexpr FifoShape defaultFifo(Protocol p) {
  switch (p) {
    case Protocol::LL: return {32 * 1024, 8};
    case Protocol::LL128: return {128 * 1024, 8};
    case Protocol::Simple: break;
  }
  return {256 * 1024, 8};
}

}  // namespace braid::kernels
