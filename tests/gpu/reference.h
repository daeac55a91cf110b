// The float64 (and exact integer) reference of the GPU tests: element values by type, test
// inputs, and the expected result of a reduction across ranks.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/numeric.h"
#include "kernels/executor.h"

namespace braid::gputest {

enum class TestOp { Sum, Prod, Max, Min, Avg, PreMulHost, PreMulDevice };
inline const char* testOpName(TestOp op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg", "premul", "premul_dev"};
  return names[int(op)];
}
constexpr TestOp kAllOps[] = {TestOp::Sum, TestOp::Prod, TestOp::Max, TestOp::Min,
                              TestOp::Avg, TestOp::PreMulHost, TestOp::PreMulDevice};

inline double loadValue(ncclDataType_t t, const void* p) {
  switch (t) {
    case ncclInt8: return *static_cast<const int8_t*>(p);
    case ncclUint8: return *static_cast<const uint8_t*>(p);
    case ncclInt32: return *static_cast<const int32_t*>(p);
    case ncclUint32: return *static_cast<const uint32_t*>(p);
    case ncclInt64: return double(*static_cast<const int64_t*>(p));
    case ncclUint64: return double(*static_cast<const uint64_t*>(p));
    case ncclFloat16: return halfBitsToFloat(*static_cast<const uint16_t*>(p));
    case ncclFloat32: return *static_cast<const float*>(p);
    case ncclFloat64: return *static_cast<const double*>(p);
    case ncclBfloat16: return bf16BitsToFloat(*static_cast<const uint16_t*>(p));
    case ncclFloat8e4m3: return fp8e4m3BitsToFloat(*static_cast<const uint8_t*>(p));
    case ncclFloat8e5m2: return fp8e5m2BitsToFloat(*static_cast<const uint8_t*>(p));
    default: return 0;
  }
}

// Stores v (an integer value for integer types, wrapped to the type's width).
inline void storeValue(ncclDataType_t t, double v, void* p) {
  auto wrap = [&](auto sample) {
    using T = decltype(sample);
    T x = static_cast<T>(static_cast<int64_t>(v));
    std::memcpy(p, &x, sizeof x);
  };
  switch (t) {
    case ncclInt8: wrap(int8_t{}); break;
    case ncclUint8: wrap(uint8_t{}); break;
    case ncclInt32: wrap(int32_t{}); break;
    case ncclUint32: wrap(uint32_t{}); break;
    case ncclInt64: wrap(int64_t{}); break;
    case ncclUint64: wrap(uint64_t{}); break;
    case ncclFloat16: { uint16_t b = floatToHalfBits(float(v)); std::memcpy(p, &b, 2); break; }
    case ncclFloat32: { float f = float(v); std::memcpy(p, &f, 4); break; }
    case ncclFloat64: std::memcpy(p, &v, 8); break;
    case ncclBfloat16: { uint16_t b = floatToBf16Bits(float(v)); std::memcpy(p, &b, 2); break; }
    case ncclFloat8e4m3: { uint8_t b = floatToFp8e4m3Bits(float(v)); std::memcpy(p, &b, 1); break; }
    case ncclFloat8e5m2: { uint8_t b = floatToFp8e5m2Bits(float(v)); std::memcpy(p, &b, 1); break; }
    default: break;
  }
}

inline bool isSigned(ncclDataType_t t) { return isFloatType(t) || isSignedIntType(t); }

// Rank r's input element i for a reduction: small integers, exact in every type. They
// repeat every kInputPeriod elements (9 for sums, 15 for products), so that a checker needs
// the reference of kInputPeriod indices only.
constexpr uint64_t kInputPeriod = 45;
inline double inputValue(ncclDataType_t t, TestOp op, int r, uint64_t i) {
  if (op == TestOp::Prod) {
    double v = ((i + r) % 3 == 0) ? 2 : 1;
    return (isSigned(t) && (i + 2 * r) % 5 == 0) ? -v : v;
  }
  int64_t v = int64_t((i * 7 + r * 13 + 3) % 9);
  return isSigned(t) ? double(v - 4) : double(v);
}

// The PreMulSum scalar rank r uses (TestOp::Avg: 1/n for floats).
inline double scalarValue(ncclDataType_t t, TestOp op, int r, int n) {
  if (op == TestOp::Avg) return 1.0 / n;
  if (op == TestOp::PreMulHost) return isFloatType(t) ? 0.5 : 3;
  if (op == TestOp::PreMulDevice) return isFloatType(t) ? (r % 2 ? 2.0 : 0.5) : r + 1;
  return 1;
}

// The executor's op for a test op (the device scalar pointer is filled in by the caller).
inline kernels::RedOp redOpFor(ncclDataType_t t, TestOp op, int r, int n) {
  kernels::RedOp red;
  red.nRanks = n;
  switch (op) {
    case TestOp::Sum: red.kind = kernels::RedKind::Sum; break;
    case TestOp::Prod: red.kind = kernels::RedKind::Prod; break;
    case TestOp::Max: red.kind = kernels::RedKind::Max; break;
    case TestOp::Min: red.kind = kernels::RedKind::Min; break;
    case TestOp::Avg:
      red.kind = isFloatType(t) ? kernels::RedKind::PreMulSum : kernels::RedKind::SumPostDiv;
      break;
    case TestOp::PreMulHost:
    case TestOp::PreMulDevice: red.kind = kernels::RedKind::PreMulSum; break;
  }
  if (red.kind == kernels::RedKind::PreMulSum) {
    // Like NCCL: 1/n goes through float on its way to the type.
    double s = scalarValue(t, op, r, n);
    storeValue(t, isFloatType(t) ? double(float(s)) : s, &red.scalarBits);
  }
  return red;
}

// Wraps an exact integer result to the type (sums and products wrap on the GPU too).
inline double wrapToType(ncclDataType_t t, double v) {
  unsigned char buf[8];
  storeValue(t, v, buf);
  return loadValue(t, buf);
}

struct Expected {
  double value;
  double tolerance;  // 0: exact
};

// The reduction of terms[r] = rank r's raw value across ranks.
inline Expected reduceReference(ncclDataType_t t, TestOp op, const std::vector<double>& raw, int n) {
  std::vector<double> terms(raw);
  if (op == TestOp::PreMulHost || op == TestOp::PreMulDevice || (op == TestOp::Avg && isFloatType(t)))
    for (int r = 0; r < n; ++r) terms[r] = raw[r] * scalarValue(t, op, r, n);
  double v = terms[0], sumAbs = std::fabs(terms[0]);
  for (int r = 1; r < n; ++r) {
    sumAbs += std::fabs(terms[r]);
    switch (op) {
      case TestOp::Prod: v *= terms[r]; break;
      case TestOp::Max: v = std::max(v, terms[r]); break;
      case TestOp::Min: v = std::min(v, terms[r]); break;
      default: v += terms[r]; break;
    }
  }
  if (!isFloatType(t)) {
    // Integers wrap, per operation; wrapping the exact result is the same modulo 2^bits.
    if (op == TestOp::Prod) {
      int64_t p = 1;
      for (int r = 0; r < n; ++r) p *= int64_t(terms[r]);
      v = double(p);
    }
    v = wrapToType(t, v);
    if (op == TestOp::Avg) v = double(int64_t(v) / int64_t(n));  // truncates toward zero, like C
    return {v, 0};
  }
  double eps = 0;
  switch (t) {
    case ncclFloat16: eps = std::ldexp(1, -10); break;
    case ncclFloat32: eps = std::ldexp(1, -23); break;
    case ncclFloat64: eps = std::ldexp(1, -52); break;
    case ncclBfloat16: eps = std::ldexp(1, -7); break;
    case ncclFloat8e4m3: eps = std::ldexp(1, -3); break;
    case ncclFloat8e5m2: eps = std::ldexp(1, -2); break;
    default: break;
  }
  double scale = op == TestOp::Prod ? std::fabs(v) : sumAbs;
  return {v, (n + 1) * eps * scale};
}

}  // namespace braid::gputest
