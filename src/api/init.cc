// Communicator lifecycle: unique ids, init (rank, config, all, scalable), split, shrink,
// finalize, destroy, abort, revoke, and the queries.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>

#include "api/device_errors.h"
#include "api/export.h"
#include "api/fallback_route.h"
#include "api/forward.h"
#include "api/group.h"
#include "api/real_served.h"
#include "api/resources.h"
#include "api/shadow.h"
#include "core/bootstrap_wire.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/env.h"
#include "core/log.h"
#include "core/root.h"
#include "core/unique_id.h"

using braid::fail;

namespace {

// The device of the calling thread, or -1 when there is no usable CUDA device (host-only).
int currentDevice() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no driver" error for later calls
    return -1;
  }
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return -1;
  return dev;
}

uint64_t mixSecret(uint64_t secret, uint64_t salt) {
  uint64_t x = secret ^ (salt + 0x9E3779B97F4A7C15ull + (secret << 6) + (secret >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

// Runs `job` now (blocking), in the background (non-blocking), or at ncclGroupEnd.
ncclResult_t launchInit(ncclComm* comm, std::function<ncclResult_t()> job) {
  auto wrapped = [comm, job]() {
    ncclResult_t rc = ncclInternalError;
    try {
      rc = job();
    } catch (const std::exception& e) {  // no exception may leave an init (its thread, or the caller's)
      rc = fail(ncclInternalError, "ncclCommInitRank (rank %d): %s", comm->rank, e.what());
    }
    // The liveness monitor may have failed the communicator already (a peer died as init
    // ended): that stays.
    ncclComm::State initializing = ncclComm::State::Initializing;
    if (rc != ncclSuccess) {
      comm->state.store(ncclComm::State::Failed);
      comm->asyncError.store(rc);
    } else if (comm->state.compare_exchange_strong(initializing, ncclComm::State::Ready)) {
      ncclResult_t inProgress = ncclInProgress;
      comm->asyncError.compare_exchange_strong(inProgress, ncclSuccess);
    }
    return rc;
  };
  if (braid::api::inGroup()) {
    braid::api::deferInit(comm, wrapped, comm->blocking);
    return ncclSuccess;
  }
  if (!comm->blocking) {
    comm->initThread = std::thread(wrapped);
    return ncclInProgress;
  }
  return wrapped();
}

// A new, registered communicator in the Initializing state.
ncclComm* newComm(const ncclConfig_t& config) {
  ncclComm* comm = new ncclComm();
  comm->config = config;
  comm->blocking = config.blocking != 0;
  if (config.commName) comm->name = config.commName;
  braid::registerComm(comm);
  return comm;
}

// How long destroy and abort wait for calls in flight on other threads to return after the
// abort flag: every wait polls it at least every 50 ms, so this only passes when a thread is
// stuck outside braid (in CUDA, say). Then the communicator is leaked, never freed under it.
constexpr double kDrainSeconds = 10.0;

// Destroy (abort = false) and abort: safe against calls in flight on other threads.
ncclResult_t closeComm(ncclComm* comm, bool abort, const char* caller) {
  bool drained = true;
  BRAID_CHECK(braid::beginTeardown(comm, abort, caller, kDrainSeconds, &drained));
  if (!drained) return ncclSuccess;
  bool aborted = comm->abortFlag.load();  // also a destroy that interrupted calls in flight
  // The shadow's last checks are read, and the real communicator (if any) closed, before
  // braid's own resources go: the real one may still run work on the same streams.
  // An abort does not wait for them (braid's kernels may be stuck until destroyResources).
  ncclResult_t shadowRc = aborted ? ncclSuccess : braid::api::drainShadow(comm, caller);
  ncclResult_t realRc = braid::api::closeRealComm(comm, aborted);
  braid::stopLiveness(comm, aborted);  // first of braid's: the monitor may signal the device
  braid::api::destroyResources(comm, aborted);
  braid::api::releaseShadow(comm);  // its scratch and slots, now that nothing runs on them
  braid::teardownComm(comm);
  delete comm;
  return shadowRc != ncclSuccess ? shadowRc : realRc;
}

// Blocking inits that fail leave no communicator behind; non-blocking ones keep it so that
// ncclCommGetAsyncError can report why.
ncclResult_t finishInit(ncclComm* comm, ncclComm_t* out, ncclResult_t rc) {
  if (rc != ncclSuccess && rc != ncclInProgress && comm->blocking && !braid::api::inGroup()) {
    (void)closeComm(comm, /*abort=*/true, "ncclCommInitRank");
    *out = nullptr;
    return rc;
  }
  *out = comm;
  return rc;
}

ncclResult_t checkInitArgs(const char* caller, ncclComm_t* comm, int nranks, int rank) {
  if (!comm) return fail(ncclInvalidArgument, "%s: comm (the output pointer) is NULL. Fix: pass &comm.", caller);
  if (nranks <= 0)
    return fail(ncclInvalidArgument, "%s: nranks = %d must be positive. Fix: pass the number of ranks.", caller, nranks);
  if (nranks > braid::wire::kMaxRanks)
    return fail(ncclInvalidArgument, "%s: nranks = %d is above braid's limit of %d ranks per communicator.", caller,
                nranks, braid::wire::kMaxRanks);
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "%s: rank = %d is out of range for nranks = %d. Fix: pass 0 <= rank < nranks.",
                caller, rank, nranks);
  return ncclSuccess;
}

ncclResult_t initRank(const char* caller, ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                      ncclConfig_t* userConfig) {
  BRAID_CHECK(checkInitArgs(caller, out, nranks, rank));
  *out = nullptr;
  braid::UniqueIdContent content;
  BRAID_CHECK(braid::decodeUniqueId(id, caller, &content));
  ncclConfig_t config;
  BRAID_CHECK(braid::parseConfig(userConfig, caller, &config));
  if ((content.flags & braid::kRootAtRank0) && rank == 0) {
    braid::UniqueIdContent started;
    BRAID_CHECK(braid::startRoot(&content.root, content.secret, &started));
  }
  int dev = currentDevice();
  ncclComm* comm = newComm(config);
  comm->rank = rank;  // before the init thread starts: other threads may read them meanwhile
  comm->nRanks = nranks;
  comm->cudaDev = dev;
  ncclResult_t rc = launchInit(comm, [comm, nranks, id, rank, dev]() {
    if (dev >= 0 && cudaSetDevice(dev) != cudaSuccess)
      return fail(ncclUnhandledCudaError, "ncclCommInitRank (rank %d): cudaSetDevice(%d) failed", rank, dev);
    BRAID_CHECK(braid::initRankSync(comm, nranks, id, rank, dev));
    return braid::api::createResources(comm);
  });
  return finishInit(comm, out, rc);
}

// Split and shrink: `decide` runs inside the init job (so that grouped splits of several ranks
// on one thread don't deadlock) and returns the members (parent ranks in child-rank order).
ncclResult_t initChild(ncclComm* parent, bool participates, uint64_t salt,
                       std::function<ncclResult_t(std::vector<int>*)> decide, ncclComm_t* out,
                       ncclConfig_t* userConfig, const char* caller) {
  ncclConfig_t config = parent->config;
  if (userConfig) BRAID_CHECK(braid::parseConfig(userConfig, caller, &config));
  uint64_t secret = mixSecret(parent->bootstrap->secret(), salt);
  if (!participates) {
    // NCCL_SPLIT_NOCOLOR: take part in the exchange, get no communicator.
    auto job = [parent, decide, caller]() mutable {
      braid::CommUse use(parent, caller);  // the parent stays until the exchange is done
      BRAID_CHECK(use.result());
      std::vector<int> m;
      return decide(&m);
    };
    if (braid::api::inGroup()) {
      braid::api::deferInit(nullptr, job, parent->blocking);
      return ncclSuccess;
    }
    return job();
  }
  ncclComm* child = newComm(config);
  ncclResult_t rc = launchInit(child, [parent, child, secret, decide, caller]() {
    braid::CommUse use(parent, caller);  // the parent stays until the child is made
    BRAID_CHECK(use.result());
    if (parent->cudaDev >= 0 && cudaSetDevice(parent->cudaDev) != cudaSuccess)
      return fail(ncclUnhandledCudaError, "split: cudaSetDevice(%d) failed", parent->cudaDev);
    std::vector<int> members;
    BRAID_CHECK(decide(&members));
    int myIndex = static_cast<int>(std::find(members.begin(), members.end(), parent->rank) - members.begin());
    BRAID_CHECK(braid::initDerivedSync(parent, child, members, myIndex, secret));
    return braid::api::createResources(child);
  });
  return finishInit(child, out, rc);
}

// The GPU resources, made by the first device call (maybe on another thread). They stay until
// teardown, which waits for the caller's CommUse.
braid::DeviceResources* deviceOf(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(comm->deviceMutex);
  return comm->device.get();
}

// Holds the communicator for the rest of the calling scope (see braid::CommUse).
#define BRAID_USE(comm, caller)            \
  braid::CommUse use_((comm), (caller));   \
  BRAID_CHECK(use_.result())

}  // namespace

BRAID_API(ncclResult_t, ncclGetVersion, int* version) {
  BRAID_FORWARD(ncclGetVersion, version);
  if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL. Fix: pass &version.");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  BRAID_FORWARD(ncclGetUniqueId, uniqueId);
  if (!uniqueId) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL. Fix: pass &id.");
  braid::UniqueIdContent content{};
  if (const char* fixed = braid::env::get("NCCL_COMM_ID")) {
    // Every process computes the same id; rank 0 starts the root at init (NCCL's behaviour).
    BRAID_CHECK(braid::parseHostPort(fixed, &content.root));
    content.secret = mixSecret(0x0280028002800280ull, std::hash<std::string>{}(fixed));
    content.flags = braid::kRootAtRank0;
  } else {
    BRAID_CHECK(braid::startRoot(nullptr, braid::randomSecret(), &content));
  }
  *uniqueId = braid::encodeUniqueId(content);
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  BRAID_FORWARD(ncclCommInitRank, comm, nranks, commId, rank);
  return initRank("ncclCommInitRank", comm, nranks, commId, rank, nullptr);
}

BRAID_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
          ncclConfig_t* config) {
  BRAID_FORWARD(ncclCommInitRankConfig, comm, nranks, commId, rank, config);
  return initRank("ncclCommInitRankConfig", comm, nranks, commId, rank, config);
}

BRAID_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
          ncclUniqueId* commIds, ncclConfig_t* config) {
  BRAID_FORWARD(ncclCommInitRankScalable, newcomm, nranks, myrank, nId, commIds, config);
  if (nId <= 0 || !commIds)
    return fail(ncclInvalidArgument, "ncclCommInitRankScalable: nId = %d, commIds = %p. Fix: pass at least one id.",
                nId, static_cast<void*>(commIds));
  // One root serves all ranks here (its rendezvous is O(n)); the other ids are accepted and
  // left unused.
  return initRank("ncclCommInitRankScalable", newcomm, nranks, commIds[0], myrank, config);
}

BRAID_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  BRAID_FORWARD(ncclCommInitAll, comms, ndev, devlist);
  if (!comms) return fail(ncclInvalidArgument, "ncclCommInitAll: comms is NULL. Fix: pass an array of ndev comms.");
  if (ndev <= 0) return fail(ncclInvalidArgument, "ncclCommInitAll: ndev = %d must be positive.", ndev);
  int nGpus = 0;
  if (cudaGetDeviceCount(&nGpus) != cudaSuccess) {
    cudaGetLastError();
    nGpus = 0;
  }
  std::vector<int> devs(ndev);
  for (int i = 0; i < ndev; ++i) {
    devs[i] = devlist ? devlist[i] : (nGpus > 0 ? i % nGpus : -1);
    if (devlist && (devs[i] < 0 || devs[i] >= nGpus))
      return fail(ncclInvalidArgument, "ncclCommInitAll: devlist[%d] = %d is not a CUDA device (this process sees %d). "
                  "Fix: pass device ordinals, or a NULL devlist for host-only ranks on a machine without GPUs.",
                  i, devs[i], nGpus);
  }
  ncclUniqueId id;
  BRAID_CHECK(pncclGetUniqueId(&id));
  std::vector<ncclResult_t> results(ndev, ncclSuccess);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    threads.emplace_back([&, i] {
      if (devs[i] >= 0 && cudaSetDevice(devs[i]) != cudaSuccess) {
        results[i] = fail(ncclUnhandledCudaError, "ncclCommInitAll: cudaSetDevice(%d) failed", devs[i]);
        return;
      }
      if (devs[i] < 0) cudaGetLastError();
      results[i] = initRank("ncclCommInitAll", &comms[i], ndev, id, i, nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < ndev; ++i)
    if (results[i] != ncclSuccess) {
      for (int j = 0; j < ndev; ++j)
        if (comms[j]) { (void)closeComm(comms[j], /*abort=*/true, "ncclCommInitAll"); comms[j] = nullptr; }
      return results[i];
    }
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  BRAID_FORWARD(ncclCommSplit, comm, color, key, newcomm, config);
  if (braid::api::realServing(comm)) {
    using SplitFn = decltype(&pncclCommSplit);
    return braid::api::deriveReal(comm, "ncclCommSplit", config, [&](const braid::fallback::RealComm& parent,
                                  ncclConfig_t* realConfig, ncclComm_t* child) {
      auto split = parent.fn<SplitFn>("pncclCommSplit");
      return split ? split(parent.handle(), color, key, child, realConfig) : ncclInvalidUsage;
    }, newcomm);
  }
  BRAID_USE(comm, "ncclCommSplit");
  if (!newcomm) return fail(ncclInvalidArgument, "ncclCommSplit (rank %d): newcomm is NULL.", comm->rank);
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return fail(ncclInvalidArgument, "ncclCommSplit (rank %d): color = %d is negative. Fix: use a color >= 0, or "
                "NCCL_SPLIT_NOCOLOR to opt out.", comm->rank, color);
  auto s = comm->state.load();
  if (s != ncclComm::State::Ready && s != ncclComm::State::Revoked) BRAID_CHECK(braid::checkCommReady(comm, "ncclCommSplit"));
  *newcomm = nullptr;
  uint64_t salt = (++comm->childCount << 32) ^ static_cast<uint32_t>(color);
  int myRank = comm->rank, nRanks = comm->nRanks;
  auto decide = [comm, color, key, myRank, nRanks](std::vector<int>* members) {
    struct Entry { int color, key, rank; };
    std::vector<Entry> all(nRanks);
    all[myRank] = {color, key, myRank};
    BRAID_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Entry)));
    std::vector<Entry> group;
    for (const Entry& e : all)
      if (e.color == color) group.push_back(e);
    std::stable_sort(group.begin(), group.end(),
                     [](const Entry& a, const Entry& b) { return std::tie(a.key, a.rank) < std::tie(b.key, b.rank); });
    members->clear();
    for (const Entry& e : group) members->push_back(e.rank);
    return ncclSuccess;
  };
  return initChild(comm, color != NCCL_SPLIT_NOCOLOR, salt, decide, newcomm, config, "ncclCommSplit");
}

BRAID_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
          ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  BRAID_FORWARD(ncclCommShrink, comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  if (braid::api::realServing(comm)) {
    using ShrinkFn = decltype(&pncclCommShrink);
    return braid::api::deriveReal(comm, "ncclCommShrink", config, [&](const braid::fallback::RealComm& parent,
                                  ncclConfig_t* realConfig, ncclComm_t* child) {
      auto shrink = parent.fn<ShrinkFn>("pncclCommShrink");
      return shrink ? shrink(parent.handle(), excludeRanksList, excludeRanksCount, child, realConfig, shrinkFlags)
                    : ncclInvalidUsage;
    }, newcomm);
  }
  BRAID_USE(comm, "ncclCommShrink");
  if (!newcomm) return fail(ncclInvalidArgument, "ncclCommShrink (rank %d): newcomm is NULL.", comm->rank);
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return fail(ncclInvalidArgument, "ncclCommShrink (rank %d): shrinkFlags = %d; allowed NCCL_SHRINK_DEFAULT or "
                "NCCL_SHRINK_ABORT.", comm->rank, shrinkFlags);
  if (excludeRanksCount < 0 || excludeRanksCount >= comm->nRanks || (excludeRanksCount > 0 && !excludeRanksList))
    return fail(ncclInvalidArgument, "ncclCommShrink (rank %d): excludeRanksCount = %d with list %p. Fix: a list of "
                "0..nranks-1 entries.", comm->rank, excludeRanksCount, static_cast<void*>(excludeRanksList));
  std::vector<bool> excluded(comm->nRanks, false);
  for (int i = 0; i < excludeRanksCount; ++i) {
    int r = excludeRanksList[i];
    if (r < 0 || r >= comm->nRanks)
      return fail(ncclInvalidArgument, "ncclCommShrink (rank %d): excludeRanksList[%d] = %d is out of range 0..%d.",
                  comm->rank, i, r, comm->nRanks - 1);
    excluded[r] = true;
  }
  if (excluded[comm->rank])
    return fail(ncclInvalidArgument, "ncclCommShrink (rank %d): this rank is in the exclude list. Fix: excluded "
                "ranks must not call ncclCommShrink.", comm->rank);
  *newcomm = nullptr;
  std::vector<int> members;
  for (int r = 0; r < comm->nRanks; ++r)
    if (!excluded[r]) members.push_back(r);
  uint64_t salt = ++comm->childCount;
  auto decide = [members](std::vector<int>* out) {
    *out = members;
    return ncclSuccess;
  };
  return initChild(comm, true, salt, decide, newcomm, config, "ncclCommShrink");
}

BRAID_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  BRAID_FORWARD(ncclCommFinalize, comm);
  if (auto real = braid::api::realServing(comm)) {  // the real one's finalize, its answer; braid's state follows
    BRAID_USE(comm, "ncclCommFinalize");
    ncclResult_t rc = real->finalize();
    if (rc != ncclSuccess && rc != ncclInProgress) return braid::api::noteRealFailure("ncclCommFinalize", comm, *real, rc);
    comm->state.store(ncclComm::State::Finalized);
    return rc;
  }
  BRAID_USE(comm, "ncclCommFinalize");
  auto s = comm->state.load();
  if (s == ncclComm::State::Finalized)
    return fail(ncclInvalidArgument, "ncclCommFinalize (rank %d): the communicator is already finalized.", comm->rank);
  if (s == ncclComm::State::Revoked)
    return fail(ncclInvalidUsage, "ncclCommFinalize (rank %d): the communicator was revoked; destroy it instead.", comm->rank);
  BRAID_CHECK(braid::checkCommReady(comm, "ncclCommFinalize"));
  ncclResult_t shadowRc = braid::api::drainShadow(comm, "ncclCommFinalize");  // the last checks, read
  BRAID_CHECK(braid::api::finalizeRealComm(comm));
  comm->state.store(ncclComm::State::Finalized);
  return shadowRc;
}

BRAID_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  BRAID_FORWARD(ncclCommDestroy, comm);
  if (!comm) return ncclSuccess;
  return closeComm(comm, /*abort=*/false, "ncclCommDestroy");
}

BRAID_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  BRAID_FORWARD(ncclCommAbort, comm);
  if (auto real = braid::api::realServing(comm)) {
    // The real NCCL serves it: its abort first, so that a call blocked inside the real NCCL on
    // another thread returns before braid's teardown waits for the calls in flight.
    ncclResult_t aborted = real->abort();
    if (aborted != ncclSuccess) aborted = braid::api::noteRealFailure("ncclCommAbort", comm, *real, aborted);
    ncclResult_t rc = closeComm(comm, /*abort=*/true, "ncclCommAbort");
    return aborted != ncclSuccess ? aborted : rc;
  }
  if (!comm) return ncclSuccess;
  return closeComm(comm, /*abort=*/true, "ncclCommAbort");
}

BRAID_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  BRAID_FORWARD(ncclCommRevoke, comm, revokeFlags);
  BRAID_REAL_SERVES_NOW(ncclCommRevoke, comm, comm, revokeFlags);
  BRAID_USE(comm, "ncclCommRevoke");
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return fail(ncclInvalidArgument, "ncclCommRevoke (rank %d): revokeFlags = %d; only NCCL_REVOKE_DEFAULT (0) is "
                "allowed.", comm->rank, revokeFlags);
  BRAID_CHECK(braid::checkCommReady(comm, "ncclCommRevoke"));
  comm->state.store(ncclComm::State::Revoked);
  // In-flight kernels stop at the abort word; the FIFOs are then in no known state, so the
  // communicator keeps only destroy, split and shrink (its children get fresh connections).
  if (braid::DeviceResources* device = deviceOf(comm)) device->stopInFlight();
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  BRAID_FORWARD(ncclCommCount, comm, count);
  BRAID_REAL_SERVES_NOW(ncclCommCount, comm, comm, count);
  BRAID_USE(comm, "ncclCommCount");
  if (!count) return fail(ncclInvalidArgument, "ncclCommCount: count is NULL.");
  if (comm->state.load() == ncclComm::State::Initializing) BRAID_CHECK(braid::checkCommReady(comm, "ncclCommCount"));
  *count = comm->nRanks;
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  BRAID_FORWARD(ncclCommCuDevice, comm, device);
  BRAID_REAL_SERVES_NOW(ncclCommCuDevice, comm, comm, device);
  BRAID_USE(comm, "ncclCommCuDevice");
  if (!device) return fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL.");
  if (comm->state.load() == ncclComm::State::Initializing) BRAID_CHECK(braid::checkCommReady(comm, "ncclCommCuDevice"));
  *device = comm->cudaDev;
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  BRAID_FORWARD(ncclCommUserRank, comm, rank);
  BRAID_REAL_SERVES_NOW(ncclCommUserRank, comm, comm, rank);
  BRAID_USE(comm, "ncclCommUserRank");
  if (!rank) return fail(ncclInvalidArgument, "ncclCommUserRank: rank is NULL.");
  if (comm->state.load() == ncclComm::State::Initializing) BRAID_CHECK(braid::checkCommReady(comm, "ncclCommUserRank"));
  *rank = comm->rank;
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  BRAID_FORWARD(ncclCommGetAsyncError, comm, asyncError);
  BRAID_REAL_SERVES_NOW(ncclCommGetAsyncError, comm, comm, asyncError);
  BRAID_USE(comm, "ncclCommGetAsyncError");
  if (!asyncError) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL.");
  ncclResult_t rc = comm->asyncError.load();
  if (braid::DeviceResources* device = deviceOf(comm); rc == ncclSuccess && device) {
    // Kernels report through a host-mapped word (an abort, or work they could not run).
    rc = device->asyncError();
  }
  if (rc == ncclSuccess) {
    rc = braid::api::deviceAsyncError(comm);  // a fault on the device's streams: it stays
    if (rc != ncclSuccess) comm->asyncError.store(rc);
  }
  if (rc == ncclSuccess) rc = braid::api::realAsyncError(comm);  // the real communicator's, if any
  *asyncError = rc;
  return ncclSuccess;
}

BRAID_API(const char*, ncclGetErrorString, ncclResult_t result) {
  BRAID_FORWARD(ncclGetErrorString, result);
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

BRAID_API(const char*, ncclGetLastError, ncclComm_t comm) {
  BRAID_FORWARD(ncclGetLastError, comm);
  BRAID_REAL_SERVES_NOW(ncclGetLastError, comm, comm);
  // A failed communicator names its own failure (a dead peer, a mismatch), which may have been
  // found on another thread; otherwise the process's last error, as NCCL keeps it.
  if (comm && braid::isLiveComm(comm)) {
    braid::CommUse use(comm, "ncclGetLastError");
    if (use.result() == ncclSuccess && comm->state.load() == ncclComm::State::Failed) {
      static thread_local std::string text;
      text = braid::commFailureText(comm);
      if (!text.empty()) return text.c_str();
    }
  }
  return braid::lastError();
}
