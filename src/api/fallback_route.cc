#include "api/fallback_route.h"

#include <cuda_runtime.h>

#include <mutex>
#include <set>
#include <string>

#include "api/group.h"
#include "api/real_served.h"
#include "core/cuda_scope.h"

namespace braid::api {
namespace {

using GroupFn = ncclResult_t (*)();

// This thread's real group: opened by its first real call inside a braid group.
thread_local const fallback::RealNccl* tlsRealGroup = nullptr;

}  // namespace

void noteRoute(const char* pname, fallback::Route route) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (!said.insert(pname).second) return;
  const char* where = route == fallback::Route::Real ? "the real NCCL" : "braid";
  BRAID_INFO(kInit, "%s: served by %s: %s", pname + 1, where,
             fallback::routeReason(fallback::backend(), /*braidImplements=*/false));
}

ncclResult_t realCommOf(ncclComm* comm, const char* caller, fallback::RealComm** out) {
  std::lock_guard<std::mutex> lock(comm->realMutex);
  if (comm->real) {
    *out = comm->real.get();
    return ncclSuccess;
  }
  BRAID_CHECK(checkCommReady(comm, caller));
  // Several ranks of this process driven from one thread inside a group cannot meet in a
  // collective creation: each would wait for the others on the same thread.
  if (inGroup() && fallback::sharesProcess(comm->peers, comm->rank))
    return fail(ncclInvalidUsage, "%s (rank %d): its real NCCL communicator does not exist yet and must be made by "
                "every rank together, which ranks of one process cannot do from inside a group (one thread may "
                "drive several of them). Fix: make the first such call outside the group, each rank on its own "
                "thread", caller, comm->rank);
  braid::DeviceScope device(comm->cudaDev);  // the real init uses the current device; put back after
  if (device.error() != cudaSuccess)
    return fail(ncclUnhandledCudaError, "%s (rank %d): cudaSetDevice(%d) before making the real NCCL communicator "
                "failed: %s", caller, comm->rank, comm->cudaDev, cudaGetErrorString(device.error()));
  BRAID_INFO(kInit, "%s (rank %d): this communicator has no real NCCL communicator yet: making one now (collective)",
             caller, comm->rank);
  BRAID_CHECK(fallback::RealComm::create(comm, caller, &comm->real));
  *out = comm->real.get();
  return ncclSuccess;
}

ncclResult_t joinRealGroup(const fallback::RealNccl& lib) {
  if (!inGroup() || tlsRealGroup != nullptr) return ncclSuccess;
  auto start = reinterpret_cast<GroupFn>(lib.symbol("pncclGroupStart"));
  ncclResult_t rc = start ? start() : ncclInvalidUsage;
  if (rc != ncclSuccess)
    return fail(rc, "ncclGroupStart: opening the real group in %s returned %d: %s", fallback::describe(lib).c_str(),
                static_cast<int>(rc), fallback::realLastError(lib, nullptr).c_str());
  tlsRealGroup = &lib;
  return ncclSuccess;
}

ncclResult_t closeRealGroup() {
  const fallback::RealNccl* lib = tlsRealGroup;
  if (lib == nullptr) return ncclSuccess;
  tlsRealGroup = nullptr;
  auto end = reinterpret_cast<GroupFn>(lib->symbol("pncclGroupEnd"));
  ncclResult_t rc = end ? end() : ncclInvalidUsage;
  if (rc != ncclSuccess && rc != ncclInProgress)
    return fail(rc, "ncclGroupEnd: the real half of the group, in %s, returned %d: %s", fallback::describe(*lib).c_str(),
                static_cast<int>(rc), fallback::realLastError(*lib, nullptr).c_str());
  return rc;
}

ncclResult_t finalizeRealComm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(comm->realMutex);
  if (!comm->real) return ncclSuccess;
  ncclResult_t rc = comm->real->finalize();
  if (rc != ncclSuccess && rc != ncclInProgress)
    return fail(rc, "ncclCommFinalize (rank %d): finalizing its real communicator in %s returned %d: %s", comm->rank,
                fallback::describe(comm->real->lib()).c_str(), static_cast<int>(rc), comm->real->lastError().c_str());
  return ncclSuccess;
}

ncclResult_t closeRealComm(ncclComm* comm, bool abort) {
  std::shared_ptr<fallback::RealComm> real;
  {
    std::lock_guard<std::mutex> lock(comm->realMutex);
    real = std::move(comm->real);
  }
  if (!real) return ncclSuccess;
  forgetRealServed(comm);
  ncclResult_t rc = abort ? real->abort() : real->destroy();
  if (rc != ncclSuccess)
    return fail(rc, "%s (rank %d): %s of its real communicator in %s returned %d: %s",
                abort ? "ncclCommAbort" : "ncclCommDestroy", comm->rank, abort ? "the abort" : "the destroy",
                fallback::describe(real->lib()).c_str(), static_cast<int>(rc), real->lastError().c_str());
  return ncclSuccess;
}

ncclResult_t realAsyncError(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(comm->realMutex);
  if (!comm->real) return ncclSuccess;
  ncclResult_t async = ncclSuccess;
  ncclResult_t rc = comm->real->asyncError(&async);
  if (rc != ncclSuccess) return rc;
  if (async == ncclInProgress) return ncclSuccess;  // blocking: only while an op is queued
  if (async != ncclSuccess)
    (void)fail(async, "rank %d: its real NCCL communicator (%s) reports %d: %s", comm->rank,
               fallback::describe(comm->real->lib()).c_str(), static_cast<int>(async), comm->real->lastError().c_str());
  return async;
}

}  // namespace braid::api
