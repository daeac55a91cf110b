#include "core/unique_id.h"

#include <sys/random.h>

#include <chrono>
#include <cstring>

#include "core/log.h"

namespace braid {
namespace {

uint32_t fnv1a(const void* data, size_t size) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

}  // namespace

uint64_t randomSecret() {
  uint64_t s = 0;
  if (getrandom(&s, sizeof(s), 0) != sizeof(s)) {
    // No entropy source: fall back to time; still unguessable enough for accidental peers.
    s = static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count()) *
        0x9E3779B97F4A7C15ull;
  }
  return s;
}

ncclUniqueId encodeUniqueId(const UniqueIdContent& content) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  UniqueIdContent c = content;
  c.tag = kUniqueIdTag;
  c.checksum = fnv1a(&c, offsetof(UniqueIdContent, checksum));
  std::memcpy(id.internal, &c, sizeof(c));
  return id;
}

ncclResult_t decodeUniqueId(const ncclUniqueId& id, const char* caller, UniqueIdContent* out) {
  std::memcpy(out, id.internal, sizeof(*out));
  if (out->tag != kUniqueIdTag || out->checksum != fnv1a(out, offsetof(UniqueIdContent, checksum)) ||
      (out->root.sa.sa_family != AF_INET && out->root.sa.sa_family != AF_INET6))
    return fail(ncclInvalidArgument,
                "%s: commId is not a valid unique id (bad tag or checksum). Fix: pass the ncclUniqueId that "
                "ncclGetUniqueId returned on one rank, unchanged, to every rank.",
                caller);
  return ncclSuccess;
}

}  // namespace braid
