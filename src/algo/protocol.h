// The wire protocols of a device connection. A schedule never names one: the tuner
// (algo/tuner.h) picks it per launch, and the GPU executor runs the same steps with it
// (kernels/proto_*.cuh). NCCL's order and names (NCCL_PROTO: LL, LL128, Simple).
#pragma once
#include <cstdint>

namespace braid::algo {

enum class Protocol : uint8_t { LL = 0, LL128 = 1, Simple = 2 };
constexpr int kNumProtocols = 3;

constexpr const char* protocolName(Protocol p) {
  switch (p) {
    case Protocol::LL: return "LL";
    case Protocol::LL128: return "LL128";
    case Protocol::Simple: return "Simple";
  }
  return "?";
}

}  // namespace braid::algo
