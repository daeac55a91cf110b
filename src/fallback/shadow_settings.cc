#include "fallback/shadow_settings.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/env.h"
#include "core/numeric.h"

namespace braid::fallback {
namespace {

// A non-negative decimal integer, whole; false for anything else.
bool parseCount(const char* text, uint64_t* out) {
  if (text == nullptr || *text < '0' || *text > '9') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

ShadowSettings parseShadowSettings(const char* shadow, const char* strict, const char* perturb) {
  ShadowSettings s;
  if (shadow != nullptr && *shadow != '\0' && !parseCount(shadow, &s.every)) {
    s.error = std::string("BRAID_SHADOW='") + shadow + "' is not 0, 1 or a count N (every N-th call)";
    s.every = 0;
  }
  if (strict != nullptr && *strict != '\0') {
    uint64_t v = 0;
    if (!parseCount(strict, &v) || v > 1) s.error += std::string(s.error.empty() ? "" : "; ") +
                                                     "BRAID_SHADOW_STRICT='" + strict + "' is not 0 or 1";
    s.strict = v == 1;
  }
  if (perturb != nullptr && *perturb != '\0') {
    uint64_t v = 0;
    if (!parseCount(perturb, &v) || v > static_cast<uint64_t>(INT64_MAX))
      s.error += std::string(s.error.empty() ? "" : "; ") + "BRAID_SHADOW_TEST_PERTURB='" + perturb +
                 "' is not an element index";
    else
      s.perturbIndex = static_cast<int64_t>(v);
  }
  return s;
}

const ShadowSettings& shadowSettings() {
  static const ShadowSettings settings = parseShadowSettings(
      env::get("BRAID_SHADOW"), env::get("BRAID_SHADOW_STRICT"), env::get("BRAID_SHADOW_TEST_PERTURB"));
  return settings;
}

std::string valueText(ncclDataType_t type, unsigned long long bits) {
  char text[64];
  double v = 0;
  bool isFloat = true;
  switch (type) {
    case ncclFloat16: v = halfBitsToFloat(static_cast<uint16_t>(bits)); break;
    case ncclBfloat16: v = bf16BitsToFloat(static_cast<uint16_t>(bits)); break;
    case ncclFloat8e4m3: v = fp8e4m3BitsToFloat(static_cast<uint8_t>(bits)); break;
    case ncclFloat8e5m2: v = fp8e5m2BitsToFloat(static_cast<uint8_t>(bits)); break;
    case ncclFloat32: v = bitsToFloat(static_cast<uint32_t>(bits)); break;
    case ncclFloat64: std::memcpy(&v, &bits, sizeof v); break;
    default: isFloat = false;
  }
  if (isFloat) {
    std::snprintf(text, sizeof text, "%.9g (0x%llx)", v, bits);
    return text;
  }
  switch (type) {
    case ncclInt8: std::snprintf(text, sizeof text, "%d", static_cast<int8_t>(bits)); break;
    case ncclInt32: std::snprintf(text, sizeof text, "%d", static_cast<int32_t>(bits)); break;
    case ncclInt64: std::snprintf(text, sizeof text, "%lld", static_cast<long long>(bits)); break;
    default: std::snprintf(text, sizeof text, "%llu", bits); break;
  }
  return text;
}

std::string mismatchText(uint64_t seq, const char* coll, size_t count, ncclDataType_t type, ncclRedOp_t op,
                         bool reduces, int rank, unsigned long long mismatches, unsigned long long elements,
                         unsigned long long firstIndex, unsigned long long mineBits, unsigned long long refBits) {
  char head[256];
  std::snprintf(head, sizeof head, "shadow check #%" PRIu64 " %s count %zu %s%s%s rank %d: %llu of %llu elements "
                "differ from the real NCCL's; the first at index %llu: braid ", seq, coll, count, typeName(type),
                reduces ? " " : "", reduces ? opName(op) : "", rank, mismatches, elements, firstIndex);
  return head + valueText(type, mineBits) + ", NCCL " + valueText(type, refBits);
}

}  // namespace braid::fallback
