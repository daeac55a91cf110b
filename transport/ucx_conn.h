// One direction of a UCX connection as the proxy keeps it (transport/ucx_net.h), and the shape
// of its messages on the wire: their tags, how many bytes a slot sends, which memory type they
// name. ucx_net.cc's proxy thread schedules and progresses these; this is what each one is.
// Internal to transport/ucx_net.cc (needs UCX's headers: BRAID_HAVE_UCX).
#pragma once
#include <ucp/api/ucp.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "transport/net_fifo.h"

namespace braid::transport::ucxconn {

using Clock = std::chrono::steady_clock;

// A message's tag: its kind, engine space (net_fifo.h), channel, the sending rank and (data)
// the slot's sequence number, so that every receive names exactly the message it takes.
// Bits: kind 2 | space 1 | channel 13 (data lanes and the call check's lane; the GPU's p2p
// lanes from 64) | rank 20 | sequence 28 (at most kMaxNetSlots messages of a connection are in
// flight, so 28 bits never alias).
enum Kind : uint64_t { kData = 1, kCredit = 2 };
constexpr int kMaxChannels = 1 << 13;
constexpr int kMaxRanks = 1 << 20;
inline ucp_tag_t tagOf(Kind kind, uint32_t space, int channel, int sender, uint64_t seq) {
  return (uint64_t(kind) << 62) | (uint64_t(space & 1) << 61) | (uint64_t(channel) << 48) | (uint64_t(sender) << 28) |
         (seq & 0xfffffffu);
}
constexpr ucp_tag_t kFullMask = ~ucp_tag_t(0);

// A request's state: done (with its status) or still running.
struct Pending {
  void* request = nullptr;  // nullptr: completed at once, or nothing posted
  bool posted = false;
};

struct RecvConn;

struct SendConn {
  int channel = 0, peer = 0;
  NetFifo fifo;
  uint64_t sent = 0, completed = 0, remoteHead = 0;
  Pending sends[kMaxNetSlots];
  ucp_dt_iov_t iov[kMaxNetSlots][2];
  uint64_t credit = 0;  // the receiver's last head
  Pending creditRecv;
  ucp_tag_recv_info_t creditInfo{};
  ucp_mem_h memh = nullptr;  // the slots' mapping (NetFifo::cudaSlots), when UCX could make one
  // The connection from the same peer on the same channel and space, where both carry slot
  // headers: each slot sent carries its head as a credit (SlotHeader::credit), and each slot
  // received from it may carry ours (pairCredits).
  RecvConn* reverse = nullptr;
  bool failed = false;
};

// Credits go back in batches of half the FIFO: one message per consumed slot cost an 8 B
// all-reduce a quarter of its time (direct, 2 nodes x 1 rank: 37 -> 27 us, median of 5 runs
// each). The sender keeps at least nSlots - nSlots / 2 + 1 slots in flight. A credit held back
// goes anyway once the engine has consumed nothing more for kCreditHold: a ring whose every
// rank waits for space towards its neighbour, each holding a few uncredited slots, would
// otherwise wait for ever. Where data goes back to the sender on the same channel (CPU engine
// FIFOs, which carry headers), each of its slots carries the credit too, and a credit message
// goes only for what no slot carried: 8 B all-reduce, 2 nodes x 1 rank (direct) 17.9 -> 15.3 us
// (call check off: 10.3 -> 8.2), 2 x 2 (tree) 37.7 -> 33.9, medians of 5-7 interleaved runs.
inline uint64_t creditBatch(const NetFifo& f) { return std::max<uint64_t>(1, f.nSlots / 2); }
constexpr auto kCreditHold = std::chrono::microseconds(50);

struct RecvConn {
  int channel = 0, peer = 0;
  NetFifo fifo;
  uint64_t posted = 0, done = 0, creditSent = 0;
  uint64_t headSeen = 0;          // the engine's head at the last look, and since when
  Clock::time_point headSince{};
  Pending recvs[kMaxNetSlots];
  ucp_dt_iov_t iov[kMaxNetSlots][2];
  ucp_tag_recv_info_t info[kMaxNetSlots]{};
  uint64_t creditOut = 0;
  Pending creditSend;
  ucp_mem_h memh = nullptr;  // as SendConn::memh
  SendConn* reverse = nullptr;  // as SendConn::reverse: its slots' credits are for that connection
  bool failed = false;
};

// Pairs each connection with the one the other way on the same (channel, peer, space), where
// both carry slot headers (only those can carry a credit).
template <typename Sends, typename Recvs>
void pairCredits(Sends& sends, Recvs& recvs) {
  for (SendConn* s : sends)
    for (RecvConn* r : recvs)
      if (s->reverse == nullptr && r->reverse == nullptr && s->channel == r->channel && s->peer == r->peer &&
          s->fifo.space == r->fifo.space && s->fifo.headers != nullptr && r->fifo.headers != nullptr) {
        s->reverse = r;
        r->reverse = s;
      }
}

// The bytes of slot i to send when the slot has no header: what the engine wrote there (read
// after the tail's acquire load, which the engine's fence ordered after this word).
inline size_t messageBytes(const NetFifo& f, int i) {
  if (f.slotSizes == nullptr) return f.slotBytes;
  const uint32_t n = __atomic_load_n(&f.slotSizes[i], __ATOMIC_RELAXED);
  return n == 0 || n > f.slotBytes ? f.slotBytes : n;
}

// Every transfer names its memory type, so that UCX never guesses it (its memtype cache is off,
// start() says why): CUDA slots go with their mapping where there is one, and UCX moves them
// with its CUDA transports (a NIC's RDMA into GPU memory, cuda_copy, cuda_ipc); the rest is
// host memory.
inline void hostMemory(ucp_request_param_t* p) {
  p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p->memory_type = UCS_MEMORY_TYPE_HOST;
}
inline void describeMemory(const NetFifo& f, ucp_mem_h memh, ucp_request_param_t* p) {
  hostMemory(p);
  if (f.cudaSlots) p->memory_type = UCS_MEMORY_TYPE_CUDA;
  if (memh == nullptr) return;
  p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
  p->memh = memh;
}

// Posted with a result: nullptr (done at once), an error, or a request to poll.
inline bool posted(ucs_status_ptr_t r, Pending* p, ucs_status_t* error) {
  p->posted = true;
  if (UCS_PTR_IS_ERR(r)) {
    *error = UCS_PTR_STATUS(r);
    p->posted = false;
    return false;
  }
  p->request = r;
  return true;
}

// Slot i carries a call check's message sent late (transport/host_fifo.h): its receiver may
// have finished that call and closed its communicator, so failing to deliver it is no failure
// of the connection.
inline bool lateCheck(const NetFifo& f, int i) {
  return f.headers != nullptr && f.headers[i].signature == kLateCheckSlotSignature;
}

// Slot i of `c` is about to leave: it carries what the engine consumed from that peer (the
// reverse connection's head), which then needs no credit message up to there. True when that
// was a credit not yet sent.
inline bool carryCredit(SendConn& c, int i) {
  RecvConn* back = c.reverse;
  if (back == nullptr || c.fifo.headers == nullptr) return false;
  const uint64_t head = back->fifo.head->load(std::memory_order_acquire);
  c.fifo.headers[i].credit = head;
  if (head <= back->creditSent) return false;
  back->creditSent = head;
  return true;
}

// Slot i of `c` arrived: the credit it carries for the sends back to that peer, read before
// the engine may take the slot, never more than was sent (a peer's word cannot open room that
// does not exist).
inline void takeCarriedCredit(RecvConn& c, int i) {
  SendConn* back = c.reverse;
  if (back == nullptr || c.fifo.headers == nullptr) return;
  back->remoteHead = std::max(back->remoteHead, std::min(c.fifo.headers[i].credit, back->sent));
}

}  // namespace braid::transport::ucxconn
