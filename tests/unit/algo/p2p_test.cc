// buildP2p: lanes per peer and direction, ordering, self copies, and random groups verified.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "algo/schedule.h"
#include "algo/verifier.h"

namespace braid::algo {
namespace {

TEST(P2p, OneLanePerPeerAndDirectionKeepingOrder) {
  // Rank 0: send 5 to 1, recv 3 from 2, send 6 to 1, send 0 to 2 (dropped), recv 4 from 1.
  const std::vector<P2pOp> ops = {{true, 1, 5}, {false, 2, 3}, {true, 1, 6}, {true, 2, 0}, {false, 1, 4}};
  const RankPlan plan = buildP2p(0, 3, ops);
  ASSERT_EQ(plan.lanes.size(), 3u);
  const Lane& toOne = plan.lanes[0];
  ASSERT_EQ(toOne.steps.size(), 2u);
  EXPECT_EQ(toOne.steps[0].sendPeer, 1);
  EXPECT_EQ(toOne.steps[0].src, 0);
  EXPECT_EQ(toOne.steps[0].count, 5u);
  EXPECT_EQ(toOne.steps[1].src, 4);  // op 2's send buffer
  EXPECT_EQ(toOne.steps[1].count, 6u);
  const Lane& fromTwo = plan.lanes[1];
  ASSERT_EQ(fromTwo.steps.size(), 1u);
  EXPECT_EQ(fromTwo.steps[0].recvPeer, 2);
  EXPECT_EQ(fromTwo.steps[0].dst, 3);  // op 1's recv buffer
  EXPECT_EQ(plan.lanes[2].steps[0].recvPeer, 1);
  EXPECT_EQ(plan.lanes[2].steps[0].dst, 9);
  for (const Lane& lane : plan.lanes)
    for (const Step& s : lane.steps) EXPECT_GT(s.count, 0u);
}

TEST(P2p, SelfSendsBecomeCopies) {
  const std::vector<P2pOp> ops = {{false, 0, 8}, {true, 0, 8}, {true, 1, 2}};
  const RankPlan plan = buildP2p(0, 2, ops);
  bool sawCopy = false;
  for (const Lane& lane : plan.lanes) {
    for (const Step& s : lane.steps) {
      EXPECT_NE(s.sendPeer, 0);
      EXPECT_NE(s.recvPeer, 0);
      if (s.src == 2 && s.dst == 1) sawCopy = true;
    }
  }
  EXPECT_TRUE(sawCopy);
  const VerifyResult r = verifyP2p(2, {ops, {{false, 0, 2}}});
  EXPECT_TRUE(r.ok) << r.summary();
}

// Random groups: every rank's ops come from matched (sender, receiver, count) pairs in a
// random order per rank, with self pairs and empty ones.
std::vector<std::vector<P2pOp>> randomGroup(int n, int pairs, std::mt19937& rng) {
  std::vector<std::vector<P2pOp>> ops(n);
  for (int i = 0; i < pairs; ++i) {
    const int s = static_cast<int>(rng() % n), r = static_cast<int>(rng() % n);
    const uint64_t count = rng() % 5 == 0 ? 0 : 1 + rng() % 1000;
    const uint32_t parts = 1 + rng() % 4;  // a matched pair cuts alike
    ops[s].push_back({true, r, count, parts});
    ops[r].push_back({false, s, count, parts});
  }
  // Shuffle each rank's ops, keeping the order among ops to the same peer and direction
  // (that order is what NCCL matches on).
  for (auto& list : ops) {
    std::vector<size_t> pos(list.size());
    std::iota(pos.begin(), pos.end(), 0);
    std::shuffle(pos.begin(), pos.end(), rng);
    std::map<std::pair<int, bool>, std::vector<size_t>> groups;
    for (size_t i = 0; i < list.size(); ++i) groups[{list[i].peer, list[i].send}].push_back(i);
    std::vector<P2pOp> shuffled(list.size());
    for (const auto& [key, members] : groups) {
      std::vector<size_t> slots;
      for (size_t m : members) slots.push_back(pos[m]);
      std::sort(slots.begin(), slots.end());
      for (size_t k = 0; k < members.size(); ++k) shuffled[slots[k]] = list[members[k]];
    }
    list = shuffled;
  }
  return ops;
}

TEST(P2p, RandomGroupsVerify) {
  std::mt19937 rng(1234);
  for (int n : {1, 2, 3, 5, 8, 16}) {
    for (int trial = 0; trial < 10; ++trial) {
      const auto ops = randomGroup(n, 3 * n, rng);
      for (uint64_t slice : {0u, 64u}) {
        VerifyOptions options;
        options.sliceElems = slice;
        options.fifoSlices = 2;
        const VerifyResult r = verifyP2p(n, ops, options);
        ASSERT_TRUE(r.ok) << "n=" << n << " trial " << trial << ": " << r.summary();
      }
    }
  }
}

TEST(P2p, PartsGoToTheirOwnChannels) {
  // 10 elements in 3 parts: [0,3) [3,6) [6,10) on channels 0, 1, 2; 2 elements in 3 parts
  // leave one part empty on both ends.
  const RankPlan plan = buildP2p(0, 2, {{true, 1, 10, 3}, {false, 1, 2, 3}});
  std::map<std::pair<int, bool>, std::vector<std::pair<uint64_t, uint64_t>>> seen;  // (channel, send) -> (off, count)
  for (const Lane& lane : plan.lanes)
    for (const Step& s : lane.steps) {
      const bool send = s.sendPeer == 1;
      seen[{lane.channel, send}].push_back({send ? s.srcOff : s.dstOff, s.count});
    }
  using V = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ(seen[std::make_pair(0, true)], (V{{0, 3}}));
  EXPECT_EQ(seen[std::make_pair(1, true)], (V{{3, 3}}));
  EXPECT_EQ(seen[std::make_pair(2, true)], (V{{6, 4}}));
  EXPECT_EQ(seen[std::make_pair(0, false)], (V{}));  // 2 * 1 / 3 == 0: empty
  EXPECT_EQ(seen[std::make_pair(1, false)], (V{{0, 1}}));
  EXPECT_EQ(seen[std::make_pair(2, false)], (V{{1, 1}}));
  const VerifyResult r = verifyP2p(2, {{{true, 1, 10, 3}, {false, 1, 2, 3}}, {{false, 0, 10, 3}, {true, 0, 2, 3}}});
  EXPECT_TRUE(r.ok) << r.summary();
}

TEST(P2p, MismatchedGroupIsReported) {
  const VerifyResult r = verifyP2p(2, {{{true, 1, 10}}, {{false, 0, 12}}});
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.errors[0].find("rank 1 op 0 (recv 12 from 0): the matching send (op 0) has count 10"),
            std::string::npos)
      << r.summary();
  const VerifyResult missing = verifyP2p(2, {{}, {{false, 0, 12}}});
  ASSERT_FALSE(missing.ok);
  EXPECT_NE(missing.errors[0].find("rank 0 has only 0 non-empty sends to 1"), std::string::npos) << missing.summary();
}

}  // namespace
}  // namespace braid::algo
