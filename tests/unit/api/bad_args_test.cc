// Bad input through the public API: every entry point checks its arguments, returns the
// right ncclResult_t and leaves a last error that names the function, the argument and a fix.
// Host-only communicators (ncclCommInitAll with no device list), so it runs anywhere.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"

namespace {

std::string lastError() { return ncclGetLastError(nullptr); }

void expectError(ncclResult_t got, ncclResult_t want, std::initializer_list<const char*> mentions) {
  EXPECT_EQ(got, want) << lastError();
  for (const char* m : mentions) EXPECT_NE(lastError().find(m), std::string::npos) << "'" << m << "' missing in: " << lastError();
}

class HostComms : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << lastError(); }
  void TearDown() override {
    for (ncclComm_t c : comms) ncclCommDestroy(c);
  }
  ncclComm_t comms[2] = {};
  float a[16] = {}, b[32] = {};
};

TEST(BadArgs, VersionAndStrings) {
  int v = 0;
  EXPECT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  expectError(ncclGetVersion(nullptr), ncclInvalidArgument, {"ncclGetVersion", "version"});
  EXPECT_STREQ(ncclGetErrorString(ncclInvalidUsage), "invalid usage (run with NCCL_DEBUG=WARN for details)");
  EXPECT_STREQ(ncclGetErrorString(static_cast<ncclResult_t>(99)), "unknown result code");
  expectError(ncclGetUniqueId(nullptr), ncclInvalidArgument, {"ncclGetUniqueId"});
}

TEST(BadArgs, InitRankArguments) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  expectError(ncclCommInitRank(nullptr, 2, id, 0), ncclInvalidArgument, {"ncclCommInitRank", "comm", "NULL"});
  expectError(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument, {"nranks = 0", "Fix"});
  expectError(ncclCommInitRank(&comm, -3, id, 0), ncclInvalidArgument, {"nranks = -3"});
  expectError(ncclCommInitRank(&comm, 1 << 20, id, 0), ncclInvalidArgument, {"nranks = 1048576", "limit"});
  expectError(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument, {"rank = 2", "out of range", "Fix"});
  expectError(ncclCommInitRank(&comm, 2, id, -1), ncclInvalidArgument, {"rank = -1"});
  ncclUniqueId garbage;
  std::memset(&garbage, 0x37, sizeof(garbage));
  expectError(ncclCommInitRank(&comm, 1, garbage, 0), ncclInvalidArgument, {"not a valid unique id", "Fix"});
  EXPECT_EQ(comm, nullptr);
}

TEST(BadArgs, ConfigChecks) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0x1234;
  expectError(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, {"magic", "NCCL_CONFIG_INITIALIZER"});
  config = NCCL_CONFIG_INITIALIZER;
  config.size = 3;
  expectError(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, {"config->size = 3"});
  config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 7;
  expectError(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, {"blocking = 7", "0 or 1"});
  config = NCCL_CONFIG_INITIALIZER;
  config.minCTAs = 9;
  config.maxCTAs = 4;
  expectError(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, {"minCTAs = 9"});
  config = NCCL_CONFIG_INITIALIZER;
  config.CTAPolicy = 0x40;
  expectError(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, {"CTAPolicy"});
  // A valid config still works on the same id (the root waits for its one rank).
  config = NCCL_CONFIG_INITIALIZER;
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclSuccess) << lastError();
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(BadArgs, MismatchedRankCountsAcrossRanks) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c0 = nullptr, c1 = nullptr;
  ncclResult_t r0 = ncclSuccess, r1 = ncclSuccess;
  std::thread t0([&] { r0 = ncclCommInitRank(&c0, 2, id, 0); });
  std::thread t1([&] { r1 = ncclCommInitRank(&c1, 3, id, 1); });
  t0.join();
  t1.join();
  EXPECT_NE(r0, ncclSuccess);
  EXPECT_NE(r1, ncclSuccess);
  EXPECT_NE(lastError().find("nranks"), std::string::npos) << lastError();
}

TEST(BadArgs, AbortWhileNonBlockingInitWaitsForPeers) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 2, id, 0, &config), ncclInProgress);  // rank 1 never comes
  ncclResult_t state = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
  EXPECT_EQ(state, ncclInProgress);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
}

TEST(BadArgs, CommHandles) {
  int n = 0;
  expectError(ncclCommCount(nullptr, &n), ncclInvalidArgument, {"ncclCommCount", "NULL"});
  auto* fake = reinterpret_cast<ncclComm_t>(0x1000);
  expectError(ncclCommCount(fake, &n), ncclInvalidArgument, {"not a live communicator"});
  expectError(ncclAllReduce(nullptr, nullptr, 1, ncclFloat, ncclSum, fake, nullptr), ncclInvalidArgument,
              {"ncclAllReduce", "not a live communicator"});
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(nullptr), ncclSuccess);
  expectError(ncclCommDestroy(fake), ncclInvalidArgument, {"already been destroyed"});
  expectError(ncclGroupEnd(), ncclInvalidUsage, {"ncclGroupEnd", "ncclGroupStart"});
}

TEST_F(HostComms, CollectiveArguments) {
  ncclComm_t c = comms[0];
  expectError(ncclAllReduce(a, b, 4, static_cast<ncclDataType_t>(12), ncclSum, c, nullptr), ncclInvalidArgument,
              {"ncclAllReduce", "rank 0", "datatype = 12"});
  expectError(ncclAllReduce(a, b, 4, ncclFloat, static_cast<ncclRedOp_t>(99), c, nullptr), ncclInvalidArgument,
              {"op = 99"});
  expectError(ncclAllReduce(nullptr, b, 4, ncclFloat, ncclSum, c, nullptr), ncclInvalidArgument, {"sendbuff is NULL"});
  expectError(ncclAllReduce(a, nullptr, 4, ncclFloat, ncclSum, c, nullptr), ncclInvalidArgument, {"recvbuff is NULL"});
  expectError(ncclBroadcast(a, b, 4, ncclFloat, 2, c, nullptr), ncclInvalidArgument, {"ncclBroadcast", "root = 2", "Fix"});
  expectError(ncclReduce(a, b, 4, ncclFloat, ncclSum, -1, c, nullptr), ncclInvalidArgument, {"root = -1"});
  expectError(ncclSend(a, 4, ncclFloat, 5, c, nullptr), ncclInvalidArgument, {"ncclSend", "peer = 5"});
  expectError(ncclRecv(b, 4, ncclFloat, -2, c, nullptr), ncclInvalidArgument, {"ncclRecv", "peer = -2"});
  expectError(ncclAllReduce(a, a + 1, 8, ncclFloat, ncclSum, c, nullptr), ncclInvalidArgument, {"overlap"});
  // count 0 is a no-op, even with null buffers.
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 0, ncclFloat, ncclSum, c, nullptr), ncclSuccess) << lastError();
}

TEST_F(HostComms, ErrorsInsideAGroupFailTheGroup) {
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_NE(ncclAllReduce(a, b, 4, static_cast<ncclDataType_t>(-1), ncclSum, comms[0], nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
}

TEST_F(HostComms, UserOps) {
  ncclRedOp_t op;
  float two = 2.0f;
  expectError(ncclRedOpCreatePreMulSum(nullptr, &two, ncclFloat, ncclScalarHostImmediate, comms[0]), ncclInvalidArgument,
              {"op is NULL"});
  expectError(ncclRedOpDestroy(ncclSum, comms[0]), ncclInvalidArgument, {"built-in"});
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &two, ncclFloat, ncclScalarHostImmediate, comms[0]), ncclSuccess);
  expectError(ncclAllReduce(a, b, 4, ncclInt32, op, comms[0], nullptr), ncclInvalidArgument, {"created for"});
  EXPECT_EQ(ncclRedOpDestroy(op, comms[0]), ncclSuccess);
  expectError(ncclRedOpDestroy(op, comms[0]), ncclInvalidArgument, {"already destroyed"});
}

TEST_F(HostComms, SplitAndShrinkArguments) {
  ncclComm_t child = nullptr;
  expectError(ncclCommSplit(comms[0], -5, 0, &child, nullptr), ncclInvalidArgument, {"color = -5"});
  expectError(ncclCommSplit(comms[0], 0, 0, nullptr, nullptr), ncclInvalidArgument, {"newcomm is NULL"});
  int self = 0;
  expectError(ncclCommShrink(comms[0], &self, 1, &child, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument,
              {"exclude list"});
  int bad = 9;
  expectError(ncclCommShrink(comms[0], &bad, 1, &child, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument,
              {"out of range"});
  expectError(ncclCommShrink(comms[0], nullptr, 0, &child, nullptr, 7), ncclInvalidArgument, {"shrinkFlags = 7"});
  expectError(ncclCommRevoke(comms[0], 3), ncclInvalidArgument, {"revokeFlags = 3"});
}

TEST_F(HostComms, LifecycleStates) {
  int dev = 5;
  ASSERT_EQ(ncclCommCuDevice(comms[0], &dev), ncclSuccess);
  ASSERT_EQ(ncclCommFinalize(comms[0]), ncclSuccess);
  expectError(ncclCommFinalize(comms[0]), ncclInvalidArgument, {"already finalized"});
  expectError(ncclAllReduce(a, b, 4, ncclFloat, ncclSum, comms[0], nullptr), ncclInvalidUsage, {"finalized"});
}

TEST_F(HostComms, GroupedCollectivesOfTwoRanksOnOneThread) {
  float x[2][8], y[2][8];
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 8; ++i) x[r][i] = static_cast<float>(r * 10 + i);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(ncclAllReduce(x[r], y[r], 8, ncclFloat, ncclSum, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << lastError();
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 8; ++i) EXPECT_EQ(y[r][i], static_cast<float>(10 + 2 * i));
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(x[0], y[0], 8, ncclFloat, ncclSum, comms[0], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess);
  EXPECT_GT(sim.estimatedTime, 0.0f);
}

}  // namespace

namespace {

// Every collective and send/recv with a count far larger than its (host) buffers, in place and
// out of place: ncclInvalidArgument naming the buffer, before anything is read or written.
TEST_F(HostComms, HugeCountsAreRefusedEverywhere) {
  const size_t counts[] = {size_t(1) << 45, size_t(1) << 60, SIZE_MAX / 2};
  for (size_t count : counts) {
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      float* in = a;
      float* out = inPlace ? a : b;
      SCOPED_TRACE("count " + std::to_string(count) + (inPlace ? " in place" : " out of place"));
      struct Call {
        const char* name;
        std::function<ncclResult_t()> run;
      };
      ncclComm_t c = comms[0];
      std::vector<Call> calls = {
          {"ncclAllReduce", [&] { return ncclAllReduce(in, out, count, ncclFloat32, ncclSum, c, nullptr); }},
          {"ncclBroadcast", [&] { return ncclBroadcast(in, out, count, ncclFloat32, 0, c, nullptr); }},
          {"ncclReduce", [&] { return ncclReduce(in, out, count, ncclFloat32, ncclSum, 0, c, nullptr); }},
          {"ncclAllGather", [&] { return ncclAllGather(in, out, count, ncclFloat32, c, nullptr); }},
          {"ncclReduceScatter", [&] { return ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, c, nullptr); }},
          {"ncclAlltoAll", [&] { return ncclAlltoAll(in, out, count, ncclFloat32, c, nullptr); }},
          {"ncclGather", [&] { return ncclGather(in, out, count, ncclFloat32, 0, c, nullptr); }},
          {"ncclScatter", [&] { return ncclScatter(in, out, count, ncclFloat32, 0, c, nullptr); }},
          {"ncclSend", [&] { return ncclSend(in, count, ncclFloat32, 1, c, nullptr); }},
          {"ncclRecv", [&] { return ncclRecv(out, count, ncclFloat32, 1, c, nullptr); }},
      };
      for (const Call& call : calls) {
        ncclResult_t rc = call.run();
        EXPECT_EQ(rc, ncclInvalidArgument) << call.name << ": " << lastError();
        EXPECT_NE(lastError().find(call.name), std::string::npos) << lastError();
        EXPECT_TRUE(lastError().find("buff") != std::string::npos || lastError().find("overflows") != std::string::npos)
            << lastError();
        EXPECT_NE(lastError().find("Fix"), std::string::npos) << lastError();
      }
    }
  }
  // The communicator is still fine: nothing was started.
  float x[2] = {1, 2}, y[2] = {3, 4};
  ncclGroupStart();
  EXPECT_EQ(ncclAllReduce(x, x, 2, ncclFloat32, ncclSum, comms[0], nullptr), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(y, y, 2, ncclFloat32, ncclSum, comms[1], nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << lastError();
  EXPECT_EQ(x[0], 4.0f);
}

}  // namespace
