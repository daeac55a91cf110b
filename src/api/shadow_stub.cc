// BRAID_SHADOW without CUDA kernels: no device collectives run, so there is nothing to check.
#include "api/shadow.h"

namespace braid::api {

struct ShadowGroup::Items {};
ShadowGroup::ShadowGroup(std::span<const Task* const>) {}
ShadowGroup::~ShadowGroup() = default;
ncclResult_t ShadowGroup::before() { return ncclSuccess; }
ncclResult_t ShadowGroup::after() { return ncclSuccess; }
ncclResult_t pollShadow(ncclComm*, const char*) { return ncclSuccess; }
ncclResult_t drainShadow(ncclComm*, const char*) { return ncclSuccess; }
void releaseShadow(ncclComm*) {}

}  // namespace braid::api
