// Where a communicator stands in its sequence of calls: each collective gets the next number
// (the same on every rank, since every rank issues the same collectives in the same order),
// and the communicator knows which calls started, which completed and, while one waits, for
// which ranks. The hang report and the mismatch check read it; a status query from another
// rank gets a snapshot of it (CallStatus, which travels as it is).
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nccl.h"

namespace braid {

// The API's calls as the fault machinery names them (a mirror of algo::Coll plus the two
// halves of send/recv; src/api maps them).
enum class CallKind : uint8_t {
  AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, Send, Recv, Count
};
const char* callName(CallKind kind);  // "ncclAllReduce", ...

// One call, as every rank describes it: what a mismatch check compares. Fixed layout (it
// travels between ranks).
struct CallDesc {
  uint64_t seq = 0;      // collective number on this communicator (1, 2, ...); send/recv: 0
  uint64_t count = 0;
  int32_t root = -1;     // root (rooted collectives) or peer (send/recv); -1 when none
  int32_t op = -1;       // ncclRedOp_t of reductions; -1 when none
  uint8_t kind = 0;      // CallKind (Count: not known, e.g. the other side of a FIFO signature mismatch)
  uint8_t type = 0;      // ncclDataType_t
  uint8_t onDevice = 0;  // device buffers (GPU executor) or host buffers (CPU engine)
  uint8_t pad[5] = {};
};
static_assert(sizeof(CallDesc) == 32);

// True when both ranks must have called the same thing: the fields that every rank of a
// collective passes alike (not the buffers, which may be host on one and device on another
// only if a call is wrong; they are compared too).
bool sameCall(const CallDesc& a, const CallDesc& b);
// "#42 ncclBroadcast count 1024 float32 root 0" (no seq for send/recv: "ncclSend 8 int32 to 3").
std::string describeCall(const CallDesc& d);

// A rank's position, as a status query returns it. Fixed layout.
struct CallStatus {
  static constexpr int kMaxWaitingFor = 6;
  int32_t rank = -1;
  uint32_t inCall = 0;          // 1 while a call (or group) is in flight on this rank
  uint64_t started = 0;         // the last collective number started (0: none)
  uint64_t completed = 0;       // the last collective number known complete
  CallDesc current;             // the oldest call not known complete, or the last one completed
  int32_t waitingFor[kMaxWaitingFor];  // ranks this one waits for (host engine), -1 ends the list
  uint32_t failed = 0;          // the communicator failed (a dead peer, a mismatch)
  uint32_t pad = 0;
};

class CallState {
 public:
  CallState();
  ~CallState();
  CallState(const CallState&) = delete;
  CallState& operator=(const CallState&) = delete;

  // A group's calls on this communicator start, in order: collectives are numbered here
  // (descs[i].seq is written). Returns the number of the last collective (or the current one
  // when the group has none).
  uint64_t begin(CallDesc* descs, size_t n);
  // The calls begun last are complete (host engine), or are all captured into a graph.
  void complete();
  // The calls begun last were enqueued on `stream`: they complete when an event recorded
  // there now fires. false when CUDA refused the event (the caller treats it as complete).
  bool enqueued(cudaStream_t stream);
  // The same, complete when `*doneWord` reaches `doneValue` (compared cyclically): a word that
  // another process's stream writes (a served rank, src/api/served.h), so that this rank's
  // stream gets no event (without MPS each operation in its context costs a context switch).
  // The word is shared: the calls' record keeps it mapped.
  void enqueued(std::shared_ptr<const volatile uint32_t> doneWord, uint32_t doneValue);
  // The host engine moved data (cheap: a relaxed add), and what it waits for while stalled.
  void noteProgress() { progress_.fetch_add(1, std::memory_order_relaxed); }
  void setWaitingFor(const int* ranks, int n);

  // For the monitor thread: a snapshot (device completions polled through their events),
  // and a number that changes whenever something moves (progress, a start, a completion).
  CallStatus status(int rank);
  uint64_t activity();
  // The last collective number started (no CUDA call: also for the goodbye at process exit).
  uint64_t started();
  // No call in flight: none on the host, and every enqueued one complete.
  bool idle();

 private:
  struct Pending {
    uint64_t lastSeq = 0;
    CallDesc first;
    cudaEvent_t event = nullptr;              // or, without one:
    std::shared_ptr<const volatile uint32_t> doneWord;
    uint32_t doneValue = 0;
    int device = -1;
  };
  void pollEventsLocked();

  std::mutex mutex_;
  uint64_t nextSeq_ = 1;
  uint64_t started_ = 0, completed_ = 0;
  bool inHostCall_ = false;
  CallDesc current_, last_;
  std::vector<Pending> pending_;          // device calls not yet known complete, oldest first
  std::vector<cudaEvent_t> spareEvents_;  // recorded and fired: reused
  int waitingFor_[CallStatus::kMaxWaitingFor];
  std::atomic<uint64_t> progress_{0};
  std::atomic<uint64_t> moves_{0};
};

}  // namespace braid
