// Names, buffer sizes, dump format, block splitting and the registry.
#include <gtest/gtest.h>

#include <cstdlib>

#include "algo/algorithm.h"
#include "algo/partition.h"
#include "algo/schedule.h"

namespace braid::algo {
namespace {

TEST(Schedule, NamesAndReductions) {
  EXPECT_STREQ(collName(Coll::AllReduce), "AllReduce");
  EXPECT_STREQ(collName(Coll::AlltoAll), "AlltoAll");
  EXPECT_STREQ(collName(Coll::Gather), "Gather");
  EXPECT_TRUE(collReduces(Coll::AllReduce));
  EXPECT_TRUE(collReduces(Coll::Reduce));
  EXPECT_TRUE(collReduces(Coll::ReduceScatter));
  EXPECT_FALSE(collReduces(Coll::AllGather));
  EXPECT_FALSE(collReduces(Coll::Broadcast));
  EXPECT_FALSE(collReduces(Coll::SendRecv));
}

TEST(Schedule, BufferSizesFollowNccl) {
  const int n = 4, root = 2;
  struct Row {
    Coll coll;
    uint64_t inRoot, outRoot, inOther, outOther;
  };
  const uint64_t c = 10;
  const Row rows[] = {
      {Coll::AllReduce, c, c, c, c},           {Coll::AllGather, c, n * c, c, n * c},
      {Coll::ReduceScatter, n * c, c, n * c, c}, {Coll::Broadcast, c, c, 0, c},
      {Coll::Reduce, c, c, c, 0},              {Coll::AlltoAll, n * c, n * c, n * c, n * c},
      {Coll::Gather, c, n * c, c, 0},          {Coll::Scatter, n * c, c, 0, c},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(collName(row.coll));
    EXPECT_EQ(inputCount(row.coll, c, n, root, root), row.inRoot);
    EXPECT_EQ(outputCount(row.coll, c, n, root, root), row.outRoot);
    EXPECT_EQ(inputCount(row.coll, c, n, 1, root), row.inOther);
    EXPECT_EQ(outputCount(row.coll, c, n, 1, root), row.outOther);
  }
}

TEST(Schedule, DumpIsOneLinePerStep) {
  CollArgs args;
  args.coll = Coll::AllReduce;
  args.nRanks = 4;
  args.rank = 1;
  args.count = 10;
  const std::string text = dump(findAlgorithm("ring")->build(args), args);
  EXPECT_NE(text.find("# AllReduce rank 1/4 count 10: 1 lanes, 7 steps\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lane 0 ch 0 | step 0: load in[3..6) send->2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lane 0 ch 0 | step 1: recv<-0 reduce in[0..3) send->2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lane 0 ch 0 | step 3: recv<-0 reduce in[6..8) final store out[6..8) send->2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("lane 0 ch 0 | step 6: recv<-0 store out[8..10)\n"), std::string::npos) << text;
}

TEST(Schedule, DumpNamesP2pBuffers) {
  CollArgs args;
  args.coll = Coll::SendRecv;
  const RankPlan plan = buildP2p(0, 2, {{true, 1, 5}, {false, 1, 7}});
  const std::string text = dump(plan, args);
  EXPECT_NE(text.find("load send0[0..5) send->1"), std::string::npos) << text;
  EXPECT_NE(text.find("recv<-1 store recv1[0..7)"), std::string::npos) << text;
}

TEST(Schedule, MaybeDumpScheduleHonoursEnv) {
  setenv("BRAID_DUMP_SCHEDULE", "1", 1);
  CollArgs args;
  args.coll = Coll::AllGather;
  args.nRanks = 2;
  args.count = 3;
  testing::internal::CaptureStderr();
  maybeDumpSchedule(args, findAlgorithm("ring")->build(args));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("# AllGather rank 0/2 count 3"), std::string::npos) << err;
  EXPECT_NE(err.find("load in[0..3) store out[0..3) send->1"), std::string::npos) << err;
}

TEST(Partition, SplitsAlignedAndBalanced) {
  const auto parts = splitRange({0, 1009}, 4, 4);
  ASSERT_EQ(parts.size(), 4u);
  uint64_t at = 0;
  for (const Range& r : parts) {
    EXPECT_EQ(r.begin, at);
    EXPECT_EQ(r.begin % 4, 0u);
    EXPECT_LE(r.size(), 256u);
    EXPECT_GE(r.size(), 240u);
    at = r.end;
  }
  EXPECT_EQ(at, 1009u);
  // Fewer elements than parts: trailing parts are empty, nothing is lost.
  const auto tiny = splitRange({0, 5}, 4, 4);
  EXPECT_EQ(tiny[0].size() + tiny[1].size() + tiny[2].size() + tiny[3].size(), 5u);
  EXPECT_TRUE(tiny[2].empty());
  EXPECT_TRUE(tiny[3].empty());
}

TEST(Partition, ChunksKeepBlocksUnderMaxStep) {
  for (uint64_t maxStep : {1u, 7u, 64u, 1000u}) {
    for (uint64_t blocks : {1u, 3u, 8u}) {
      const uint64_t align = std::min<uint64_t>(4, maxStep);  // as effectiveAlign() does
      const auto chunks = chunkRange({16, 100016}, blocks, maxStep, align);
      uint64_t at = 16;
      for (const Range& c : chunks) {
        EXPECT_EQ(c.begin, at);
        for (const Range& b : splitRange(c, blocks, align)) ASSERT_LE(b.size(), maxStep);
        at = c.end;
      }
      EXPECT_EQ(at, 100016u);
    }
  }
  EXPECT_TRUE(chunkRange({5, 5}, 2, 8, 1).empty());
  EXPECT_EQ(chunkRange({0, 100}, 2, 0, 1).size(), 1u);
}

TEST(Partition, RingOrderFallsBackToIdentity) {
  CollArgs args;
  args.nRanks = 4;
  args.rank = 2;
  args.ring = {3, 2, 0, 1};
  RingOrder ring(args);
  EXPECT_EQ(ring.pos(), 1);
  EXPECT_EQ(ring.prev(), 3);
  EXPECT_EQ(ring.next(), 0);
  args.ring = {0, 0, 1, 2};  // not a permutation
  RingOrder identity(args);
  EXPECT_EQ(identity.prev(), 1);
  EXPECT_EQ(identity.next(), 3);
}

TEST(Registry, FindsAlgorithmsAndDefaults) {
  ASSERT_NE(findAlgorithm("ring"), nullptr);
  EXPECT_EQ(findAlgorithm("RING"), findAlgorithm("ring"));
  EXPECT_EQ(findAlgorithm("Direct"), findAlgorithm("direct"));
  EXPECT_NE(findAlgorithm("twoshot"), nullptr);
  EXPECT_EQ(findAlgorithm("rin"), nullptr);
  EXPECT_EQ(findAlgorithm("ringx"), nullptr);
  EXPECT_EQ(findAlgorithm(""), nullptr);
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce})
    EXPECT_STREQ(defaultAlgorithm(c, 8)->name, "ring");
  for (Coll c : {Coll::AlltoAll, Coll::Gather, Coll::Scatter}) EXPECT_STREQ(defaultAlgorithm(c, 8)->name, "direct");
  EXPECT_EQ(defaultAlgorithm(Coll::SendRecv, 8), nullptr);
  for (const Algorithm* a : algorithms()) EXPECT_FALSE(a->supports(Coll::SendRecv, 4)) << a->name;
  // The GPU executor's choice by size is the tuner's: tests/unit/tuner.
}

}  // namespace
}  // namespace braid::algo
