// A stand-in NCCL for one rank and host memory, LD_PRELOADed under braid-perf by
// perf_fake_smoke.sh: it lets braid-perf's whole loop (placements, checks, table, JSON, exit
// status) run where no NCCL library works yet. With one rank every collective is a copy,
// except PreMulSum, which multiplies by its scalar. With FAKE_NCCL_CORRUPT=1 the first byte
// of every output is flipped, so that the test sees braid-perf report wrong results; with
// FAKE_NCCL_REFUSE_AVG=1 every call with ncclAvg returns ncclInvalidArgument.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "nccl.h"
#include "tests/common/narrow_float.h"
#include "tests/common/reference.h"

namespace {

using braid::check::typeSize;

constexpr int kMaxPreMulSums = 8;
struct PreMulSum {
  bool used = false;
  double scalar = 0;
};
PreMulSum gPreMulSums[kMaxPreMulSums];  // the op handle is ncclNumOps + index

struct PendingTransfer {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t bytes = 0;
};
PendingTransfer gTransfer;

thread_local const char* gLastError = "";

ncclResult_t fail(const char* why) {
  gLastError = why;
  return ncclInvalidArgument;
}

double loadAsDouble(ncclDataType_t type, const void* p) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, typeSize(type));
  switch (type) {
    case ncclInt8: return static_cast<int8_t>(bits);
    case ncclUint8: return static_cast<uint8_t>(bits);
    case ncclInt32: return static_cast<int32_t>(bits);
    case ncclUint32: return static_cast<uint32_t>(bits);
    case ncclInt64: return static_cast<double>(static_cast<int64_t>(bits));
    case ncclUint64: return static_cast<double>(bits);
    case ncclFloat16: return braid::check::halfBitsToDouble(static_cast<uint16_t>(bits));
    case ncclBfloat16: return braid::check::bf16BitsToDouble(static_cast<uint16_t>(bits));
    case ncclFloat8e4m3: return braid::check::fp8BitsToDouble(static_cast<uint8_t>(bits), true);
    case ncclFloat8e5m2: return braid::check::fp8BitsToDouble(static_cast<uint8_t>(bits), false);
    case ncclFloat32: {
      float f;
      std::memcpy(&f, p, sizeof f);
      return f;
    }
    case ncclFloat64: {
      double d;
      std::memcpy(&d, p, sizeof d);
      return d;
    }
    default: return 0;
  }
}

ncclResult_t finish(void* out, size_t bytes) {
  const char* corrupt = std::getenv("FAKE_NCCL_CORRUPT");
  if (corrupt && corrupt[0] == '1' && bytes > 0) static_cast<unsigned char*>(out)[0] ^= 0x5a;
  return ncclSuccess;
}

ncclResult_t copyResult(const void* in, void* out, size_t count, ncclDataType_t type) {
  size_t bytes = count * typeSize(type);
  if (bytes) std::memmove(out, in, bytes);
  return finish(out, bytes);
}

ncclResult_t reduceResult(const void* in, void* out, size_t count, ncclDataType_t type, ncclRedOp_t op) {
  const char* refuseAvg = std::getenv("FAKE_NCCL_REFUSE_AVG");
  if (op == ncclAvg && refuseAvg && refuseAvg[0] == '1') return fail("fake nccl: avg refused");
  int index = static_cast<int>(op) - static_cast<int>(ncclNumOps);
  if (index < 0) return copyResult(in, out, count, type);  // one rank: sum, prod, max, min, avg give x
  if (index >= kMaxPreMulSums || !gPreMulSums[index].used) return fail("fake nccl: unknown op");
  size_t size = typeSize(type);
  for (size_t i = 0; i < count; ++i) {
    double x = loadAsDouble(type, static_cast<const char*>(in) + i * size);
    braid::check::storeValue(type, x * gPreMulSums[index].scalar, static_cast<char*>(out) + i * size);
  }
  return finish(out, count * size);
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  if (nranks != 1 || rank != 0) return fail("fake nccl: one rank only");
  *comm = reinterpret_cast<ncclComm_t>(new int(0));
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete reinterpret_cast<int*>(comm);
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }
const char* ncclGetErrorString(ncclResult_t result) { return result == ncclSuccess ? "no error" : "fake nccl error"; }
const char* ncclGetLastError(ncclComm_t) { return gLastError; }

ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() {
  if (gTransfer.recv && gTransfer.send && gTransfer.bytes) std::memmove(gTransfer.recv, gTransfer.send, gTransfer.bytes);
  ncclResult_t result = gTransfer.recv ? finish(gTransfer.recv, gTransfer.bytes) : ncclSuccess;
  gTransfer = PendingTransfer{};
  return result;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type, ncclScalarResidence_t,
                                      ncclComm_t) {
  for (int i = 0; i < kMaxPreMulSums; ++i) {
    if (gPreMulSums[i].used) continue;
    gPreMulSums[i] = {true, loadAsDouble(type, scalar)};
    *op = static_cast<ncclRedOp_t>(ncclNumOps + i);
    return ncclSuccess;
  }
  return fail("fake nccl: too many ops");
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t) {
  int index = static_cast<int>(op) - static_cast<int>(ncclNumOps);
  if (index < 0 || index >= kMaxPreMulSums) return fail("fake nccl: bad op");
  gPreMulSums[index].used = false;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t,
                           cudaStream_t) {
  return reduceResult(s, r, n, t, op);
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t,
                               cudaStream_t) {
  return reduceResult(s, r, n, t, op);
}
ncclResult_t ncclReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, int, ncclComm_t,
                        cudaStream_t) {
  return reduceResult(s, r, n, t, op);
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t, cudaStream_t) {
  return copyResult(s, r, n, t);
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, ncclDataType_t t, int, ncclComm_t, cudaStream_t) {
  return copyResult(s, r, n, t);
}
ncclResult_t ncclAlltoAll(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t, cudaStream_t) {
  return copyResult(s, r, n, t);
}
ncclResult_t ncclGather(const void* s, void* r, size_t n, ncclDataType_t t, int, ncclComm_t, cudaStream_t) {
  return copyResult(s, r, n, t);
}
ncclResult_t ncclScatter(const void* s, void* r, size_t n, ncclDataType_t t, int, ncclComm_t, cudaStream_t) {
  return copyResult(s, r, n, t);
}
ncclResult_t ncclSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t, cudaStream_t) {
  if (peer != 0) return fail("fake nccl: peer out of range");
  gTransfer.send = s;
  gTransfer.bytes = n * typeSize(t);
  return ncclSuccess;
}
ncclResult_t ncclRecv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t, cudaStream_t) {
  if (peer != 0) return fail("fake nccl: peer out of range");
  gTransfer.recv = r;
  gTransfer.bytes = n * typeSize(t);
  return ncclSuccess;
}

}  // extern "C"
