// The UCP worker addresses of a communicator's ranks, exchanged over its bootstrap in two
// rounds (sizes and failures, then the addresses padded to the longest). A rank that could
// not start UCX sends its reason instead of an address, so that every rank fails together and
// names it. Collective; plain bytes (no UCX headers needed).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

struct ncclComm;

namespace braid::transport {

struct AddressExchange {
  struct Size {
    uint64_t bytes;
    char failure[240];
  };
  std::vector<Size> sizes;
  std::vector<char> all;
  size_t maxBytes = 1;
  const char* address(int rank) const { return all.data() + maxBytes * rank; }
};

// `failure` empty: this rank sends its address (`bytes` of it); otherwise the reason it has none.
// Fails on every rank, naming the first rank without UCX, when one sent a reason.
ncclResult_t exchangeAddresses(ncclComm* comm, const std::string& failure, const void* address, size_t bytes,
                               AddressExchange* ex);

}  // namespace braid::transport
