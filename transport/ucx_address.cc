#include "transport/ucx_address.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/bootstrap.h"
#include "core/comm.h"
#include "core/log.h"

namespace braid::transport {

ncclResult_t exchangeAddresses(ncclComm* comm, const std::string& failure, const void* address, size_t bytes,
                               AddressExchange* ex) {
  const int n = comm->nRanks, me = comm->rank;
  ex->sizes.assign(n, AddressExchange::Size{});
  ex->sizes[me].bytes = failure.empty() ? bytes : 0;
  std::snprintf(ex->sizes[me].failure, sizeof ex->sizes[me].failure, "%s", failure.c_str());
  BRAID_CHECK(comm->bootstrap->allGather(ex->sizes.data(), sizeof(AddressExchange::Size)));
  for (const AddressExchange::Size& s : ex->sizes) ex->maxBytes = std::max<size_t>(ex->maxBytes, s.bytes);
  ex->all.assign(ex->maxBytes * n, 0);
  if (failure.empty()) std::memcpy(ex->all.data() + ex->maxBytes * me, address, bytes);
  BRAID_CHECK(comm->bootstrap->allGather(ex->all.data(), ex->maxBytes));
  for (int r = 0; r < n; ++r)
    if (ex->sizes[r].failure[0] != '\0')
      return fail(ncclSystemError, "rank %d: its communicator has ranks on other hosts, which need UCX, and rank %d cannot use "
                  "it: %.240s", me, r, ex->sizes[r].failure);
  return ncclSuccess;
}

}  // namespace braid::transport
