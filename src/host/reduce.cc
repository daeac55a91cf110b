// Reduction ops for the CPU engine: NCCL's op mapping, kernel selection, names.
#include "host/reduce.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "core/numeric.h"
#include "host/reduce_isa.h"

namespace braid::host {

namespace kernels {
namespace base {
ElemwiseFn selectKernel(ncclDataType_t type, HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post);
}
namespace avx2 {
extern const bool kBuilt;
ElemwiseFn selectKernel(ncclDataType_t type, HostOpKind kind, bool hasRecv, bool hasSrc, bool pre, bool post);
}
}  // namespace kernels

namespace {

// 1/nRanks in `type`, rounded as NCCL does it (hostToDevRedOp): double, then float, then the
// type with round-to-nearest-even (fp8: saturating).
uint64_t reciprocalBits(ncclDataType_t type, int nRanks) {
  const double exact = 1.0 / nRanks;
  const float single = float(exact);
  switch (type) {
    case ncclFloat16: return floatToHalfBits(single);
    case ncclBfloat16: return floatToBf16Bits(single);
    case ncclFloat8e4m3: return floatToFp8e4m3Bits(single);
    case ncclFloat8e5m2: return floatToFp8e5m2Bits(single);
    case ncclFloat32: return floatToBits(single);
    case ncclFloat64: {
      uint64_t bits;
      std::memcpy(&bits, &exact, sizeof bits);
      return bits;
    }
    default: return 0;
  }
}

}  // namespace

std::optional<HostOp> makeHostOp(ncclRedOp_t op, ncclDataType_t type, int nRanks) {
  if (!validDataType(type) || nRanks < 1) return std::nullopt;
  HostOp h;
  h.type = type;
  h.nRanks = nRanks;
  switch (op) {
    case ncclSum: h.kind = HostOpKind::Sum; return h;
    case ncclProd: h.kind = HostOpKind::Prod; return h;
    case ncclMax: h.kind = HostOpKind::Max; return h;
    case ncclMin: h.kind = HostOpKind::Min; return h;
    case ncclAvg:
      if (isFloatType(type)) {
        h.kind = HostOpKind::PreMulSum;
        h.scalar = reciprocalBits(type, nRanks);
      } else {
        h.kind = HostOpKind::SumPostDiv;
      }
      return h;
    default: return std::nullopt;
  }
}

std::optional<HostOp> makePreMulSumOp(ncclDataType_t type, const void* scalar, int nRanks) {
  if (!validDataType(type) || scalar == nullptr || nRanks < 1) return std::nullopt;
  HostOp h;
  h.kind = HostOpKind::PreMulSum;
  h.type = type;
  h.nRanks = nRanks;
  std::memcpy(&h.scalar, scalar, sizeOfType(type));  // the low bytes; the rest stay zero
  return h;
}

bool kernelIsaSupported(KernelIsa isa) {
  if (isa == KernelIsa::Base) return true;
#if defined(__x86_64__)
  static const bool avx2 = kernels::avx2::kBuilt && __builtin_cpu_supports("avx2") &&
                           __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return avx2;
#else
  return false;
#endif
}

KernelIsa bestKernelIsa() { return kernelIsaSupported(KernelIsa::Avx2) ? KernelIsa::Avx2 : KernelIsa::Base; }

const char* kernelIsaName(KernelIsa isa) { return isa == KernelIsa::Avx2 ? "avx2" : "base"; }

ElemwiseFn selectElemwiseFor(KernelIsa isa, const HostOp& op, bool hasRecv, bool hasSrc, bool premulSrc, bool final) {
  if (!hasRecv && !hasSrc) return nullptr;
  int typeBits = dataTypeBits(op.type);  // checked before it is read as the enum (UB when out of range)
  if (op.nRanks < 1 || typeBits < 0 || typeBits >= kNumDataTypes || !kernelIsaSupported(isa)) return nullptr;
  if (op.kind == HostOpKind::SumPostDiv && isFloatType(op.type)) return nullptr;  // integers only
  const bool pre = op.kind == HostOpKind::PreMulSum && hasSrc && premulSrc;
  const bool post = op.kind == HostOpKind::SumPostDiv && final;
  return isa == KernelIsa::Avx2 ? kernels::avx2::selectKernel(op.type, op.kind, hasRecv, hasSrc, pre, post)
                                : kernels::base::selectKernel(op.type, op.kind, hasRecv, hasSrc, pre, post);
}

ElemwiseFn selectElemwise(const HostOp& op, bool hasRecv, bool hasSrc, bool premulSrc, bool final) {
  static const KernelIsa best = bestKernelIsa();
  return selectElemwiseFor(best, op, hasRecv, hasSrc, premulSrc, final);
}

const char* redOpName(ncclRedOp_t op) { return opName(op); }

const char* hostOpKindName(HostOpKind kind) {
  switch (kind) {
    case HostOpKind::Sum: return "Sum";
    case HostOpKind::Prod: return "Prod";
    case HostOpKind::Max: return "Max";
    case HostOpKind::Min: return "Min";
    case HostOpKind::PreMulSum: return "PreMulSum";
    case HostOpKind::SumPostDiv: return "SumPostDiv";
  }
  return "?";
}

std::string formatValue(ncclDataType_t type, const void* value) {
  if (value == nullptr || !validDataType(type)) return "?";
  char text[64];
  uint64_t bits = 0;
  std::memcpy(&bits, value, sizeOfType(type));
  switch (type) {
    case ncclInt8: std::snprintf(text, sizeof text, "%d", int(int8_t(bits))); break;
    case ncclUint8: std::snprintf(text, sizeof text, "%u", unsigned(bits)); break;
    case ncclInt32: std::snprintf(text, sizeof text, "%" PRId32, int32_t(uint32_t(bits))); break;
    case ncclUint32: std::snprintf(text, sizeof text, "%" PRIu32, uint32_t(bits)); break;
    case ncclInt64: std::snprintf(text, sizeof text, "%" PRId64, int64_t(bits)); break;
    case ncclUint64: std::snprintf(text, sizeof text, "%" PRIu64, bits); break;
    case ncclFloat32: std::snprintf(text, sizeof text, "%.9g", double(bitsToFloat(uint32_t(bits)))); break;
    case ncclFloat64: {
      double d;
      std::memcpy(&d, &bits, sizeof d);
      std::snprintf(text, sizeof text, "%.17g", d);
      break;
    }
    case ncclFloat16:
      std::snprintf(text, sizeof text, "%.6g (0x%04x)", double(halfBitsToFloat(uint16_t(bits))), unsigned(bits));
      break;
    case ncclBfloat16:
      std::snprintf(text, sizeof text, "%.4g (0x%04x)", double(bf16BitsToFloat(uint16_t(bits))), unsigned(bits));
      break;
    case ncclFloat8e4m3:
      std::snprintf(text, sizeof text, "%g (0x%02x)", double(fp8e4m3BitsToFloat(uint8_t(bits))), unsigned(bits));
      break;
    case ncclFloat8e5m2:
      std::snprintf(text, sizeof text, "%g (0x%02x)", double(fp8e5m2BitsToFloat(uint8_t(bits))), unsigned(bits));
      break;
    default: return "?";
  }
  return text;
}

}  // namespace braid::host
