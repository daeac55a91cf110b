// Builds without the GPU executor (BRAID_ENABLE_CUDA=OFF): device buffers get a clear error.
#include <span>

#include "api/task.h"
#include "core/comm.h"
#include "core/log.h"

namespace braid::api {

ncclResult_t runDeviceTasks(std::span<const Task* const> tasks) {
  const Task& t = *tasks.front();
  return fail(ncclInvalidUsage,
              "%s (rank %d): device-memory collectives need braid's GPU executor, which this build lacks. Fix: use "
              "host buffers, or a build with BRAID_ENABLE_CUDA=ON.",
              t.caller, t.comm->rank);
}

}  // namespace braid::api
