#include "api/served_schedule.h"

namespace braid::api {
namespace {

bool leaderSideIssued(const ServedQueueView& q, const PostGate& p, const LeaderIssued& leader) {
  const PeerCounts& c = p.counts[size_t(leader.rank)];
  return p.collSeq <= leader.collSeq && c.sendsTo <= leader.recvdFrom[size_t(q.rank)] &&
         c.recvsFrom <= leader.sentTo[size_t(q.rank)];
}

// Whether the other queues' posts (enqueued, and the first take[i] waiting of queue i) hold the
// other side of everything `p` of queue `me` exchanges with them.
// `unposted`: the ranks served here that have no queue yet (not connected: nothing posted).
bool peersCover(const std::vector<ServedQueueView>& queues, size_t me, const PostGate& p, const std::vector<size_t>& take,
                const std::vector<int>& unposted) {
  const int rank = queues[me].rank;
  for (size_t i = 0; i < queues.size(); ++i) {
    if (i == me || !queues[i].open) continue;
    const PostGate& theirs = take[i] > 0 ? *queues[i].waiting[take[i] - 1] : *queues[i].enqueued;
    const PeerCounts& mine = p.counts[size_t(queues[i].rank)];
    const PeerCounts& back = theirs.counts[size_t(rank)];
    if (p.collSeq > theirs.collSeq || mine.sendsTo > back.recvsFrom || mine.recvsFrom > back.sendsTo) return false;
  }
  for (int r : unposted)
    if (p.collSeq > 0 || p.counts[size_t(r)].sendsTo > 0 || p.counts[size_t(r)].recvsFrom > 0) return false;
  return true;
}

}  // namespace

std::vector<size_t> runnablePosts(const std::vector<ServedQueueView>& queues, const LeaderIssued& leader,
                                  const std::vector<int>& leaderOf) {
  std::vector<bool> hasQueue(leaderOf.size(), false);
  for (const ServedQueueView& q : queues) hasQueue[size_t(q.rank)] = true;
  std::vector<int> unposted;
  for (size_t r = 0; r < leaderOf.size(); ++r)
    if (int(r) != leader.rank && leaderOf[r] == leader.rank && !hasQueue[r]) unposted.push_back(int(r));
  std::vector<size_t> take(queues.size(), 0);
  for (size_t i = 0; i < queues.size(); ++i) {
    if (!queues[i].open) continue;
    while (take[i] < queues[i].waiting.size() && leaderSideIssued(queues[i], *queues[i].waiting[take[i]], leader)) ++take[i];
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < queues.size(); ++i)
      while (take[i] > 0 && !peersCover(queues, i, *queues[i].waiting[take[i] - 1], take, unposted)) {
        --take[i];
        changed = true;
      }
  }
  return take;
}

}  // namespace braid::api
