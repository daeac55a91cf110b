#include "core/comm.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "core/env.h"
#include "core/log.h"
#include "core/resources.h"

namespace braid {
namespace {

std::mutex gRegistryMutex;
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
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  registry().insert(comm);
}
void unregisterComm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  registry().erase(comm);
}
bool isLiveComm(const ncclComm* comm) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  return comm && registry().count(comm) > 0;
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
  if (s == ncclComm::State::Initializing)
    return fail(ncclInvalidArgument,
                "%s (rank %d): attempt to use communicator before the previous operation returned ncclSuccess. Fix: "
                "poll ncclCommGetAsyncError until it returns ncclSuccess first.",
                caller, comm->rank);
  return fail(ncclInvalidUsage, "%s (rank %d): the communicator is %s; only ncclCommDestroy/Abort are allowed now.",
              caller, comm->rank, stateName(s));
}

ncclResult_t initRankSync(ncclComm* comm, int nRanks, const ncclUniqueId& id, int rank, int cudaDev) {
  setLogDevice(cudaDev);
  UniqueIdContent content;
  BRAID_CHECK(decodeUniqueId(id, "ncclCommInitRank", &content));
  comm->rank = rank;
  comm->nRanks = nRanks;
  comm->cudaDev = cudaDev;
  std::vector<PeerInfo> peers;
  BRAID_CHECK(TcpBootstrap::connectViaRoot(content, describeSelf(rank, nRanks, cudaDev), env::initTimeoutSeconds(),
                                           &comm->abortFlag, &comm->bootstrap, &peers));
  comm->peers = std::move(peers);
  return setupCommResources(comm);
}

ncclResult_t initDerivedSync(ncclComm* parent, ncclComm* child, const std::vector<int>& members, int myIndex,
                             uint64_t secret) {
  int n = static_cast<int>(members.size());
  child->rank = myIndex;
  child->nRanks = n;
  child->cudaDev = parent->cudaDev;
  setLogDevice(child->cudaDev);
  PeerInfo self = describeSelf(myIndex, n, parent->cudaDev);
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
  return setupCommResources(child);
}

ncclResult_t setupCommResources(ncclComm* comm) {
  for (const PeerInfo& p : comm->peers)
    if (p.libraryVersion != NCCL_VERSION_CODE)
      return fail(ncclInvalidUsage, "ncclCommInitRank (rank %d): rank %d runs another library version (%d vs %d).",
                  comm->rank, p.rank, p.libraryVersion, NCCL_VERSION_CODE);
  BRAID_CHECK(createResources(comm));
  BRAID_INFO(kInit, "comm %p rank %d nRanks %d cudaDev %d busId %s - Init COMPLETE", static_cast<void*>(comm),
             comm->rank, comm->nRanks, comm->cudaDev, comm->peers[comm->rank].busId[0] ? comm->peers[comm->rank].busId : "host");
  return ncclSuccess;
}

void teardownComm(ncclComm* comm, bool abort) {
  if (abort && comm->bootstrap) comm->bootstrap->abort();
  destroyResources(comm, abort);
  comm->bootstrap.reset();
}

}  // namespace braid
