// Two-shot AllReduce: a direct reduce-scatter followed by a direct all-gather.
//
// Each chunk is cut into n blocks; rank b owns block b. Round k (1..n-1) of the first shot:
// send input block r+k to its owner, and add the block that rank r-k sends onto our own
// (kFinal on the last round). Round k of the second shot: send our complete block to r+k
// and store the one r-k sends. Every block is reduced at one rank only, so all ranks end
// with bit-identical results; it moves 2(n-1)/n of the data per rank, like the ring, with
// 2(n-1) rounds of latency that do not wait on each other around a ring.
// In-place is safe: our own block is read from the input only in round 1, before it is
// first written, and other blocks are written only after every send has read them.
#include "algo/algorithm.h"
#include "algo/partition.h"

namespace braid::algo {

namespace {

void twoShotChunk(const CollArgs& a, Range chunk, uint64_t align, Lane& lane) {
  const int n = a.nRanks, r = a.rank;
  const auto blocks = splitRange(chunk, n, align);
  auto peer = [&](int64_t k) { return static_cast<int>(((r + k) % n + n) % n); };
  const Range own = blocks[r];
  for (int k = 1; k < n; ++k) {
    const Range theirs = blocks[peer(k)];
    addStep(lane, {.sendPeer = peer(k), .src = kInput, .srcOff = theirs.begin, .count = theirs.size()});
    const bool first = k == 1, last = k == n - 1;
    addStep(lane, {.recvPeer = peer(-k), .src = first ? kInput : kOutput, .dst = kOutput,
                   .flags = static_cast<uint8_t>(kReduce | (last ? kFinal : 0)), .srcOff = own.begin,
                   .dstOff = own.begin, .count = own.size()});
  }
  for (int k = 1; k < n; ++k) {
    addStep(lane, {.sendPeer = peer(k), .src = kOutput, .srcOff = own.begin, .count = own.size()});
    const Range theirs = blocks[peer(-k)];
    addStep(lane, {.recvPeer = peer(-k), .dst = kOutput, .dstOff = theirs.begin, .count = theirs.size()});
  }
}

bool twoShotSupports(Coll coll, int nRanks) { return nRanks >= 1 && coll == Coll::AllReduce; }

RankPlan twoShotBuild(const CollArgs& a) {
  if (a.count == 0 || !twoShotSupports(a.coll, a.nRanks)) return {};
  const uint64_t align = effectiveAlign(a);
  return chunkedPlan(a, a.nRanks, kFinal, [&](Range chunk, Lane& lane) { twoShotChunk(a, chunk, align, lane); });
}

}  // namespace

extern const Algorithm kTwoShot{"twoshot", twoShotSupports, twoShotBuild};

}  // namespace braid::algo
