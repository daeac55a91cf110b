#include "core/comm.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <shared_mutex>
#include <thread>
#include <unordered_set>

#include "core/env.h"
#include "core/log.h"

ncclComm::ncclComm() = default;
ncclComm::~ncclComm() {
  if (initThread.joinable()) initThread.join();
}

namespace braid {
namespace {

// Shared for the per-call lookups (CommUse), exclusive to register, unregister and close.
std::shared_mutex gRegistryMutex;
std::unordered_set<const ncclComm*>& registry() {
  static auto* set = new std::unordered_set<const ncclComm*>();  // never destroyed: used at exit
  return *set;
}

const char* stateName(ncclComm::State s) {
  switch (s) {
    case ncclComm::State::Initializing: return "still initializing";
    case ncclComm::State::Ready: return "ready";
    case ncclComm::State::Finalized: return "finalized";
    case ncclComm::State::Revoked: return "revoked";
    case ncclComm::State::Failed: return "failed";
  }
  return "?";
}

PeerInfo describeSelf(int rank, int nRanks, int cudaDev) {
  PeerInfo self;
  self.rank = rank;
  self.nRanks = nRanks;
  self.cudaDev = cudaDev;
  self.pid = getpid();
  self.hostHash = hostHash();
  self.machineHash = machineHash();
  self.processHash = processHash();
  self.libraryVersion = NCCL_VERSION_CODE;
  self.initTimeoutMs = static_cast<int32_t>(env::initTimeoutSeconds() * 1000);
  if (cudaDev >= 0 && cudaDeviceGetPCIBusId(self.busId, sizeof(self.busId), cudaDev) != cudaSuccess)
    self.busId[0] = 0;
  for (char* c = self.busId; *c; ++c) *c = static_cast<char>(std::tolower(*c));
  return self;
}

}  // namespace

void registerComm(ncclComm* comm) {
  std::unique_lock<std::shared_mutex> lock(gRegistryMutex);
  registry().insert(comm);
}
void unregisterComm(ncclComm* comm) {
  std::unique_lock<std::shared_mutex> lock(gRegistryMutex);
  registry().erase(comm);
}
bool isLiveComm(const ncclComm* comm) {
  std::shared_lock<std::shared_mutex> lock(gRegistryMutex);
  return comm && registry().count(comm) > 0;
}

CommUse::CommUse(ncclComm* comm, const char* caller) {
  if (!comm) {
    result_ = fail(ncclInvalidArgument, "%s: comm is NULL. Fix: pass a communicator from ncclCommInitRank.", caller);
    return;
  }
  std::shared_lock<std::shared_mutex> lock(gRegistryMutex);
  if (!registry().count(comm)) {
    result_ = fail(ncclInvalidArgument,
                   "%s: comm %p is not a live communicator (destroyed, or never initialized). Fix: pass a "
                   "communicator from ncclCommInitRank that was not destroyed.",
                   caller, static_cast<const void*>(comm));
    return;
  }
  if (comm->closing.load()) {
    // No rank in the text: a split child learns its rank in its init, maybe on another thread.
    result_ = fail(ncclInvalidUsage,
                   "%s: communicator %p is being destroyed or aborted by another thread. Fix: do not use a "
                   "communicator after ncclCommDestroy/ncclCommAbort was called on it.",
                   caller, static_cast<const void*>(comm));
    return;
  }
  comm->uses.fetch_add(1, std::memory_order_acq_rel);
  comm_ = comm;
}

CommUse::~CommUse() {
  if (comm_) comm_->uses.fetch_sub(1, std::memory_order_acq_rel);
}

ncclResult_t beginTeardown(ncclComm* comm, bool abort, const char* caller, double waitSeconds, bool* drained) {
  *drained = true;
  {
    std::unique_lock<std::shared_mutex> lock(gRegistryMutex);
    if (!comm || !registry().count(comm))
      return fail(ncclInvalidArgument, "%s: comm %p has already been destroyed (or was never created).", caller,
                  static_cast<void*>(comm));
    if (comm->closing.exchange(true))
      return fail(ncclInvalidUsage, "%s (rank %d): another thread is already destroying or aborting this "
                  "communicator.", caller, comm->rank);
  }
  // From here no new call enters. Calls in flight end at the abort flag: every wait in braid
  // (bootstrap, host engine, kernels through the device's abort word) polls it.
  int inFlight = comm->uses.load();
  if (abort || inFlight > 0) {
    if (!abort)
      BRAID_WARN("%s (rank %d): %d call(s) still in flight on other threads; they are interrupted (as by "
                 "ncclCommAbort) and return an error.", caller, comm->rank, inFlight);
    comm->abortFlag.store(true);
    std::lock_guard<std::mutex> lock(comm->deviceMutex);
    if (comm->device) comm->device->signalAbort();
  }
  if (comm->initThread.joinable()) comm->initThread.join();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(waitSeconds);
  while (comm->uses.load() > 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      BRAID_WARN("%s (rank %d): %d call(s) did not return within %.0f s of the abort; the communicator's memory is "
                 "left allocated so that they cannot touch freed memory.", caller, comm->rank, comm->uses.load(),
                 waitSeconds);
      *drained = false;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  unregisterComm(comm);
  return ncclSuccess;
}

void markCommFailed(ncclComm* comm, ncclResult_t result, const char* text, bool cause) {
  {
    std::lock_guard<std::mutex> lock(comm->failureMutex);
    if (!comm->failureText.empty() && (comm->failureIsCause || !cause)) return;
    comm->failureText = text;
    comm->failureIsCause = cause;
  }
  comm->asyncError.store(result);
  comm->state.store(ncclComm::State::Failed);
  std::lock_guard<std::mutex> lock(comm->deviceMutex);
  if (comm->device) comm->device->signalAbort();
}

std::string commFailureText(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(comm->failureMutex);
  return comm->failureText;
}

std::string awaitFailureCause(ncclComm* comm, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(comm->failureMutex);
      if (comm->failureIsCause) return comm->failureText;
    }
    if (std::chrono::steady_clock::now() > deadline || !comm->liveness) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void setCommDevice(ncclComm* comm, DeviceResources* device) {
  std::lock_guard<std::mutex> lock(comm->deviceMutex);
  comm->device.reset(device);
  if (device && comm->state.load() == ncclComm::State::Failed) device->signalAbort();
}

ncclResult_t checkCommReady(const ncclComm* comm, const char* caller) {
  if (!comm)
    return fail(ncclInvalidArgument, "%s: comm is NULL. Fix: pass a communicator from ncclCommInitRank.", caller);
  if (!isLiveComm(comm))
    return fail(ncclInvalidArgument,
                "%s: comm %p is not a live communicator (destroyed, or never initialized). Fix: pass a communicator "
                "from ncclCommInitRank that was not destroyed.",
                caller, static_cast<const void*>(comm));
  ncclComm::State s = comm->state.load();
  if (s == ncclComm::State::Ready) return ncclSuccess;
  if (s == ncclComm::State::Initializing)  // no rank in the text: the init may still be setting it
    return fail(ncclInvalidArgument,
                "%s: attempt to use communicator %p before the previous operation returned ncclSuccess. Fix: "
                "poll ncclCommGetAsyncError until it returns ncclSuccess first.",
                caller, static_cast<const void*>(comm));
  if (s == ncclComm::State::Failed) {
    ncclComm* c = const_cast<ncclComm*>(comm);
    std::string why = commFailureText(c);
    ncclResult_t rc = c->asyncError.load();
    if (rc == ncclSuccess || rc == ncclInProgress) rc = ncclInvalidUsage;
    return fail(rc, "%s (rank %d): the communicator has failed%s%s Only ncclCommDestroy, ncclCommAbort and "
                "ncclCommShrink are allowed now.", caller, comm->rank, why.empty() ? "." : ": ", why.c_str());
  }
  return fail(ncclInvalidUsage, "%s (rank %d): the communicator is %s; only ncclCommDestroy/Abort are allowed now.",
              caller, comm->rank, stateName(s));
}

ncclResult_t initRankSync(ncclComm* comm, int nRanks, const ncclUniqueId& id, int rank, int cudaDev) {
  setLogDevice(cudaDev);
  UniqueIdContent content;
  BRAID_CHECK(decodeUniqueId(id, "ncclCommInitRank", &content));
  // comm->rank, nRanks and cudaDev were set by the caller before the init (maybe on another
  // thread) began: other threads may read them meanwhile (an abort's message, say).
  std::vector<PeerInfo> peers;
  PeerInfo self = describeSelf(rank, nRanks, cudaDev);
  BRAID_CHECK(Liveness::open(&self.monitor, &comm->liveness));
  BRAID_CHECK(TcpBootstrap::connectViaRoot(content, self, env::initTimeoutSeconds(), &comm->abortFlag,
                                           &comm->bootstrap, &peers));
  comm->peers = std::move(peers);
  return finishBootstrap(comm);
}

ncclResult_t initDerivedSync(ncclComm* parent, ncclComm* child, const std::vector<int>& members, int myIndex,
                             uint64_t secret) {
  int n = static_cast<int>(members.size());
  child->rank = myIndex;
  child->nRanks = n;
  child->cudaDev = parent->cudaDev;
  setLogDevice(child->cudaDev);
  PeerInfo self = describeSelf(myIndex, n, parent->cudaDev);
  BRAID_CHECK(Liveness::open(&self.monitor, &child->liveness));
  int listenFd = -1;
  BRAID_CHECK(TcpBootstrap::openListener(&self.listen, &listenFd));
  // Exchange the new listeners among the members only, over the parent's bootstrap: the
  // excluded ranks of a shrink may be dead.
  std::vector<int> sorted(members);
  std::sort(sorted.begin(), sorted.end());
  std::vector<PeerInfo> byParentRank(parent->nRanks);
  byParentRank[parent->rank] = self;
  ncclResult_t rc = parent->bootstrap->allGatherAmong(sorted, byParentRank.data(), sizeof(PeerInfo));
  if (rc != ncclSuccess) {
    close(listenFd);
    return rc;
  }
  std::vector<PeerInfo> peers(n);
  for (int i = 0; i < n; ++i) peers[i] = byParentRank[members[i]];
  child->bootstrap = TcpBootstrap::fromPeers(myIndex, peers, secret, listenFd);
  child->peers = std::move(peers);
  return finishBootstrap(child);
}

ncclResult_t finishBootstrap(ncclComm* comm) {
  for (const PeerInfo& p : comm->peers)
    if (p.libraryVersion != NCCL_VERSION_CODE)
      return fail(ncclInvalidUsage, "ncclCommInitRank (rank %d): rank %d runs another library version (%d vs %d).",
                  comm->rank, p.rank, p.libraryVersion, NCCL_VERSION_CODE);
  // Liveness first: from here a peer's death ends every wait for it, the setup's too.
  BRAID_CHECK(comm->liveness->start(comm));
  comm->bootstrap->watch(&comm->abortFlag, comm->liveness->peerStates());
  return ncclSuccess;
}

void stopLiveness(ncclComm* comm, bool abort) {
  if (comm->liveness) comm->liveness->stop(abort);
}

void teardownComm(ncclComm* comm) {
  comm->liveness.reset();
  comm->bootstrap.reset();
}

}  // namespace braid
