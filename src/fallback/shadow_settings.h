// BRAID_SHADOW's settings, read once per process (the checks themselves: src/api/shadow.h).
//   BRAID_SHADOW=0 or unset: off; =1: every device collective; =N: every N-th per communicator
//   BRAID_SHADOW_STRICT=1: a mismatch (or a communicator that cannot be shadowed) fails the
//     communicator's next call with ncclInternalError (ncclInvalidUsage for the refusal)
//   BRAID_SHADOW_TEST_PERTURB=i: test-only; flips a bit of element i of the real NCCL's output
//     before the comparison, so that a test can see a mismatch caught and named
#pragma once
#include <cstdint>
#include <string>

#include "nccl.h"

namespace braid::fallback {

struct ShadowSettings {
  uint64_t every = 0;          // 0: off
  bool strict = false;
  int64_t perturbIndex = -1;   // -1: no perturbation
  std::string error;           // a malformed value: why (the shadow is then off, and says so)
};

// Parses the three values (each may be null). Pure.
ShadowSettings parseShadowSettings(const char* shadow, const char* strict, const char* perturb);
const ShadowSettings& shadowSettings();  // the process's, read once

// Whether the `seq`-th (1-based) device collective of a communicator is checked.
inline bool shadowThisCall(const ShadowSettings& s, uint64_t seq) { return s.every != 0 && seq % s.every == 0; }

// One line for a mismatch: "shadow check #7 ncclAllReduce count 1024 float32 sum rank 0: 3 of
// 1024 elements differ from the real NCCL's; the first at index 5: braid 1.5 (0x3fc00000),
// NCCL 1.25 (0x3fa00000)". Values shown as numbers where the type allows (the bits always).
std::string mismatchText(uint64_t seq, const char* coll, size_t count, ncclDataType_t type, ncclRedOp_t op,
                         bool reduces, int rank, unsigned long long mismatches, unsigned long long elements,
                         unsigned long long firstIndex, unsigned long long mineBits, unsigned long long refBits);

// A value's bits as text: integers as numbers, floats through double (fp16/bf16/fp8 decoded).
std::string valueText(ncclDataType_t type, unsigned long long bits);

}  // namespace braid::fallback
