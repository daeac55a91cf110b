// One rank of a multi-process test, started by the launcher (tests/mp/mp_test.cc). The first
// argument names the scenario; the rank prints what it observed and exits 0 when every check
// it can make locally passed. The driver checks exit codes and output.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/rank_env.h"
#include "tests/common/reference.h"

using namespace braid;

namespace {

int gRank = 0, gN = 1;
ncclUniqueId gId;

#define EXPECT_OK(call)                                                                              \
  do {                                                                                               \
    ncclResult_t r_ = (call);                                                                        \
    if (r_ != ncclSuccess) {                                                                         \
      std::printf("FAIL %s:%d %s -> %d %s | %s\n", __FILE__, __LINE__, #call, r_, ncclGetErrorString(r_), \
                  ncclGetLastError(nullptr));                                                        \
      std::exit(1);                                                                                  \
    }                                                                                                \
  } while (0)

#define EXPECT_TRUE(cond)                                                         \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::printf("FAIL %s:%d %s\n", __FILE__, __LINE__, #cond);                  \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

// The PreMulSum scalar 2.0 in each type's representation.
void scalarTwo(ncclDataType_t type, unsigned char* out) {
  std::memset(out, 0, 8);
  switch (type) {
    case ncclInt8: case ncclUint8: out[0] = 2; break;
    case ncclInt32: case ncclUint32: { int32_t v = 2; std::memcpy(out, &v, 4); break; }
    case ncclInt64: case ncclUint64: { int64_t v = 2; std::memcpy(out, &v, 8); break; }
    case ncclFloat16: case ncclBfloat16: out[1] = 0x40; break;  // 0x4000 in both
    case ncclFloat32: { float v = 2; std::memcpy(out, &v, 4); break; }
    case ncclFloat64: { double v = 2; std::memcpy(out, &v, 8); break; }
    default: out[0] = 0x40; break;  // e4m3 and e5m2
  }
}

ncclComm_t initComm() {
  ncclComm_t comm = nullptr;
  EXPECT_OK(ncclCommInitRank(&comm, gN, gId, gRank));
  return comm;
}

int scenarioInit() {
  ncclComm_t comm = initComm();
  int count = 0, rank = -1, dev = -2;
  EXPECT_OK(ncclCommCount(comm, &count));
  EXPECT_OK(ncclCommUserRank(comm, &rank));
  EXPECT_OK(ncclCommCuDevice(comm, &dev));
  EXPECT_TRUE(count == gN && rank == gRank);
  std::printf("rank %d of %d on device %d\n", rank, count, dev);
  EXPECT_OK(ncclCommFinalize(comm));
  EXPECT_OK(ncclCommDestroy(comm));
  EXPECT_TRUE(ncclCommDestroy(comm) == ncclInvalidArgument);  // a second destroy is reported
  std::printf("OK\n");
  return 0;
}

int scenarioNonBlocking() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t rc = ncclCommInitRankConfig(&comm, gN, gId, gRank, &config);
  EXPECT_TRUE(rc == ncclInProgress || rc == ncclSuccess);
  EXPECT_TRUE(comm != nullptr);
  ncclResult_t state = ncclInProgress;
  auto start = std::chrono::steady_clock::now();
  int polls = 0;
  while (state == ncclInProgress) {
    EXPECT_OK(ncclCommGetAsyncError(comm, &state));
    ++polls;
    EXPECT_TRUE(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(state == ncclSuccess);
  std::printf("first call returned %d after init, polled %d times\n", rc, polls);
  EXPECT_OK(ncclCommDestroy(comm));
  std::printf("OK\n");
  return 0;
}

int64_t sumRanksAllReduce(ncclComm_t comm, int64_t mine) {
  int64_t value = mine;
  EXPECT_OK(ncclAllReduce(&value, &value, 1, ncclInt64, ncclSum, comm, nullptr));
  return value;
}

int scenarioSplit() {
  ncclComm_t comm = initComm();
  ncclComm_t child = nullptr;
  EXPECT_OK(ncclCommSplit(comm, gRank % 2, -gRank, &child, nullptr));
  int count = 0, rank = 0;
  EXPECT_OK(ncclCommCount(child, &count));
  EXPECT_OK(ncclCommUserRank(child, &rank));
  int expectCount = (gN + 1 - gRank % 2) / 2;
  EXPECT_TRUE(count == expectCount);
  EXPECT_TRUE(rank == expectCount - 1 - gRank / 2);  // key = -rank reverses the order
  int64_t expect = 0;
  for (int r = gRank % 2; r < gN; r += 2) expect += r;
  EXPECT_TRUE(sumRanksAllReduce(child, gRank) == expect);
  // A second split with rank 0 opting out, while the first child is still alive.
  ncclComm_t child2 = nullptr;
  EXPECT_OK(ncclCommSplit(comm, gRank == 0 ? NCCL_SPLIT_NOCOLOR : 7, gRank, &child2, nullptr));
  if (gRank == 0) {
    EXPECT_TRUE(child2 == nullptr);
  } else {
    EXPECT_OK(ncclCommCount(child2, &count));
    EXPECT_TRUE(count == gN - 1);
    EXPECT_TRUE(sumRanksAllReduce(child2, gRank) == int64_t(gN) * (gN - 1) / 2);
    EXPECT_OK(ncclCommDestroy(child2));
  }
  // Parent and child at the same time.
  EXPECT_TRUE(sumRanksAllReduce(comm, 1) == gN);
  EXPECT_OK(ncclCommDestroy(child));
  EXPECT_OK(ncclCommDestroy(comm));
  std::printf("OK\n");
  return 0;
}

int scenarioShrink() {
  ncclComm_t comm = initComm();
  EXPECT_TRUE(sumRanksAllReduce(comm, 1) == gN);
  if (gRank == gN - 1) {
    // The excluded rank leaves (as a failed rank would); it does not call ncclCommShrink.
    std::printf("OK\n");
    std::fflush(stdout);
    _exit(0);
  }
  int exclude = gN - 1;
  ncclComm_t child = nullptr;
  EXPECT_OK(ncclCommShrink(comm, &exclude, 1, &child, nullptr, NCCL_SHRINK_ABORT));
  int count = 0;
  EXPECT_OK(ncclCommCount(child, &count));
  EXPECT_TRUE(count == gN - 1);
  EXPECT_TRUE(sumRanksAllReduce(child, gRank) == int64_t(gN - 1) * (gN - 2) / 2);
  EXPECT_OK(ncclCommDestroy(child));
  EXPECT_OK(ncclCommAbort(comm));
  std::printf("OK\n");
  return 0;
}

// Rank 1 dies before init; the others must fail within BRAID_INIT_TIMEOUT, naming rank 1.
int scenarioDieEarly() {
  if (gRank == 1) _exit(3);
  ncclComm_t comm = nullptr;
  auto start = std::chrono::steady_clock::now();
  ncclResult_t rc = ncclCommInitRank(&comm, gN, gId, gRank);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("init returned %d after %.1f s: %s\n", rc, secs, ncclGetLastError(nullptr));
  EXPECT_TRUE(rc != ncclSuccess && comm == nullptr);
  return 0;
}

int scenarioMismatch() {
  ncclComm_t comm = initComm();
  std::vector<float> buf(1000 + 1000 * gRank, 1.0f);
  ncclResult_t rc = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
  std::printf("mismatched allreduce returned %d: %s\n", rc, ncclGetLastError(nullptr));
  EXPECT_TRUE(rc != ncclSuccess);
  EXPECT_OK(ncclCommAbort(comm));
  return 0;
}

// Rank 0 sends to rank 1, which never posts the matching recv: bounded failure.
int scenarioUnmatchedSend() {
  ncclComm_t comm = initComm();
  std::vector<int> buf(4 << 20, 7);
  ncclResult_t rc = ncclSuccess;
  if (gRank == 0) rc = ncclSend(buf.data(), buf.size(), ncclInt32, 1, comm, nullptr);
  else std::this_thread::sleep_for(std::chrono::seconds(4));
  std::printf("rank %d returned %d: %s\n", gRank, rc, rc ? ncclGetLastError(nullptr) : "");
  if (gRank == 0) EXPECT_TRUE(rc != ncclSuccess);
  EXPECT_OK(ncclCommAbort(comm));
  return 0;
}

// Every collective, type and op, in place and out of place, against braid_check's float64
// reference. argv: counts (comma separated) and an optional type filter.
int scenarioCollectives(const std::vector<size_t>& counts, bool allTypes) {
  ncclComm_t comm = initComm();
  size_t failures = 0, runs = 0;
  uint64_t seed = 1;
  std::vector<ncclDataType_t> types;
  if (allTypes) types.assign(std::begin(check::kAllTypes), std::end(check::kAllTypes));
  else types = {ncclFloat32, ncclInt64};
  for (size_t count : counts) {
    for (check::Collective coll : check::kAllCollectives) {
      std::vector<check::ReduceOp> ops;
      if (check::isReduction(coll)) ops.assign(std::begin(check::kAllReduceOps), std::end(check::kAllReduceOps));
      else ops = {check::ReduceOp::None};
      if (!allTypes && check::isReduction(coll)) ops = {check::ReduceOp::Sum, check::ReduceOp::Max};
      for (ncclDataType_t type : types)
        for (check::ReduceOp op : ops)
          for (int inPlace = 0; inPlace < 2; ++inPlace) {
            if (coll == check::Collective::SendRecv && inPlace) continue;
            int root = (gN > 1) ? static_cast<int>(seed % gN) : 0;
            check::CheckSpec spec;
            spec.coll = coll;
            spec.type = type;
            spec.op = op;
            spec.preMulScalar = 2.0;
            spec.nRanks = gN;
            spec.root = root;
            spec.count = count;
            spec.seed = ++seed;
            auto bc = check::bufferCounts(coll, count, gN);
            size_t es = check::typeSize(type);
            std::vector<char> sendBuf(std::max<size_t>(bc.send, 1) * es), recvBuf(std::max<size_t>(bc.recv, 1) * es, 0x5a);
            std::vector<char> oneBuf(std::max<size_t>(std::max(bc.send, bc.recv), 1) * es, 0x5a);
            char* in = sendBuf.data();
            char* out = recvBuf.data();
            if (inPlace) {
              in = oneBuf.data() + check::inPlaceInputOffset(coll, count, gRank) * es;
              out = oneBuf.data() + check::inPlaceOutputOffset(coll, count, gRank) * es;
            }
            check::fillInput(spec, gRank, in);
            ncclRedOp_t ncclOp = ncclSum;
            switch (op) {
              case check::ReduceOp::Prod: ncclOp = ncclProd; break;
              case check::ReduceOp::Max: ncclOp = ncclMax; break;
              case check::ReduceOp::Min: ncclOp = ncclMin; break;
              case check::ReduceOp::Avg: ncclOp = ncclAvg; break;
              case check::ReduceOp::PreMulSum: {
                unsigned char scalar[8] = {};
                scalarTwo(type, scalar);
                EXPECT_OK(ncclRedOpCreatePreMulSum(&ncclOp, scalar, type, ncclScalarHostImmediate, comm));
                break;
              }
              default: break;
            }
            ncclResult_t rc = ncclSuccess;
            switch (coll) {
              case check::Collective::AllReduce: rc = ncclAllReduce(in, out, count, type, ncclOp, comm, nullptr); break;
              case check::Collective::AllGather: rc = ncclAllGather(in, out, count, type, comm, nullptr); break;
              case check::Collective::ReduceScatter: rc = ncclReduceScatter(in, out, count, type, ncclOp, comm, nullptr); break;
              case check::Collective::Broadcast: rc = ncclBroadcast(in, out, count, type, root, comm, nullptr); break;
              case check::Collective::Reduce: rc = ncclReduce(in, out, count, type, ncclOp, root, comm, nullptr); break;
              case check::Collective::AlltoAll: rc = ncclAlltoAll(in, out, count, type, comm, nullptr); break;
              case check::Collective::Gather: rc = ncclGather(in, out, count, type, root, comm, nullptr); break;
              case check::Collective::Scatter: rc = ncclScatter(in, out, count, type, root, comm, nullptr); break;
              case check::Collective::SendRecv:
                EXPECT_OK(ncclGroupStart());
                EXPECT_OK(ncclSend(in, count, type, (gRank + 1) % gN, comm, nullptr));
                EXPECT_OK(ncclRecv(out, count, type, (gRank + gN - 1) % gN, comm, nullptr));
                rc = ncclGroupEnd();
                break;
            }
            if (op == check::ReduceOp::PreMulSum) EXPECT_OK(ncclRedOpDestroy(ncclOp, comm));
            ++runs;
            if (rc != ncclSuccess) {
              std::printf("FAIL %s %s %s count %zu inplace %d: returned %d: %s\n", check::collectiveName(coll),
                          check::typeName(type), check::opName(op), count, inPlace, rc, ncclGetLastError(nullptr));
              return 1;
            }
            check::CheckResult res = check::check(spec, gRank, out);
            if (res.wrong) {
              ++failures;
              std::printf("WRONG %s %s %s count %zu inplace %d root %d: %zu of %zu wrong; first: %s\n",
                          check::collectiveName(coll), check::typeName(type), check::opName(op), count, inPlace, root,
                          res.wrong, res.checked, res.firstMismatch.c_str());
            }
          }
    }
  }
  EXPECT_OK(ncclCommDestroy(comm));
  std::printf("%zu runs, %zu wrong\n", runs, failures);
  if (failures == 0) std::printf("OK\n");
  return failures ? 1 : 0;
}

std::vector<size_t> parseCounts(const char* text) {
  std::vector<size_t> counts;
  for (const char* p = text; *p;) {
    counts.push_back(std::strtoull(p, const_cast<char**>(&p), 10));
    if (*p == ',') ++p;
  }
  return counts;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  test::RankEnv env;
  std::string error;
  if (argc < 2 || !test::readRankEnv(&env, &error) || !env.launched || !env.hasUniqueId) {
    std::fprintf(stderr, "mp_rank: start me through the launcher (%s)\n", error.c_str());
    return 2;
  }
  gRank = env.rank;
  gN = env.nRanks;
  gId = env.uniqueId;
  std::string s = argv[1];
  if (s == "init") return scenarioInit();
  if (s == "nonblocking") return scenarioNonBlocking();
  if (s == "split") return scenarioSplit();
  if (s == "shrink") return scenarioShrink();
  if (s == "die-early") return scenarioDieEarly();
  if (s == "mismatch") return scenarioMismatch();
  if (s == "unmatched-send") return scenarioUnmatchedSend();
  if (s == "collectives") return scenarioCollectives(parseCounts(argc > 2 ? argv[2] : "0,1,7"), argc > 3 && !std::strcmp(argv[3], "all"));
  std::fprintf(stderr, "mp_rank: unknown scenario %s\n", s.c_str());
  return 2;
}
