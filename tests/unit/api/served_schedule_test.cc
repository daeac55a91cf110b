// The served ranks' scheduling rule (src/api/served_schedule.h): a post runs only with the leader
// rank's side issued and every served peer's side arrived and running with it. Each case is a
// situation that hung on the H200 before the rule, or one the rule must not hold up for ever.
#include "api/served_schedule.h"

#include <gtest/gtest.h>

#include <deque>

namespace braid::api {
namespace {

// Ranks 0..n-1 on one GPU, rank 0 leads; queues for the served ranks given.
struct World {
  int n;
  std::vector<int> leaderOf;
  std::deque<PostGate> posts;  // stable addresses
  std::vector<ServedQueueView> queues;
  std::vector<PostGate> enqueued;
  LeaderIssued leader;
  explicit World(int ranks) : n(ranks), leaderOf(size_t(ranks), 0), enqueued(size_t(ranks)) {
    leader.rank = 0;
    leader.sentTo.assign(size_t(n), 0);
    leader.recvdFrom.assign(size_t(n), 0);
    for (PostGate& g : enqueued) g.counts.assign(size_t(n), PeerCounts{});
  }
  ServedQueueView& queue(int rank) {
    for (ServedQueueView& q : queues)
      if (q.rank == rank) return q;
    queues.push_back(ServedQueueView{rank, true, &enqueued[size_t(rank)], {}});
    return queues.back();
  }
  // A post of `rank`: collective number so far, and (peer, sends, recvs) totals so far.
  void post(int rank, uint64_t collSeq, std::vector<std::tuple<int, uint64_t, uint64_t>> p2p = {}) {
    PostGate g;
    g.collSeq = collSeq;
    g.counts.assign(size_t(n), PeerCounts{});
    for (auto [peer, s, r] : p2p) g.counts[size_t(peer)] = {s, r};
    posts.push_back(g);
    queue(rank).waiting.push_back(&posts.back());
  }
  std::vector<size_t> run() { return runnablePosts(queues, leader, leaderOf); }
};

TEST(ServedSchedule, ACollectiveRunsOnlyWhenTheLeaderAndEveryServedRankHaveIssuedIt) {
  World w(4);
  w.post(1, 1);
  w.post(2, 1);
  EXPECT_EQ(w.run(), (std::vector<size_t>{0, 0}));  // the leader has not issued #1
  w.leader.collSeq = 1;
  EXPECT_EQ(w.run(), (std::vector<size_t>{0, 0}));  // rank 3 is not even connected
  w.post(3, 1);
  EXPECT_EQ(w.run(), (std::vector<size_t>{1, 1, 1}));
}

TEST(ServedSchedule, ARankAheadWaitsForTheLeaderWithoutHoldingUpTheCallBefore) {
  World w(3);
  w.leader.collSeq = 5;
  w.post(1, 5);
  w.post(1, 6);  // #6: the leader is still in its #5 (its cudaFree must not wait for #6)
  w.post(2, 5);
  EXPECT_EQ(w.run(), (std::vector<size_t>{1, 1}));
}

TEST(ServedSchedule, ASendRecvRingAmongServedRanksRunsAsOneSet) {
  // 4 ranks, ring r -> r+1: rank 2 exchanges with ranks 1 and 3 only, ranks 1 and 3 also with
  // the leader. Rank 2's post alone must not run while rank 1's waits for the leader (a
  // 4-process ring hung so on the H200).
  World w(4);
  w.post(2, 0, {{3, 1, 0}, {1, 0, 1}});
  EXPECT_EQ(w.run(), (std::vector<size_t>{0}));  // ranks 1 and 3 have not posted
  w.post(1, 0, {{2, 1, 0}, {0, 0, 1}});
  w.post(3, 0, {{0, 1, 0}, {2, 0, 1}});
  EXPECT_EQ(w.run(), (std::vector<size_t>{0, 0, 0}));  // the leader has issued neither side
  w.leader.sentTo[1] = 1;
  EXPECT_EQ(w.run(), (std::vector<size_t>{0, 0, 0}));  // nor its receive from rank 3
  w.leader.recvdFrom[3] = 1;
  EXPECT_EQ(w.run(), (std::vector<size_t>{1, 1, 1}));
}

TEST(ServedSchedule, SendRecvBetweenServedRanksAloneNeedsNothingFromTheLeader) {
  World w(3);
  w.post(1, 0, {{2, 1, 1}});
  w.post(2, 0, {{1, 1, 1}});
  EXPECT_EQ(w.run(), (std::vector<size_t>{1, 1}));
}

TEST(ServedSchedule, OpsSplitDifferentlyOverPostsWaitForEnough) {
  // Rank 1 sends twice to rank 2 in one post; rank 2 receives them in two posts.
  World w(3);
  w.post(1, 0, {{2, 2, 0}});
  w.post(2, 0, {{1, 0, 1}});
  EXPECT_EQ(w.run(), (std::vector<size_t>{0, 0}));  // rank 1's second send has no receive yet
  w.post(2, 0, {{1, 0, 2}});
  EXPECT_EQ(w.run(), (std::vector<size_t>{1, 2}));
}

TEST(ServedSchedule, AGoneRankHoldsNobodyUp) {
  World w(3);
  w.leader.collSeq = 1;
  w.post(1, 1);
  w.queue(2).open = false;  // rank 2's process died; the abort follows
  EXPECT_EQ(w.run(), (std::vector<size_t>{1, 0}));
}

TEST(ServedSchedule, EnqueuedPostsCountAsTheOtherSide) {
  World w(3);
  w.leader.collSeq = 2;
  w.enqueued[2].collSeq = 2;  // rank 2 ran its #2 already
  w.queue(2);
  w.post(1, 2);
  EXPECT_EQ(w.run(), (std::vector<size_t>{0, 1}));
}

}  // namespace
}  // namespace braid::api
