/* braid's nccl.h seen from C: it must compile as C11 (-Wall -Wextra -pedantic), and its
 * layouts and initializers must be the ones a C++ compiler sees in NVIDIA's header (the test
 * compares these rows with the toolkit table, by name). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include ABI_NCCL_HEADER

struct AbiCRow {
  const char* name;
  long long value;
};

#define C_TYPE(T) {"sizeof(" #T ")", (long long)sizeof(T)}, {"alignof(" #T ")", (long long)_Alignof(T)}
#define C_FIELD(S, f) {"offsetof(" #S ", " #f ")", (long long)offsetof(S, f)}
#define C_NUMBER(e) {#e, (long long)(e)}

/* Filled at run time: C allows only constant initializers in static storage. Ends with {NULL, 0}. */
const struct AbiCRow* abiCRows(void) {
  const ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  const ncclSimInfo_t simInfo = NCCL_SIM_INFO_INITIALIZER;
  const struct AbiCRow rows[] = {
      C_TYPE(ncclComm_t), C_TYPE(ncclUniqueId), C_TYPE(ncclResult_t), C_TYPE(ncclRedOp_t),
      C_TYPE(ncclDataType_t), C_TYPE(ncclScalarResidence_t), C_TYPE(ncclConfig_t), C_TYPE(ncclSimInfo_t),
      C_FIELD(ncclConfig_t, size), C_FIELD(ncclConfig_t, magic), C_FIELD(ncclConfig_t, version),
      C_FIELD(ncclConfig_t, blocking), C_FIELD(ncclConfig_t, cgaClusterSize), C_FIELD(ncclConfig_t, minCTAs),
      C_FIELD(ncclConfig_t, maxCTAs), C_FIELD(ncclConfig_t, netName), C_FIELD(ncclConfig_t, splitShare),
      C_FIELD(ncclConfig_t, trafficClass), C_FIELD(ncclConfig_t, commName), C_FIELD(ncclConfig_t, collnetEnable),
      C_FIELD(ncclConfig_t, CTAPolicy), C_FIELD(ncclConfig_t, shrinkShare), C_FIELD(ncclConfig_t, nvlsCTAs),
      C_FIELD(ncclConfig_t, nChannelsPerNetPeer), C_FIELD(ncclConfig_t, nvlinkCentricSched),
      C_FIELD(ncclSimInfo_t, size), C_FIELD(ncclSimInfo_t, magic), C_FIELD(ncclSimInfo_t, version),
      C_FIELD(ncclSimInfo_t, estimatedTime),
      C_NUMBER(ncclMaxRedOp), C_NUMBER(ncclNumResults), C_NUMBER(ncclNumTypes), C_NUMBER(NCCL_VERSION_CODE),
      C_NUMBER(NCCL_VERSION(2, 8, 4)), C_NUMBER(NCCL_VERSION(2, 28, 9)),
      {"NCCL_CONFIG_INITIALIZER.size", (long long)config.size},
      {"NCCL_CONFIG_INITIALIZER.magic", (long long)config.magic},
      {"NCCL_CONFIG_INITIALIZER.version", (long long)config.version},
      {"NCCL_CONFIG_INITIALIZER.blocking", config.blocking},
      {"NCCL_CONFIG_INITIALIZER.nvlinkCentricSched", config.nvlinkCentricSched},
      {"NCCL_SIM_INFO_INITIALIZER.size", (long long)simInfo.size},
      {"NCCL_SIM_INFO_INITIALIZER.magic", (long long)simInfo.magic},
      {NULL, 0}};
  static struct AbiCRow copy[sizeof(rows) / sizeof(rows[0])];
  memcpy(copy, rows, sizeof(rows));
  return copy;
}
