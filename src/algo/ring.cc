// Ring algorithms: data flows from each rank to the next one in the ring order.
//
// Every collective splits its data over nChannels lanes (lane c on channel c), and each lane
// loops over chunks small enough that one step carries at most maxStepElems elements.
//  - AllReduce: a chunk is cut into n blocks. A reduce-scatter pass (n-1 hops) leaves block
//    pos+1 complete at ring position pos (kFinal there), then an all-gather pass (n-1 hops)
//    forwards the complete blocks. Each input block is read once, before any output block
//    is written, so in-place (input == output) is safe.
//  - ReduceScatter / AllGather: the same two passes on their own, with rank-sized blocks.
//  - Broadcast: a pipeline from the root along the ring. Reduce: a pipeline ending at the root.
// With one rank every collective is a copy from input to output (kFinal for reductions).
#include "algo/algorithm.h"
#include "algo/partition.h"

namespace braid::algo {

namespace {

uint8_t finalFlag(Coll coll) { return collReduces(coll) ? kFinal : 0; }

// One rank: copy input to output, one lane per channel.
RankPlan singleRank(const CollArgs& a) {
  RankPlan plan;
  const uint64_t total = outputCount(a.coll, a.count, 1, 0, 0);
  const auto ranges = laneRanges(a, total);
  for (size_t c = 0; c < ranges.size(); ++c) {
    const Range r = ranges[c];
    Lane lane{.channel = static_cast<int32_t>(c), .steps = {}};
    addStep(lane, {.src = kInput, .dst = kOutput, .flags = finalFlag(a.coll), .srcOff = r.begin,
                   .dstOff = r.begin, .count = r.size()});
    if (!lane.steps.empty()) plan.lanes.push_back(std::move(lane));
  }
  return plan;
}

void allReduceChunk(const RingOrder& ring, Range chunk, uint64_t align, Lane& lane) {
  const int n = ring.size(), pos = ring.pos(), prev = ring.prev(), next = ring.next();
  const auto blocks = splitRange(chunk, n, align);
  auto block = [&](int64_t j) { return blocks[static_cast<size_t>(((j % n) + n) % n)]; };
  // Reduce-scatter: start with our own block, then add our input to what arrives.
  Range b = block(pos);
  addStep(lane, {.sendPeer = next, .src = kInput, .srcOff = b.begin, .count = b.size()});
  for (int s = 1; s <= n - 2; ++s) {
    b = block(pos - s);
    addStep(lane, {.recvPeer = prev, .sendPeer = next, .src = kInput, .flags = kReduce, .srcOff = b.begin,
                   .count = b.size()});
  }
  b = block(pos + 1);  // completes here: store it and start the all-gather with it
  addStep(lane, {.recvPeer = prev, .sendPeer = next, .src = kInput, .dst = kOutput, .flags = kReduce | kFinal,
                 .srcOff = b.begin, .dstOff = b.begin, .count = b.size()});
  // All-gather: store and forward complete blocks; the last one stops here.
  for (int t = 1; t <= n - 1; ++t) {
    b = block(pos + 1 - t);
    addStep(lane, {.recvPeer = prev, .sendPeer = t < n - 1 ? next : kNoPeer, .dst = kOutput,
                   .dstOff = b.begin, .count = b.size()});
  }
}

RankPlan ringAllReduce(const CollArgs& a) {
  const RingOrder ring(a);
  const uint64_t align = effectiveAlign(a);
  RankPlan plan;
  const auto ranges = laneRanges(a, a.count);
  for (size_t c = 0; c < ranges.size(); ++c) {
    Lane lane{.channel = static_cast<int32_t>(c), .steps = {}};
    for (Range chunk : chunkRange(ranges[c], ring.size(), a.maxStepElems, align))
      allReduceChunk(ring, chunk, align, lane);
    if (!lane.steps.empty()) plan.lanes.push_back(std::move(lane));
  }
  return plan;
}

// Block `owner` of a rank-blocked buffer (ReduceScatter input, AllGather output).
uint64_t blockOffset(const CollArgs& a, int owner, Range chunk) {
  return static_cast<uint64_t>(owner) * a.count + chunk.begin;
}

void allGatherChunk(const CollArgs& a, const RingOrder& ring, Range chunk, Lane& lane) {
  const int n = ring.size(), pos = ring.pos();
  addStep(lane, {.sendPeer = ring.next(), .src = kInput, .dst = kOutput, .srcOff = chunk.begin,
                 .dstOff = blockOffset(a, a.rank, chunk), .count = chunk.size()});
  for (int t = 1; t <= n - 1; ++t) {
    addStep(lane, {.recvPeer = ring.prev(), .sendPeer = t < n - 1 ? ring.next() : kNoPeer, .dst = kOutput,
                   .dstOff = blockOffset(a, ring.at(pos - t), chunk), .count = chunk.size()});
  }
}

void reduceScatterChunk(const CollArgs& a, const RingOrder& ring, Range chunk, Lane& lane) {
  const int n = ring.size(), pos = ring.pos();
  // The block owned by ring position p starts at p+1 and travels n-1 hops to p.
  addStep(lane, {.sendPeer = ring.next(), .src = kInput, .srcOff = blockOffset(a, ring.at(pos - 1), chunk),
                 .count = chunk.size()});
  for (int s = 1; s <= n - 2; ++s) {
    addStep(lane, {.recvPeer = ring.prev(), .sendPeer = ring.next(), .src = kInput, .flags = kReduce,
                   .srcOff = blockOffset(a, ring.at(pos - s - 1), chunk), .count = chunk.size()});
  }
  addStep(lane, {.recvPeer = ring.prev(), .src = kInput, .dst = kOutput, .flags = kReduce | kFinal,
                 .srcOff = blockOffset(a, a.rank, chunk), .dstOff = chunk.begin, .count = chunk.size()});
}

void broadcastChunk(const CollArgs& a, const RingOrder& ring, Range chunk, Lane& lane) {
  const int n = ring.size();
  const int dist = ((ring.pos() - ring.posOf(a.root)) % n + n) % n;  // hops from the root
  Step s{.dst = kOutput, .dstOff = chunk.begin, .count = chunk.size()};
  if (dist == 0) {
    s.src = kInput;
    s.srcOff = chunk.begin;
  } else {
    s.recvPeer = ring.prev();
  }
  if (dist < n - 1) s.sendPeer = ring.next();
  addStep(lane, s);
}

void reduceChunk(const CollArgs& a, const RingOrder& ring, Range chunk, Lane& lane) {
  const int n = ring.size();
  const int dist = ((ring.pos() - ring.posOf(a.root) - 1) % n + n) % n;  // hops from the chain's start
  Step s{.src = kInput, .srcOff = chunk.begin, .count = chunk.size()};
  if (dist > 0) {
    s.recvPeer = ring.prev();
    s.flags = kReduce;
  }
  if (dist < n - 1) {
    s.sendPeer = ring.next();
  } else {  // the root
    s.flags |= kFinal;
    s.dst = kOutput;
    s.dstOff = chunk.begin;
  }
  addStep(lane, s);
}

// Collectives whose lanes walk [0, count) chunk by chunk, one block per step.
RankPlan perChunk(const CollArgs& a, void (*emit)(const CollArgs&, const RingOrder&, Range, Lane&)) {
  const RingOrder ring(a);
  RankPlan plan;
  const auto ranges = laneRanges(a, a.count);
  for (size_t c = 0; c < ranges.size(); ++c) {
    Lane lane{.channel = static_cast<int32_t>(c), .steps = {}};
    for (Range chunk : chunkRange(ranges[c], 1, a.maxStepElems, effectiveAlign(a))) emit(a, ring, chunk, lane);
    if (!lane.steps.empty()) plan.lanes.push_back(std::move(lane));
  }
  return plan;
}

bool ringSupports(Coll coll, int nRanks) {
  if (nRanks < 1) return false;
  switch (coll) {
    case Coll::AllReduce:
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::Broadcast:
    case Coll::Reduce: return true;
    default: return false;
  }
}

RankPlan ringBuild(const CollArgs& a) {
  if (a.count == 0 || !ringSupports(a.coll, a.nRanks)) return {};
  if (a.nRanks == 1) return singleRank(a);
  switch (a.coll) {
    case Coll::AllReduce: return ringAllReduce(a);
    case Coll::AllGather: return perChunk(a, allGatherChunk);
    case Coll::ReduceScatter: return perChunk(a, reduceScatterChunk);
    case Coll::Broadcast: return perChunk(a, broadcastChunk);
    case Coll::Reduce: return perChunk(a, reduceChunk);
    default: return {};
  }
}

}  // namespace

extern const Algorithm kRing{"ring", ringSupports, ringBuild};

}  // namespace braid::algo
