// Memory and registration entry points. braid needs no registration for correctness: it
// records registrations so that deregistration is checked, and reports windows as
// unsupported (NULL), as NCCL does without symmetric-memory support.
#include <cuda_runtime.h>

#include <set>

#include "api/export.h"
#include "api/forward.h"
#include "api/real_served.h"
#include "core/comm.h"
#include "core/log.h"

using braid::fail;

namespace {
struct Registration {
  ncclComm* comm;
  void* buff;
  size_t size;
};
std::mutex gRegMutex;
std::set<Registration*> gRegistrations;
}  // namespace

BRAID_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  BRAID_FORWARD(ncclMemAlloc, ptr, size);
  if (!ptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL.");
  if (size == 0) return fail(ncclInvalidArgument, "ncclMemAlloc: size is 0.");
  cudaError_t err = cudaMalloc(ptr, size);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return fail(ncclUnhandledCudaError, "ncclMemAlloc: cudaMalloc(%zu) failed: %s", size, cudaGetErrorString(err));
  }
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclMemFree, void* ptr) {
  BRAID_FORWARD(ncclMemFree, ptr);
  if (!ptr) return ncclSuccess;
  cudaError_t err = cudaFree(ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return fail(ncclUnhandledCudaError, "ncclMemFree(%p): cudaFree failed: %s", ptr, cudaGetErrorString(err));
  }
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  BRAID_FORWARD(ncclCommRegister, comm, buff, size, handle);
  BRAID_REAL_SERVES_NOW(ncclCommRegister, comm, comm, buff, size, handle);
  braid::CommUse use_(comm, "ncclCommRegister");
  BRAID_CHECK(use_.result());
  BRAID_CHECK(braid::checkCommReady(comm, "ncclCommRegister"));
  if (!handle) return fail(ncclInvalidArgument, "ncclCommRegister (rank %d): handle is NULL.", comm->rank);
  if (!buff || size == 0)
    return fail(ncclInvalidArgument, "ncclCommRegister (rank %d): buff %p size %zu: nothing to register.", comm->rank,
                buff, size);
  auto* reg = new Registration{comm, buff, size};
  std::lock_guard<std::mutex> lock(gRegMutex);
  gRegistrations.insert(reg);
  *handle = reg;
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  BRAID_FORWARD(ncclCommDeregister, comm, handle);
  BRAID_REAL_SERVES_NOW(ncclCommDeregister, comm, comm, handle);
  braid::CommUse use_(comm, "ncclCommDeregister");
  BRAID_CHECK(use_.result());
  BRAID_CHECK(braid::checkCommReady(comm, "ncclCommDeregister"));
  std::lock_guard<std::mutex> lock(gRegMutex);
  auto* reg = static_cast<Registration*>(handle);
  if (!gRegistrations.count(reg) || reg->comm != comm)
    return fail(ncclInvalidUsage, "ncclCommDeregister (rank %d): handle %p is not a registration of this "
                "communicator.", comm->rank, handle);
  gRegistrations.erase(reg);
  delete reg;
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
          int winFlags) {
  BRAID_FORWARD(ncclCommWindowRegister, comm, buff, size, win, winFlags);
  BRAID_REAL_SERVES_NOW(ncclCommWindowRegister, comm, comm, buff, size, win, winFlags);
  braid::CommUse use_(comm, "ncclCommWindowRegister");
  BRAID_CHECK(use_.result());
  BRAID_CHECK(braid::checkCommReady(comm, "ncclCommWindowRegister"));
  (void)buff;
  (void)size;
  (void)winFlags;
  if (!win) return fail(ncclInvalidArgument, "ncclCommWindowRegister (rank %d): win is NULL.", comm->rank);
  *win = nullptr;  // no symmetric windows: callers fall back to regular buffers
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  BRAID_FORWARD(ncclCommWindowDeregister, comm, win);
  BRAID_REAL_SERVES_NOW(ncclCommWindowDeregister, comm, comm, win);
  braid::CommUse use_(comm, "ncclCommWindowDeregister");
  BRAID_CHECK(use_.result());
  BRAID_CHECK(braid::checkCommReady(comm, "ncclCommWindowDeregister"));
  if (win)
    return fail(ncclInvalidUsage, "ncclCommWindowDeregister (rank %d): window %p was not registered by braid.",
                comm->rank, static_cast<void*>(win));
  return ncclSuccess;
}
