// How many channels (CUDA blocks) a device-memory call uses: pure, so that a CPU test pins the
// rule down (GpuResources applies it with the communicator's settings).
#pragma once
#include <algorithm>
#include <cstddef>

namespace braid::api {

constexpr size_t kCoarseBytesPerChannel = 512 << 10;  // ranks that share a GPU, and large calls
constexpr size_t kFineBytesPerChannel = 64 << 10;     // small calls with one rank per GPU
constexpr size_t kFineChannels = 16;

// A channel per `bytesPerChannel` up to kFineChannels channels, then one per 512 KiB: each lane
// costs host time on every call (packing, upload), which only calls of several MiB hide. On 2
// H200s a 2 MiB all-reduce took 36 us on 16 channels and 65-86 us on 32, 8 MiB 56 us on 16 and
// 95-137 us on 64; from 32 MiB 64 channels were fastest (perf/NOTES.md). The caller caps it.
inline size_t channelsWanted(size_t bytes, size_t bytesPerChannel) {
  const size_t fine = (bytes + bytesPerChannel - 1) / bytesPerChannel;
  const size_t coarse = (bytes + kCoarseBytesPerChannel - 1) / kCoarseBytesPerChannel;
  return std::max<size_t>(1, std::max(std::min(fine, kFineChannels), coarse));
}

}  // namespace braid::api
