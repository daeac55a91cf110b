// POSIX shared memory that CUDA sees as mapped pinned memory: a region one process makes and
// others on the host map by name, each getting a host and a device address for it. Used by the
// P2P transport's staged FIFOs and by the served ranks' control words (served_link.h).
#pragma once
#include <cstddef>
#include <string>

#include "nccl.h"

namespace braid::transport {

constexpr size_t kShmNameBytes = 128;

// "/braid-<kind>-<pid>-<rank>-<counter>-<random>": unique on this host, also across pid
// namespaces that share /dev/shm (shm_open's O_EXCL refuses a clash rather than share).
std::string uniqueShmName(const char* kind, int rank);

// Maps the shared-memory object `name` of `bytes` into this process (creating it, zero
// filled, when `create`) and registers it with CUDA as mapped, portable pinned memory.
// On failure it undoes what it did, including the name it created. `who` and `rank` start
// the error messages ("p2p: rank 3: shm_open(...)").
ncclResult_t mapShared(const char* who, int rank, const char* name, size_t bytes, bool create, void** host, void** dev);
ncclResult_t unmapShared(const char* who, int rank, void* host, size_t bytes);

}  // namespace braid::transport
