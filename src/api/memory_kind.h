// Which engine a buffer belongs to: device memory goes to the GPU executor, everything else
// (plain host memory, pinned or not, or any pointer when there is no CUDA) to the CPU engine.
#pragma once
#include "nccl.h"

namespace braid::api {

enum class MemoryKind { Host, Device };

// `device` receives the owning device for device memory.
MemoryKind memoryKindOf(const void* ptr, int* device);

}  // namespace braid::api
