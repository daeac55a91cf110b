#include "api/real_served.h"

#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "core/bootstrap.h"
#include "core/config.h"
#include "core/env.h"
#include "fallback/backend.h"
#include "transport/select.h"
#include "transport/ucx_api.h"
#include "transport/ucx_net.h"

namespace braid::api {
namespace {

// Communicators of this process that the real NCCL serves (the routing's gate), and their
// addresses in a small table that a call scans without a lock, so that braid's own
// communicators do not pay two more registry lookups per call once one such communicator
// exists (ncclCommCount on a busy 2-core machine: 320-560 ns with them instead of ~165; with
// the table no difference was measured, 81-101 ns both).
std::atomic<int> gRealServed{0};
constexpr int kServedSlots = 64;
std::atomic<ncclComm*> gServedSlots[kServedSlots];
std::atomic<int> gServedHigh{0};      // slots at or above it are empty
std::atomic<int> gServedOverflow{0};  // served communicators without a slot: every call then asks the registry
std::mutex gServedMutex;              // for adding and removing

void rememberRealServed(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(gServedMutex);
  int slot = 0;
  while (slot < kServedSlots && gServedSlots[slot].load(std::memory_order_relaxed) != nullptr) ++slot;
  if (slot == kServedSlots) {
    gServedOverflow.fetch_add(1, std::memory_order_release);
  } else {
    gServedSlots[slot].store(comm, std::memory_order_release);
    if (gServedHigh.load(std::memory_order_relaxed) <= slot) gServedHigh.store(slot + 1, std::memory_order_release);
  }
  gRealServed.fetch_add(1, std::memory_order_release);
}

// What each rank says at init about its links to ranks on other hosts.
struct LinkVote {
  int32_t ok = 0;    // 1: it can serve them
  int32_t pad = 0;
  char host[64] = {};  // where it runs, for the message
  char why[512] = {};  // when it cannot: why
};

// The host's name as a user knows it: BRAID_HOSTID (emulated hosts), else the host name.
std::string hostLabel() {
  if (const char* id = env::get("BRAID_HOSTID")) return id;
  char name[64] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Every rank's vote, in rank order; the first rank that cannot serve its links in *firstBad (or -1).
ncclResult_t gatherVotes(ncclComm* comm, bool ok, const std::string& why, std::vector<LinkVote>* all, int* firstBad) {
  all->assign(comm->nRanks, LinkVote{});
  LinkVote& mine = (*all)[comm->rank];
  mine.ok = ok ? 1 : 0;
  std::snprintf(mine.host, sizeof mine.host, "%s", hostLabel().c_str());
  std::snprintf(mine.why, sizeof mine.why, "%s", why.c_str());
  ncclResult_t rc = comm->bootstrap->allGather(all->data(), sizeof(LinkVote));
  if (rc != ncclSuccess)
    return fail(rc, "rank %d: init: braid's bootstrap exchange (can every rank reach the other hosts?) failed: %s",
                comm->rank, braid::lastError());
  *firstBad = -1;
  for (int r = 0; r < comm->nRanks && *firstBad < 0; ++r)
    if (!(*all)[r].ok) *firstBad = r;
  return ncclSuccess;
}

// "braid cannot connect rank P on host H: why", from this rank's side: P is the first rank that
// cannot serve its links, or (when that is this rank) the first rank on another host.
std::string cannotConnect(const ncclComm* comm, const std::vector<LinkVote>& votes, int bad) {
  int peer = bad;
  std::string why = votes[bad].why;
  if (bad == comm->rank) {
    for (int r = 0; r < comm->nRanks; ++r)
      if (transport::localityOf(comm->peers[comm->rank], comm->peers[r]) == transport::Locality::OtherHost) {
        peer = r;
        break;
      }
    why = "this rank cannot reach other hosts: " + why;
  }
  return "braid cannot connect rank " + std::to_string(peer) + " on host " + votes[peer].host + ": " + why;
}

// The real NCCL takes the communicator: collective, every rank agrees on the outcome.
ncclResult_t handOver(ncclComm* comm, const std::string& reason) {
  ncclResult_t rc;
  {
    std::lock_guard<std::mutex> lock(comm->realMutex);
    rc = fallback::RealComm::create(comm, "init", &comm->real);
  }
  if (rc != ncclSuccess)
    return fail(rc, "rank %d: %s; and the real NCCL cannot serve this communicator instead: %s. Fix: make UCX usable "
                "on every rank (or reachable), or a real NCCL loadable (BRAID_NCCL_LIBRARY)", comm->rank,
                reason.c_str(), braid::lastError());
  comm->servedByReal.store(true, std::memory_order_release);
  rememberRealServed(comm);
  BRAID_INFO(kInit | kNet, "rank %d: %s; the real NCCL serves this communicator", comm->rank, reason.c_str());
  return ncclSuccess;
}

}  // namespace

ncclResult_t connectOtherHosts(ncclComm* comm) {
  // BRAID_BACKEND=braid: UCX or nothing; init fails (every rank, naming the one without UCX).
  if (fallback::backend() != fallback::Backend::Auto) return transport::UcxNet::create(comm, &comm->net);
  // 1. Can every rank open UCX? Asked before anyone starts it, so that nobody warns in vain.
  std::string why;
  const bool opens = transport::ucx::api(&why) != nullptr;
  std::vector<LinkVote> votes;
  int bad = -1;
  BRAID_CHECK(gatherVotes(comm, opens, why, &votes, &bad));
  if (bad < 0) {
    // 2. UCX starts and connects on every rank (collective), or the ranks agree it did not.
    ncclResult_t rc = transport::UcxNet::create(comm, &comm->net);
    BRAID_CHECK(gatherVotes(comm, rc == ncclSuccess, rc == ncclSuccess ? "" : braid::lastError(), &votes, &bad));
    if (bad < 0) return ncclSuccess;
    if (comm->net) comm->net->close(/*abort=*/true);  // nothing ran on it yet
    comm->net.reset();
  }
  return handOver(comm, cannotConnect(comm, votes, bad));
}

bool anyRealServed() { return gRealServed.load(std::memory_order_relaxed) > 0; }

bool mayBeRealServed(const ncclComm* comm) {
  if (comm == nullptr) return false;
  if (gServedOverflow.load(std::memory_order_acquire) > 0) return true;
  const int high = gServedHigh.load(std::memory_order_acquire);
  for (int i = 0; i < high; ++i)
    if (gServedSlots[i].load(std::memory_order_acquire) == comm) return true;
  return false;
}

std::shared_ptr<fallback::RealComm> realServing(ncclComm* comm) {
  if (!anyRealServed() || !mayBeRealServed(comm) || !isLiveComm(comm)) return nullptr;
  CommUse use(comm, "realServing");
  if (use.result() != ncclSuccess || !comm->servedByReal.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(comm->realMutex);
  return comm->real;
}

void forgetRealServed(ncclComm* comm) {
  if (!comm->servedByReal.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(gServedMutex);
  int slot = 0;
  while (slot < kServedSlots && gServedSlots[slot].load(std::memory_order_relaxed) != comm) ++slot;
  if (slot == kServedSlots) gServedOverflow.fetch_sub(1, std::memory_order_release);
  else gServedSlots[slot].store(nullptr, std::memory_order_release);
  gRealServed.fetch_sub(1, std::memory_order_release);
}

ncclResult_t noteRealFailure(const char* caller, const ncclComm* comm, const fallback::RealComm& real, ncclResult_t rc) {
  const std::string text = real.lastError();
  return fail(rc, "%s (rank %d): the real NCCL serves this communicator, and %s returned %d: %s", caller, comm->rank,
              fallback::describe(real.lib()).c_str(), static_cast<int>(rc), text.empty() ? "(no last error)" : text.c_str());
}

ncclResult_t deriveReal(ncclComm* parent, const char* caller, ncclConfig_t* userConfig, const RealChildCall& call,
                        ncclComm_t* newcomm) {
  CommUse use(parent, caller);
  BRAID_CHECK(use.result());
  if (!newcomm) return fail(ncclInvalidArgument, "%s (rank %d): newcomm is NULL.", caller, parent->rank);
  *newcomm = nullptr;
  std::shared_ptr<fallback::RealComm> real;
  {
    std::lock_guard<std::mutex> lock(parent->realMutex);
    real = parent->real;
  }
  if (!real) return fail(ncclInvalidUsage, "%s (rank %d): the communicator is being closed", caller, parent->rank);
  ncclConfig_t config = parent->config;
  if (userConfig) BRAID_CHECK(parseConfig(userConfig, caller, &config));
  ncclConfig_t realConfig = config;
  realConfig.blocking = 1;  // made now: the braid child is ready when this returns
  ncclComm_t realChild = nullptr;
  ncclResult_t rc = call(*real, &realConfig, &realChild);
  if (rc != ncclSuccess) return noteRealFailure(caller, parent, *real, rc);
  if (realChild == nullptr) return ncclSuccess;  // NCCL_SPLIT_NOCOLOR
  std::shared_ptr<fallback::RealComm> adopted = fallback::RealComm::adopt(&real->lib(), realChild);
  using QueryFn = ncclResult_t (*)(ncclComm_t, int*);
  int rank = -1, nRanks = 0, dev = -1;
  for (auto [pname, out] : {std::pair{"pncclCommUserRank", &rank}, {"pncclCommCount", &nRanks}, {"pncclCommCuDevice", &dev}}) {
    auto query = adopted->fn<QueryFn>(pname);
    rc = query ? query(realChild, out) : ncclInvalidUsage;
    if (rc != ncclSuccess)
      return fail(rc, "%s (rank %d): the real NCCL made the child, but %s of it in %s failed (%d): %s; the child is "
                  "destroyed again", caller, parent->rank, pname, fallback::describe(real->lib()).c_str(),
                  static_cast<int>(rc), adopted->lastError().c_str());  // ~RealComm destroys it
  }
  ncclComm* child = new ncclComm();
  child->config = config;
  child->blocking = config.blocking != 0;
  if (config.commName) child->name = config.commName;
  child->rank = rank;
  child->nRanks = nRanks;
  child->cudaDev = dev;
  child->real = std::move(adopted);
  child->servedByReal.store(true, std::memory_order_release);
  child->state.store(ncclComm::State::Ready);
  child->asyncError.store(ncclSuccess);
  rememberRealServed(child);
  registerComm(child);
  BRAID_INFO(kInit, "%s (rank %d): the real NCCL serves the parent, so it serves the child too (rank %d of %d)", caller,
             parent->rank, rank, nRanks);
  *newcomm = child;
  return ncclSuccess;
}

}  // namespace braid::api
