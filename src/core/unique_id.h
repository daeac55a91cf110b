// The content of an ncclUniqueId: the root's address and a random secret. Only braid's own
// ranks parse it; it is checked for integrity so that garbage is reported, not followed.
#pragma once
#include <cstdint>

#include "core/socket.h"
#include "nccl.h"

namespace braid {

struct UniqueIdContent {
  uint32_t tag;          // kUniqueIdTag
  uint32_t flags;        // kRootAtRank0: NCCL_COMM_ID was set, rank 0 hosts the root
  uint64_t secret;       // every bootstrap connection must present it
  SocketAddress root;
  uint32_t checksum;     // over the bytes before it
};
static_assert(sizeof(UniqueIdContent) <= NCCL_UNIQUE_ID_BYTES);

constexpr uint32_t kUniqueIdTag = 0x31445242;  // "BRD1"
constexpr uint32_t kRootAtRank0 = 0x1;

ncclUniqueId encodeUniqueId(const UniqueIdContent& content);
// ncclInvalidArgument (with the last error set) when the id is not one braid made.
ncclResult_t decodeUniqueId(const ncclUniqueId& id, const char* caller, UniqueIdContent* out);
uint64_t randomSecret();

}  // namespace braid
