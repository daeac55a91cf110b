// NCCL group semantics: ncclGroupStart/End aggregate collectives, send/recv pairs and
// communicator inits issued by this thread; groups nest; one group may span communicators.
#pragma once
#include <functional>
#include <span>
#include <vector>

#include "api/task.h"
#include "nccl.h"

namespace braid::api {

bool inGroup();
// Outside a group, runs the task at once (a group of one); inside, queues it.
ncclResult_t submit(Task task);
// Inits inside a group run in parallel at ncclGroupEnd (several ranks on one thread).
// `comm` (may be null) is handed the thread when the init is non-blocking.
void deferInit(ncclComm* comm, std::function<ncclResult_t()> job, bool blocking);
// Records the first error of the current group; ncclGroupEnd returns it.
ncclResult_t noteGroupError(ncclResult_t rc);

ncclResult_t groupStart();
ncclResult_t groupEnd(ncclSimInfo_t* simInfo);

// Runs one group's tasks: host-memory work on the CPU engine, device work on streams.
ncclResult_t executeTasks(std::span<Task> tasks, ncclSimInfo_t* simInfo);

}  // namespace braid::api
