// The communicator behind an ncclComm_t.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/call_state.h"
#include "core/liveness.h"
#include "core/peer_info.h"
#include "core/tcp_bootstrap.h"
#include "nccl.h"

namespace braid {
class HostTransport;  // src/host: shared-memory connections for host-memory collectives
namespace transport {
class UcxNet;  // transport/ucx_net.h: FIFOs to ranks on other hosts
}
namespace fallback {
class RealComm;  // src/fallback/real_comm.h: the real NCCL's communicator behind this one
}
namespace api {
class Shadow;         // src/api/shadow.h: BRAID_SHADOW's scratch buffers and pending checks
class PlanCache;      // src/api/plan.h: recently used host schedules
class CommTuning;     // src/api/tuning.h: NCCL_ALGO/NCCL_PROTO and the links, for the tuner
class Served;         // src/api/served.h: which process runs the GPU work of ranks sharing a GPU
}
// GPU connections and buffers for device-memory collectives (defined above core, in api).
class DeviceResources {
 public:
  virtual ~DeviceResources() = default;
  virtual void signalAbort() = 0;              // kernels see it and return
  virtual void stopInFlight() = 0;             // abort the kernels, wait for them, clear the word
  virtual ncclResult_t asyncError() const = 0;  // what the kernels reported
  virtual void close(bool abort) = 0;
};
}

// A user-created reduction op (ncclRedOpCreatePreMulSum).
struct BraidUserOp {
  bool live = false;
  ncclDataType_t type = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  unsigned char scalar[8] = {};      // the host value, when residence is HostImmediate
  const void* devScalar = nullptr;   // the pointer, when residence is Device
};

struct ncclComm {
  enum class State { Initializing, Ready, Finalized, Revoked, Failed };

  int rank = -1;
  int nRanks = 0;
  int cudaDev = -1;  // -1: a host-only rank
  std::string name;
  ncclConfig_t config{};
  bool blocking = true;
  std::vector<braid::PeerInfo> peers;
  std::unique_ptr<braid::TcpBootstrap> bootstrap;
  std::vector<int> ring;          // rank order for ring algorithms (from the topology)
  std::vector<int> nodeOf;        // every rank's node (host), ids by first appearance; empty: one host
  double ringBandwidth = 0;       // GB/s per ring link, the topology's estimate (0: unknown)
  uint64_t childCount = 0;        // derived communicators so far (split/shrink secrets)

  std::atomic<State> state{State::Initializing};
  std::atomic<ncclResult_t> asyncError{ncclInProgress};
  std::atomic<bool> abortFlag{false};
  std::thread initThread;         // non-blocking init/split runs here

  // Calls in flight (braid::CommUse): teardown waits for them to leave before it frees
  // anything. `closing` is set once, under the registry's lock, by destroy or abort.
  std::atomic<int> uses{0};
  std::atomic<bool> closing{false};
  // Why the communicator failed (a dead peer, a mismatch, an error inside a collective):
  // later calls and ncclGetLastError(comm) say it.
  std::mutex failureMutex;
  std::string failureText;
  bool failureIsCause = false;
  // The collective in which another rank found a mismatch (its news, core/liveness.h); 0: none.
  // A rank still in an earlier call may finish it: the others finished it before they met.
  std::atomic<uint64_t> mismatchSeq{0};
  std::unique_ptr<braid::Liveness> liveness;  // which peers are alive; hang reports
  braid::CallState calls;                     // numbered calls: started, completed, waiting for

  std::mutex userOpsMutex;
  std::vector<BraidUserOp> userOps;

  // Made by the layers above (src/api, src/host). shared_ptr: its deleter is bound where the
  // object is made, so core destroys them without seeing their types.
  std::shared_ptr<braid::HostTransport> host;
  std::shared_ptr<braid::transport::UcxNet> net;  // made at init when a rank is on another host
  std::shared_ptr<braid::api::PlanCache> hostPlans;
  std::shared_ptr<braid::api::PlanCache> devicePlans;  // GPU executor plans (other lane sizes)
  std::shared_ptr<braid::api::CommTuning> tuning;      // every algorithm/protocol/channel choice
  std::shared_ptr<braid::api::Served> served;          // set at init when a GPU has ranks of several processes
  std::unique_ptr<braid::DeviceResources> device;  // set and reset under deviceMutex
  std::mutex deviceMutex;                           // against the monitor thread's abort signal
  // The real NCCL's communicator over the same ranks, made by the first call that needs it
  // (a call braid lacks, a shadow check); set under realMutex, closed with this one.
  std::shared_ptr<braid::fallback::RealComm> real;
  std::mutex realMutex;
  // Set at init (BRAID_BACKEND=auto, braid cannot connect these ranks: src/api/real_served.h)
  // before the communicator is ready, never cleared: every call goes to `real`.
  std::atomic<bool> servedByReal{false};
  std::shared_ptr<braid::api::Shadow> shadow;  // made by the first shadowed call; under realMutex
  // The call check on host memory (host/engine.h CheckLane): messages riding on a data slot,
  // in a slot of their own, or sent late by a stalled run; groups that their data checked
  // alone. Said at INFO when the communicator closes.
  std::atomic<uint64_t> checksRode{0}, checksAlone{0}, checksLate{0}, checksByData{0};
  // Host time of this rank's device calls (the enqueue, not the GPU's work), said at INFO COLL
  // when the communicator closes: where a small call's time goes when the host is the bound.
  struct EnqueueTimes {
    std::atomic<uint64_t> calls{0}, checkNs{0};
    std::atomic<uint64_t> runs{0}, runNs{0}, planNs{0}, launchNs{0};  // runs that planned (the first also connect)
    std::atomic<uint64_t> replays{0}, replayNs{0}, replayLaunchNs{0};  // runs that replayed a kept launch
    // Served GPUs (served.h): a leader rank waiting for its served ranks' posts (launchFused) and for
    // their side to be enqueued (leaderLaunched); a served rank sending its posts; either issuing the
    // stream operations and launches of the served path.
    std::atomic<uint64_t> postsWaitNs{0}, servedWaitNs{0}, postSendNs{0}, servedStreamNs{0};
    using Clock = std::chrono::steady_clock;
    static void add(std::atomic<uint64_t>& to, Clock::time_point since) {
      to.fetch_add(uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count()),
                   std::memory_order_relaxed);
    }
  } enqueueTimes;

  ncclComm();
  ~ncclComm();
};

namespace braid {

// Live communicators, so that a destroyed or garbage handle is reported instead of followed.
void registerComm(ncclComm* comm);
void unregisterComm(ncclComm* comm);
bool isLiveComm(const ncclComm* comm);

// Checks that `comm` is a live communicator that finished its init; names `caller`.
ncclResult_t checkCommReady(const ncclComm* comm, const char* caller);

// A call in progress on a communicator: while one exists the communicator is not freed.
// Taken by every entry point that uses a communicator; refused (with the last error set) for
// NULL, a handle that is not a live communicator, or one being destroyed or aborted.
class CommUse {
 public:
  CommUse(ncclComm* comm, const char* caller);
  ~CommUse();
  CommUse(const CommUse&) = delete;
  CommUse& operator=(const CommUse&) = delete;
  ncclResult_t result() const { return result_; }

 private:
  ncclComm* comm_ = nullptr;
  ncclResult_t result_ = ncclSuccess;
};

// Destroy and abort: refuses a second teardown, makes calls in flight on other threads return
// (abort: always; destroy: with a warning, since the user should not), waits up to `waitSeconds`
// for them to leave, and unregisters the handle. False when they did not leave in time: the
// caller must then not free the communicator (it is leaked, never used after free).
ncclResult_t beginTeardown(ncclComm* comm, bool abort, const char* caller, double waitSeconds, bool* drained);

// Records the communicator's failure, makes it refuse further collectives, and stops its
// kernels. The first cause is kept; a consequence (`cause` false: a peer's abort, a call that
// failed on a closed connection) gives way to a cause found later (the death behind it).
// From any thread; logs nothing (the caller does).
void markCommFailed(ncclComm* comm, ncclResult_t result, const char* text, bool cause = true);
// The failure's text ("" when the communicator has not failed).
std::string commFailureText(ncclComm* comm);
// Waits up to `seconds` for the communicator's failure to have a cause (a peer's death seen by
// the liveness monitor): a call that failed on a closed connection is often the echo of a
// death whose news is still on its way. The cause's text, or "" when none came.
std::string awaitFailureCause(ncclComm* comm, double seconds);
// Installs the GPU resources (under deviceMutex; a failure already known aborts them at once).
void setCommDevice(ncclComm* comm, DeviceResources* device);

// The core half of init: this rank's bootstrap through the root named in `id`, the peers'
// table and the liveness mesh (the body of InitRank before src/api adds its resources). The
// caller has set comm->rank, nRanks and cudaDev to the arguments' values.
ncclResult_t initRankSync(ncclComm* comm, int nRanks, const ncclUniqueId& id, int rank, int cudaDev);
// Derived communicator among `members` (ranks of `parent`, in new-rank order); `myIndex` is
// this rank's position. Used by split and shrink.
ncclResult_t initDerivedSync(ncclComm* parent, ncclComm* child, const std::vector<int>& members, int myIndex,
                             uint64_t secret);
// After the bootstrap (both init paths): library versions agree, the liveness mesh is up.
ncclResult_t finishBootstrap(ncclComm* comm);
// Teardown, in this order: stopLiveness (a goodbye, or this rank's abort, to the peers; the
// monitor no longer touches the communicator), src/api's resources, then teardownComm (the
// bootstrap and the mesh's sockets).
void stopLiveness(ncclComm* comm, bool abort);
void teardownComm(ncclComm* comm);

}  // namespace braid
