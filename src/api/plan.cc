#include "api/plan.h"

#include <algorithm>

#include "algo/algorithm.h"
#include "core/comm.h"
#include "core/numeric.h"

namespace braid::api {

size_t collectiveBytes(const Task& t) {
  bool perRankBlocks = t.coll == algo::Coll::AllGather || t.coll == algo::Coll::ReduceScatter ||
                       t.coll == algo::Coll::AlltoAll || t.coll == algo::Coll::Gather || t.coll == algo::Coll::Scatter;
  return t.count * sizeOfType(t.type) * (perRankBlocks ? t.comm->nRanks : 1);
}

algo::CollArgs collArgsFor(const Task& t, int nChannels, size_t alignBytes, size_t fifoBytes) {
  size_t es = sizeOfType(t.type);
  algo::CollArgs args;
  args.coll = t.coll;
  args.nRanks = t.comm->nRanks;
  args.rank = t.comm->rank;
  args.count = t.count;
  args.root = t.root;
  args.nChannels = nChannels;
  args.alignElems = static_cast<uint32_t>(std::max<size_t>(1, alignBytes / es));
  args.maxStepElems = fifoBytes / 2 / es;
  args.ring = t.comm->ring;
  args.nodeOf = t.comm->nodeOf;  // computed once, at init (api/resources.cc chooseRing)
  return args;
}

bool sendOverlapsARecv(const Task& send, std::span<const Task* const> p2p) {
  auto begin = static_cast<const char*>(send.sendbuff);
  auto end = begin + send.count * sizeOfType(send.type);
  for (const Task* r : p2p) {
    if (r->isSend || r->count == 0) continue;
    auto rb = static_cast<const char*>(r->recvbuff);
    if (rb < end && begin < rb + r->count * sizeOfType(r->type)) return true;
  }
  return false;
}

void PlanCache::startRun() {
  if (plans_.size() > 256) plans_.clear();
}

const algo::RankPlan& PlanCache::get(const algo::CollArgs& args, const algo::Algorithm* algorithm) {
  if (algorithm == nullptr) algorithm = algo::defaultAlgorithm(args.coll, args.nRanks);
  // nRanks, rank, ring and nodeOf are fixed for a communicator; the rest names the plan.
  Key key{static_cast<int>(args.coll), args.count, args.root, args.nChannels, args.alignElems, args.maxStepElems, algorithm};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    it = plans_.emplace(key, algorithm->build(args)).first;
    algo::maybeDumpSchedule(args, it->second);
  }
  return it->second;
}

}  // namespace braid::api
