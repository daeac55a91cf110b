// Without CUDA kernels no rank runs GPU work, so none is served (served.h).
#include "api/served.h"

namespace braid::api {

class ServedLeader {};

ncclResult_t planServing(ncclComm*) { return ncclSuccess; }
Served::~Served() = default;
void Served::stop(bool) {}
void Served::release() {}

}  // namespace braid::api
