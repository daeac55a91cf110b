#include "api/redop.h"

#include <cuda_runtime.h>

#include <cstring>

#include "api/export.h"
#include "api/forward.h"
#include "api/real_served.h"
#include "core/comm.h"
#include "core/log.h"
#include "core/numeric.h"

using braid::fail;

namespace braid::api {

ncclResult_t hostOpFor(ncclComm* comm, ncclRedOp_t op, ncclDataType_t type, const char* caller, host::HostOp* out) {
  if (static_cast<int>(op) < ncclNumOps) {
    auto hop = host::makeHostOp(op, type, comm->nRanks);
    if (!hop) return fail(ncclInvalidArgument, "%s: op %d is not valid for type %s", caller, op, typeName(type));
    *out = *hop;
    return ncclSuccess;
  }
  BraidUserOp user;
  {
    std::lock_guard<std::mutex> lock(comm->userOpsMutex);
    size_t index = static_cast<size_t>(op) - ncclNumOps;
    if (index >= comm->userOps.size() || !comm->userOps[index].live)
      return fail(ncclInvalidArgument, "%s (rank %d): op %d was destroyed or never created.", caller, comm->rank, op);
    user = comm->userOps[index];
  }
  unsigned char scalar[8] = {};
  if (user.residence == ncclScalarHostImmediate) {
    std::memcpy(scalar, user.scalar, sizeof(scalar));
  } else if (cudaMemcpy(scalar, user.devScalar, sizeOfType(type), cudaMemcpyDefault) != cudaSuccess) {
    cudaError_t err = cudaGetLastError();
    return fail(ncclUnhandledCudaError, "%s (rank %d): cannot read the PreMulSum scalar at %p: %s", caller, comm->rank,
                user.devScalar, cudaGetErrorString(err));
  }
  auto hop = host::makePreMulSumOp(type, scalar, comm->nRanks);
  if (!hop) return fail(ncclInvalidArgument, "%s: PreMulSum is not valid for type %s", caller, typeName(type));
  *out = *hop;
  return ncclSuccess;
}

}  // namespace braid::api

BRAID_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
          ncclScalarResidence_t residence, ncclComm_t comm) {
  BRAID_FORWARD(ncclRedOpCreatePreMulSum, op, scalar, datatype, residence, comm);
  BRAID_REAL_SERVES_NOW(ncclRedOpCreatePreMulSum, comm, op, scalar, datatype, residence, comm);
  braid::CommUse use_(comm, "ncclRedOpCreatePreMulSum");
  BRAID_CHECK(use_.result());
  BRAID_CHECK(braid::checkCommReady(comm, "ncclRedOpCreatePreMulSum"));
  if (!op) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum (rank %d): op is NULL.", comm->rank);
  if (!scalar) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum (rank %d): scalar is NULL.", comm->rank);
  if (static_cast<int>(datatype) < 0 || datatype >= ncclNumTypes)
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum (rank %d): datatype = %d is invalid.", comm->rank,
                static_cast<int>(datatype));
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum (rank %d): residence = %d; use ncclScalarDevice or "
                "ncclScalarHostImmediate.", comm->rank, static_cast<int>(residence));
  BraidUserOp user;
  user.live = true;
  user.type = datatype;
  user.residence = residence;
  if (residence == ncclScalarHostImmediate) std::memcpy(user.scalar, scalar, braid::sizeOfType(datatype));
  else user.devScalar = scalar;
  std::lock_guard<std::mutex> lock(comm->userOpsMutex);
  size_t index = 0;
  while (index < comm->userOps.size() && comm->userOps[index].live) ++index;
  if (index == comm->userOps.size()) comm->userOps.push_back(user);
  else comm->userOps[index] = user;
  *op = static_cast<ncclRedOp_t>(ncclNumOps + index);
  return ncclSuccess;
}

BRAID_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  BRAID_FORWARD(ncclRedOpDestroy, op, comm);
  BRAID_REAL_SERVES_NOW(ncclRedOpDestroy, comm, op, comm);
  braid::CommUse use_(comm, "ncclRedOpDestroy");
  BRAID_CHECK(use_.result());
  BRAID_CHECK(braid::checkCommReady(comm, "ncclRedOpDestroy"));
  if (static_cast<int>(op) < ncclNumOps)
    return fail(ncclInvalidArgument, "ncclRedOpDestroy (rank %d): op %d is a built-in op; only ops from "
                "ncclRedOpCreatePreMulSum can be destroyed.", comm->rank, static_cast<int>(op));
  std::lock_guard<std::mutex> lock(comm->userOpsMutex);
  size_t index = static_cast<size_t>(op) - ncclNumOps;
  if (index >= comm->userOps.size() || !comm->userOps[index].live)
    return fail(ncclInvalidArgument, "ncclRedOpDestroy (rank %d): op %d was already destroyed or never created on "
                "this communicator.", comm->rank, static_cast<int>(op));
  comm->userOps[index].live = false;
  return ncclSuccess;
}
