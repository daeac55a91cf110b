// Direct algorithms: every rank talks to its peers directly, in rounds.
//
// In round k (1..n-1) rank r sends to r+k and receives from r-k (mod n), so the partners
// of a round are always in the same round and no FIFO ever needs to hold more than a
// round's message. Data is split over nChannels lanes (lane c on channel c) and each lane
// loops over chunks of at most maxStepElems elements.
//  - AlltoAll, AllGather: own block copied locally, then one exchange per round.
//  - Gather / Scatter / Broadcast: the root receives from / sends to each peer in turn.
//  - Reduce / ReduceScatter: the block's owner receives every peer's contribution and adds
//    them one by one (the first onto its own input, kFinal on the last).
//  - AllReduce, one-shot: every rank sends its whole input to every peer, then adds the n-1
//    inputs it receives. All sends come first, so in-place is safe. Latency is one hop, but
//    each rank adds in its own order: floating-point sums may differ between ranks in the
//    last bits (use "twoshot" or "ring" when the ranks must agree bit for bit).
#include "algo/algorithm.h"
#include "algo/partition.h"

namespace braid::algo {

namespace {

struct Ctx {
  const CollArgs& a;
  int n;
  int r;
  int peer(int64_t k) const { return static_cast<int>(((r + k) % n + n) % n); }
  uint64_t block(int owner, Range chunk) const { return static_cast<uint64_t>(owner) * a.count + chunk.begin; }
};

void copyStep(Lane& lane, uint64_t srcOff, uint64_t dstOff, uint64_t count, uint8_t flags = 0) {
  addStep(lane, {.src = kInput, .dst = kOutput, .flags = flags, .srcOff = srcOff, .dstOff = dstOff, .count = count});
}

void alltoallChunk(const Ctx& x, Range c, Lane& lane) {
  copyStep(lane, x.block(x.r, c), x.block(x.r, c), c.size());
  for (int k = 1; k < x.n; ++k) {
    const int to = x.peer(k), from = x.peer(-k);
    addStep(lane, {.sendPeer = to, .src = kInput, .srcOff = x.block(to, c), .count = c.size()});
    addStep(lane, {.recvPeer = from, .dst = kOutput, .dstOff = x.block(from, c), .count = c.size()});
  }
}

void allGatherChunk(const Ctx& x, Range c, Lane& lane) {
  copyStep(lane, c.begin, x.block(x.r, c), c.size());
  for (int k = 1; k < x.n; ++k) {
    const int from = x.peer(-k);
    addStep(lane, {.sendPeer = x.peer(k), .src = kInput, .srcOff = c.begin, .count = c.size()});
    addStep(lane, {.recvPeer = from, .dst = kOutput, .dstOff = x.block(from, c), .count = c.size()});
  }
}

void gatherChunk(const Ctx& x, Range c, Lane& lane) {
  const int root = x.a.root;
  if (x.r != root) {
    addStep(lane, {.sendPeer = root, .src = kInput, .srcOff = c.begin, .count = c.size()});
    return;
  }
  copyStep(lane, c.begin, x.block(root, c), c.size());
  for (int k = 1; k < x.n; ++k) {
    const int from = x.peer(k);
    addStep(lane, {.recvPeer = from, .dst = kOutput, .dstOff = x.block(from, c), .count = c.size()});
  }
}

void scatterChunk(const Ctx& x, Range c, Lane& lane) {
  const int root = x.a.root;
  if (x.r != root) {
    addStep(lane, {.recvPeer = root, .dst = kOutput, .dstOff = c.begin, .count = c.size()});
    return;
  }
  copyStep(lane, x.block(root, c), c.begin, c.size());
  for (int k = 1; k < x.n; ++k) {
    const int to = x.peer(k);
    addStep(lane, {.sendPeer = to, .src = kInput, .srcOff = x.block(to, c), .count = c.size()});
  }
}

void broadcastChunk(const Ctx& x, Range c, Lane& lane) {
  const int root = x.a.root;
  if (x.r != root) {
    addStep(lane, {.recvPeer = root, .dst = kOutput, .dstOff = c.begin, .count = c.size()});
    return;
  }
  copyStep(lane, c.begin, c.begin, c.size());
  for (int k = 1; k < x.n; ++k)
    addStep(lane, {.sendPeer = x.peer(k), .src = kInput, .srcOff = c.begin, .count = c.size()});
}

// Owner side of a reduction into out[outOff..): recv from `from(k)` for k = 1..n-1, adding
// onto the own input block first and onto the partial sum in the output afterwards.
template <class From>
void reduceInto(const Ctx& x, uint64_t inOff, uint64_t outOff, uint64_t count, From from, Lane& lane,
                int k) {
  const bool first = k == 1, last = k == x.n - 1;
  addStep(lane, {.recvPeer = from(k), .src = first ? kInput : kOutput, .dst = kOutput,
                 .flags = static_cast<uint8_t>(kReduce | (last ? kFinal : 0)), .srcOff = first ? inOff : outOff,
                 .dstOff = outOff, .count = count});
}

void reduceChunk(const Ctx& x, Range c, Lane& lane) {
  const int root = x.a.root;
  if (x.r != root) {
    addStep(lane, {.sendPeer = root, .src = kInput, .srcOff = c.begin, .count = c.size()});
    return;
  }
  for (int k = 1; k < x.n; ++k)
    reduceInto(x, c.begin, c.begin, c.size(), [&](int64_t j) { return x.peer(j); }, lane, k);
}

void reduceScatterChunk(const Ctx& x, Range c, Lane& lane) {
  for (int k = 1; k < x.n; ++k) {
    const int to = x.peer(k);
    addStep(lane, {.sendPeer = to, .src = kInput, .srcOff = x.block(to, c), .count = c.size()});
    reduceInto(x, x.block(x.r, c), c.begin, c.size(), [&](int64_t j) { return x.peer(-j); }, lane, k);
  }
}

void allReduceChunk(const Ctx& x, Range c, Lane& lane) {
  for (int k = 1; k < x.n; ++k)
    addStep(lane, {.sendPeer = x.peer(k), .src = kInput, .srcOff = c.begin, .count = c.size()});
  for (int k = 1; k < x.n; ++k)
    reduceInto(x, c.begin, c.begin, c.size(), [&](int64_t j) { return x.peer(-j); }, lane, k);
}

bool directSupports(Coll coll, int nRanks) { return nRanks >= 1 && coll != Coll::SendRecv; }

RankPlan directBuild(const CollArgs& a) {
  if (a.count == 0 || !directSupports(a.coll, a.nRanks)) return {};
  void (*emit)(const Ctx&, Range, Lane&) = nullptr;
  switch (a.coll) {
    case Coll::AlltoAll: emit = alltoallChunk; break;
    case Coll::AllGather: emit = allGatherChunk; break;
    case Coll::Gather: emit = gatherChunk; break;
    case Coll::Scatter: emit = scatterChunk; break;
    case Coll::Broadcast: emit = broadcastChunk; break;
    case Coll::Reduce: emit = reduceChunk; break;
    case Coll::ReduceScatter: emit = reduceScatterChunk; break;
    case Coll::AllReduce: emit = allReduceChunk; break;
    default: return {};
  }
  const Ctx x{a, a.nRanks, a.rank};
  // One rank: a copy (every block offset is 0); reductions apply their post-op.
  return chunkedPlan(a, 1, collReduces(a.coll) ? kFinal : 0, [&](Range c, Lane& lane) { emit(x, c, lane); });
}

}  // namespace

extern const Algorithm kDirect{"direct", directSupports, directBuild};

}  // namespace braid::algo
