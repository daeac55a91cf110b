// The algorithm registry. Adding an algorithm: write <name>.cc defining
// `extern const Algorithm k<Name>{...}`, and add it to the list below.
#include <cctype>

#include "algo/algorithm.h"

namespace braid::algo {

extern const Algorithm kRing, kDirect, kTwoShot;

const std::vector<const Algorithm*>& algorithms() {
  static const std::vector<const Algorithm*> all = {
      &kRing,
      &kDirect,
      &kTwoShot,
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

const Algorithm* tunedAlgorithm(Coll coll, int nRanks, uint64_t bytes) {
  // A small all-reduce of 2 ranks: one hop (each sends its input to the other, then adds)
  // instead of the ring's two in a row, each a FIFO handshake across the link. Both ranks
  // still get the same bits, as a + b == b + a; with more ranks the orders would differ.
  constexpr uint64_t kOneShotMaxBytes = 64 << 10;
  if (coll == Coll::AllReduce && nRanks == 2 && bytes <= kOneShotMaxBytes) {
    static const Algorithm* direct = findAlgorithm("direct");
    return direct;
  }
  return defaultAlgorithm(coll, nRanks);
}

}  // namespace braid::algo
