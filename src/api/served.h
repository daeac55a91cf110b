// Ranks of separate processes on one GPU while MPS is off: one process runs the GPU work.
//
// Without MPS the GPU runs one process's work at a time and a switch costs ~140 us each way,
// so a kernel that waits for another process's kernel waits milliseconds (issue 16's probe,
// tests/gpu/timeslice_probe). So the lowest rank of such a GPU leads: its process runs the
// kernels of every rank of the GPU that lives in another process ("served" ranks), on CUDA IPC
// mappings of their buffers and FIFOs. A served rank packs its launch as usual
// (kernels/pack.h), describes every pointer in it (transport/ipc_refs.h) and posts it over a
// Unix socket (transport/served_link.h); on its own stream it only writes "ready" after the
// work already there and waits for "done", never a kernel and never a copy. The leader's
// thread maps the pointers, and on a stream of its own per served rank waits for "ready", runs
// the copies and kernels, and writes "done". A collective whose every served post is in when
// the leader rank issues it runs instead as one kernel with the leader rank's own, on its
// stream (ServedLeader::launchFused): each launch and stream operation in the leader's context
// costs a context switch. The words are pinned host memory, so that an abort or a dead process
// releases every waiting stream from the host.
//
// Chosen at init, the same on every rank: a GPU with ranks of several processes, every rank on
// one host, MPS off as the leader sees it (cudaDevAttrMpsEnabled), BRAID_SERVED not 0
// (BRAID_SERVED=1 serves under MPS too, to compare). Ranks in the leader's own process (threads)
// run their kernels themselves: they share its context. CUDA graph capture is refused on such a
// communicator (the leader would have to replay the served ranks' work with their graphs).
//
// The hazard this design lives with: every served kernel runs in the leader's context, so a call
// there that waits for the device (cudaFree, a synchronous copy, a lazily loaded module) waits
// for them. The server keeps every kernel's peers enqueued with it (whole sets, ServedGate), and
// the leader rank's call returns only once the served side of it is enqueued; what is left is a
// set of send/recv among served ranks alone, launched while the leader's process makes such a
// call — it can still hang, as NCCL's own launches could around a cudaFree.
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/served_schedule.h"  // PeerCounts
#include "core/comm.h"
#include "kernels/executor.h"
#include "transport/served_link.h"

namespace braid::api {

class ServedLeader;

// Who runs whose kernels in a communicator: the same on every rank.
struct ServedPlan {
  std::vector<int> leaderOf;  // by rank: the rank whose process runs its kernels (itself: its own)
  std::string socketName;     // of this rank's leader's socket (empty: this rank is not in a served GPU)
  bool any() const;           // some rank is served
  bool served(int rank) const { return leaderOf[size_t(rank)] != rank; }
  bool leads(int rank) const;  // some rank is served by `rank`
};

// Where a launch stands against the leader rank's work. A served rank's kernels run in the
// leader's context, so any call there that waits for the device (cudaFree, a synchronous copy,
// cudaDeviceSynchronize) waits for them too; a served kernel that waits for the leader rank's
// part of a call the leader has not issued yet would then never finish (2 processes hung so in
// mp_rank's cuMemFree). So the server launches a served rank's work only once the leader rank
// has enqueued its side of it: the collective of the same number, and as many sends and
// receives between the two (NCCL matches send/recv per pair in order).
struct ServedGate {
  uint64_t collSeq = 0;  // the launch's last collective number (0: none)
  uint64_t sends = 0;    // send/recv ops with the other rank (served rank: the leader; leader: that rank)
  uint64_t recvs = 0;
};

// A launch that holds one collective and nothing else: which, and its arguments. The leader runs a
// collective of which every rank is on its GPU as one pass over their buffers
// (kernels/local_collective.h), when every rank's launch is that one collective.
struct SoleCollective {
  bool any = false;
  algo::Coll coll = algo::Coll::AllReduce;
  uint64_t count = 0;
  ncclDataType_t type = ncclFloat32;
  int root = 0;
};

// What a communicator keeps: the plan, and the server when this rank leads.
class Served {
 public:
  ~Served();
  ServedPlan plan;
  std::unique_ptr<ServedLeader> leader;
  // Waits for the served ranks to say goodbye (bounded; at once on abort), then stops the server.
  void stop(bool abort);
  // The leader rank enqueued a launch: `perRank[r]` its send/recv ops with rank r, each with the
  // launch's last collective number. Lets the server run the served ranks' posts that waited
  // for it, and waits (bounded: BRAID_SERVED_WAIT) until the served side of it is enqueued.
  // A no-op unless this rank leads.
  void leaderLaunched(const std::vector<ServedGate>& perRank);
  // Before the leader rank's kernels of a launch whose first collective is number `firstColl`
  // (and that has no send/recv: an earlier post of a served rank may wait for those): `stream`
  // waits until every served rank's stream has issued that collective (ServedWords::readyColl).
  // A no-op unless this rank leads; BRAID_SERVED_GATE=0 turns it off.
  ncclResult_t gate(cudaStream_t stream, uint64_t firstColl);
  // The leader rank's launch `L` (packed: `own`; `sole` when it is one collective) of collectives
  // firstColl..lastColl (and nothing else) as one kernel with every served rank's side of it
  // (ServedLeader::launchFused); *fused false when this rank does not lead or that cannot be:
  // then gate and enqueue `own` as usual.
  ncclResult_t launchFused(const kernels::Launch& L, const kernels::PackedLaunch& own, const SoleCollective& sole,
                           uint64_t firstColl, uint64_t lastColl, unsigned* widest, bool* fused);
  // Abort: the leader rank's calls stop waiting for the served ranks.
  void release();
};

// Whether MPS runs for this GPU, as this process sees it (cudaDevAttrMpsEnabled; false when
// the query fails).
bool mpsEnabled(int cudaDev);

// At init, after the ring: collective (an allGather) when some GPU has ranks of several
// processes; sets comm->served and starts this rank's server when it leads. Logs the choice.
ncclResult_t planServing(ncclComm* comm);

// Held by a rank of a served communicator while it enqueues kernels in the leader's process
// (the leader, and ranks that are threads of its process), and by the leader's server while
// it closes mappings of freed buffers: that close waits for the kernels running in the
// context, and must not find one there that waits for a kernel the server has yet to launch.
std::mutex& servedLaunchMutex(int cudaDev);

// A copy the leader makes before the kernels (a send/recv to oneself; an input staged because
// the call overwrites it). `dst` may be a scratch token (scratchToken).
struct ServedCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};
// Stands for the leader's scratch buffer `index` in a served rank's work (never dereferenced
// in the served process).
void* scratchToken(size_t index);

// A served rank's end: its control words and its connection to the leader.
class ServedMember {
 public:
  // Connects to the leader (its server runs from init, so this waits only for a slow start).
  static ncclResult_t connect(ncclComm* comm, std::unique_ptr<ServedMember>* out);
  ~ServedMember();
  ServedMember(const ServedMember&) = delete;
  ServedMember& operator=(const ServedMember&) = delete;

  // Posts the launch (packed here, run by the leader after `copies`, each scratch buffer of
  // scratchBytes[i] allocated there) and orders L.stream: ready, then wait for done.
  // perRank[r]: the launch's send/recv ops with rank r, and its last collective number.
  ncclResult_t post(const kernels::Launch& L, const SoleCollective& sole, const std::vector<ServedCopy>& copies,
                    const std::vector<size_t>& scratchBytes, const std::vector<ServedGate>& perRank);
  // Releases this rank's waiting streams and makes its kernels return (abort, a dead peer).
  void release();
  // Tells the leader this rank is done with it (after the streams drained).
  void close();

  volatile uint32_t* abortWord() const { return &page_->host()->abort; }
  // The word the leader's stream writes when a post's outputs are written, and the last post:
  // when it reaches that, this rank's device calls so far are complete (CallState::enqueued).
  std::shared_ptr<const volatile uint32_t> doneWord() const { return {page_, &page_->host()->done}; }
  uint32_t lastPost() const { return posted_.load(); }
  volatile uint32_t* errorWord() const { return &page_->host()->error; }

 private:
  ServedMember() = default;
  ncclComm* comm_ = nullptr;
  int fd_ = -1;
  std::shared_ptr<transport::ServedPage> page_;  // shared with the record of calls in flight
  std::mutex mutex_;
  std::atomic<uint32_t> posted_{0};
  // So far (under mutex_): the last collective number, and the send/recv ops with each rank.
  uint64_t lastColl_ = 0;
  std::atomic<uint32_t> lastCollWord_{0};  // lastColl_, for release() (no lock: abort must not wait)
  std::vector<PeerCounts> counts_;
};

}  // namespace braid::api
