// The algorithm registry. Adding an algorithm: write <name>.cc defining
// `extern const Algorithm k<Name>{...}`, and add it to the list below.
#include <cctype>

#include "algo/algorithm.h"

namespace braid::algo {

extern const Algorithm kRing, kDirect, kTwoShot, kTree, kDoubling;

const std::vector<const Algorithm*>& algorithms() {
  static const std::vector<const Algorithm*> all = {
      &kRing,
      &kDirect,
      &kTwoShot,
      &kTree,
      &kDoubling,
  };
  return all;
}

const Algorithm* findAlgorithm(const std::string& name) {
  auto same = [](const std::string& a, const char* b) {
    size_t i = 0;
    for (; i < a.size() && b[i] != '\0'; ++i)
      if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
        return false;
    return i == a.size() && b[i] == '\0';
  };
  for (const Algorithm* algo : algorithms())
    if (same(name, algo->name)) return algo;
  return nullptr;
}

const Algorithm* defaultAlgorithm(Coll coll, int nRanks) {
  switch (coll) {
    case Coll::AllReduce:
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::Broadcast:
    case Coll::Reduce: {
      static const Algorithm* ring = findAlgorithm("ring");  // looked up once: this is per call
      return ring;
    }
    case Coll::AlltoAll:
    case Coll::Gather:
    case Coll::Scatter: {
      static const Algorithm* direct = findAlgorithm("direct");
      return direct;
    }
    default: break;
  }
  (void)nRanks;
  return nullptr;
}

}  // namespace braid::algo
