// One end of a connection to another host as the UCX proxy (transport/ucx_net.h) sees it: a
// ring of slots and two counters, in this rank's memory. Both engines hand the proxy their
// FIFOs in this one shape, so that one proxy moves the CPU engine's host FIFOs and the GPU
// connections' pinned FIFOs alike:
//   CPU engine (transport/host_fifo.h): slots of kFifoSlotBytes, each with a SlotHeader saying
//     how many of its bytes are data; the counters are FifoControl's.
//   GPU (transport/net_device.h): raw slots of the Simple protocol (no header: the bytes its
//     slice wrote travel, slotSizes) in pinned host memory, or in device memory where UCX takes CUDA memory
//     (cudaSlots), the counters words in pinned host memory that the kernel reads and writes
//     through mapped pointers.
// Sender end: `tail` = slots the engine filled (the proxy reads it); `head` = slots the proxy
// has sent and the engine may fill again (the proxy writes it). Receiver end: `tail` = slots
// arrived (the proxy writes it); `head` = slots the engine consumed (the proxy reads it and
// returns it to the sender as credit).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/host_fifo.h"

namespace braid::transport {

// The most slots a network FIFO may have (the proxy keeps that many requests per connection).
constexpr uint32_t kMaxNetSlots = 16;
constexpr uint32_t kSpaceHost = 0, kSpaceDevice = 1;

struct NetFifo {
  char* slots = nullptr;                 // slot k of the stream at slots + (k % nSlots) * slotBytes
  size_t slotBytes = 0;
  uint32_t nSlots = 0;
  std::atomic<uint64_t>* tail = nullptr;
  std::atomic<uint64_t>* head = nullptr;
  SlotHeader* headers = nullptr;         // per slot; null: every message is a whole slot
  // Without headers, the sender's per-slot byte counts (the GPU's Simple slices write them
  // before the tail): a message is that many bytes, a whole slot where it is 0 or null.
  const uint32_t* slotSizes = nullptr;
  // Written by a GPU (or anything else that cannot wake the proxy): the proxy must look at
  // the counters on its own while such connections may move (transport/ucx_net.h kick()).
  bool polled = false;
  // Which engine's connection (part of each message's tag): the CPU engine's and the GPU's
  // connections on one (channel, peer) never take each other's messages.
  uint32_t space = kSpaceHost;
  // The slots are CUDA device memory (GPUDirect, transport/net_device.h): the UcxNet maps them
  // (ucp_mem_map) and hands them to UCX as such; the proxy never touches them itself.
  bool cudaSlots = false;

  char* slot(uint64_t index) const { return slots + (index % nSlots) * slotBytes; }
};

// The CPU engine's FIFO (FifoLayout at `base`) in that shape.
inline NetFifo hostNetFifo(void* base) {
  FifoControl* ctl = FifoLayout::control(base);
  NetFifo f;
  f.slots = FifoLayout::slot(base, 0);
  f.slotBytes = kFifoSlotBytes;
  f.nSlots = kFifoSlots;
  f.tail = &ctl->tail;
  f.head = &ctl->head;
  f.headers = ctl->headers;
  return f;
}

// A counter word that a GPU reads and writes as a plain 64-bit word, seen as an atomic here
// (std::atomic<uint64_t> is that word, lock-free, on every platform braid builds for).
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) && std::atomic<uint64_t>::is_always_lock_free);
inline std::atomic<uint64_t>* counterWord(uint64_t* word) { return reinterpret_cast<std::atomic<uint64_t>*>(word); }

}  // namespace braid::transport
