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
// The default algorithm for a collective (the tuner, algo/tuner.h, may pick another).
const Algorithm* defaultAlgorithm(Coll coll, int nRanks);

}  // namespace braid::algo
