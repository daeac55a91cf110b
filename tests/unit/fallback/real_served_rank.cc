// One rank of a communicator across emulated hosts (each rank its own BRAID_HOSTID), started by
// real_served_test.cc. The driver makes UCX unavailable (BRAID_UCX_LIBRARY) and gives the
// stand-in NCCL (fake_nccl.c, BRAID_NCCL_LIBRARY). Modes (argv[1]):
//   auto     braid cannot connect the ranks: the real NCCL serves every call on the braid handle;
//            each call is checked in the stand-in's journal (its own handle, its id) and for its
//            result; a group mixes the communicator with a braid one.
//   refused  init must fail (BRAID_BACKEND=braid, or no real NCCL): prints the last error.
//   braid    UCX works: braid serves the communicator, the stand-in sees nothing.
// Prints OK when every check passed; exits 1 at the first failure.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/rank_env.h"

// The device API's host half (NVIDIA's nccl_device.h is not included: the team's layout only).
extern "C" {
struct BraidTestTeam {
  int nRanks, rank, stride;
};
BraidTestTeam ncclTeamWorld(ncclComm_t comm);
}

namespace {

int gRank = 0;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::printf("[rank %d] FAIL %s:%d: %s: ", gRank, __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                                                \
      std::printf("\n");                                                       \
      std::fflush(stdout);                                                     \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)
#define CHECK_OK(call) \
  do {                 \
    ncclResult_t r_ = (call); \
    CHECK(r_ == ncclSuccess, "returned %d: %s", static_cast<int>(r_), ncclGetLastError(nullptr)); \
  } while (0)

// The stand-in's own functions: the copy braid loaded (same path, same handle).
struct Fake {
  void* handle = nullptr;
  Fake() {
    const char* path = std::getenv("BRAID_NCCL_LIBRARY");
    handle = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  }
  template <typename Fn>
  Fn fn(const char* name) const {
    return handle ? reinterpret_cast<Fn>(dlsym(handle, name)) : nullptr;
  }
  std::string journal() const {
    auto f = fn<const char* (*)()>("fakeNcclJournal");
    return f ? f() : "";
  }
  void clear() const {
    if (auto f = fn<void (*)()>("fakeNcclClearJournal")) f();
  }
};

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The stand-in's id of the communicator this rank joined ("CommInitRankConfig id=X rank=R").
std::string realIdIn(const std::string& journal, int rank, int nRanks) {
  const std::string key = "CommInitRankConfig id=";
  for (size_t at = journal.find(key); at != std::string::npos; at = journal.find(key, at + 1)) {
    size_t end = journal.find('\n', at);
    std::string line = journal.substr(at, end - at);
    if (line.find(" rank=" + std::to_string(rank) + " nranks=" + std::to_string(nRanks)) != std::string::npos)
      return line.substr(key.size(), line.find(' ', key.size()) - key.size());
  }
  return "";
}

// Every call since the journal was cleared named `what` on real communicator `id`, this rank.
void expectServed(const Fake& fake, const std::string& what, const std::string& id) {
  std::string j = fake.journal();
  CHECK(j.find(what + " id=" + id + " rank=" + std::to_string(gRank)) != std::string::npos,
        "the stand-in did not serve %s on its communicator %s; journal:\n%s", what.c_str(), id.c_str(), j.c_str());
}

void collectives(const Fake& fake, ncclComm_t comm, const std::string& id, int n) {
  const int r = gRank;
  const size_t count = 7;
  std::vector<float> send(count), recv(count * n, -1.0f);
  for (size_t i = 0; i < count; ++i) send[i] = float(r + 1) * 10 + float(i);
  CHECK_OK(ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr));
  expectServed(fake, "AllReduce", id);
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int q = 0; q < n; ++q) want += float(q + 1) * 10 + float(i);
    CHECK(recv[i] == want, "all-reduce element %zu: %g, want %g", i, recv[i], want);
  }
  std::vector<int32_t> ints = {r * 5, -r, 100 + r}, maxed(3, 0);
  CHECK_OK(ncclAllReduce(ints.data(), maxed.data(), 3, ncclInt32, ncclMax, comm, nullptr));
  CHECK(maxed[0] == (n - 1) * 5 && maxed[1] == 0 && maxed[2] == 100 + n - 1, "int32 max: %d %d %d", maxed[0], maxed[1], maxed[2]);
  CHECK_OK(ncclBroadcast(send.data(), recv.data(), count, ncclFloat32, n - 1, comm, nullptr));
  expectServed(fake, "Broadcast", id);
  CHECK(recv[3] == float(n) * 10 + 3, "broadcast from rank %d: %g", n - 1, recv[3]);
  CHECK_OK(ncclAllGather(send.data(), recv.data(), count, ncclFloat32, comm, nullptr));
  expectServed(fake, "AllGather", id);
  for (int q = 0; q < n; ++q) CHECK(recv[q * count + 1] == float(q + 1) * 10 + 1, "all-gather part %d: %g", q, recv[q * count + 1]);
  std::vector<float> big(count * n);
  for (size_t i = 0; i < big.size(); ++i) big[i] = float(r) + float(i);
  std::vector<float> part(count, 0);
  CHECK_OK(ncclReduceScatter(big.data(), part.data(), count, ncclFloat32, ncclSum, comm, nullptr));
  expectServed(fake, "ReduceScatter", id);
  float wantPart = 0;
  for (int q = 0; q < n; ++q) wantPart += float(q) + float(r * count);
  CHECK(part[0] == wantPart, "reduce-scatter: %g, want %g", part[0], wantPart);
  std::vector<float> reduced(count, -1.0f);
  CHECK_OK(ncclReduce(send.data(), reduced.data(), count, ncclFloat32, ncclSum, 0, comm, nullptr));
  expectServed(fake, "Reduce", id);
  if (r == 0) CHECK(reduced[0] == float(n * (n + 1) / 2) * 10, "reduce at root: %g", reduced[0]);
  else CHECK(reduced[0] == -1.0f, "reduce wrote a non-root's output: %g", reduced[0]);
  CHECK_OK(ncclAlltoAll(big.data(), recv.data(), count, ncclFloat32, comm, nullptr));
  expectServed(fake, "AlltoAll", id);
  for (int q = 0; q < n; ++q) CHECK(recv[q * count] == float(q) + float(r * count), "all-to-all from %d: %g", q, recv[q * count]);
}

// Send/recv with every peer in one group, and a group mixing a braid communicator (one rank,
// host memory) with the real-served one: braid's half and the stand-in's both run.
void groups(const Fake& fake, ncclComm_t comm, const std::string& id, int n) {
  std::vector<int32_t> out(4), in(4 * n, -1);
  for (int i = 0; i < 4; ++i) out[i] = gRank * 1000 + i;
  CHECK_OK(ncclGroupStart());
  for (int peer = 0; peer < n; ++peer) {
    CHECK_OK(ncclSend(out.data(), 4, ncclInt32, peer, comm, nullptr));
    CHECK_OK(ncclRecv(in.data() + 4 * peer, 4, ncclInt32, peer, comm, nullptr));
  }
  CHECK(in[0] == -1, "a receive completed before ncclGroupEnd");
  CHECK_OK(ncclGroupEnd());
  expectServed(fake, "Send", id);
  expectServed(fake, "Recv", id);
  for (int peer = 0; peer < n; ++peer) CHECK(in[4 * peer + 2] == peer * 1000 + 2, "from %d: %d", peer, in[4 * peer + 2]);

  ncclComm_t solo = nullptr;
  CHECK_OK(ncclCommInitAll(&solo, 1, nullptr));  // host-only, one rank: braid's own
  fake.clear();
  float mine[2] = {1.5f, 2.5f}, soloOut[2] = {0, 0};
  float shared[2] = {float(gRank), 1.0f}, sharedOut[2] = {0, 0};
  CHECK_OK(ncclGroupStart());
  CHECK_OK(ncclAllReduce(mine, soloOut, 2, ncclFloat32, ncclSum, solo, nullptr));
  CHECK_OK(ncclAllReduce(shared, sharedOut, 2, ncclFloat32, ncclSum, comm, nullptr));
  CHECK_OK(ncclGroupEnd());
  std::string j = fake.journal();
  CHECK(occurrences(j, "AllReduce") == 1 && j.find("AllReduce id=" + id) != std::string::npos &&
            j.find("queued") != std::string::npos && j.find("GroupEnd") != std::string::npos,
        "the mixed group: only the real-served call reaches the stand-in, inside its group; journal:\n%s", j.c_str());
  CHECK(soloOut[0] == 1.5f && soloOut[1] == 2.5f, "braid's half: %g %g", soloOut[0], soloOut[1]);
  CHECK(sharedOut[0] == float(n * (n - 1) / 2) && sharedOut[1] == float(n), "the real half: %g %g", sharedOut[0], sharedOut[1]);
  CHECK_OK(ncclCommDestroy(solo));
}

void queriesAndMemory(const Fake& fake, ncclComm_t comm, const std::string& id, int n) {
  int count = 0, rank = -1, dev = 7;
  CHECK_OK(ncclCommCount(comm, &count));
  expectServed(fake, "CommCount", id);
  CHECK_OK(ncclCommUserRank(comm, &rank));
  expectServed(fake, "CommUserRank", id);
  CHECK_OK(ncclCommCuDevice(comm, &dev));
  expectServed(fake, "CommCuDevice", id);
  CHECK(count == n && rank == gRank && dev == -1, "count %d rank %d device %d", count, rank, dev);
  float buf[8];
  void* handle = nullptr;
  CHECK_OK(ncclCommRegister(comm, buf, sizeof buf, &handle));
  expectServed(fake, "CommRegister", id);
  CHECK_OK(ncclCommDeregister(comm, handle));  // the stand-in checks it is its own handle
  expectServed(fake, "CommDeregister", id);
  ncclRedOp_t op = ncclSum;
  float scalar = 2.0f;
  CHECK_OK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  CHECK(static_cast<int>(op) == 77, "the stand-in's op: %d", static_cast<int>(op));
  CHECK_OK(ncclRedOpDestroy(op, comm));
  expectServed(fake, "RedOpDestroy", id);
  ncclResult_t async = ncclInternalError;
  CHECK_OK(ncclCommGetAsyncError(comm, &async));
  expectServed(fake, "GetAsyncError", id);
  CHECK(async == ncclSuccess, "async error %d", static_cast<int>(async));
  fake.fn<void (*)(const char*)>("fakeNcclSetLastError")("fake: the stand-in's last error");
  const char* last = ncclGetLastError(comm);
  expectServed(fake, "GetLastError", id);
  CHECK(last && std::strcmp(last, "fake: the stand-in's last error") == 0, "ncclGetLastError(comm): %s", last);
  fake.fn<void (*)(const char*)>("fakeNcclSetLastError")("");
}

// Split (keys reversed, then one rank opting out) and shrink: children the stand-in makes,
// behind new braid handles that it serves too.
void derived(const Fake& fake, ncclComm_t comm, const std::string& id, int n) {
  ncclComm_t child = nullptr;
  CHECK_OK(ncclCommSplit(comm, 0, n - gRank, &child, nullptr));
  expectServed(fake, "CommSplit", id);
  CHECK(child != nullptr && child != comm, "split child %p", static_cast<void*>(child));
  int rank = -1, count = 0;
  CHECK_OK(ncclCommUserRank(child, &rank));
  CHECK_OK(ncclCommCount(child, &count));
  CHECK(rank == n - 1 - gRank && count == n, "split child: rank %d of %d", rank, count);
  int32_t v = gRank + 1, sum = 0;
  CHECK_OK(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, child, nullptr));
  CHECK(sum == n * (n + 1) / 2, "child all-reduce %d", sum);
  std::string j = fake.journal();
  CHECK(occurrences(j, "CommInitRankConfig") == 0, "the child was made by a real init, not by the real split:\n%s", j.c_str());
  CHECK_OK(ncclCommDestroy(child));
  CHECK(fake.journal().find("CommDestroy id=") != std::string::npos, "the child's real communicator was not destroyed");

  ncclComm_t lone = nullptr;
  CHECK_OK(ncclCommSplit(comm, gRank == 0 ? 0 : NCCL_SPLIT_NOCOLOR, 0, &lone, nullptr));
  CHECK((gRank == 0) == (lone != nullptr), "NCCL_SPLIT_NOCOLOR: rank %d got %p", gRank, static_cast<void*>(lone));
  if (lone) {
    CHECK_OK(ncclCommCount(lone, &count));
    CHECK(count == 1, "lone child of %d", count);
    CHECK_OK(ncclCommDestroy(lone));
  }

  ncclComm_t shrunk = nullptr;
  CHECK_OK(ncclCommShrink(comm, nullptr, 0, &shrunk, nullptr, NCCL_SHRINK_DEFAULT));
  expectServed(fake, "CommShrink", id);
  CHECK_OK(ncclCommCount(shrunk, &count));
  CHECK(count == n, "shrunk child of %d", count);
  // Abort from another thread while a receive (whose send never comes) waits inside the real
  // NCCL: the real abort comes first, so the receive returns and braid's teardown need not wait.
  ncclResult_t blocked = ncclSuccess;
  int32_t never = 0;
  std::thread waiter([&] { blocked = ncclRecv(&never, 1, ncclInt32, 1 - gRank, shrunk, nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto start = std::chrono::steady_clock::now();
  CHECK_OK(ncclCommAbort(shrunk));
  waiter.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(blocked != ncclSuccess && seconds < 3.0, "the blocked receive: %d after %.2f s", static_cast<int>(blocked), seconds);
  CHECK(fake.journal().find("CommAbort id=") != std::string::npos, "the shrunk child was not aborted in the stand-in");
}

int servedByReal(const braid::test::RankEnv& env) {
  Fake fake;
  CHECK(fake.handle != nullptr, "the stand-in NCCL (BRAID_NCCL_LIBRARY) does not load: %s", dlerror());
  fake.clear();
  ncclComm_t comm = nullptr;
  CHECK_OK(ncclCommInitRank(&comm, env.nRanks, env.uniqueId, env.rank));
  const std::string id = realIdIn(fake.journal(), env.rank, env.nRanks);
  CHECK(!id.empty(), "init made no real communicator; journal:\n%s", fake.journal().c_str());
  collectives(fake, comm, id, env.nRanks);
  groups(fake, comm, id, env.nRanks);
  queriesAndMemory(fake, comm, id, env.nRanks);
  // A call braid lacks (the device API) goes to the same real communicator: none is made for it.
  BraidTestTeam team = ncclTeamWorld(comm);
  CHECK(team.nRanks == env.nRanks && team.rank == env.rank, "ncclTeamWorld: %d of %d", team.rank, team.nRanks);
  CHECK(occurrences(fake.journal(), "CommInitRankConfig") == 0, "a second real communicator:\n%s", fake.journal().c_str());
  derived(fake, comm, id, env.nRanks);
  fake.clear();
  CHECK_OK(ncclCommFinalize(comm));
  expectServed(fake, "CommFinalize", id);
  CHECK_OK(ncclCommDestroy(comm));
  expectServed(fake, "CommDestroy", id);
  return 0;
}

int refused(const braid::test::RankEnv& env) {
  ncclComm_t comm = nullptr;
  ncclResult_t rc = ncclCommInitRank(&comm, env.nRanks, env.uniqueId, env.rank);
  CHECK(rc != ncclSuccess && comm == nullptr, "init succeeded (%d)", static_cast<int>(rc));
  std::printf("[rank %d] init failed (%d): %s\n", gRank, static_cast<int>(rc), ncclGetLastError(nullptr));
  return 0;
}

int servedByBraid(const braid::test::RankEnv& env) {
  Fake fake;
  fake.clear();
  ncclComm_t comm = nullptr;
  ncclResult_t rc = ncclCommInitRank(&comm, env.nRanks, env.uniqueId, env.rank);
  if (rc != ncclSuccess && std::strstr(ncclGetLastError(nullptr), "UCX")) {
    std::printf("[rank %d] SKIP: UCX does not work here: %s\n", gRank, ncclGetLastError(nullptr));
    return 77;
  }
  CHECK_OK(rc);
  float v = float(gRank + 1), sum = 0;
  CHECK_OK(ncclAllReduce(&v, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
  CHECK(sum == float(env.nRanks * (env.nRanks + 1) / 2), "braid's all-reduce over UCX: %g", sum);
  CHECK_OK(ncclCommDestroy(comm));
  CHECK(fake.journal().empty(), "the stand-in saw calls although braid connects the ranks:\n%s", fake.journal().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const braid::test::RankEnv env = braid::test::rankEnvOrExit("real_served_rank");
  gRank = env.rank;
  const std::string mode = argc > 1 ? argv[1] : "";
  setenv("BRAID_HOSTID", ("real-served-host-" + std::to_string(env.rank)).c_str(), 1);  // each rank its own host
  int rc = 2;
  if (mode == "auto") rc = servedByReal(env);
  else if (mode == "refused") rc = refused(env);
  else if (mode == "braid") rc = servedByBraid(env);
  else std::fprintf(stderr, "usage: real_served_rank auto|refused|braid\n");
  if (rc == 0) std::printf("[rank %d] OK\n", gRank);
  return rc;
}
