#include "tests/common/reference.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "tests/common/narrow_float.h"

namespace braid::check {
namespace {

// ---- names ----------------------------------------------------------------------------------

struct CollectiveName {
  Collective coll;
  const char* name;
};
constexpr CollectiveName kCollectiveNames[] = {
    {Collective::AllReduce, "allreduce"}, {Collective::AllGather, "allgather"},
    {Collective::ReduceScatter, "reducescatter"}, {Collective::Broadcast, "broadcast"},
    {Collective::Reduce, "reduce"}, {Collective::AlltoAll, "alltoall"},
    {Collective::Gather, "gather"}, {Collective::Scatter, "scatter"},
    {Collective::SendRecv, "sendrecv"}};

struct TypeName {
  ncclDataType_t type;
  const char* name;
  const char* aliases[3];
};
constexpr TypeName kTypeNames[] = {
    {ncclInt8, "int8", {"char", nullptr, nullptr}},
    {ncclUint8, "uint8", {nullptr, nullptr, nullptr}},
    {ncclInt32, "int32", {"int", nullptr, nullptr}},
    {ncclUint32, "uint32", {nullptr, nullptr, nullptr}},
    {ncclInt64, "int64", {nullptr, nullptr, nullptr}},
    {ncclUint64, "uint64", {nullptr, nullptr, nullptr}},
    {ncclFloat16, "half", {"fp16", "float16", nullptr}},
    {ncclFloat32, "float", {"fp32", "float32", nullptr}},
    {ncclFloat64, "double", {"fp64", "float64", nullptr}},
    {ncclBfloat16, "bfloat16", {"bf16", nullptr, nullptr}},
    {ncclFloat8e4m3, "f8e4m3", {"fp8e4m3", "e4m3", nullptr}},
    {ncclFloat8e5m2, "f8e5m2", {"fp8e5m2", "e5m2", nullptr}}};

struct OpName {
  ReduceOp op;
  const char* name;
  const char* alias;
};
constexpr OpName kOpNames[] = {{ReduceOp::Sum, "sum", nullptr},        {ReduceOp::Prod, "prod", nullptr},
                               {ReduceOp::Max, "max", nullptr},        {ReduceOp::Min, "min", nullptr},
                               {ReduceOp::Avg, "avg", nullptr},        {ReduceOp::PreMulSum, "mulsum", "premulsum"},
                               {ReduceOp::None, "none", nullptr}};

std::string lowerWithoutSeparators(std::string_view text) {
  std::string out;
  for (char c : text)
    if (c != '_' && c != '-') out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
  return out;
}

// ---- element representation -------------------------------------------------------------------

bool isInteger(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: case ncclInt32: case ncclUint32: case ncclInt64: case ncclUint64:
      return true;
    default:
      return false;
  }
}

bool isSignedInteger(ncclDataType_t type) { return type == ncclInt8 || type == ncclInt32 || type == ncclInt64; }

// Reads the bytes: loading a value outside the C++ enum's range (0..15) as the enum is undefined.
void requireType(const ncclDataType_t& type) {
  int bits;
  static_assert(sizeof bits == sizeof type);
  std::memcpy(&bits, &type, sizeof bits);
  if (bits < 0 || bits >= static_cast<int>(ncclNumTypes))
    throw std::invalid_argument("braid_check: unknown data type " + std::to_string(bits));
}

// The value of a 64-bit pattern read as the type (sign- or zero-extended to int64).
int64_t wrapToType(ncclDataType_t type, uint64_t bits) {
  switch (type) {
    case ncclInt8: return static_cast<int8_t>(bits);
    case ncclUint8: return static_cast<uint8_t>(bits);
    case ncclInt32: return static_cast<int32_t>(bits);
    case ncclUint32: return static_cast<uint32_t>(bits);
    default: return static_cast<int64_t>(bits);
  }
}

// The type's representation of a 64-bit two's-complement value: its low bytes.
uint64_t lowBits(ncclDataType_t type, uint64_t value) {
  size_t bits = 8 * typeSize(type);
  return bits == 64 ? value : value & ((1ull << bits) - 1);
}

uint64_t loadBits(ncclDataType_t type, const void* base, size_t index) {
  size_t size = typeSize(type);
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(base) + index * size, size);  // little-endian host
  return bits;
}

void storeBits(ncclDataType_t type, uint64_t bits, void* base, size_t index) {
  size_t size = typeSize(type);
  std::memcpy(static_cast<char*>(base) + index * size, &bits, size);
}

double bitsToDouble(ncclDataType_t type, uint64_t bits) {
  switch (type) {
    case ncclFloat16: return halfBitsToDouble(static_cast<uint16_t>(bits));
    case ncclBfloat16: return bf16BitsToDouble(static_cast<uint16_t>(bits));
    case ncclFloat8e4m3: return fp8BitsToDouble(static_cast<uint8_t>(bits), true);
    case ncclFloat8e5m2: return fp8BitsToDouble(static_cast<uint8_t>(bits), false);
    case ncclFloat32: {
      float f;
      uint32_t b = static_cast<uint32_t>(bits);
      std::memcpy(&f, &b, sizeof f);
      return f;
    }
    case ncclFloat64: {
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return d;
    }
    default:
      return static_cast<double>(wrapToType(type, bits));
  }
}

// Rounds to the type (nearest even; integers: truncation of an integral double, then wrap).
uint64_t doubleToBits(ncclDataType_t type, double value) {
  switch (type) {
    case ncclFloat16: return doubleToHalfBits(value);
    case ncclBfloat16: return doubleToBf16Bits(value);
    case ncclFloat8e4m3: return doubleToFp8Bits(value, true);
    case ncclFloat8e5m2: return doubleToFp8Bits(value, false);
    case ncclFloat32: {
      float f = static_cast<float>(value);
      uint32_t b;
      std::memcpy(&b, &f, sizeof b);
      return b;
    }
    case ncclFloat64: {
      uint64_t b;
      std::memcpy(&b, &value, sizeof b);
      return b;
    }
    default:
      return lowBits(type, static_cast<uint64_t>(static_cast<int64_t>(value)));
  }
}

double roundToType(ncclDataType_t type, double value) { return bitsToDouble(type, doubleToBits(type, value)); }

double smallestSubnormal(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return std::ldexp(1.0, -24);
    case ncclBfloat16: return std::ldexp(1.0, -133);
    case ncclFloat8e4m3: return std::ldexp(1.0, -9);
    case ncclFloat8e5m2: return std::ldexp(1.0, -16);
    case ncclFloat32: return std::numeric_limits<float>::denorm_min();
    case ncclFloat64: return std::numeric_limits<double>::denorm_min();
    default: return 0;
  }
}

// ---- inputs -------------------------------------------------------------------------------------

uint64_t mixBits(uint64_t seed, int rank, size_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank) * 0xD1B54A32D192ED03ull +
               static_cast<uint64_t>(index) * 0x8CB92BA72F3D8DD7ull + 0x2545F4914F6CDD1Dull;
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Random bits of the type's width; float patterns with an all-ones exponent (inf/NaN) are
// made finite by clearing the exponent's top bit.
uint64_t randomFiniteBits(ncclDataType_t type, uint64_t h) {
  switch (type) {
    case ncclFloat16: { uint64_t b = h & 0xffff; return (b & 0x7c00) == 0x7c00 ? b & ~0x4000ull : b; }
    case ncclBfloat16: { uint64_t b = h & 0xffff; return (b & 0x7f80) == 0x7f80 ? b & ~0x4000ull : b; }
    case ncclFloat8e4m3: { uint64_t b = h & 0xff; return (b & 0x7f) == 0x7f ? b & ~0x40ull : b; }
    case ncclFloat8e5m2: { uint64_t b = h & 0xff; return (b & 0x7c) == 0x7c ? b & ~0x40ull : b; }
    case ncclFloat32: {
      uint64_t b = h & 0xffffffffull;
      return (b & 0x7f800000ull) == 0x7f800000ull ? b & ~0x40000000ull : b;
    }
    case ncclFloat64: {
      constexpr uint64_t kExp = 0x7ff0000000000000ull;
      return (h & kExp) == kExp ? h & ~0x4000000000000000ull : h;
    }
    default:
      return lowBits(type, h);
  }
}

double smallReductionValue(ncclDataType_t type, ReduceOp op, uint64_t h) {
  if (op == ReduceOp::Prod) {
    static constexpr double kFloatFactors[] = {1, -1, 2, -2, 0.5, -0.5};
    static constexpr double kSignedFactors[] = {1, -1, 2};
    if (!isInteger(type)) return kFloatFactors[h % 6];
    if (isSignedInteger(type)) return kSignedFactors[h % 3];
    return static_cast<double>(1 + h % 2);
  }
  auto centred = [h](uint64_t halfRange) { return static_cast<double>(h % (2 * halfRange + 1)) - halfRange; };
  switch (type) {
    case ncclInt8: return centred(2);
    case ncclUint8: return static_cast<double>(h % 4);
    case ncclInt32: case ncclInt64: return centred(1000);
    case ncclUint32: case ncclUint64: return static_cast<double>(h % 2001);
    case ncclFloat32: case ncclFloat64: return centred(64) / 8;
    case ncclFloat16: return centred(8) / 4;
    case ncclBfloat16: return centred(3);
    case ncclFloat8e4m3: return centred(2);
    case ncclFloat8e5m2: return centred(1);
    default: return 0;
  }
}

uint64_t inputBits(ncclDataType_t type, ReduceOp op, int rank, uint64_t seed, size_t index) {
  uint64_t h = mixBits(seed, rank, index);
  if (op == ReduceOp::None) return randomFiniteBits(type, h);
  return doubleToBits(type, smallReductionValue(type, op, h));
}

// ---- reference ------------------------------------------------------------------------------

void validate(const CheckSpec& spec, int rank) {
  requireType(spec.type);
  if (spec.nRanks < 1) throw std::invalid_argument("braid_check: nRanks must be >= 1");
  if (rank < 0 || rank >= spec.nRanks) throw std::invalid_argument("braid_check: rank out of range");
  if (hasRoot(spec.coll) && (spec.root < 0 || spec.root >= spec.nRanks))
    throw std::invalid_argument("braid_check: root out of range");
  if (isReduction(spec.coll) && spec.op == ReduceOp::None)
    throw std::invalid_argument("braid_check: a reduction needs an op other than none");
}

struct Source {
  int rank;
  size_t index;
};

// Where output element `index` of `rank` comes from, for collectives that move data.
Source sourceOf(const CheckSpec& spec, int rank, size_t index) {
  size_t count = spec.count;
  switch (spec.coll) {
    case Collective::AllGather:
    case Collective::Gather:
      return {static_cast<int>(index / count), index % count};
    case Collective::Broadcast:
      return {spec.root, index};
    case Collective::AlltoAll:
      return {static_cast<int>(index / count), rank * count + index % count};
    case Collective::Scatter:
      return {spec.root, rank * count + index};
    case Collective::SendRecv:
      return {(rank + spec.nRanks - 1) % spec.nRanks, index};
    default:
      throw std::logic_error("braid_check: sourceOf called for a reduction");
  }
}

std::string hexBits(uint64_t bits, size_t size) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%0*" PRIx64, static_cast<int>(2 * size), bits);
  return text;
}

std::string formatDouble(double v) {
  char text[48];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

struct Expectation {
  bool exactBits = false;  // compare the representation (integers, copies)
  uint64_t bits = 0;
  double exact = 0;        // float reductions: the exact value and the allowed distance
  double allowed = 0;
};

Expectation expectReduction(const CheckSpec& spec, size_t srcIndex) {
  const ReduceOp op = spec.op;
  const int n = spec.nRanks;
  Expectation e;
  if (isInteger(spec.type)) {
    uint64_t acc = op == ReduceOp::Prod ? 1 : 0;
    int64_t extreme = 0;
    uint64_t scalar = doubleToBits(spec.type, std::trunc(spec.preMulScalar));
    for (int r = 0; r < n; ++r) {
      auto x = static_cast<int64_t>(smallReductionValue(spec.type, op, mixBits(spec.seed, r, srcIndex)));
      auto ux = static_cast<uint64_t>(x);
      switch (op) {
        case ReduceOp::Prod: acc *= ux; break;
        case ReduceOp::Max: extreme = r == 0 ? x : std::max(extreme, x); break;
        case ReduceOp::Min: extreme = r == 0 ? x : std::min(extreme, x); break;
        case ReduceOp::PreMulSum: acc += static_cast<uint64_t>(wrapToType(spec.type, ux * scalar)); break;
        default: acc += ux; break;  // Sum, Avg
      }
    }
    if (op == ReduceOp::Max || op == ReduceOp::Min) acc = static_cast<uint64_t>(extreme);
    if (op == ReduceOp::Avg) {
      int64_t sum = wrapToType(spec.type, acc);
      acc = static_cast<uint64_t>(sum / n);
    }
    e.exactBits = true;
    e.bits = lowBits(spec.type, acc);
    return e;
  }
  double scalar = op == ReduceOp::PreMulSum ? roundToType(spec.type, spec.preMulScalar)
                  : op == ReduceOp::Avg     ? 1.0 / n
                                            : 1.0;
  double exact = op == ReduceOp::Prod ? 1.0 : 0.0;
  double scale = 0;
  for (int r = 0; r < n; ++r) {
    double x = smallReductionValue(spec.type, op, mixBits(spec.seed, r, srcIndex));
    switch (op) {
      case ReduceOp::Prod: exact *= x; break;
      case ReduceOp::Max: exact = r == 0 ? x : std::max(exact, x); break;
      case ReduceOp::Min: exact = r == 0 ? x : std::min(exact, x); break;
      default:  // Sum, Avg, PreMulSum
        exact += x * scalar;
        scale += std::fabs(x * scalar);
        break;
    }
  }
  if (op == ReduceOp::Max || op == ReduceOp::Min) {
    e.exactBits = true;
    e.bits = doubleToBits(spec.type, exact);
    return e;
  }
  if (op == ReduceOp::Prod) scale = std::fabs(exact);
  e.exact = exact;
  e.allowed = tolerance(spec.type, n, scale);
  return e;
}

// True when `got` satisfies the expectation; else appends a description to *why.
bool matches(const CheckSpec& spec, const Expectation& e, uint64_t gotBits, std::string* why) {
  size_t size = typeSize(spec.type);
  if (e.exactBits) {
    if (gotBits == e.bits) return true;
    *why = "expected " + hexBits(e.bits, size) + " (" + formatDouble(bitsToDouble(spec.type, e.bits)) + "), got " +
           hexBits(gotBits, size) + " (" + formatDouble(bitsToDouble(spec.type, gotBits)) + ")";
    return false;
  }
  double got = bitsToDouble(spec.type, gotBits);
  double rounded = roundToType(spec.type, e.exact);
  bool ok;
  if (std::isinf(rounded))
    ok = got == rounded;  // overflow in the type: the implementation must overflow the same way
  else
    ok = std::isfinite(got) && std::fabs(got - e.exact) <= e.allowed;
  if (!ok)
    *why = "expected " + formatDouble(e.exact) + " +- " + formatDouble(e.allowed) + ", got " + formatDouble(got) +
           " (" + hexBits(gotBits, size) + ")";
  return ok;
}

}  // namespace

// ---- public ----------------------------------------------------------------------------------

const char* collectiveName(Collective coll) {
  for (const auto& entry : kCollectiveNames)
    if (entry.coll == coll) return entry.name;
  return "?";
}

const char* typeName(ncclDataType_t type) {
  for (const auto& entry : kTypeNames)
    if (entry.type == type) return entry.name;
  return "?";
}

const char* opName(ReduceOp op) {
  for (const auto& entry : kOpNames)
    if (entry.op == op) return entry.name;
  return "?";
}

bool parseCollective(std::string_view name, Collective* coll) {
  std::string key = lowerWithoutSeparators(name);
  for (const auto& entry : kCollectiveNames)
    if (key == entry.name) {
      *coll = entry.coll;
      return true;
    }
  return false;
}

bool parseType(std::string_view name, ncclDataType_t* type) {
  for (const auto& entry : kTypeNames) {
    bool hit = name == entry.name;
    for (const char* alias : entry.aliases) hit = hit || (alias && name == alias);
    if (hit) {
      *type = entry.type;
      return true;
    }
  }
  return false;
}

bool parseOp(std::string_view name, ReduceOp* op) {
  for (const auto& entry : kOpNames)
    if (name == entry.name || (entry.alias && name == entry.alias)) {
      *op = entry.op;
      return true;
    }
  return false;
}

size_t typeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

bool isReduction(Collective coll) {
  return coll == Collective::AllReduce || coll == Collective::ReduceScatter || coll == Collective::Reduce;
}

bool hasRoot(Collective coll) {
  return coll == Collective::Broadcast || coll == Collective::Reduce || coll == Collective::Gather ||
         coll == Collective::Scatter;
}

bool hasOutput(Collective coll, int rank, int root) {
  return (coll != Collective::Reduce && coll != Collective::Gather) || rank == root;
}

BufferCounts bufferCounts(Collective coll, size_t count, int nRanks) {
  size_t all = count * static_cast<size_t>(nRanks);
  switch (coll) {
    case Collective::AllGather: case Collective::Gather: return {count, all};
    case Collective::ReduceScatter: case Collective::Scatter: return {all, count};
    case Collective::AlltoAll: return {all, all};
    default: return {count, count};
  }
}

size_t inPlaceInputOffset(Collective coll, size_t count, int rank) {
  return (coll == Collective::AllGather || coll == Collective::Gather) ? count * rank : 0;
}

size_t inPlaceOutputOffset(Collective coll, size_t count, int rank) {
  return (coll == Collective::ReduceScatter || coll == Collective::Scatter) ? count * rank : 0;
}

ReduceOp inputOp(Collective coll, ReduceOp op) { return isReduction(coll) ? op : ReduceOp::None; }

double inputValue(ncclDataType_t type, ReduceOp op, int rank, uint64_t seed, size_t index) {
  requireType(type);
  return bitsToDouble(type, inputBits(type, op, rank, seed, index));
}

void storeValue(ncclDataType_t type, double value, void* host) {
  requireType(type);
  storeBits(type, doubleToBits(type, value), host, 0);
}

void fillInput(ncclDataType_t type, ReduceOp op, int rank, uint64_t seed, size_t count, void* host) {
  requireType(type);
  for (size_t i = 0; i < count; ++i) storeBits(type, inputBits(type, op, rank, seed, i), host, i);
}

void fillInput(const CheckSpec& spec, int rank, void* host) {
  validate(spec, rank);
  fillInput(spec.type, inputOp(spec.coll, spec.op), rank, spec.seed, bufferCounts(spec.coll, spec.count, spec.nRanks).send,
            host);
}

CheckResult check(const CheckSpec& spec, int rank, const void* output) {
  validate(spec, rank);
  CheckResult result;
  if (!hasOutput(spec.coll, rank, spec.root)) return result;
  size_t outCount = bufferCounts(spec.coll, spec.count, spec.nRanks).recv;
  const bool reduces = isReduction(spec.coll);
  std::string why;
  for (size_t i = 0; i < outCount; ++i) {
    Expectation e;
    std::string from;
    if (reduces) {
      size_t srcIndex = spec.coll == Collective::ReduceScatter ? rank * spec.count + i : i;
      e = expectReduction(spec, srcIndex);
      if (result.wrong == 0) from = "reduction of input element " + std::to_string(srcIndex);
    } else {
      Source src = sourceOf(spec, rank, i);
      e.exactBits = true;
      e.bits = inputBits(spec.type, ReduceOp::None, src.rank, spec.seed, src.index);
      if (result.wrong == 0) from = "rank " + std::to_string(src.rank) + " input element " + std::to_string(src.index);
    }
    ++result.checked;
    if (matches(spec, e, loadBits(spec.type, output, i), &why)) continue;
    if (result.wrong++ == 0)
      result.firstMismatch = std::string(collectiveName(spec.coll)) + " " + typeName(spec.type) +
                             (reduces ? std::string(" ") + opName(spec.op) : std::string()) + " rank " +
                             std::to_string(rank) + " of " + std::to_string(spec.nRanks) + ", output element " +
                             std::to_string(i) + " (" + from + "): " + why;
  }
  return result;
}

double unitRoundoff(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return std::ldexp(1.0, -11);
    case ncclBfloat16: return std::ldexp(1.0, -8);
    case ncclFloat8e4m3: return std::ldexp(1.0, -4);
    case ncclFloat8e5m2: return std::ldexp(1.0, -3);
    case ncclFloat32: return std::ldexp(1.0, -24);
    case ncclFloat64: return std::ldexp(1.0, -53);
    default: return 0;
  }
}

double tolerance(ncclDataType_t type, int nRanks, double scale) {
  if (isInteger(type)) return 0;
  double steps = nRanks + 2.0;
  return steps * unitRoundoff(type) * scale + steps * smallestSubnormal(type);
}

}  // namespace braid::check
