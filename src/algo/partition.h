// How algorithms cut a buffer into lanes, chunks and blocks, and walk a ring.
// Internal to src/algo.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "algo/schedule.h"

namespace braid::algo {

struct Range {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
};

// Splits r into `parts` contiguous ranges, as equal as possible in whole units of `align`
// elements. Inner boundaries sit at r.begin + k*align; trailing parts may be empty.
std::vector<Range> splitRange(Range r, uint64_t parts, uint64_t align);

// Cuts r into as few equal chunks as possible such that splitting a chunk into
// `blocksPerChunk` blocks (splitRange) gives blocks of at most maxStepElems elements.
// maxStepElems == 0 means one chunk. An empty r gives no chunks.
std::vector<Range> chunkRange(Range r, uint64_t blocksPerChunk, uint64_t maxStepElems, uint64_t align);

// The alignment the algorithm should use: alignElems, at least 1, at most maxStepElems.
uint64_t effectiveAlign(const CollArgs& args);

// The lanes' data ranges: [0, total) cut into max(1, nChannels) aligned parts.
std::vector<Range> laneRanges(const CollArgs& args, uint64_t total);

// The plan of an algorithm whose lanes each cut their range into chunks (chunkRange with
// `blocksPerChunk`) and emit each chunk's steps: one lane per channel, lane c on channel c. One
// rank: a copy in -> out per lane with `copyFlags` (kFinal for reductions).
RankPlan chunkedPlan(const CollArgs& args, uint64_t blocksPerChunk, uint8_t copyFlags,
                     const std::function<void(Range chunk, Lane& lane)>& emitChunk);

// Rank order of a ring: args.ring when it is a permutation of 0..nRanks-1, else identity.
class RingOrder {
 public:
  explicit RingOrder(const CollArgs& args);
  int size() const { return static_cast<int>(order_.size()); }
  // The rank at ring position p (any integer; taken modulo the ring size).
  int at(int64_t p) const;
  // This rank's position in the ring.
  int pos() const { return pos_; }
  int prev() const { return at(pos_ - 1); }
  int next() const { return at(pos_ + 1); }
  int posOf(int rank) const;

 private:
  std::vector<int> order_;
  std::vector<int> posOf_;
  int pos_ = 0;
};

// Appends a step unless it is empty (count 0): both ends of a connection skip the same
// blocks, because they compute the same block boundaries.
void addStep(Lane& lane, const Step& step);

}  // namespace braid::algo
