// The algorithm registry: each algorithm is one file (ring.cc, direct.cc, ...) and one
// line in registry.cc.
#pragma once
#include "algo/schedule.h"

namespace braid::algo {

struct Algorithm {
  const char* name;                              // "ring", "direct", ...
  bool (*supports)(Coll coll, int nRanks);       // which collectives it implements
  RankPlan (*build)(const CollArgs& args);       // pure: same args, same plan
};

// All registered algorithms, in registration order.
const std::vector<const Algorithm*>& algorithms();
// nullptr when no algorithm has that name (case-insensitive).
const Algorithm* findAlgorithm(const std::string& name);
// The default algorithm for a collective (the tuner may pick another).
const Algorithm* defaultAlgorithm(Coll coll, int nRanks);
// The GPU executor's choice for a collective of `bytes` (collectiveBytes): the default, or an
// algorithm with fewer hops in a row where a call is short enough for latency to rule.
const Algorithm* tunedAlgorithm(Coll coll, int nRanks, uint64_t bytes);

}  // namespace braid::algo
