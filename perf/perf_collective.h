// One collective call through the public NCCL API, and the reduction op to pass to it.
#pragma once
#include <cuda_runtime.h>

#include "nccl.h"
#include "tests/common/reference.h"

namespace braid::perf {

struct CallArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // the NCCL count argument (CallShape::count)
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  int rank = 0;
  int nRanks = 1;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// Enqueues the collective. SendRecv is a ring: send to rank+1, receive from rank-1, in one group.
ncclResult_t launchCollective(check::Collective coll, const CallArgs& args);

// The ncclRedOp_t for an op; PreMulSum is created on `comm` with the scalar 2 in `type` and
// destroyed with the object.
class ReduceOpHandle {
 public:
  ReduceOpHandle(check::ReduceOp op, ncclDataType_t type, ncclComm_t comm);
  ~ReduceOpHandle();
  ReduceOpHandle(const ReduceOpHandle&) = delete;
  ReduceOpHandle& operator=(const ReduceOpHandle&) = delete;
  ncclRedOp_t get() const { return op_; }
  static constexpr double kPreMulScalar = 2.0;  // exact in every type

 private:
  ncclRedOp_t op_ = ncclSum;
  ncclComm_t comm_ = nullptr;  // set when op_ was created here
};

}  // namespace braid::perf
