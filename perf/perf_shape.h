// How nccl-tests turns a message size into a call: the NCCL count argument, the buffer sizes,
// the size column (the larger of the send and receive buffers) and the bus-bandwidth factor.
#pragma once
#include <cstddef>

#include "nccl.h"
#include "tests/common/reference.h"

namespace braid::perf {

struct CallShape {
  size_t count = 0;      // the NCCL count argument (per rank or per peer, as the call defines it)
  size_t sendElems = 0;  // elements in the send buffer
  size_t recvElems = 0;  // elements in the receive buffer
  size_t bytes = 0;      // the size column: max(send, recv) bytes
};

// `bytes` is the requested size; collectives that split it across ranks round down to a
// multiple of nRanks elements, as nccl-tests does.
CallShape callShape(check::Collective coll, ncclDataType_t type, size_t bytes, int nRanks);

// busbw = algbw * factor: 2(n-1)/n for all-reduce; (n-1)/n for all-gather, reduce-scatter,
// all-to-all, gather and scatter; 1 for broadcast, reduce and sendrecv.
double busBandwidthFactor(check::Collective coll, int nRanks);

}  // namespace braid::perf
