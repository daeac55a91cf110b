// Which engine a buffer belongs to: device memory goes to the GPU executor, everything else
// (plain host memory, pinned or not, or any pointer when there is no CUDA) to the CPU engine.
// And whether a buffer can hold what a call will read or write there.
#pragma once
#include <cstddef>

#include "nccl.h"

namespace braid::api {

enum class MemoryKind { Host, Device };

// `device` receives the owning device for device memory.
MemoryKind memoryKindOf(const void* ptr, int* device);

// Whether [ptr, ptr + bytes) lies in memory the process has: inside one CUDA allocation for
// device memory; mapped at its first and last byte for host memory (what can be known without
// walking every page). ncclInvalidArgument naming `caller`, `rank` and `what` otherwise: a
// count too large for the buffer would make the engines read or write past it.
ncclResult_t checkExtent(const char* caller, int rank, const char* what, const void* ptr, size_t bytes,
                         MemoryKind kind);

}  // namespace braid::api
