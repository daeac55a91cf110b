#include "perf/perf_collective.h"

#include <cstdint>

#include "perf/perf_errors.h"

namespace braid::perf {

using check::Collective;
using check::ReduceOp;

ncclResult_t launchCollective(Collective coll, const CallArgs& a) {
  switch (coll) {
    case Collective::AllReduce: return ncclAllReduce(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
    case Collective::AllGather: return ncclAllGather(a.send, a.recv, a.count, a.type, a.comm, a.stream);
    case Collective::ReduceScatter: return ncclReduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
    case Collective::Broadcast: return ncclBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
    case Collective::Reduce: return ncclReduce(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm, a.stream);
    case Collective::AlltoAll: return ncclAlltoAll(a.send, a.recv, a.count, a.type, a.comm, a.stream);
    case Collective::Gather: return ncclGather(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
    case Collective::Scatter: return ncclScatter(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
    case Collective::SendRecv: {
      ncclResult_t result = ncclGroupStart();
      if (result != ncclSuccess) return result;
      ncclResult_t sent = ncclSend(a.send, a.count, a.type, (a.rank + 1) % a.nRanks, a.comm, a.stream);
      ncclResult_t received = ncclRecv(a.recv, a.count, a.type, (a.rank + a.nRanks - 1) % a.nRanks, a.comm, a.stream);
      result = ncclGroupEnd();  // always closes the group, even after a failed call inside it
      return sent != ncclSuccess ? sent : received != ncclSuccess ? received : result;
    }
  }
  return ncclInvalidArgument;
}

ReduceOpHandle::ReduceOpHandle(ReduceOp op, ncclDataType_t type, ncclComm_t comm) {
  switch (op) {
    case ReduceOp::Sum: case ReduceOp::None: op_ = ncclSum; break;
    case ReduceOp::Prod: op_ = ncclProd; break;
    case ReduceOp::Max: op_ = ncclMax; break;
    case ReduceOp::Min: op_ = ncclMin; break;
    case ReduceOp::Avg: op_ = ncclAvg; break;
    case ReduceOp::PreMulSum: {
      alignas(8) unsigned char scalar[8] = {};
      check::storeValue(type, kPreMulScalar, scalar);
      PERF_NCCL(ncclRedOpCreatePreMulSum(&op_, scalar, type, ncclScalarHostImmediate, comm));
      comm_ = comm;
      break;
    }
  }
}

ReduceOpHandle::~ReduceOpHandle() {
  if (comm_ != nullptr) (void)ncclRedOpDestroy(op_, comm_);  // nothing to do with an error here
}

}  // namespace braid::perf
