// Out-of-band exchange between the ranks of one communicator, over TCP.
// Used at init and for setup (IPC handles, shared-memory names); never on the data path.
#pragma once
#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace braid {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int nRanks() const = 0;
  // Every rank contributes `bytesPerRank` bytes at data + rank*bytesPerRank; afterwards all
  // ranks hold every rank's block. Ring algorithm: O(n) messages per rank.
  virtual ncclResult_t allGather(void* data, size_t bytesPerRank) = 0;
  // Tagged point-to-point messages; a recv matches the send with the same (peer, tag).
  virtual ncclResult_t send(int peer, uint32_t tag, const void* data, size_t size) = 0;
  virtual ncclResult_t recv(int peer, uint32_t tag, void* data, size_t size) = 0;
  virtual ncclResult_t barrier() = 0;
};

}  // namespace braid
