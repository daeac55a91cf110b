#include "perf/perf_shape.h"

#include <algorithm>

namespace braid::perf {

using check::Collective;

CallShape callShape(Collective coll, ncclDataType_t type, size_t bytes, int nRanks) {
  size_t typeBytes = check::typeSize(type);
  size_t elems = bytes / typeBytes;
  bool splitAcrossRanks = coll == Collective::AllGather || coll == Collective::ReduceScatter ||
                          coll == Collective::AlltoAll || coll == Collective::Gather || coll == Collective::Scatter;
  CallShape shape;
  shape.count = splitAcrossRanks ? elems / static_cast<size_t>(nRanks) : elems;
  check::BufferCounts counts = check::bufferCounts(coll, shape.count, nRanks);
  shape.sendElems = counts.send;
  shape.recvElems = counts.recv;
  shape.bytes = std::max(counts.send, counts.recv) * typeBytes;
  return shape;
}

double busBandwidthFactor(Collective coll, int nRanks) {
  double n = nRanks;
  switch (coll) {
    case Collective::AllReduce: return 2 * (n - 1) / n;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AlltoAll:
    case Collective::Gather:
    case Collective::Scatter: return (n - 1) / n;
    default: return 1;
  }
}

}  // namespace braid::perf
