// One rank of a multi-process test, started by the launcher (tests/mp/mp_test.cc). The first
// argument names the scenario; the rank prints what it observed and exits 0 when every check
// it can make locally passed. The driver checks exit codes and output.
//
// `mp_rank --threads N <scenario> [args...]` runs N ranks as threads of this one process instead
// (no launcher needed; under braid-launch only with -np 1, for its timeout): the process makes
// the unique id, each thread creates its own communicator (concurrently) and runs the scenario
// with its own rank, device and stream. Lines are prefixed "[rank r] "; the process then prints
// the totals ("<runs> runs, <wrong> wrong (...)" for `collectives`) and "OK" when every thread
// passed, and exits 0 (77 when skipped, 1 on a failure, 2 on a usage error). On one GPU, ranks in separate processes
// are time-sliced; threads of one process share a context and run at the same time. Scenarios
// whose meaning needs separate processes (a rank exiting, dying, aborting) refuse threads mode.
// In threads mode with device memory, every rank synchronises its stream and all meet at a
// barrier before results are copied back or memory is freed or allocated, and meet again before
// the next collective: memory calls can synchronise the device, shared by all ranks here, while
// a peer's kernel waits for this rank.
//
// `--memory device` (anywhere after the scenario) puts the buffers of `collectives` in GPU
// memory (device rank % deviceCount, inputs copied in, the call on a CUDA stream, results copied
// back) and is required by `abort`. CUDA comes from the driver (libcuda.so.1, loaded at run
// time), so this program needs no CUDA to build or to run in host mode. Without a GPU a
// device-mode rank prints "SKIP ..." and exits 77.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/rank_env.h"
#include "tests/common/reference.h"
#include "tests/mp/gpu_driver.h"
#include "tests/mp/rank_util.h"

using namespace braid;
using namespace braid::mptest;

namespace {

// Threads mode: all ranks meet here (a no-op for a process).
std::barrier<>* gBarrier = nullptr;
void meet() {
  if (gBarrier) gBarrier->arrive_and_wait();
}


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

// NCCL_COMM_ID: every rank makes the id itself (the same one), rank 0 hosts the root.
int scenarioCommId() {
  ncclUniqueId id;
  EXPECT_OK(ncclGetUniqueId(&id));
  ncclComm_t comm = nullptr;
  EXPECT_OK(ncclCommInitRank(&comm, gN, id, gRank));
  int64_t value = gRank + 1;
  EXPECT_OK(ncclAllReduce(&value, &value, 1, ncclInt64, ncclSum, comm, nullptr));
  EXPECT_TRUE(value == int64_t(gN) * (gN + 1) / 2);
  EXPECT_OK(ncclCommDestroy(comm));
  say("OK\n");
  return 0;
}

int scenarioInit() {
  ncclComm_t comm = initComm();
  int count = 0, rank = -1, dev = -2;
  EXPECT_OK(ncclCommCount(comm, &count));
  EXPECT_OK(ncclCommUserRank(comm, &rank));
  EXPECT_OK(ncclCommCuDevice(comm, &dev));
  EXPECT_TRUE(count == gN && rank == gRank);
  say("rank %d of %d on device %d\n", rank, count, dev);
  EXPECT_OK(ncclCommFinalize(comm));
  EXPECT_OK(ncclCommDestroy(comm));
  EXPECT_TRUE(ncclCommDestroy(comm) == ncclInvalidArgument);  // a second destroy is reported
  say("OK\n");
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
  say("first call returned %d after init, polled %d times\n", rc, polls);
  EXPECT_OK(ncclCommDestroy(comm));
  say("OK\n");
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
  say("OK\n");
  return 0;
}

int scenarioShrink() {
  ncclComm_t comm = initComm();
  EXPECT_TRUE(sumRanksAllReduce(comm, 1) == gN);
  if (gRank == gN - 1) {
    // The excluded rank leaves (as a failed rank would); it does not call ncclCommShrink.
    say("OK\n");
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
  say("OK\n");
  return 0;
}

// Rank 1 dies before init; the others must fail within BRAID_INIT_TIMEOUT, naming rank 1.
int scenarioDieEarly() {
  if (gRank == 1) _exit(3);
  ncclComm_t comm = nullptr;
  auto start = std::chrono::steady_clock::now();
  ncclResult_t rc = ncclCommInitRank(&comm, gN, gId, gRank);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  say("init returned %d after %.1f s: %s\n", rc, secs, ncclGetLastError(nullptr));
  EXPECT_TRUE(rc != ncclSuccess && comm == nullptr);
  return 0;
}

// Rank 1 reaches the bootstrap root and dies there (its process exits while the root waits for
// rank 2, which starts late): ranks 0 and 2 hear at once that rank 1 closed its connection,
// long before BRAID_INIT_TIMEOUT.
int scenarioDieAtRoot() {
  if (gRank == 1) {  // 2 s: time enough to reach the root even on a loaded machine
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(2));
      _exit(3);
    }).detach();
  }
  if (gRank == 2) std::this_thread::sleep_for(std::chrono::seconds(4));
  ncclComm_t comm = nullptr;
  auto start = std::chrono::steady_clock::now();
  ncclResult_t rc = ncclCommInitRank(&comm, gN, gId, gRank);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  say("init returned %d after %.1f s: %s\n", rc, secs, ncclGetLastError(nullptr));
  EXPECT_TRUE(rc != ncclSuccess && comm == nullptr);
  return 0;
}

int scenarioMismatch() {
  ncclComm_t comm = initComm();
  std::vector<float> buf(1000 + 1000 * gRank, 1.0f);
  ncclResult_t rc = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
  say("mismatched allreduce returned %d: %s\n", rc, ncclGetLastError(nullptr));
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
  say("rank %d returned %d: %s\n", gRank, rc, rc ? ncclGetLastError(nullptr) : "");
  if (gRank == 0) EXPECT_TRUE(rc != ncclSuccess);
  EXPECT_OK(ncclCommAbort(comm));
  return 0;
}

// Every collective, type and op, in place and out of place, against braid_check's float64
// reference. Each (count, allTypes) pair runs every collective: allTypes covers every type and
// op, otherwise float32 and int64 with sum and max. With gpu::enabled the buffers are in GPU
// memory and each call runs on gpu::stream, which is synchronised before the check.
struct CountSet {
  size_t count;
  bool allTypes;
};

// --fail-at R:K (a test of the failure path): rank R fails before its collective number K.
int gFailAtRank = -1;
size_t gFailAtRun = 0;

// Threads mode: each rank's runs and wrong results, for the process's total line.
struct Totals {
  size_t runs = 0, wrong = 0;
};
std::vector<Totals> gTotals;

int scenarioCollectives(const std::vector<CountSet>& sets) {
  ncclComm_t comm = initComm();
  size_t failures = 0, runs = 0;
  uint64_t seed = 1;
  auto started = std::chrono::steady_clock::now(), lastNote = started;
  cudaStream_t stream = gpu::enabled ? static_cast<cudaStream_t>(gpu::stream) : nullptr;
  for (const CountSet& set : sets) {
    size_t count = set.count;
    std::vector<ncclDataType_t> types;
    if (set.allTypes) types.assign(std::begin(check::kAllTypes), std::end(check::kAllTypes));
    else types = {ncclFloat32, ncclInt64};
    for (check::Collective coll : check::kAllCollectives) {
      std::vector<check::ReduceOp> ops;
      if (check::isReduction(coll)) ops.assign(std::begin(check::kAllReduceOps), std::end(check::kAllReduceOps));
      else ops = {check::ReduceOp::None};
      if (!set.allTypes && check::isReduction(coll)) ops = {check::ReduceOp::Sum, check::ReduceOp::Max};
      for (ncclDataType_t type : types)
        for (check::ReduceOp op : ops)
          for (int inPlace = 0; inPlace < 2; ++inPlace) {
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
            size_t sendBytes = std::max<size_t>(bc.send, 1) * es, recvBytes = std::max<size_t>(bc.recv, 1) * es;
            size_t oneBytes = std::max<size_t>(std::max(bc.send, bc.recv), 1) * es;
            std::vector<char> sendBuf(sendBytes), recvBuf(recvBytes, 0x5a), oneBuf(oneBytes, 0x5a);
            size_t inOffset = inPlace ? check::inPlaceInputOffset(coll, count, gRank) * es : 0;
            size_t outOffset = inPlace ? check::inPlaceOutputOffset(coll, count, gRank) * es : 0;
            char* in = inPlace ? oneBuf.data() + inOffset : sendBuf.data();
            char* out = inPlace ? oneBuf.data() + outOffset : recvBuf.data();
            check::fillInput(spec, gRank, in);
            // Device mode: the same layout in GPU memory; `in`/`out` become device pointers and
            // `hostOut` is where the result lands after the copy back.
            std::unique_ptr<gpu::Buffer> dSend, dRecv, dOne;
            char* hostOut = out;
            if (gpu::enabled) {
              if (inPlace) {
                dOne = std::make_unique<gpu::Buffer>(oneBytes);
                dOne->upload(oneBuf.data(), oneBytes);
                in = dOne->get() + inOffset;
                out = dOne->get() + outOffset;
              } else {
                dSend = std::make_unique<gpu::Buffer>(sendBytes);
                dRecv = std::make_unique<gpu::Buffer>(recvBytes);
                dSend->upload(sendBuf.data(), sendBytes);
                dRecv->upload(recvBuf.data(), recvBytes);
                in = dSend->get();
                out = dRecv->get();
              }
              // A copy from pageable memory may return before its DMA lands, and the upload ran
              // on the legacy stream, which the collective's non-blocking stream does not wait
              // for (it once let a collective read the 0x5a poison).
              CU_OK(gpu::api.streamSynchronize(nullptr));
            }
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
            // Threads mode: every rank's buffers are ready (no rank allocates or frees memory
            // while the collective may run).
            meet();
            if (gRank == gFailAtRank && runs == gFailAtRun) {
              say("FAIL injected before run %zu (--fail-at)\n", runs);
              failRank();
            }
            ncclResult_t rc = ncclSuccess;
            switch (coll) {
              case check::Collective::AllReduce: rc = ncclAllReduce(in, out, count, type, ncclOp, comm, stream); break;
              case check::Collective::AllGather: rc = ncclAllGather(in, out, count, type, comm, stream); break;
              case check::Collective::ReduceScatter: rc = ncclReduceScatter(in, out, count, type, ncclOp, comm, stream); break;
              case check::Collective::Broadcast: rc = ncclBroadcast(in, out, count, type, root, comm, stream); break;
              case check::Collective::Reduce: rc = ncclReduce(in, out, count, type, ncclOp, root, comm, stream); break;
              case check::Collective::AlltoAll: rc = ncclAlltoAll(in, out, count, type, comm, stream); break;
              case check::Collective::Gather: rc = ncclGather(in, out, count, type, root, comm, stream); break;
              case check::Collective::Scatter: rc = ncclScatter(in, out, count, type, root, comm, stream); break;
              case check::Collective::SendRecv:
                EXPECT_OK(ncclGroupStart());
                EXPECT_OK(ncclSend(in, count, type, (gRank + 1) % gN, comm, stream));
                EXPECT_OK(ncclRecv(out, count, type, (gRank + gN - 1) % gN, comm, stream));
                rc = ncclGroupEnd();
                break;
            }
            if (op == check::ReduceOp::PreMulSum) EXPECT_OK(ncclRedOpDestroy(ncclOp, comm));
            ++runs;
            if (gpu::enabled && gRank == 0 && std::chrono::steady_clock::now() - lastNote > std::chrono::seconds(5)) {
              lastNote = std::chrono::steady_clock::now();  // progress, for a run that times out
              say("progress: %zu runs in %.0f s, now %s %s %s count %zu\n", runs,
                  std::chrono::duration<double>(lastNote - started).count(), check::collectiveName(coll),
                  check::typeName(type), check::opName(op), count);
            }
            if (rc != ncclSuccess) {
              say("FAIL %s %s %s count %zu inplace %d: returned %d: %s\n", check::collectiveName(coll),
                  check::typeName(type), check::opName(op), count, inPlace, rc, ncclGetLastError(nullptr));
              failRank();
            }
            if (gpu::enabled) CU_OK(gpu::api.streamSynchronize(gpu::stream));
            // Threads mode: every rank's part of this collective has finished; copying back,
            // freeing and the next case's allocations are safe until the next meet().
            meet();
            if (gpu::enabled) {
              ncclResult_t async = ncclSuccess;
              EXPECT_OK(ncclCommGetAsyncError(comm, &async));
              if (async != ncclSuccess) {
                say("FAIL %s %s %s count %zu inplace %d: async error %d: %s\n", check::collectiveName(coll),
                    check::typeName(type), check::opName(op), count, inPlace, async, ncclGetLastError(nullptr));
                failRank();
              }
              if (inPlace) {
                dOne->download(oneBuf.data(), oneBytes);
              } else {
                dRecv->download(recvBuf.data(), recvBytes);
              }
            }
            check::CheckResult res = check::check(spec, gRank, hostOut);
            if (res.wrong) {
              ++failures;
              say("WRONG %s %s %s count %zu inplace %d root %d: %zu of %zu wrong; first: %s\n",
                  check::collectiveName(coll), check::typeName(type), check::opName(op), count, inPlace, root,
                  res.wrong, res.checked, res.firstMismatch.c_str());
            }
          }
    }
  }
  EXPECT_OK(ncclCommDestroy(comm));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  say("%zu runs, %zu wrong (%s memory, %.1f s)\n", runs, failures, gpu::enabled ? "device" : "host", secs);
  if (gThreads) gTotals[gRank] = {runs, failures};
  if (failures == 0) say("OK\n");
  return failures ? 1 : 0;
}

// Device memory: after a warm-up all-reduce by all, rank `who` (default 0) enqueues one that
// the others never join, waits 0.5 s and calls ncclCommAbort, which must return within 1 s; the
// stream must then drain within 5 s. The other ranks never call the second collective and abort
// later. (With processes sharing a GPU without MPS, rank 0's process runs the others' GPU work
// (src/api/served.h): `abort 0` aborts that process with a member missing, `abort 1` a member
// whose leader never joins.)
int scenarioAbort(int who) {
  if (!gpu::enabled) {
    say("FAIL abort needs --memory device\n");
    return 1;
  }
  ncclComm_t comm = initComm();
  using Clock = std::chrono::steady_clock;
  size_t count = 1 << 20;
  gpu::Buffer in(count * sizeof(float)), out(count * sizeof(float));
  // Everyone runs the same all-reduce once: braid connects peers on first use, on the host and
  // together with them, so only a warmed-up collective reaches the GPU and waits there.
  EXPECT_OK(ncclAllReduce(in.get(), out.get(), count, ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(gpu::stream)));
  CU_OK(gpu::api.streamSynchronize(gpu::stream));
  if (gRank == who) {
    EXPECT_OK(ncclAllReduce(in.get(), out.get(), count, ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(gpu::stream)));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    gpu::CUresult pending = gpu::api.streamQuery(gpu::stream);
    say("stream before abort: %s\n", pending == 0 ? "idle (the collective did not wait?)" : "busy");
    auto t0 = Clock::now();
    ncclResult_t rc = ncclCommAbort(comm);
    double abortSecs = std::chrono::duration<double>(Clock::now() - t0).count();
    say("ncclCommAbort returned %d after %.3f s\n", rc, abortSecs);
    EXPECT_TRUE(rc == ncclSuccess);
    EXPECT_TRUE(abortSecs < 1.0);
    auto t1 = Clock::now();
    gpu::CUresult q = 600;  // cudaErrorNotReady / CUDA_ERROR_NOT_READY
    while ((q = gpu::api.streamQuery(gpu::stream)) == 600 && Clock::now() - t1 < std::chrono::seconds(5))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    double drainSecs = std::chrono::duration<double>(Clock::now() - t1).count();
    say("stream after abort: %s (%d %s) after %.3f s\n", q == 600 ? "STILL BUSY" : "drained", q,
        q == 0 ? "ok" : gpu::errorText(q), drainSecs);
    EXPECT_TRUE(q != 600);
    say("SUMMARY abort %.3fs drain %.3fs\n", abortSecs, drainSecs);
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    EXPECT_OK(ncclCommAbort(comm));
  }
  say("OK\n");
  return 0;
}

std::vector<size_t> parseCounts(const char* text) {
  std::vector<size_t> counts;
  for (const char* p = text; *p;) {
    counts.push_back(std::strtoull(p, const_cast<char**>(&p), 10));
    if (*p == ',') ++p;
  }
  return counts;
}

// The scenario and its arguments. Options after the scenario: --memory host|device, --big
// COUNTS (float32/int64 only, for `collectives`), --fail-at R:K (`collectives`: rank R fails
// before its run K, counted from 0); the remaining words are positional.
struct Args {
  std::string scenario;
  std::vector<std::string> pos;
  std::string memory = "host", big;
};

const char* const kScenarios[] = {"init",     "comm-id",     "nonblocking", "split",          "shrink", "die-early",
                                  "die-at-root", "mismatch", "unmatched-send", "abort", "collectives"};
// Those that run with ranks as threads; the others need ranks that can exit, die or stay away
// on their own.
const char* const kThreadScenarios[] = {"init", "comm-id", "nonblocking", "split", "collectives"};

template <size_t N>
bool listed(const char* const (&list)[N], const std::string& s) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

// Runs the scenario as rank gRank (this process, or this thread in threads mode). With device
// memory, after gpu::loadDriver().
int runScenario(const Args& a) {
  if (a.memory == "device") gpu::start(gRank);
  const std::string& s = a.scenario;
  if (s == "init") return scenarioInit();
  if (s == "comm-id") return scenarioCommId();
  if (s == "nonblocking") return scenarioNonBlocking();
  if (s == "split") return scenarioSplit();
  if (s == "shrink") return scenarioShrink();
  if (s == "die-early") return scenarioDieEarly();
  if (s == "die-at-root") return scenarioDieAtRoot();
  if (s == "mismatch") return scenarioMismatch();
  if (s == "unmatched-send") return scenarioUnmatchedSend();
  if (s == "abort") return scenarioAbort(a.pos.empty() ? 0 : std::atoi(a.pos[0].c_str()));
  std::vector<CountSet> sets;  // collectives
  bool all = a.pos.size() > 1 && a.pos[1] == "all";
  for (size_t c : parseCounts(a.pos.empty() ? "0,1,7" : a.pos[0].c_str())) sets.push_back({c, all});
  if (!a.big.empty())
    for (size_t c : parseCounts(a.big.c_str())) sets.push_back({c, false});
  return scenarioCollectives(sets);
}

// How long the other threads may run on after one failed (it left the barrier; they may wait
// for it in a collective) before the process ends.
constexpr int kGraceSeconds = 5;

// Threads mode: n ranks as threads of this process, one communicator each. Returns the exit code.
int runThreads(int n, const Args& a) {
  gThreads = true;
  gN = n;
  ncclResult_t rc = ncclGetUniqueId(&gId);
  if (rc != ncclSuccess) {
    std::printf("FAIL ncclGetUniqueId -> %d %s | %s\n", rc, ncclGetErrorString(rc), ncclGetLastError(nullptr));
    return 1;
  }
  std::barrier<> barrier(n);
  gBarrier = &barrier;
  gTotals.assign(n, {});
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<int> codes(n, -1);  // -1: still running
  int finished = 0, firstFailed = -1;
  auto started = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      gRank = r;
      int code = 1;
      try {
        code = runScenario(a);
      } catch (const RankFailed&) {
        code = 1;
      } catch (const std::exception& e) {
        gFailed = true;
        say("FAIL exception: %s\n", e.what());
      }
      // Done (or failed): later phases of the barrier no longer wait for this rank.
      barrier.arrive_and_drop();
      std::lock_guard<std::mutex> lock(mutex);
      codes[r] = code;
      ++finished;
      if (gFailed && firstFailed < 0) firstFailed = r;
      cv.notify_all();
    });
  {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return finished == n || firstFailed >= 0; });
    if (!cv.wait_for(lock, std::chrono::seconds(kGraceSeconds), [&] { return finished == n; })) {
      std::string running;
      for (int r = 0; r < n; ++r)
        if (codes[r] < 0) running += (running.empty() ? "" : ",") + std::to_string(r);
      std::printf("FAIL rank(s) %s still running %d s after rank %d failed; exiting\n", running.c_str(),
                  kGraceSeconds, firstFailed);
      std::fflush(stdout);
      // Join the ranks that finished (TSan reports a finished thread never joined as a leak);
      // the others are blocked in braid or CUDA: no destructors, no joins.
      for (int r = 0; r < n; ++r)
        if (codes[r] >= 0) threads[r].join();
      _exit(1);
    }
  }
  for (std::thread& t : threads) t.join();
  gBarrier = nullptr;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::string failed;
  for (int r = 0; r < n; ++r)
    if (codes[r] != 0) failed += (failed.empty() ? "" : ",") + std::to_string(r);
  if (a.scenario == "collectives") {
    Totals sum;
    for (const Totals& t : gTotals) {
      sum.runs += t.runs;
      sum.wrong += t.wrong;
    }
    std::printf("%zu runs, %zu wrong (%s memory, %d ranks as threads, %.1f s)\n", sum.runs, sum.wrong,
                a.memory.c_str(), n, secs);
  }
  if (!failed.empty()) {
    std::printf("FAIL rank(s) %s of %d failed\n", failed.c_str(), n);
    return 1;
  }
  std::printf("OK\n");
  return 0;
}

}  // namespace

// mp_rank [--threads N] <scenario> [--memory host|device] [--big COUNTS] [--fail-at R:K] [args...]
int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int threads = 0;
  int first = 1;  // the scenario's index in argv
  if (argc > 1 && std::string(argv[1]) == "--threads") {
    if (argc < 3 || !test::parseBoundedInt(argv[2], 1, 1024, &threads)) {
      std::fprintf(stderr, "mp_rank: --threads wants a rank count in [1, 1024], got %s\n", argc < 3 ? "nothing" : argv[2]);
      return 2;
    }
    first = 3;
  }
  if (first >= argc) {
    std::fprintf(stderr, "usage: mp_rank [--threads N] <scenario> [--memory host|device] [--big COUNTS] "
                         "[--fail-at R:K] [args...]\n");
    return 2;
  }
  Args a;
  a.scenario = argv[first];
  for (int i = first + 1; i < argc; ++i) {
    std::string w = argv[i];
    if (w == "--memory" && i + 1 < argc) a.memory = argv[++i];
    else if (w == "--big" && i + 1 < argc) a.big = argv[++i];
    else if (w == "--fail-at" && i + 1 < argc) {
      unsigned long long run = 0;
      if (std::sscanf(argv[++i], "%d:%llu", &gFailAtRank, &run) != 2 || gFailAtRank < 0) {
        std::fprintf(stderr, "mp_rank: --fail-at wants RANK:RUN, got %s\n", argv[i]);
        return 2;
      }
      gFailAtRun = run;
    } else a.pos.push_back(w);
  }
  if (a.memory != "host" && a.memory != "device") {
    std::fprintf(stderr, "mp_rank: --memory wants host or device, got %s\n", a.memory.c_str());
    return 2;
  }
  if (!listed(kScenarios, a.scenario)) {
    std::fprintf(stderr, "mp_rank: unknown scenario %s\n", a.scenario.c_str());
    return 2;
  }
  test::RankEnv env;
  std::string error;
  bool envOk = test::readRankEnv(&env, &error);
  if (threads > 0) {
    if (!listed(kThreadScenarios, a.scenario)) {
      std::fprintf(stderr, "mp_rank: scenario %s needs one process per rank; --threads runs only init, comm-id, "
                           "nonblocking, split and collectives\n", a.scenario.c_str());
      return 2;
    }
    // The launcher may start this one process (for its time limit); its id is not used.
    if (!envOk || (env.launched && env.nRanks > 1)) {
      std::fprintf(stderr, "mp_rank: with --threads, run one process (braid-launch -np 1 at most)%s%s\n",
                   error.empty() ? "" : ": ", error.c_str());
      return 2;
    }
    if (a.memory == "device") gpu::loadDriver();  // exits 77 without a GPU
    return runThreads(threads, a);
  }
  if (!envOk || !env.launched || !env.hasUniqueId) {
    std::fprintf(stderr, "mp_rank: start me through the launcher, or use --threads N%s%s\n", error.empty() ? "" : ": ",
                 error.c_str());
    return 2;
  }
  gRank = env.rank;
  gN = env.nRanks;
  gId = env.uniqueId;
  if (a.memory == "device") gpu::loadDriver();
  return runScenario(a);
}
