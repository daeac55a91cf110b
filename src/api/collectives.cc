// The collective and point-to-point entry points: argument checks, then a Task for the group.
#include <cuda_runtime.h>

#include <cstdint>

#include "api/export.h"
#include "api/forward.h"
#include "api/group.h"
#include "api/memory_kind.h"
#include "api/real_served.h"
#include "api/shadow.h"
#include "api/task.h"
#include "core/comm.h"
#include "core/log.h"
#include "core/numeric.h"

using braid::fail;
using braid::algo::Coll;

namespace {

size_t typeSize(ncclDataType_t t) { return braid::sizeOfType(t); }

ncclResult_t checkType(const braid::api::Task& t) {
  int type = braid::dataTypeBits(t.type);  // any int from a C caller; not yet a valid enum value
  if (type < 0 || type >= ncclNumTypes)
    return fail(ncclInvalidArgument, "%s (rank %d): datatype = %d is not an NCCL data type. Fix: use ncclInt8 .. "
                "ncclFloat8e5m2 (0..%d).", t.caller, t.comm->rank, type, ncclNumTypes - 1);
  return ncclSuccess;
}

ncclResult_t checkOp(const braid::api::Task& t) {
  int op = static_cast<int>(t.op);
  if (op >= 0 && op < ncclNumOps) return ncclSuccess;
  if (op >= ncclNumOps) {
    std::lock_guard<std::mutex> lock(t.comm->userOpsMutex);
    size_t index = static_cast<size_t>(op - ncclNumOps);
    if (index < t.comm->userOps.size() && t.comm->userOps[index].live) {
      if (t.comm->userOps[index].type != t.type)
        return fail(ncclInvalidArgument, "%s (rank %d): op %d was created for %s but the call uses %s. Fix: create "
                    "the PreMulSum op with the call's datatype.", t.caller, t.comm->rank, op,
                    braid::typeName(t.comm->userOps[index].type), braid::typeName(t.type));
      return ncclSuccess;
    }
  }
  return fail(ncclInvalidArgument, "%s (rank %d): op = %d is neither a built-in op (ncclSum .. ncclAvg) nor a live "
              "op from ncclRedOpCreatePreMulSum on this communicator.", t.caller, t.comm->rank, op);
}

ncclResult_t checkRoot(const braid::api::Task& t, const char* what) {
  if (t.root < 0 || t.root >= t.comm->nRanks)
    return fail(ncclInvalidArgument, "%s (rank %d): %s = %d is out of range for a communicator of %d ranks. Fix: "
                "pass 0 <= %s < %d.", t.caller, t.comm->rank, what, t.root, t.comm->nRanks, what, t.comm->nRanks);
  return ncclSuccess;
}

// Null pointers where data must flow, host/device mixes, and buffers on another device.
ncclResult_t checkBuffers(braid::api::Task& t, bool needSend, bool needRecv, size_t sendElems, size_t recvElems) {
  size_t es = typeSize(t.type);
  // count x element size x ranks must not overflow (the buffer sizes below are products of them).
  if (t.count > (SIZE_MAX / 8) / static_cast<size_t>(t.comm->nRanks))
    return fail(ncclInvalidArgument, "%s (rank %d): count = %zu is too large: count x element size x %d ranks "
                "overflows. Fix: pass the number of elements of the buffer.", t.caller, t.comm->rank, t.count,
                t.comm->nRanks);
  if (needSend && sendElems > 0 && !t.sendbuff)
    return fail(ncclInvalidArgument, "%s (rank %d): sendbuff is NULL with count %zu. Fix: pass a buffer of %zu "
                "elements.", t.caller, t.comm->rank, t.count, sendElems);
  if (needRecv && recvElems > 0 && !t.recvbuff)
    return fail(ncclInvalidArgument, "%s (rank %d): recvbuff is NULL with count %zu. Fix: pass a buffer of %zu "
                "elements.", t.caller, t.comm->rank, t.count, recvElems);
  int sendDev = -1, recvDev = -1;
  auto sendKind = needSend && t.sendbuff ? braid::api::memoryKindOf(t.sendbuff, &sendDev) : braid::api::MemoryKind::Host;
  auto recvKind = needRecv && t.recvbuff ? braid::api::memoryKindOf(t.recvbuff, &recvDev) : braid::api::MemoryKind::Host;
  bool anySend = needSend && t.sendbuff && sendElems > 0, anyRecv = needRecv && t.recvbuff && recvElems > 0;
  if (anySend && anyRecv && sendKind != recvKind)
    return fail(ncclInvalidArgument, "%s (rank %d): sendbuff %p is %s memory but recvbuff %p is %s memory. Fix: use "
                "two device buffers or two host buffers.", t.caller, t.comm->rank, t.sendbuff,
                sendKind == braid::api::MemoryKind::Device ? "device" : "host", t.recvbuff,
                recvKind == braid::api::MemoryKind::Device ? "device" : "host");
  t.onDevice = (anySend && sendKind == braid::api::MemoryKind::Device) || (anyRecv && recvKind == braid::api::MemoryKind::Device);
  // The buffers hold what the count says (a huge count would read or write far past them).
  if (anySend) BRAID_CHECK(braid::api::checkExtent(t.caller, t.comm->rank, "sendbuff", t.sendbuff, sendElems * es, sendKind));
  if (anyRecv) BRAID_CHECK(braid::api::checkExtent(t.caller, t.comm->rank, "recvbuff", t.recvbuff, recvElems * es, recvKind));
  if (t.onDevice) {
    int dev = anySend ? sendDev : recvDev;
    if (dev != t.comm->cudaDev)
      return fail(ncclInvalidArgument, "%s (rank %d): the buffers are on CUDA device %d but the communicator's rank "
                  "is on device %d. Fix: allocate the buffers on device %d.", t.caller, t.comm->rank, dev,
                  t.comm->cudaDev, t.comm->cudaDev);
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (t.onDevice && t.stream && cudaStreamIsCapturing(t.stream, &capture) != cudaSuccess) cudaGetLastError();
  // Under capture only capture-safe calls are allowed: the stream's device was checked when
  // it was not capturing (the common case), so skip the check there.
  if (t.onDevice && t.stream && capture == cudaStreamCaptureStatusNone) {
    int streamDev = -1;
    if (cudaStreamGetDevice(t.stream, &streamDev) != cudaSuccess) {
      cudaGetLastError();
      return fail(ncclInvalidArgument, "%s (rank %d): stream %p is not a valid CUDA stream. Fix: pass a stream "
                  "created on device %d, or 0.", t.caller, t.comm->rank, static_cast<void*>(t.stream), t.comm->cudaDev);
    }
    if (streamDev != t.comm->cudaDev)
      return fail(ncclInvalidArgument, "%s (rank %d): the stream belongs to CUDA device %d but the rank is on device "
                  "%d. Fix: create the stream on device %d.", t.caller, t.comm->rank, streamDev, t.comm->cudaDev,
                  t.comm->cudaDev);
  }
  // Overlap other than NCCL's in-place forms gives undefined results: refuse it.
  if (anySend && anyRecv && t.sendbuff != t.recvbuff) {
    auto s0 = reinterpret_cast<uintptr_t>(t.sendbuff), r0 = reinterpret_cast<uintptr_t>(t.recvbuff);
    uintptr_t s1 = s0 + sendElems * es, r1 = r0 + recvElems * es;
    bool overlap = s0 < r1 && r0 < s1;
    bool inPlaceForm = false;
    int rank = t.comm->rank;
    if (t.coll == Coll::AllGather) inPlaceForm = s0 == r0 + rank * t.count * es;
    if (t.coll == Coll::ReduceScatter) inPlaceForm = r0 == s0 + rank * t.count * es;
    if (t.coll == Coll::Gather) inPlaceForm = s0 == r0 + t.root * t.count * es;
    if (t.coll == Coll::Scatter) inPlaceForm = r0 == s0 + t.root * t.count * es;
    if (overlap && !inPlaceForm)
      return fail(ncclInvalidArgument, "%s (rank %d): sendbuff [%p, +%zu B) and recvbuff [%p, +%zu B) overlap without "
                  "being NCCL's in-place form. Fix: use separate buffers, or the exact in-place layout.", t.caller,
                  rank, t.sendbuff, sendElems * es, t.recvbuff, recvElems * es);
  }
  return ncclSuccess;
}

ncclResult_t enqueue(braid::api::Task t) {
  const auto start = ncclComm::EnqueueTimes::Clock::now();
  // Held until the call returns: another thread's destroy or abort waits for it.
  braid::CommUse use(t.comm, t.caller);
  if (use.result() != ncclSuccess) return braid::api::noteGroupError(use.result());
  ncclResult_t rc = braid::checkCommReady(t.comm, t.caller);
  if (rc == ncclSuccess) rc = braid::api::pollShadow(t.comm, t.caller);  // earlier checks; STRICT fails here
  if (rc == ncclSuccess) rc = checkType(t);
  int n = rc == ncclSuccess ? t.comm->nRanks : 1;
  int rank = rc == ncclSuccess ? t.comm->rank : 0;
  if (rc == ncclSuccess) {
    size_t c = t.count;
    switch (t.coll) {
      case Coll::AllReduce: rc = checkOp(t); if (!rc) rc = checkBuffers(t, true, true, c, c); break;
      case Coll::Reduce:
        rc = checkOp(t);
        if (!rc) rc = checkRoot(t, "root");
        if (!rc) rc = checkBuffers(t, true, rank == t.root, c, rank == t.root ? c : 0);
        break;
      case Coll::Broadcast:
        rc = checkRoot(t, "root");
        if (!rc) rc = checkBuffers(t, rank == t.root, true, rank == t.root ? c : 0, c);
        break;
      case Coll::AllGather: rc = checkBuffers(t, true, true, c, c * n); break;
      case Coll::ReduceScatter: rc = checkOp(t); if (!rc) rc = checkBuffers(t, true, true, c * n, c); break;
      case Coll::AlltoAll: rc = checkBuffers(t, true, true, c * n, c * n); break;
      case Coll::Gather:
        rc = checkRoot(t, "root");
        if (!rc) rc = checkBuffers(t, true, rank == t.root, c, rank == t.root ? c * n : 0);
        break;
      case Coll::Scatter:
        rc = checkRoot(t, "root");
        if (!rc) rc = checkBuffers(t, rank == t.root, true, rank == t.root ? c * n : 0, c);
        break;
      case Coll::SendRecv:
        rc = checkRoot(t, "peer");
        if (!rc) rc = checkBuffers(t, t.isSend, !t.isSend, t.isSend ? c : 0, t.isSend ? 0 : c);
        break;
    }
  }
  if (rc != ncclSuccess) return braid::api::noteGroupError(rc);
  if (t.onDevice) {
    auto& times = t.comm->enqueueTimes;
    times.calls.fetch_add(1, std::memory_order_relaxed);
    times.add(times.checkNs, start);
  }
  return braid::api::noteGroupError(braid::api::submit(t));
}

braid::api::Task task(const char* caller, ncclComm_t comm, Coll coll, const void* send, void* recv, size_t count,
                      ncclDataType_t type, ncclRedOp_t op, int root, cudaStream_t stream) {
  braid::api::Task t;
  t.caller = caller;
  t.comm = comm;
  t.coll = coll;
  t.sendbuff = send;
  t.recvbuff = recv;
  t.count = count;
  t.type = type;
  t.op = op;
  t.root = root;
  t.stream = stream;
  return t;
}

}  // namespace

BRAID_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  BRAID_FORWARD(ncclAllReduce, sendbuff, recvbuff, count, datatype, op, comm, stream);
  BRAID_REAL_SERVES(ncclAllReduce, comm, sendbuff, recvbuff, count, datatype, op, comm, stream);
  return enqueue(task("ncclAllReduce", comm, Coll::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, stream));
}

BRAID_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  BRAID_FORWARD(ncclReduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  BRAID_REAL_SERVES(ncclReduce, comm, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  return enqueue(task("ncclReduce", comm, Coll::Reduce, sendbuff, recvbuff, count, datatype, op, root, stream));
}

BRAID_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, cudaStream_t stream) {
  BRAID_FORWARD(ncclBroadcast, sendbuff, recvbuff, count, datatype, root, comm, stream);
  BRAID_REAL_SERVES(ncclBroadcast, comm, sendbuff, recvbuff, count, datatype, root, comm, stream);
  return enqueue(task("ncclBroadcast", comm, Coll::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, stream));
}

BRAID_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
          cudaStream_t stream) {
  BRAID_FORWARD(ncclBcast, buff, count, datatype, root, comm, stream);
  BRAID_REAL_SERVES(ncclBcast, comm, buff, count, datatype, root, comm, stream);
  return enqueue(task("ncclBcast", comm, Coll::Broadcast, buff, buff, count, datatype, ncclSum, root, stream));
}

BRAID_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
          ncclComm_t comm, cudaStream_t stream) {
  BRAID_FORWARD(ncclAllGather, sendbuff, recvbuff, sendcount, datatype, comm, stream);
  BRAID_REAL_SERVES(ncclAllGather, comm, sendbuff, recvbuff, sendcount, datatype, comm, stream);
  return enqueue(task("ncclAllGather", comm, Coll::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, stream));
}

BRAID_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  BRAID_FORWARD(ncclReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
  BRAID_REAL_SERVES(ncclReduceScatter, comm, sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
  return enqueue(task("ncclReduceScatter", comm, Coll::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, stream));
}

BRAID_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclComm_t comm, cudaStream_t stream) {
  BRAID_FORWARD(ncclAlltoAll, sendbuff, recvbuff, count, datatype, comm, stream);
  BRAID_REAL_SERVES(ncclAlltoAll, comm, sendbuff, recvbuff, count, datatype, comm, stream);
  return enqueue(task("ncclAlltoAll", comm, Coll::AlltoAll, sendbuff, recvbuff, count, datatype, ncclSum, 0, stream));
}

BRAID_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, cudaStream_t stream) {
  BRAID_FORWARD(ncclGather, sendbuff, recvbuff, count, datatype, root, comm, stream);
  BRAID_REAL_SERVES(ncclGather, comm, sendbuff, recvbuff, count, datatype, root, comm, stream);
  return enqueue(task("ncclGather", comm, Coll::Gather, sendbuff, recvbuff, count, datatype, ncclSum, root, stream));
}

BRAID_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, cudaStream_t stream) {
  BRAID_FORWARD(ncclScatter, sendbuff, recvbuff, count, datatype, root, comm, stream);
  BRAID_REAL_SERVES(ncclScatter, comm, sendbuff, recvbuff, count, datatype, root, comm, stream);
  return enqueue(task("ncclScatter", comm, Coll::Scatter, sendbuff, recvbuff, count, datatype, ncclSum, root, stream));
}

BRAID_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
          ncclComm_t comm, cudaStream_t stream) {
  BRAID_FORWARD(ncclSend, sendbuff, count, datatype, peer, comm, stream);
  BRAID_REAL_SERVES(ncclSend, comm, sendbuff, count, datatype, peer, comm, stream);
  auto t = task("ncclSend", comm, Coll::SendRecv, sendbuff, nullptr, count, datatype, ncclSum, peer, stream);
  t.isSend = true;
  return enqueue(t);
}

BRAID_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
          cudaStream_t stream) {
  BRAID_FORWARD(ncclRecv, recvbuff, count, datatype, peer, comm, stream);
  BRAID_REAL_SERVES(ncclRecv, comm, recvbuff, count, datatype, peer, comm, stream);
  auto t = task("ncclRecv", comm, Coll::SendRecv, nullptr, recvbuff, count, datatype, ncclSum, peer, stream);
  t.isSend = false;
  return enqueue(t);
}
