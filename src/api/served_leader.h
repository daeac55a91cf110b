// The leader's server (served.h): one thread that accepts the ranks this process serves, maps
// their buffers, and runs their posted work on a stream per rank, in sets that never leave a
// kernel waiting for one not yet enqueued. Posts that have arrived when the leader rank issues
// its side are run by the leader rank's own call instead (leaderLaunched).
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/served.h"
#include "api/served_schedule.h"
#include "api/served_wire.h"
#include "kernels/pack.h"
#include "kernels/work_cache.h"
#include "transport/ipc_refs.h"
#include "transport/served_link.h"

namespace braid::api {

// The leader's server: one thread, one stream per served rank.

class ServedLeader {
 public:
  static ncclResult_t start(ncclComm* comm, const std::string& name, std::unique_ptr<ServedLeader>* out);
  ~ServedLeader() { stop(true); }
  void stop(bool abort);
  void leaderLaunched(const std::vector<ServedGate>& perRank);
  ncclResult_t gate(cudaStream_t stream, uint64_t firstColl);
  void releaseLeader();
  // The leader rank's launch `L` (packed: `own`) of collectives firstColl..lastColl (nothing
  // else), run with every served rank's side of it as one kernel on L.stream, once their posts
  // are in (bounded: BRAID_SERVED_WAIT): without MPS each kernel launch and stream operation in
  // the leader's context costs a context switch. A collective of which every rank is served here
  // (`sole`, and each post's) runs as one pass over all their buffers where it can
  // (kernels/local_collective.h; BRAID_SERVED_LOCAL=0: never); other work as the ranks'
  // kernels merged into one. *fused false (nothing enqueued) where it cannot: `own`
  // is not one kernel, or a rank's post does not come, holds other work, copies or scratch, or
  // differs in shape; the caller then enqueues `own` as usual. BRAID_SERVED_FUSE=0 turns it off.
  ncclResult_t launchFused(const kernels::Launch& L, const kernels::PackedLaunch& own, const SoleCollective& sole,
                           uint64_t firstColl, uint64_t lastColl, unsigned* widest, bool* fused);

 private:
  struct Member {
    int fd = -1;
    int rank = -1;
    std::unique_ptr<transport::ServedPage> page;
    cudaStream_t stream = nullptr;
    uint32_t lastSeq = 0;
    bool open = false;  // said hello, not goodbye, not gone
    struct Waiting {
      std::vector<unsigned char> frame;
      PostGate gate;  // its totals (PostHeader)
    };
    std::deque<Waiting> waiting;  // arrived, not enqueued yet
    bool saidHeld = false;        // the first waiting post was logged
    PostGate enqueued;            // the totals of the last post enqueued
    cudaStream_t lastOn = nullptr;  // the stream that ran its last post (its own, or a fused launch's)
  };
  // A post as read, its pointers mapped (scratch buffers still tokens).
  struct ParsedPost {
    served_wire::PostHeader h{};
    std::vector<uint64_t> scratchBytes;
    std::vector<served_wire::WireCopy> copies;
    std::vector<std::pair<void*, const void*>> copyPtrs;
    kernels::PackedLaunch packed;
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> scratchAt;  // per kernel: (offset, scratch index)
  };
  // A launch of the leader rank, whose stream waits at `go` until the served ranks' side of it
  // is enqueued: the leader's totals after it (ServedGate).
  struct Ticket {
    uint32_t id = 0;
    uint64_t collSeq = 0;
    std::vector<uint64_t> sentTo, recvdFrom;
  };

  explicit ServedLeader(ncclComm* comm)
      : comm_(comm), rank_(comm->rank), cudaDev_(comm->cudaDev), sentTo_(size_t(comm->nRanks)), recvdFrom_(size_t(comm->nRanks)) {}
  void launchReady();
  bool covered(const Ticket& t) const;
  Member* member(int rank) const;  // its open connection, else its last one, else null
  void releaseTickets();
  void serve();
  void accept();
  bool hello(Member& m, const std::vector<unsigned char>& frame, std::string* why);
  void post(Member& m, const std::vector<unsigned char>& frame);
  ncclResult_t parse(const std::vector<unsigned char>& frame, ParsedPost* out, std::string* why);
  ncclResult_t enqueue(Member& m, ParsedPost& post, std::string* why);
  cudaError_t followLast(Member& m, cudaStream_t stream);
  std::vector<Member*> fusablePosts(uint64_t firstColl, uint64_t lastColl, bool* wait);
  ncclResult_t waitForServed(cudaStream_t stream, uint64_t coll);
  void gone(Member& m, const std::string& why);
  bool drain(Member& m);
  void closeRetiredWhenIdle();
  void addGate(int rank, transport::ServedPage* page);
  void openGates(int rank);  // -1: every rank's

  ncclComm* comm_;
  int rank_;
  int cudaDev_;
  int listenFd_ = -1;
  std::vector<std::unique_ptr<Member>> members_;  // the server thread's, until it is joined
  std::atomic<int> open_{0};
  std::atomic<bool> stop_{false};
  bool stopped_ = false;
  std::thread thread_;
  std::unique_ptr<transport::IpcImports> imports_;
  std::unique_ptr<kernels::WorkCache> workCache_;
  cudaMemPool_t pool_ = nullptr;
  // The members, their posts, the mappings and the work cache: the server thread's and, in
  // leaderLaunched, the leader rank's calling thread's (stateMutex_ before ticketsMutex_).
  std::mutex stateMutex_;
  std::condition_variable postArrived_;  // with stateMutex_
  std::atomic<bool> saidFused_{false}, saidLocal_{false};
  bool waitedOut_ = false;  // launchFused waited BRAID_SERVED_WAIT in this call (the leader rank's thread)
  // The leader rank's launches so far (ServedGate).
  std::atomic<uint64_t> leaderColl_{0};
  std::vector<std::atomic<uint64_t>> sentTo_, recvdFrom_;
  std::mutex ticketsMutex_;
  std::condition_variable ticketsCovered_;
  uint32_t lastTicket_ = 0;
  uint32_t coveredUpTo_ = 0;  // the last ticket whose served side is enqueued (or released)
  std::deque<Ticket> tickets_;
  std::atomic<bool> saidSlow_{false};
  // The served ranks' readyColl words the leader rank's streams wait on (gate), and the highest
  // collective number waited for: writing it from the host opens every such wait.
  struct GateWord {
    int rank;
    transport::ServedPage* page;
    bool open;  // the rank is connected: gate waits for it
  };
  std::mutex gateMutex_;
  std::vector<GateWord> gates_;
  uint64_t gatedColl_ = 0;
};

}  // namespace braid::api
