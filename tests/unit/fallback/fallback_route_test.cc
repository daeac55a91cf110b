// BRAID_BACKEND=auto through braid's exported API (libbraid.so), with a stand-in for the real
// NCCL (fake_nccl.c: CI has no GPU, so the real one cannot make a communicator): the calls
// braid lacks go to the real library with the real handle, its communicator made on first
// need, collectively, with the id over braid's bootstrap; destroy, abort, finalize, split and
// async errors follow the braid communicator; a failed real init names rank, call, library
// and the real error; a mixed group runs braid's half first. Run three ways (CMakeLists.txt):
// with the fake (Fake.*), with no loadable NCCL (NoRealNccl.*), with the toolkit's real
// libnccl.so.2 on a machine without GPU (RealNcclNoGpu.*).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"

// The device API's host half (nccl_device.h, which is NVIDIA's, is not included: opaque here).
extern "C" {
struct BraidTestTeam {
  int nRanks, rank, stride;
};
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, void* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void* devComm);
BraidTestTeam ncclTeamWorld(ncclComm_t comm);
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
}

namespace {

// The fake's own functions (dlopen of the same path gives the copy braid loads).
struct Fake {
  Fake() {
    const char* path = std::getenv("BRAID_NCCL_LIBRARY");
    handle = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;  // the same copy braid loads
  }
  template <typename Fn>
  Fn fn(const char* name) const { return handle ? reinterpret_cast<Fn>(dlsym(handle, name)) : nullptr; }
  std::string journal() const { return fn<const char* (*)()>("fakeNcclJournal")(); }
  void clear() const { fn<void (*)()>("fakeNcclClearJournal")(); }
  void* handle;
};

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// n host-only ranks of one process, one thread each.
std::vector<ncclComm_t> initRanks(int n) {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclComm_t> comms(n, nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] { EXPECT_EQ(ncclCommInitRank(&comms[r], n, id, r), ncclSuccess) << ncclGetLastError(nullptr); });
  for (auto& t : threads) t.join();
  return comms;
}

// Runs body(rank, comm) on every rank at once (collective calls).
void onEveryRank(const std::vector<ncclComm_t>& comms, const std::function<void(int, ncclComm_t)>& body) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) threads.emplace_back([&, r] { body(static_cast<int>(r), comms[r]); });
  for (auto& t : threads) t.join();
}

TEST(Fake, DeviceApiServedByTheRealNcclMadeLazilyAndCollectively) {
  Fake fake;
  ASSERT_NE(fake.handle, nullptr) << dlerror();
  fake.clear();
  auto comms = initRanks(2);
  // Init alone makes no real communicator.
  EXPECT_EQ(fake.journal().find("CommInitRankConfig"), std::string::npos) << fake.journal();
  std::vector<unsigned long long> devComm(2, 0);
  onEveryRank(comms, [&](int r, ncclComm_t c) {
    EXPECT_EQ(ncclDevCommCreate(c, nullptr, &devComm[r]), ncclSuccess) << ncclGetLastError(nullptr);
  });
  std::string j = fake.journal();
  // Rank 0 alone asked for the id; both ranks joined with it, with braid's rank and size.
  ASSERT_EQ(occurrences(j, "GetUniqueId"), 1u) << j;
  std::string id = j.substr(j.find("GetUniqueId ") + 12, j.find('\n', j.find("GetUniqueId")) - j.find("GetUniqueId ") - 12);
  EXPECT_NE(j.find("CommInitRankConfig id=" + id + " rank=0 nranks=2"), std::string::npos) << j;
  EXPECT_NE(j.find("CommInitRankConfig id=" + id + " rank=1 nranks=2"), std::string::npos) << j;
  // The real NCCL got its own handle (the fake refuses any other) and filled the output.
  EXPECT_EQ(occurrences(j, "DevCommCreate id=" + id), 2u) << j;
  EXPECT_EQ(devComm[0], std::stoull(id, nullptr, 16));
  // A second call, and a local query, reuse the communicator.
  onEveryRank(comms, [&](int r, ncclComm_t c) {
    EXPECT_EQ(ncclDevCommDestroy(c, &devComm[r]), ncclSuccess);
    BraidTestTeam t = ncclTeamWorld(c);
    EXPECT_EQ(t.nRanks, 2);
    EXPECT_EQ(t.rank, r);
  });
  EXPECT_EQ(occurrences(fake.journal(), "CommInitRankConfig"), 2u);
  // Destroy closes the real communicator too.
  onEveryRank(comms, [&](int, ncclComm_t c) { EXPECT_EQ(ncclCommDestroy(c), ncclSuccess); });
  EXPECT_EQ(occurrences(fake.journal(), "CommDestroy id=" + id), 2u) << fake.journal();
}

// The fake was loaded before braid asked for it, by plain dlopen (Fake's constructor), as
// PyTorch preloads libnccl.so.2: its own call of ncclCommGetAsyncError (inside DevCommCreate,
// as NCCL's enqueue checks make) binds to braid's export, which must hand it back to the fake.
TEST(Fake, ItsOwnExportedNamesBoundToBraidsComeBackToIt) {
  Fake fake;
  ASSERT_NE(fake.handle, nullptr) << dlerror();
  ASSERT_NE(dlsym(RTLD_DEFAULT, "ncclCommGetAsyncError"), fake.fn<void*>("pncclCommGetAsyncError"))
      << "precondition: the global ncclCommGetAsyncError is braid's";
  fake.clear();
  auto comms = initRanks(2);
  onEveryRank(comms, [&](int, ncclComm_t c) {
    EXPECT_EQ(ncclDevCommCreate(c, nullptr, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  });
  const std::string j = fake.journal();
  // Each DevCommCreate first asked about its own communicator, and the fake answered.
  EXPECT_EQ(occurrences(j, "GetAsyncError id="), 2u) << j;
  EXPECT_EQ(occurrences(j, "DevCommCreate id="), 2u) << j;
  onEveryRank(comms, [&](int, ncclComm_t c) { EXPECT_EQ(ncclCommDestroy(c), ncclSuccess); });
  // Closed: its handle is braid's business no more (a later call with it is refused by braid).
}

TEST(Fake, CallsWithoutACommunicatorGoStraightThrough) {
  Fake fake;
  fake.clear();
  EXPECT_EQ(ncclLLA2ACalcSlots(1024, 8), 42);
  EXPECT_NE(fake.journal().find("LLA2ACalcSlots 1024 8"), std::string::npos);
}

TEST(Fake, AbortFinalizeAndAsyncErrorsFollowTheBraidCommunicator) {
  Fake fake;
  fake.clear();
  auto comms = initRanks(2);
  onEveryRank(comms, [&](int, ncclComm_t c) { EXPECT_EQ(ncclDevCommCreate(c, nullptr, nullptr), ncclSuccess); });
  ncclResult_t async = ncclInternalError;
  EXPECT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  fake.fn<void (*)(int)>("fakeNcclSetAsyncError")(ncclRemoteError);
  EXPECT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclRemoteError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("real NCCL communicator"), std::string::npos);
  fake.fn<void (*)(int)>("fakeNcclSetAsyncError")(ncclSuccess);
  // Rank 0 finalizes before rank 1 aborts: a finalize that sees a peer's abort fails, rightly
  // (it raced so on a loaded machine).
  EXPECT_EQ(ncclCommFinalize(comms[0]), ncclSuccess) << ncclGetLastError(nullptr);
  onEveryRank(comms, [&](int r, ncclComm_t c) { EXPECT_EQ(r == 0 ? ncclCommDestroy(c) : ncclCommAbort(c), ncclSuccess); });
  std::string j = fake.journal();
  EXPECT_NE(j.find("CommFinalize"), std::string::npos) << j;
  EXPECT_NE(j.find("rank=0"), std::string::npos);
  EXPECT_EQ(occurrences(j, "CommDestroy"), 1u) << j;
  EXPECT_EQ(occurrences(j, "CommAbort"), 1u) << j;
}

TEST(Fake, SplitChildMakesItsOwnRealCommunicator) {
  Fake fake;
  auto comms = initRanks(3);
  onEveryRank(comms, [&](int, ncclComm_t c) { EXPECT_EQ(ncclDevCommCreate(c, nullptr, nullptr), ncclSuccess); });
  fake.clear();
  std::vector<ncclComm_t> children(3, nullptr);
  onEveryRank(comms, [&](int r, ncclComm_t c) {
    EXPECT_EQ(ncclCommSplit(c, r == 2 ? NCCL_SPLIT_NOCOLOR : 0, r, &children[r], nullptr), ncclSuccess);
  });
  EXPECT_EQ(fake.journal().find("CommInitRankConfig"), std::string::npos) << "split made a real communicator at once";
  std::vector<ncclComm_t> two = {children[0], children[1]};
  onEveryRank(two, [&](int r, ncclComm_t c) {
    BraidTestTeam t = ncclTeamWorld(c);  // a local query is the first need here: collective
    EXPECT_EQ(t.nRanks, 2);
    EXPECT_EQ(t.rank, r);
  });
  EXPECT_EQ(occurrences(fake.journal(), "nranks=2"), 2u) << fake.journal();
  onEveryRank(two, [&](int, ncclComm_t c) { EXPECT_EQ(ncclCommDestroy(c), ncclSuccess); });
  onEveryRank(comms, [&](int, ncclComm_t c) { EXPECT_EQ(ncclCommDestroy(c), ncclSuccess); });
}

// A group mixing both: braid's half (a host-memory all-reduce) has run when the real half's
// pncclGroupEnd is called; the real call was made inside the real group.
thread_local const float* tlsReduced = nullptr;
thread_local bool tlsBraidHalfDone = false;
void onRealGroupEnd() { tlsBraidHalfDone = tlsReduced != nullptr && tlsReduced[0] == 3.0f; }

TEST(Fake, MixedGroupRunsBraidsHalfThenTheRealOne) {
  Fake fake;
  fake.fn<void (*)(void (*)())>("fakeNcclOnGroupEnd")(onRealGroupEnd);
  auto comms = initRanks(2);
  onEveryRank(comms, [&](int, ncclComm_t c) { EXPECT_EQ(ncclDevCommCreate(c, nullptr, nullptr), ncclSuccess); });
  fake.clear();
  std::vector<int> braidHalfFirst(2, 0);
  onEveryRank(comms, [&](int r, ncclComm_t c) {
    float send[4] = {float(r + 1), 1, 1, 1}, recv[4] = {};
    tlsReduced = recv;
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(send, recv, 4, ncclFloat32, ncclSum, c, nullptr), ncclSuccess);
    EXPECT_EQ(ncclDevCommCreate(c, nullptr, nullptr), ncclSuccess);
    EXPECT_EQ(recv[0], 0.0f);  // nothing of the group ran yet
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_EQ(recv[0], 3.0f);
    braidHalfFirst[r] = tlsBraidHalfDone;
    tlsReduced = nullptr;
  });
  EXPECT_EQ(braidHalfFirst, std::vector<int>({1, 1}));
  std::string j = fake.journal();
  EXPECT_LT(j.find("GroupStart"), j.find("DevCommCreate")) << j;  // inside the real group
  EXPECT_LT(j.rfind("DevCommCreate"), j.rfind("GroupEnd")) << j;
  EXPECT_EQ(occurrences(j, "GroupStart"), 2u) << j;
  EXPECT_EQ(occurrences(j, "GroupEnd"), 2u) << j;
  fake.fn<void (*)(void (*)())>("fakeNcclOnGroupEnd")(nullptr);
  onEveryRank(comms, [&](int, ncclComm_t c) { EXPECT_EQ(ncclCommDestroy(c), ncclSuccess); });
}

// A real communicator cannot be made inside a group by ranks of one process (one thread may
// drive several): refused, saying how to avoid it.
TEST(Fake, FirstNeedInsideAGroupOfOneProcessIsRefused) {
  auto comms = initRanks(2);
  onEveryRank(comms, [&](int, ncclComm_t c) {
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclDevCommCreate(c, nullptr, nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("outside the group"), std::string::npos)
        << ncclGetLastError(nullptr);
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  });
  onEveryRank(comms, [&](int, ncclComm_t c) { EXPECT_EQ(ncclCommDestroy(c), ncclSuccess); });
}

// Last: the fake fails every init from here on.
TEST(Fake, ZFailedRealInitNamesRankCallLibraryAndTheRealError) {
  Fake fake;
  fake.fn<void (*)(int, const char*)>("fakeNcclFailInit")(ncclUnhandledCudaError, "fake: no CUDA device");
  auto comms = initRanks(1);
  EXPECT_EQ(ncclDevCommCreate(comms[0], nullptr, nullptr), ncclUnhandledCudaError);
  std::string last = ncclGetLastError(nullptr);
  EXPECT_NE(last.find("ncclDevCommCreate (rank 0)"), std::string::npos) << last;
  EXPECT_NE(last.find(std::getenv("BRAID_NCCL_LIBRARY")), std::string::npos) << last;
  EXPECT_NE(last.find("fake: no CUDA device"), std::string::npos) << last;
  EXPECT_EQ(ncclCommDestroy(comms[0]), ncclSuccess);
}

// BRAID_NCCL_LIBRARY names a file that does not exist: auto's error says what was tried and
// that BRAID_BACKEND=braid silences the attempt.
TEST(NoRealNccl, UnimplementedCallFailsNamingTheFilesTried) {
  EXPECT_EQ(ncclLLA2ACalcSlots(1024, 8), -1);
  std::string last = ncclGetLastError(nullptr);
  EXPECT_NE(last.find("ncclLLA2ACalcSlots"), std::string::npos) << last;
  EXPECT_NE(last.find(std::getenv("BRAID_NCCL_LIBRARY")), std::string::npos) << last;
  EXPECT_NE(last.find("BRAID_BACKEND=braid"), std::string::npos) << last;
  auto comms = initRanks(1);
  EXPECT_EQ(ncclDevCommCreate(comms[0], nullptr, nullptr), ncclSystemError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("silences the attempt"), std::string::npos);
  EXPECT_EQ(ncclCommDestroy(comms[0]), ncclSuccess);
}

// The toolkit's libnccl.so.2 without a GPU: the real init fails, and the error is the real
// NCCL's, prefixed with rank, call and library. (With a GPU the real communicator is made.)
TEST(RealNcclNoGpu, RealInitFailureIsTheRealNcclsError) {
  auto comms = initRanks(1);
  BraidTestTeam t = ncclTeamWorld(comms[0]);
  std::string last = ncclGetLastError(nullptr);
  if (t.nRanks == 1) {
    SUCCEED() << "a GPU is here: the real NCCL made its communicator";
  } else {
    EXPECT_EQ(t.nRanks, 0);
    EXPECT_NE(last.find("ncclTeamWorld (rank 0): pncclCommInitRankConfig (1 ranks) in the real NCCL 2."),
              std::string::npos) << last;
    EXPECT_NE(last.find("libnccl.so"), std::string::npos) << last;
    EXPECT_NE(last.find("returned 1: "), std::string::npos) << last;  // ncclUnhandledCudaError, its text after
  }
  EXPECT_EQ(ncclCommDestroy(comms[0]), ncclSuccess);
}

}  // namespace
