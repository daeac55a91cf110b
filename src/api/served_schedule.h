// Which of the served ranks' waiting posts the leader's server may enqueue now (served.h): a
// pure function of the queues, so that the rule is tested without a GPU.
//
// Every served kernel runs in the leader's context, so a device-waiting call there (cudaFree, a
// synchronous copy, a lazily loaded module) waits for all of them; one that waits for a kernel
// not yet enqueued would hold that call up for ever. So a post runs only when
//   - the leader rank has issued its side of it (the same collective, as many sends and receives
//     between the two: NCCL matches send/recv per pair in order), and
//   - every other served rank's side has arrived and runs with it: the largest such set of each
//     rank's oldest posts, found by dropping, rank by rank, the newest post whose peers do not
//     cover it until nothing changes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>


namespace braid::api {

// A rank's send/recv ops with one other rank, so far.
struct PeerCounts {
  uint64_t sendsTo = 0, recvsFrom = 0;
  bool operator==(const PeerCounts&) const = default;
};

// A post's totals, so far, as its rank counted them: the last collective number, and the
// send/recv ops with each rank (indexed by rank).
struct PostGate {
  uint64_t collSeq = 0;
  std::vector<PeerCounts> counts;
};

struct ServedQueueView {
  int rank = -1;
  bool open = true;                       // gone ranks take no part (their abort follows)
  const PostGate* enqueued = nullptr;     // the totals of its last enqueued post (zeros at first)
  std::vector<const PostGate*> waiting;   // arrived, oldest first
};

// What the leader rank has issued so far.
struct LeaderIssued {
  int rank = 0;
  uint64_t collSeq = 0;
  std::vector<uint64_t> sentTo, recvdFrom;  // by rank
};

// How many of each queue's oldest waiting posts may be enqueued now (by queue index).
// `leaderOf[r]` is the rank that runs rank r's GPU work; ranks served by `leader.rank` that have
// no queue (not connected yet) have posted nothing.
std::vector<size_t> runnablePosts(const std::vector<ServedQueueView>& queues, const LeaderIssued& leader,
                                  const std::vector<int>& leaderOf);

}  // namespace braid::api
