// Host entry points that libnccl.so.2 2.28.9 exports but braid does not implement yet: the
// host half of NCCL's device API (nccl_device/*.h) and the ncclResetDebugInit debug helper.
//
// They exist so that every symbol of the real library is braid's own: under LD_PRELOAD a
// missing name would bind to the real NCCL and receive a braid communicator. Under
// BRAID_BACKEND=auto (the default) the real NCCL serves them (BRAID_FALLBACK_*: the braid
// communicator's real one, made on first need, in place of the braid handle). Under
// BRAID_BACKEND=braid each one fails cleanly: ncclInvalidUsage (or a zero team / -1) and a
// last error naming the function.
//
// nccl_device.h is not included (it is NVIDIA's and pulls in device code); the few types that
// cross the ABI by value are restated here with the same layout, and pointers to the others
// are opaque. tests/unit/abi checks the exported names and calls each function.
#include <cstddef>

#include "api/export.h"
#include "api/fallback_route.h"
#include "api/forward.h"
#include "core/log.h"

namespace braid::device_abi {

// nccl_device/core.h `struct ncclTeam`: returned and passed by value, so its layout is ABI.
struct Team {
  int nRanks;
  int rank;
  int stride;
};
static_assert(sizeof(Team) == 12 && offsetof(Team, rank) == 4 && offsetof(Team, stride) == 8);

// Only ever handled through pointers: never defined.
struct DevComm;                  // ncclDevComm_t
struct DevCommRequirements;      // ncclDevCommRequirements_t
struct DevResourceRequirements;  // ncclDevResourceRequirements_t
struct LsaBarrierHandle;         // ncclLsaBarrierHandle_t
struct GinBarrierHandle;         // ncclGinBarrierHandle_t
struct LLA2AHandle;              // ncclLLA2AHandle_t

namespace {
ncclResult_t unsupported(const char* function) {
  return braid::fail(ncclInvalidUsage,
                     "%s: braid does not support the NCCL device API (nccl_device.h) yet; "
                     "use the host collectives of nccl.h instead",
                     function);
}
}  // namespace

}  // namespace braid::device_abi

using braid::device_abi::DevComm;
using braid::device_abi::DevCommRequirements;
using braid::device_abi::DevResourceRequirements;
using braid::device_abi::GinBarrierHandle;
using braid::device_abi::LLA2AHandle;
using braid::device_abi::LsaBarrierHandle;
using braid::device_abi::Team;
using braid::device_abi::unsupported;

// ---- Device communicators ----------------------------------------------------------------

BRAID_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const DevCommRequirements* reqs, DevComm* outDevComm) {
  BRAID_FORWARD(ncclDevCommCreate, comm, reqs, outDevComm);
  BRAID_FALLBACK_COMM(ncclDevCommCreate, ncclInvalidUsage, comm, reqs, outDevComm);
  return unsupported("ncclDevCommCreate");
}

BRAID_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const DevComm* devComm) {
  BRAID_FORWARD(ncclDevCommDestroy, comm, devComm);
  BRAID_FALLBACK_COMM(ncclDevCommDestroy, ncclInvalidUsage, comm, devComm);
  return unsupported("ncclDevCommDestroy");
}

// ---- Teams: no team exists, so the empty team {0, 0, 0} and rank -1 -----------------------

BRAID_API(Team, ncclTeamWorld, ncclComm_t comm) {
  BRAID_FORWARD(ncclTeamWorld, comm);
  BRAID_FALLBACK_COMM(ncclTeamWorld, Team{}, comm);
  unsupported("ncclTeamWorld");
  return Team{};
}

BRAID_API(Team, ncclTeamLsa, ncclComm_t comm) {
  BRAID_FORWARD(ncclTeamLsa, comm);
  BRAID_FALLBACK_COMM(ncclTeamLsa, Team{}, comm);
  unsupported("ncclTeamLsa");
  return Team{};
}

BRAID_API(Team, ncclTeamRail, ncclComm_t comm) {
  BRAID_FORWARD(ncclTeamRail, comm);
  BRAID_FALLBACK_COMM(ncclTeamRail, Team{}, comm);
  unsupported("ncclTeamRail");
  return Team{};
}

BRAID_API(int, ncclTeamRankToWorld, ncclComm_t comm, Team team, int rank) {
  BRAID_FORWARD(ncclTeamRankToWorld, comm, team, rank);
  BRAID_FALLBACK_COMM(ncclTeamRankToWorld, -1, comm, team, rank);
  unsupported("ncclTeamRankToWorld");
  return -1;
}

BRAID_API(int, ncclTeamRankToLsa, ncclComm_t comm, Team team, int rank) {
  BRAID_FORWARD(ncclTeamRankToLsa, comm, team, rank);
  BRAID_FALLBACK_COMM(ncclTeamRankToLsa, -1, comm, team, rank);
  unsupported("ncclTeamRankToLsa");
  return -1;
}

// ---- Resource requirements for device-side barriers and the LL all-to-all ----------------

BRAID_API(ncclResult_t, ncclLsaBarrierCreateRequirement, Team team, int nBarriers, LsaBarrierHandle* handle,
          DevResourceRequirements* reqs) {
  BRAID_FORWARD(ncclLsaBarrierCreateRequirement, team, nBarriers, handle, reqs);
  BRAID_FALLBACK_PLAIN(ncclLsaBarrierCreateRequirement, ncclInvalidUsage, team, nBarriers, handle, reqs);
  return unsupported("ncclLsaBarrierCreateRequirement");
}

BRAID_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, Team team, int nBarriers,
          GinBarrierHandle* handle, DevResourceRequirements* reqs) {
  BRAID_FORWARD(ncclGinBarrierCreateRequirement, comm, team, nBarriers, handle, reqs);
  BRAID_FALLBACK_COMM(ncclGinBarrierCreateRequirement, ncclInvalidUsage, comm, team, nBarriers, handle, reqs);
  return unsupported("ncclGinBarrierCreateRequirement");
}

BRAID_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) {
  BRAID_FORWARD(ncclLLA2ACalcSlots, maxElts, maxEltSize);
  BRAID_FALLBACK_PLAIN(ncclLLA2ACalcSlots, -1, maxElts, maxEltSize);
  unsupported("ncclLLA2ACalcSlots");
  return -1;
}

BRAID_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots, LLA2AHandle* handle,
          DevResourceRequirements* reqs) {
  BRAID_FORWARD(ncclLLA2ACreateRequirement, nBlocks, nSlots, handle, reqs);
  BRAID_FALLBACK_PLAIN(ncclLLA2ACreateRequirement, ncclInvalidUsage, nBlocks, nSlots, handle, reqs);
  return unsupported("ncclLLA2ACreateRequirement");
}

// ---- Debug helper -------------------------------------------------------------------------

// NCCL re-reads NCCL_DEBUG* here. braid reads its logging settings once per process; calling
// this is harmless and changes nothing (it is deprecated in nccl.h and used by no framework).
// libnccl.so.2 also exports the worker under this name as a plain strong symbol: so does braid.
extern "C" BRAID_EXPORT void ncclResetDebugInitInternal(void) {}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // the real NCCL's is deprecated too
BRAID_API(void, ncclResetDebugInit, void) {
  BRAID_FORWARD(ncclResetDebugInit);
  ncclResetDebugInitInternal();
}
#pragma GCC diagnostic pop
