// Block boundaries and ring positions shared by the algorithms.
#include "algo/partition.h"

#include <algorithm>

namespace braid::algo {

std::vector<Range> splitRange(Range r, uint64_t parts, uint64_t align) {
  if (parts == 0) return {};
  if (align == 0) align = 1;
  const uint64_t len = r.empty() ? 0 : r.size();
  const uint64_t units = (len + align - 1) / align;
  const uint64_t base = units / parts, extra = units % parts;
  std::vector<Range> out;
  out.reserve(parts);
  uint64_t unitCursor = 0;
  for (uint64_t i = 0; i < parts; ++i) {
    const uint64_t begin = std::min(r.begin + unitCursor * align, r.begin + len);
    unitCursor += base + (i < extra ? 1 : 0);
    const uint64_t end = std::min(r.begin + unitCursor * align, r.begin + len);
    out.push_back({begin, end});
  }
  return out;
}

std::vector<Range> chunkRange(Range r, uint64_t blocksPerChunk, uint64_t maxStepElems, uint64_t align) {
  if (r.empty()) return {};
  if (maxStepElems == 0) return {r};
  if (align == 0) align = 1;
  if (blocksPerChunk == 0) blocksPerChunk = 1;
  const uint64_t units = (r.size() + align - 1) / align;
  const uint64_t unitsPerBlock = std::max<uint64_t>(1, maxStepElems / align);
  const uint64_t unitsPerChunk = unitsPerBlock * blocksPerChunk;
  const uint64_t chunks = (units + unitsPerChunk - 1) / unitsPerChunk;
  return splitRange(r, chunks, align);
}

uint64_t effectiveAlign(const CollArgs& args) {
  uint64_t align = std::max<uint64_t>(1, args.alignElems);
  if (args.maxStepElems > 0) align = std::min(align, args.maxStepElems);
  return align;
}

std::vector<Range> laneRanges(const CollArgs& args, uint64_t total) {
  return splitRange({0, total}, static_cast<uint64_t>(std::max(1, args.nChannels)), effectiveAlign(args));
}

RankPlan chunkedPlan(const CollArgs& args, uint64_t blocksPerChunk, uint8_t copyFlags,
                     const std::function<void(Range chunk, Lane& lane)>& emitChunk) {
  const uint64_t align = effectiveAlign(args);
  RankPlan plan;
  const auto ranges = laneRanges(args, args.count);
  for (size_t c = 0; c < ranges.size(); ++c) {
    Lane lane{.channel = static_cast<int32_t>(c), .steps = {}};
    if (args.nRanks == 1) {
      addStep(lane, {.src = kInput, .dst = kOutput, .flags = copyFlags, .srcOff = ranges[c].begin,
                     .dstOff = ranges[c].begin, .count = ranges[c].size()});
    } else {
      for (Range chunk : chunkRange(ranges[c], blocksPerChunk, args.maxStepElems, align)) emitChunk(chunk, lane);
    }
    if (!lane.steps.empty()) plan.lanes.push_back(std::move(lane));
  }
  return plan;
}

RingOrder::RingOrder(const CollArgs& args) {
  const int n = std::max(1, args.nRanks);
  bool valid = static_cast<int>(args.ring.size()) == n;
  std::vector<int> seen(n, -1);
  for (int p = 0; valid && p < n; ++p) {
    const int r = args.ring[p];
    valid = r >= 0 && r < n && seen[r] < 0;
    if (valid) seen[r] = p;
  }
  if (valid) {
    order_ = args.ring;
    posOf_ = seen;
  } else {
    order_.resize(n);
    posOf_.resize(n);
    for (int i = 0; i < n; ++i) order_[i] = posOf_[i] = i;
  }
  pos_ = posOf(args.rank);
}

int RingOrder::at(int64_t p) const {
  const int64_t n = static_cast<int64_t>(order_.size());
  return order_[static_cast<size_t>(((p % n) + n) % n)];
}

int RingOrder::posOf(int rank) const {
  return rank >= 0 && rank < static_cast<int>(posOf_.size()) ? posOf_[rank] : 0;
}

void addStep(Lane& lane, const Step& step) {
  if (step.count > 0) lane.steps.push_back(step);
}

}  // namespace braid::algo
