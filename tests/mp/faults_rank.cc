// One rank of the fault tests (tests/mp/faults_test.cc), started by the launcher. Host
// memory throughout; each scenario prints what it saw and "OK" when every local check passed.
//
//   abort-thread POINT ROUNDS   rank 0 blocks in a call (POINT: init, connect, collective or
//                               group) while a second thread aborts the communicator; the call
//                               must return an error and the abort must return, each within 1 s.
//                               ROUNDS rounds, each on a fresh communicator split from a parent.
//   abort-thread-local ROUNDS   the same with both ranks as threads of this process (-np 1).
//   die COLL VICTIM DELAY_US [unreaped]
//                               every rank loops over COLL; VICTIM kills itself DELAY_US into the
//                               loop. Survivors must fail with ncclRemoteError naming it. With
//                               `unreaped` the victim is a child its parent does not reap.
//   leave VICTIM CALLS          every rank but VICTIM issues CALLS all-reduces; VICTIM issues
//                               CALLS - 1, destroys its communicator and exits normally: the
//                               others' last call can never complete and must fail with
//                               ncclRemoteError naming VICTIM ("LEARNED"), not hang.
//   die-in-setup VICTIM POINT   VICTIM is killed at POINT of the first connection setup
//                               (BRAID_FAULT_POINT: host-offer-made, host-offer-sent,
//                               host-offer-received); the other rank's call fails.
//   hang                        the last rank joins a broadcast seconds late: the others (and it)
//                               print a hang report (BRAID_HANG_TIMEOUT), then all complete.
//   report-signal               rank 0 raises SIGUSR1 while its peers wait: a report appears.
//   call-cost ITERS             two ranks as threads (-np 1): 8-byte all-reduces, mean time per
//                               call (with BRAID_CHECK_CALLS=-1, 0 or 1: what the check costs).
//   mismatch CLASS              the ranks call mismatched collectives (CLASS: bcast-root,
//                               reduce-root, coll, count, type, op, p2p-count): every rank must
//                               get ncclInvalidUsage naming both sides.
//
// `--memory device` (anywhere) puts the buffers in GPU memory (device rank % GPUs, the calls on
// a stream of the rank's own): die, hang, mismatch (with BRAID_CHECK_CALLS=1) and abort-thread
// connect. A call on device memory that was enqueued fails later: the scenarios then wait for
// the stream and take ncclCommGetAsyncError. Without a GPU they exit 77.
//
// Lines the driver reads: "DEATH <ns>", "LEARNED <ns> rc=<rc> | <text>", "RESULT rc=<rc> | <text>",
// "SUMMARY ...", "OK". Times are CLOCK_REALTIME nanoseconds (the ranks share the machine).
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/rank_env.h"
#include "tests/common/reference.h"
#include "tests/mp/gpu_driver.h"
#include "tests/mp/rank_util.h"

using namespace braid::mptest;
using Clock = std::chrono::steady_clock;

namespace {

int64_t wallNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

ncclComm_t initComm() {
  ncclComm_t comm = nullptr;
  EXPECT_OK(ncclCommInitRank(&comm, gN, gId, gRank));
  return comm;
}

void barrier(ncclComm_t comm) {
  int64_t v = 1;
  EXPECT_OK(ncclAllReduce(&v, &v, 1, ncclInt64, ncclSum, comm, nullptr));
  EXPECT_TRUE(v == gN);
}

// Buffers of `floats` elements on the memory the scenario asked for, and the stream of calls.
bool gDevice = false;
struct Buffers {
  explicit Buffers(size_t floats) : host(floats * 2, 1.0f) {
    if (gDevice) dev = std::make_unique<gpu::Buffer>(floats * 2 * sizeof(float));
    if (dev) dev->upload(host.data(), host.size() * sizeof(float));
    if (dev) CU_OK(gpu::api.streamSynchronize(nullptr));
  }
  float* in() { return dev ? reinterpret_cast<float*>(dev->get()) : host.data(); }
  float* out() { return in() + host.size() / 2; }
  cudaStream_t stream() const { return gDevice ? static_cast<cudaStream_t>(gpu::stream) : nullptr; }
  std::vector<float> host;
  std::unique_ptr<gpu::Buffer> dev;
};

// A call's full result: what it returned, or on device memory what the GPU work came to (the
// stream is waited for; kernels stopped by an abort or a peer's death end it).
ncclResult_t settle(ncclResult_t rc, ncclComm_t comm) {
  if (rc != ncclSuccess || !gDevice) return rc;
  CU_OK(gpu::api.streamSynchronize(gpu::stream));
  ncclResult_t async = ncclSuccess;
  if (ncclCommGetAsyncError(comm, &async) != ncclSuccess) return ncclInvalidUsage;
  return async;
}

// ---- abort from another thread ------------------------------------------------------------

struct Worst {
  double abortSecs = 0, returnSecs = 0;
};

// Runs `blocked` on a thread; after a random 0-5 ms, aborts `comm` from this thread. Both
// must end within 1 s, and `blocked` must not succeed.
void abortWhileBlocked(ncclComm_t comm, const std::function<ncclResult_t()>& blocked, std::mt19937& rng, Worst* worst) {
  std::atomic<int> rc{-1};
  std::atomic<int64_t> returnedAt{0};
  std::thread a([&] {
    rc.store(blocked());
    returnedAt.store(Clock::now().time_since_epoch().count());
  });
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % 5000));
  auto t0 = Clock::now();
  ncclResult_t abortRc = ncclCommAbort(comm);
  double abortSecs = secondsSince(t0);
  a.join();
  double returnSecs =
      std::chrono::duration<double>(Clock::duration(returnedAt.load()) - t0.time_since_epoch()).count();
  if (returnSecs < 0) returnSecs = 0;  // it returned before the abort started (a race it may win)
  if (abortRc != ncclSuccess || rc.load() == ncclSuccess || abortSecs > 1.0 || returnSecs > 1.0) {
    say("FAIL abort returned %d after %.3f s; the blocked call returned %d after %.3f s | %s\n", abortRc, abortSecs,
        rc.load(), returnSecs, ncclGetLastError(nullptr));
    failRank();
  }
  worst->abortSecs = std::max(worst->abortSecs, abortSecs);
  worst->returnSecs = std::max(worst->returnSecs, returnSecs);
}

// The call rank 0 blocks in at `point`; the other ranks never make it.
ncclResult_t blockedCall(const std::string& point, ncclComm_t comm, int peer, Buffers& b) {
  size_t n = 4096;
  if (point == "group") {
    ncclGroupStart();
    ncclAllReduce(b.in(), b.in(), n, ncclFloat32, ncclSum, comm, b.stream());
    ncclSend(b.in(), n, ncclFloat32, peer, comm, b.stream());
    ncclRecv(b.out(), n, ncclFloat32, peer, comm, b.stream());
    return ncclGroupEnd();
  }
  return ncclAllReduce(b.in(), b.in(), n, ncclFloat32, ncclSum, comm, b.stream());
}

int scenarioAbortThread(const std::string& point, int rounds) {
  if (gDevice) gpu::start(gRank);
  std::mt19937 rng(1234 + gRank);
  Worst worst;
  if (point == "init") {
    // Only rank 0: a non-blocking init that waits for a peer that never comes.
    for (int r = 0; r < rounds && gRank == 0; ++r) {
      ncclUniqueId id;
      EXPECT_OK(ncclGetUniqueId(&id));
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclComm_t comm = nullptr;
      ncclResult_t rc = ncclCommInitRankConfig(&comm, 2, id, 0, &config);
      EXPECT_TRUE(rc == ncclInProgress && comm != nullptr);
      abortWhileBlocked(comm, [comm] {
        ncclResult_t state = ncclInProgress;
        while (state == ncclInProgress) {
          if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInvalidUsage;  // aborted under us
          std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        return state;
      }, rng, &worst);
    }
  } else {
    ncclComm_t parent = initComm();
    Buffers b(8192);
    for (int r = 0; r < rounds; ++r) {
      ncclComm_t comm = nullptr;
      EXPECT_OK(ncclCommSplit(parent, 0, gRank, &comm, nullptr));
      if (point != "connect") barrier(comm);  // connections exist: the wait is in the engine
      if (gRank == 0) abortWhileBlocked(comm, [&] { return blockedCall(point, comm, 1, b); }, rng, &worst);
      barrier(parent);
      if (gRank != 0) EXPECT_OK(ncclCommDestroy(comm));  // failed (rank 0 aborted): destroy still works
    }
    EXPECT_OK(ncclCommDestroy(parent));
  }
  say("SUMMARY abort-thread %s rounds %d worst abort %.3f s worst return %.3f s\n", point.c_str(), rounds,
      worst.abortSecs, worst.returnSecs);
  say("OK\n");
  return 0;
}

// Both ranks as threads of this process: rank 1 never joins rank 0's call.
int scenarioAbortThreadLocal(int rounds) {
  std::mt19937 rng(99);
  Worst worst;
  const char* points[] = {"connect", "collective", "group"};
  for (int r = 0; r < rounds; ++r) {
    std::string point = points[r % 3];
    ncclUniqueId id;
    EXPECT_OK(ncclGetUniqueId(&id));
    ncclComm_t comms[2] = {nullptr, nullptr};
    std::thread t1([&] { EXPECT_OK(ncclCommInitRank(&comms[1], 2, id, 1)); });
    EXPECT_OK(ncclCommInitRank(&comms[0], 2, id, 0));
    t1.join();
    if (point != "connect") {
      std::thread b([&] {
        int64_t v = 1;
        EXPECT_OK(ncclAllReduce(&v, &v, 1, ncclInt64, ncclSum, comms[1], nullptr));
      });
      int64_t v = 1;
      EXPECT_OK(ncclAllReduce(&v, &v, 1, ncclInt64, ncclSum, comms[0], nullptr));
      b.join();
    }
    Buffers b(8192);
    abortWhileBlocked(comms[0], [&] { return blockedCall(point, comms[0], 1, b); }, rng, &worst);
    EXPECT_OK(ncclCommAbort(comms[1]));
  }
  say("SUMMARY abort-thread-local rounds %d worst abort %.3f s worst return %.3f s\n", rounds, worst.abortSecs,
      worst.returnSecs);
  say("OK\n");
  return 0;
}

// ---- a rank dies --------------------------------------------------------------------------

// One call of `coll` on host buffers of `count` floats; the buffers are sized for any collective.
ncclResult_t callOnce(braid::check::Collective coll, ncclComm_t comm, Buffers& b, size_t count) {
  using C = braid::check::Collective;
  float *in = b.in(), *out = b.out();
  cudaStream_t s = b.stream();
  switch (coll) {
    case C::AllReduce: return ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, s);
    case C::AllGather: return ncclAllGather(in, out, count, ncclFloat32, comm, s);
    case C::ReduceScatter: return ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, comm, s);
    case C::Broadcast: return ncclBroadcast(in, out, count, ncclFloat32, 0, comm, s);
    case C::Reduce: return ncclReduce(in, out, count, ncclFloat32, ncclSum, 0, comm, s);
    case C::AlltoAll: return ncclAlltoAll(in, out, count, ncclFloat32, comm, s);
    case C::Gather: return ncclGather(in, out, count, ncclFloat32, 0, comm, s);
    case C::Scatter: return ncclScatter(in, out, count, ncclFloat32, 0, comm, s);
    case C::SendRecv:
      ncclGroupStart();
      ncclSend(in, count, ncclFloat32, (gRank + 1) % gN, comm, s);
      ncclRecv(out, count, ncclFloat32, (gRank + gN - 1) % gN, comm, s);
      return ncclGroupEnd();
  }
  return ncclInternalError;
}

// Whether `pid` is a zombie (dead, not reaped): the third field of /proc/pid/stat is 'Z'.
bool isZombie(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

int scenarioDie(const std::string& collName, int victim, int delayUs, bool unreaped) {
  braid::check::Collective coll;
  EXPECT_TRUE(braid::check::parseCollective(collName, &coll));
  if (gRank == victim && unreaped) {
    // The rank's work happens in a child; this parent never reaps it while the survivors
    // must notice (a dead, unreaped child still passes kill(pid, 0)). Host memory only, no
    // CUDA initialised: fork is safe here.
    std::fflush(stdout);
    pid_t child = fork();
    EXPECT_TRUE(child >= 0);
    if (child > 0) {
      auto start = Clock::now();
      while (!isZombie(child) && secondsSince(start) < 60) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::this_thread::sleep_for(std::chrono::seconds(6));  // longer than the survivors may take
      say("unreaped parent: child %d was a zombie for 6 s\n", child);
      waitpid(child, nullptr, 0);
      say("OK\n");
      return 0;
    }
  }
  if (gDevice) gpu::start(gRank);
  ncclComm_t comm = initComm();
  size_t count = 1 << 15;
  Buffers b(count * gN);
  if (gRank == victim) {
    std::thread([delayUs] {
      std::this_thread::sleep_for(std::chrono::microseconds(delayUs));
      say("DEATH %lld\n", static_cast<long long>(wallNs()));
      std::fflush(stdout);
      kill(getpid(), SIGKILL);
    }).detach();
  }
  auto start = Clock::now();
  for (uint64_t i = 0;; ++i) {
    ncclResult_t rc = settle(callOnce(coll, comm, b, count), comm);
    if (rc != ncclSuccess) {
      say("LEARNED %lld rc=%d after %llu calls | %s\n", static_cast<long long>(wallNs()), rc,
          static_cast<unsigned long long>(i), ncclGetLastError(comm));
      EXPECT_TRUE(rc == ncclRemoteError);
      break;
    }
    EXPECT_TRUE(secondsSince(start) < 60);
  }
  EXPECT_OK(ncclCommAbort(comm));
  say("OK\n");
  return 0;
}

int scenarioLeave(int victim, int calls) {
  if (gDevice) gpu::start(gRank);
  ncclComm_t comm = initComm();
  size_t count = 1 << 12;
  Buffers b(count);
  const int mine = gRank == victim ? calls - 1 : calls;
  auto start = Clock::now();
  for (int i = 0; i < mine; ++i) {
    ncclResult_t rc = settle(ncclAllReduce(b.in(), b.out(), count, ncclFloat32, ncclSum, comm, b.stream()), comm);
    if (rc != ncclSuccess) {
      say("LEARNED %.3f s rc=%d in call %d | %s\n", secondsSince(start), rc, i + 1, ncclGetLastError(comm));
      EXPECT_TRUE(rc == ncclRemoteError && i + 1 == calls);
      EXPECT_OK(ncclCommAbort(comm));
      say("OK\n");
      return 0;
    }
  }
  if (gRank == victim) {
    EXPECT_OK(ncclCommDestroy(comm));
    say("LEFT after %d calls\n", mine);
  } else {
    say("FAIL: call %d completed without rank %d\n", calls, victim);
    EXPECT_TRUE(false);
    EXPECT_OK(ncclCommAbort(comm));
  }
  say("OK\n");
  return 0;
}

// The victim is killed at a step of connection setup (BRAID_FAULT_POINT, set before braid
// reads it); the survivor's call fails. The driver checks that /dev/shm keeps nothing.
int scenarioDieInSetup(int victim, const std::string& point) {
  if (gRank == victim) setenv("BRAID_FAULT_POINT", point.c_str(), 1);
  ncclComm_t comm = initComm();
  std::vector<float> buf(1 << 16, 1.0f);
  ncclResult_t rc = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
  say("RESULT rc=%d | %s\n", rc, ncclGetLastError(comm));
  EXPECT_TRUE(rc != ncclSuccess);  // the victim never gets here
  EXPECT_OK(ncclCommAbort(comm));
  say("OK\n");
  return 0;
}

// ---- hang reports -------------------------------------------------------------------------

// Rank 1 joins #2 (a broadcast from rank 0 along the ring) 3.5 s late: the ranks after it
// wait for its data, rank 0 only for the check of its call (it can complete).
int scenarioHang() {
  if (gDevice) gpu::start(gRank);
  ncclComm_t comm = initComm();
  barrier(comm);  // #1 ncclAllReduce (host memory)
  Buffers b(1024);
  if (gRank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  EXPECT_OK(settle(ncclBroadcast(b.in(), b.in(), 1024, ncclFloat32, 0, comm, b.stream()), comm));  // #2
  barrier(comm);  // #3: nobody leaves before everyone answered the reports
  EXPECT_OK(ncclCommDestroy(comm));
  say("OK\n");
  return 0;
}

int scenarioReportSignal() {
  ncclComm_t comm = initComm();
  barrier(comm);
  if (gRank == 0) {
    raise(SIGUSR1);  // braid's handler: a report, not the default termination
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
  }
  barrier(comm);
  EXPECT_OK(ncclCommDestroy(comm));
  say("OK\n");
  return 0;
}

// ---- what the call check costs ------------------------------------------------------------

// Two ranks as threads of this process (-np 1): ITERS 8-byte all-reduces, each waited for;
// the mean time per call. Run with BRAID_CHECK_CALLS=-1 (no check), 0 (host calls only, the
// default) and 1 (device calls too) to see what the check costs.
int scenarioCallCost(int iters) {
  ncclUniqueId id;
  EXPECT_OK(ncclGetUniqueId(&id));
  double perCall[2] = {0, 0};
  auto rank = [&](int r) {
    gRank = r;
    if (gDevice) gpu::start(r);
    ncclComm_t comm = nullptr;
    EXPECT_OK(ncclCommInitRank(&comm, 2, id, r));
    Buffers b(16);
    for (int i = 0; i < 100; ++i) EXPECT_OK(settle(ncclAllReduce(b.in(), b.out(), 2, ncclFloat32, ncclSum, comm, b.stream()), comm));
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i)
      EXPECT_OK(settle(ncclAllReduce(b.in(), b.out(), 2, ncclFloat32, ncclSum, comm, b.stream()), comm));
    perCall[r] = secondsSince(t0) * 1e6 / iters;
    EXPECT_OK(ncclCommDestroy(comm));
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  const char* check = std::getenv("BRAID_CHECK_CALLS");
  say("SUMMARY call-cost %s memory BRAID_CHECK_CALLS=%s: %.2f us per 8-byte all-reduce (2 ranks as threads, %d calls)\n",
      gDevice ? "device" : "host", check ? check : "unset", std::max(perCall[0], perCall[1]), iters);
  say("OK\n");
  return 0;
}

// ---- mismatched calls ---------------------------------------------------------------------

int scenarioMismatch(const std::string& kind) {
  if (gDevice) gpu::start(gRank);
  ncclComm_t comm = initComm();
  barrier(comm);
  Buffers b(4096 * gN);
  float *buf = b.in(), *out = b.out();
  int32_t* ints = reinterpret_cast<int32_t*>(out);
  cudaStream_t st = b.stream();
  size_t count = 1024;
  ncclResult_t rc = ncclSuccess;
  bool odd = gRank % 2 == 1;
  if (kind == "bcast-root") {
    rc = ncclBroadcast(buf, out, count, ncclFloat32, gRank % 2, comm, st);
  } else if (kind == "reduce-root") {
    rc = ncclReduce(buf, out, count, ncclFloat32, ncclSum, gRank % 2, comm, st);
  } else if (kind == "coll") {
    rc = gRank == 0 ? ncclAllReduce(buf, out, count, ncclFloat32, ncclSum, comm, st)
                    : ncclBroadcast(buf, out, count, ncclFloat32, 0, comm, st);
  } else if (kind == "count") {
    rc = ncclAllReduce(buf, out, count + (gRank == 0), ncclFloat32, ncclSum, comm, st);
  } else if (kind == "type") {
    rc = gRank == 0 ? ncclAllReduce(ints, ints, count, ncclInt32, ncclSum, comm, st)
                    : ncclAllReduce(buf, out, count, ncclFloat32, ncclSum, comm, st);
  } else if (kind == "op") {
    rc = ncclAllReduce(buf, out, count, ncclFloat32, odd ? ncclMax : ncclSum, comm, st);
  } else if (kind == "p2p-count") {
    // Rank 0 sends 1024 to rank 1, which expects 512; the other ranks take no part. Rank 0's
    // send may complete (it fits in the FIFO); its next call must fail.
    if (gRank == 0) rc = ncclSend(buf, count, ncclFloat32, 1, comm, st);
    if (gRank == 1) rc = ncclRecv(out, count / 2, ncclFloat32, 0, comm, st);
    if (gRank == 0 && rc == ncclSuccess) {
      say("send returned %d\n", rc);
      auto start = Clock::now();  // the receiver's news travels over the liveness mesh
      ncclResult_t async = ncclSuccess;
      while (async == ncclSuccess && secondsSince(start) < 5) {
        EXPECT_OK(ncclCommGetAsyncError(comm, &async));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      rc = ncclAllReduce(buf, out, count, ncclFloat32, ncclSum, comm, st);
    }
    if (gRank > 1) {
      // Not involved: told by the mesh (an abort of ours now would fail the others first).
      auto start = Clock::now();
      ncclResult_t async = ncclSuccess;
      while (async == ncclSuccess && secondsSince(start) < 10) {
        EXPECT_OK(ncclCommGetAsyncError(comm, &async));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      say("RESULT rc=0 | not involved; async error %d: %s\n", async, ncclGetLastError(comm));
      EXPECT_OK(ncclCommAbort(comm));
      say("OK\n");
      return 0;
    }
  } else {
    say("FAIL unknown mismatch class %s\n", kind.c_str());
    return 2;
  }
  rc = settle(rc, comm);
  say("RESULT rc=%d | %s\n", rc, ncclGetLastError(comm));
  EXPECT_TRUE(rc == ncclInvalidUsage);
  EXPECT_OK(ncclCommAbort(comm));
  say("OK\n");
  return 0;
}

int intArg(const std::vector<std::string>& a, size_t i, int fallback) {
  return i < a.size() ? std::atoi(a[i].c_str()) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<std::string> a;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--memory" && i + 1 < argc) {
      gDevice = std::string(argv[++i]) == "device";
      continue;
    }
    a.push_back(argv[i]);
  }
  if (a.empty()) {
    std::fprintf(stderr, "usage: faults_rank <scenario> [args...] (see the file's header)\n");
    return 2;
  }
  braid::test::RankEnv env;
  std::string error;
  if (!braid::test::readRankEnv(&env, &error) || !env.launched || !env.hasUniqueId) {
    std::fprintf(stderr, "faults_rank: start me through the launcher%s%s\n", error.empty() ? "" : ": ", error.c_str());
    return 2;
  }
  gRank = env.rank;
  gN = env.nRanks;
  gId = env.uniqueId;
  if (gDevice) gpu::loadDriver();  // exits 77 without a GPU
  const std::string& s = a[0];
  if (s == "abort-thread") return scenarioAbortThread(a.size() > 1 ? a[1] : "collective", intArg(a, 2, 10));
  if (s == "abort-thread-local") {
    gThreads = true;
    return scenarioAbortThreadLocal(intArg(a, 1, 10));
  }
  if (s == "die") return scenarioDie(a.size() > 1 ? a[1] : "allreduce", intArg(a, 2, 1), intArg(a, 3, 1000),
                                     a.size() > 4 && a[4] == "unreaped");
  if (s == "leave") return scenarioLeave(intArg(a, 1, 1), intArg(a, 2, 3));
  if (s == "die-in-setup") return scenarioDieInSetup(intArg(a, 1, 1), a.size() > 2 ? a[2] : "host-offer-sent");
  if (s == "hang") return scenarioHang();
  if (s == "call-cost") return scenarioCallCost(intArg(a, 1, 2000));
  if (s == "report-signal") return scenarioReportSignal();
  if (s == "mismatch") return scenarioMismatch(a.size() > 1 ? a[1] : "coll");
  std::fprintf(stderr, "faults_rank: unknown scenario %s\n", s.c_str());
  return 2;
}
