// Group semantics on host memory: mixed groups (collectives and send/recv together), nested
// groups, and one group spanning a communicator and its split children, all driven by one
// thread for several ranks (ncclCommInitAll with host-only ranks).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "nccl.h"

namespace {

constexpr int kRanks = 4;
constexpr int kCount = 1000;

class Groups : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr); }
  void TearDown() override {
    for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  }
  ncclComm_t comms[kRanks] = {};
};

TEST_F(Groups, MixedCollectivesAndSendRecvInOneNestedGroup) {
  std::vector<std::vector<int>> in(kRanks), sum(kRanks), gathered(kRanks), fromLeft(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    in[r].resize(kCount);
    std::iota(in[r].begin(), in[r].end(), r * 7);
    sum[r].assign(kCount, -1);
    gathered[r].assign(kCount * kRanks, -1);
    fromLeft[r].assign(kCount, -1);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);  // nested
    ASSERT_EQ(ncclSend(in[r].data(), kCount, ncclInt32, (r + 1) % kRanks, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(in[r].data(), sum[r].data(), kCount, ncclInt32, ncclSum, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclRecv(fromLeft[r].data(), kCount, ncclInt32, (r + kRanks - 1) % kRanks, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclAllGather(in[r].data(), gathered[r].data(), kCount, ncclInt32, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);  // inner end: nothing runs yet
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r)
    for (int i = 0; i < kCount; ++i) {
      ASSERT_EQ(sum[r][i], kRanks * i + 7 * (0 + 1 + 2 + 3));
      ASSERT_EQ(fromLeft[r][i], in[(r + kRanks - 1) % kRanks][i]);
      for (int q = 0; q < kRanks; ++q) ASSERT_EQ(gathered[r][q * kCount + i], in[q][i]);
    }
}

TEST_F(Groups, ParentAndSplitChildrenInOneGroup) {
  ncclComm_t children[kRanks] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(ncclCommSplit(comms[r], r % 2, r, &children[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<double> a(kRanks, 0), b(kRanks, 0);
  for (int r = 0; r < kRanks; ++r) a[r] = b[r] = r + 1;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(ncclAllReduce(&a[r], &a[r], 1, ncclFloat64, ncclSum, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(&b[r], &b[r], 1, ncclFloat64, ncclMax, children[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(a[r], 10.0);
    EXPECT_EQ(b[r], r % 2 ? 4.0 : 3.0);  // max over {1,3} or {2,4}
    EXPECT_EQ(ncclCommDestroy(children[r]), ncclSuccess);
  }
}

TEST_F(Groups, MismatchedTypesAreReportedNotMisread) {
  std::vector<float> f(64, 1.0f);
  std::vector<int64_t> l(64, 1);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    if (r == 0) ASSERT_EQ(ncclAllReduce(f.data(), f.data(), 64, ncclFloat32, ncclSum, comms[r], nullptr), ncclSuccess);
    else ASSERT_EQ(ncclAllReduce(l.data(), l.data(), 64, ncclInt64, ncclSum, comms[r], nullptr), ncclSuccess);
  }
  ncclResult_t rc = ncclGroupEnd();
  EXPECT_NE(rc, ncclSuccess);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("mismatched"), std::string::npos) << ncclGetLastError(nullptr);
}

}  // namespace
