// Recursive-doubling AllReduce: log2(n) rounds, in round j each rank exchanges its whole
// partial sum with the rank whose ring position differs in bit j, and adds it. Latency of
// log2(n) hops where the ring has 2(n-1) and the tree 2 log2(nodes) + 2(ranks per node - 1);
// each round moves the whole buffer, so it is for small messages. Ranks take their positions
// from the ring order (each host's ranks in one run, hosts in node order), so the first
// rounds pair ranks of one host and only the last log2(nodes) cross hosts.
//
// n not a power of two: with p the largest power of two below n, the rank at position p + i
// first hands its input to position i (which adds it) and at the end receives the result from
// it. In every round both partners add the same two values (op(theirs, mine) on one side,
// op(mine, theirs) on the other), so every rank ends with the same bits wherever op is
// commutative bit for bit, as IEEE sum, product, min and max are for numbers (a NaN among
// min/max inputs may come out differently on different ranks).
// In-place is safe: a round sends the partial before it overwrites it, and round 0 reads the
// input (sent, then added to) before the output, which may be the input, is written.
#include "algo/algorithm.h"
#include "algo/partition.h"

namespace braid::algo {

namespace {

void doublingChunk(const CollArgs& a, const RingOrder& order, Range chunk, Lane& lane) {
  const int n = a.nRanks, pos = order.pos();
  int p = 1, rounds = 0;  // p = 2^rounds, the largest power of two <= n
  while (p * 2 <= n) {
    p *= 2;
    ++rounds;
  }
  const bool extra = pos >= p, helper = pos < n - p;  // an extra hands its input to its helper
  auto step = [&](Step s) {
    s.srcOff = s.dstOff = chunk.begin;
    s.count = chunk.size();
    addStep(lane, s);
  };
  if (extra) {
    const int h = order.at(pos - p);
    step({.sendPeer = h, .src = kInput});
    step({.recvPeer = h, .dst = kOutput});
    return;
  }
  // The partial so far: the input until the first addition writes the output.
  uint16_t partial = kInput;
  if (helper) {
    step({.recvPeer = order.at(pos + p), .src = kInput, .dst = kOutput, .flags = kReduce});
    partial = kOutput;
  }
  for (int j = 0; j < rounds; ++j) {
    const int partner = order.at(pos ^ (1 << j));
    step({.sendPeer = partner, .src = partial});
    step({.recvPeer = partner, .src = partial, .dst = kOutput,
          .flags = static_cast<uint8_t>(kReduce | (j == rounds - 1 ? kFinal : 0))});
    partial = kOutput;
  }
  if (helper) step({.sendPeer = order.at(pos + p), .src = kOutput});
}

bool doublingSupports(Coll coll, int nRanks) { return nRanks >= 1 && coll == Coll::AllReduce; }

RankPlan doublingBuild(const CollArgs& a) {
  if (a.count == 0 || !doublingSupports(a.coll, a.nRanks)) return {};
  const RingOrder order(a);
  return chunkedPlan(a, 1, kFinal, [&](Range chunk, Lane& lane) { doublingChunk(a, order, chunk, lane); });
}

}  // namespace

extern const Algorithm kDoubling{"doubling", doublingSupports, doublingBuild};

}  // namespace braid::algo
