#include "api/group.h"

#include <thread>
#include <utility>

#include "api/export.h"
#include "api/fallback_route.h"
#include "api/forward.h"
#include "core/comm.h"
#include "core/log.h"

namespace braid::api {
namespace {

struct DeferredInit {
  ncclComm* comm;
  std::function<ncclResult_t()> job;
  bool blocking;
};

struct GroupState {
  int depth = 0;
  ncclResult_t error = ncclSuccess;
  std::vector<Task> tasks;
  std::vector<DeferredInit> inits;
};
thread_local GroupState tls;

// All deferred inits at once: each blocks until its peers arrive, and the peers may be
// other ranks of this very group.
ncclResult_t runInits(std::vector<DeferredInit>& inits) {
  if (inits.empty()) return ncclSuccess;
  std::vector<ncclResult_t> results(inits.size(), ncclSuccess);
  std::vector<std::thread> threads;
  bool anyBlocking = false;
  for (size_t i = 0; i < inits.size(); ++i) {
    if (inits[i].blocking) anyBlocking = true;
    threads.emplace_back([&, i] { results[i] = inits[i].job(); });
  }
  if (!anyBlocking) {
    // Non-blocking comms: the inits finish in the background, ncclCommGetAsyncError reports.
    for (size_t i = 0; i < threads.size(); ++i) {
      if (inits[i].comm) inits[i].comm->initThread = std::move(threads[i]);
      else threads[i].detach();
    }
    return ncclInProgress;
  }
  for (auto& t : threads) t.join();
  for (ncclResult_t r : results)
    if (r != ncclSuccess) return r;
  return ncclSuccess;
}

}  // namespace

bool inGroup() { return tls.depth > 0; }

ncclResult_t noteGroupError(ncclResult_t rc) {
  if (rc != ncclSuccess && rc != ncclInProgress && tls.depth > 0 && tls.error == ncclSuccess) tls.error = rc;
  return rc;
}

ncclResult_t submit(Task task) {
  if (tls.depth > 0) {
    tls.tasks.push_back(task);
    return ncclSuccess;
  }
  return executeTasks(std::span<Task>(&task, 1), nullptr);
}

void deferInit(ncclComm* comm, std::function<ncclResult_t()> job, bool blocking) {
  tls.inits.push_back({comm, std::move(job), blocking});
}

ncclResult_t groupStart() {
  ++tls.depth;
  return ncclSuccess;
}

ncclResult_t groupEnd(ncclSimInfo_t* simInfo) {
  if (tls.depth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd: not inside a group (no matching ncclGroupStart).");
  if (--tls.depth > 0) return ncclSuccess;
  GroupState state = std::move(tls);
  tls = GroupState{};
  // braid's half of the group first, then the real NCCL's (the calls braid lacks, made in
  // this group on real communicators): each half keeps NCCL's group semantics.
  ncclResult_t rc = state.error;  // an enqueue failed: nothing of braid's half runs
  if (rc == ncclSuccess) rc = runInits(state.inits);
  ncclResult_t rcTasks = ncclSuccess;
  if ((rc == ncclSuccess || rc == ncclInProgress) && !state.tasks.empty()) rcTasks = executeTasks(state.tasks, simInfo);
  ncclResult_t rcReal = closeRealGroup();
  if (rc != ncclSuccess && rc != ncclInProgress) return rc;
  if (rcTasks != ncclSuccess) return rcTasks;
  return rcReal != ncclSuccess ? rcReal : rc;
}

}  // namespace braid::api

BRAID_API(ncclResult_t, ncclGroupStart) {
  BRAID_FORWARD(ncclGroupStart);
  return braid::api::groupStart();
}
BRAID_API(ncclResult_t, ncclGroupEnd) {
  BRAID_FORWARD(ncclGroupEnd);
  return braid::api::groupEnd(nullptr);
}
BRAID_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  BRAID_FORWARD(ncclGroupSimulateEnd, simInfo);
  if (!simInfo)
    return braid::fail(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo is NULL. Fix: pass an ncclSimInfo_t "
                                            "initialized with NCCL_SIM_INFO_INITIALIZER.");
  if (simInfo->magic != 0x74685283)
    return braid::fail(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo->magic is 0x%x, not 0x74685283. Fix: "
                       "initialize it with NCCL_SIM_INFO_INITIALIZER.", simInfo->magic);
  return braid::api::groupEnd(simInfo);
}
