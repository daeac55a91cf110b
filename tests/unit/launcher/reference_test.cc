// braid_check's reference, tested on cases small enough to follow by hand: outputs are built
// here with the plainest loops (and, for floats, with a rounding to the type after every step
// in two different orders, as an implementation would), then check() must accept them and
// reject a perturbed copy.
#include "tests/common/reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
#include <vector>

#include "tests/common/narrow_float.h"

namespace braid::check {
namespace {

using Bytes = std::vector<unsigned char>;

Bytes inputOf(const CheckSpec& spec, int rank) {
  Bytes bytes(bufferCounts(spec.coll, spec.count, spec.nRanks).send * typeSize(spec.type));
  fillInput(spec, rank, bytes.data());
  return bytes;
}

template <typename T>
T at(const Bytes& bytes, size_t index) {
  T value;
  std::memcpy(&value, bytes.data() + index * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void put(Bytes& bytes, size_t index, T value) {
  std::memcpy(bytes.data() + index * sizeof(T), &value, sizeof(T));
}

// ---- names, sizes, layouts ----------------------------------------------------------------

TEST(Reference, NamesRoundTrip) {
  for (ncclDataType_t type : kAllTypes) {
    ncclDataType_t parsed;
    ASSERT_TRUE(parseType(typeName(type), &parsed)) << typeName(type);
    EXPECT_EQ(parsed, type);
  }
  for (ReduceOp op : kAllReduceOps) {
    ReduceOp parsed;
    ASSERT_TRUE(parseOp(opName(op), &parsed));
    EXPECT_EQ(parsed, op);
  }
  for (Collective coll : kAllCollectives) {
    Collective parsed;
    ASSERT_TRUE(parseCollective(collectiveName(coll), &parsed));
    EXPECT_EQ(parsed, coll);
  }
  ncclDataType_t type;
  ReduceOp op;
  Collective coll;
  EXPECT_TRUE(parseType("bf16", &type) && type == ncclBfloat16);
  EXPECT_TRUE(parseOp("premulsum", &op) && op == ReduceOp::PreMulSum);
  EXPECT_TRUE(parseCollective("All_Reduce", &coll) && coll == Collective::AllReduce);
  EXPECT_FALSE(parseType("float128", &type));
  EXPECT_STREQ(typeName(ncclFloat8e4m3), "f8e4m3");
  EXPECT_STREQ(opName(ReduceOp::PreMulSum), "mulsum");
}

TEST(Reference, BufferCountsAndInPlaceOffsets) {
  const int n = 4;
  EXPECT_EQ(bufferCounts(Collective::AllReduce, 3, n).send, 3u);
  EXPECT_EQ(bufferCounts(Collective::AllGather, 3, n).recv, 12u);
  EXPECT_EQ(bufferCounts(Collective::AllGather, 3, n).send, 3u);
  EXPECT_EQ(bufferCounts(Collective::ReduceScatter, 3, n).send, 12u);
  EXPECT_EQ(bufferCounts(Collective::ReduceScatter, 3, n).recv, 3u);
  EXPECT_EQ(bufferCounts(Collective::AlltoAll, 3, n).send, 12u);
  EXPECT_EQ(bufferCounts(Collective::AlltoAll, 3, n).recv, 12u);
  EXPECT_EQ(bufferCounts(Collective::Gather, 3, n).recv, 12u);
  EXPECT_EQ(bufferCounts(Collective::Scatter, 3, n).send, 12u);
  EXPECT_EQ(bufferCounts(Collective::SendRecv, 3, n).recv, 3u);
  EXPECT_EQ(inPlaceInputOffset(Collective::AllGather, 3, 2), 6u);
  EXPECT_EQ(inPlaceOutputOffset(Collective::AllGather, 3, 2), 0u);
  EXPECT_EQ(inPlaceOutputOffset(Collective::ReduceScatter, 3, 2), 6u);
  EXPECT_EQ(inPlaceOutputOffset(Collective::Scatter, 3, 3), 9u);
  EXPECT_EQ(inPlaceInputOffset(Collective::AllReduce, 3, 3), 0u);
}

TEST(Reference, NarrowConversionsRoundToNearestEvenAndSaturateFp8) {
  EXPECT_EQ(halfBitsToDouble(doubleToHalfBits(1.0 / 3)), 0.333251953125);
  EXPECT_EQ(doubleToHalfBits(1.0), 0x3c00);
  EXPECT_EQ(doubleToHalfBits(1.0 + std::ldexp(1.0, -11)), 0x3c00);  // a tie goes to even
  EXPECT_EQ(bf16BitsToDouble(doubleToBf16Bits(1.0 / 3)), 0.333984375);
  EXPECT_EQ(fp8BitsToDouble(doubleToFp8Bits(1.0 / 3, true), true), 0.34375);
  EXPECT_EQ(fp8BitsToDouble(doubleToFp8Bits(1.0 / 3, false), false), 0.3125);
  EXPECT_EQ(fp8BitsToDouble(doubleToFp8Bits(1000, true), true), 448);
  EXPECT_EQ(fp8BitsToDouble(doubleToFp8Bits(1e6, false), false), 57344);
}

TEST(Reference, ToleranceIsTheStatedFormula) {
  EXPECT_EQ(tolerance(ncclInt32, 8, 100), 0);
  EXPECT_DOUBLE_EQ(tolerance(ncclFloat16, 8, 1.0), 10 * std::ldexp(1.0, -11) + 10 * std::ldexp(1.0, -24));
  EXPECT_NEAR(tolerance(ncclFloat32, 8, 1.0), 5.96e-7, 1e-9);
  EXPECT_DOUBLE_EQ(tolerance(ncclBfloat16, 4, 2.0), 6 * std::ldexp(1.0, -8) * 2 + 6 * std::ldexp(1.0, -133));
}

// ---- inputs -------------------------------------------------------------------------------

TEST(Reference, ReductionInputsStayInTheirStatedDomains) {
  for (ncclDataType_t type : kAllTypes) {
    std::set<double> sumValues, prodValues;
    for (size_t i = 0; i < 2000; ++i) {
      sumValues.insert(inputValue(type, ReduceOp::Sum, static_cast<int>(i % 5), 7, i));
      prodValues.insert(inputValue(type, ReduceOp::Prod, static_cast<int>(i % 5), 7, i));
    }
    for (double v : prodValues) {
      bool isUnsigned = type == ncclUint8 || type == ncclUint32 || type == ncclUint64;
      bool isInt = isUnsigned || type == ncclInt8 || type == ncclInt32 || type == ncclInt64;
      std::set<double> allowed = isUnsigned ? std::set<double>{1, 2}
                                 : isInt    ? std::set<double>{1, -1, 2}
                                            : std::set<double>{1, -1, 2, -2, 0.5, -0.5};
      EXPECT_TRUE(allowed.count(v)) << typeName(type) << " prod value " << v;
    }
    double bound = type == ncclInt8 ? 2 : type == ncclUint8 ? 3 : type == ncclFloat16 ? 2 : type == ncclBfloat16 ? 3
                   : type == ncclFloat8e4m3 ? 2 : type == ncclFloat8e5m2 ? 1 : type == ncclFloat32 || type == ncclFloat64 ? 8
                   : 2000;
    EXPECT_GE(*sumValues.begin(), -bound) << typeName(type);
    EXPECT_LE(*sumValues.rbegin(), bound) << typeName(type);
    EXPECT_GE(sumValues.size(), 3u) << typeName(type) << ": inputs should vary";
  }
}

TEST(Reference, FillIsDeterministicPerSeedAndRank) {
  CheckSpec spec{Collective::AllReduce, ncclFloat32, ReduceOp::Sum, 1, 2, 0, 64, 11};
  Bytes a = inputOf(spec, 0), b = inputOf(spec, 0), c = inputOf(spec, 1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  spec.seed = 12;
  EXPECT_NE(inputOf(spec, 0), a);
  for (size_t i = 0; i < spec.count; ++i) EXPECT_EQ(at<float>(a, i), inputValue(ncclFloat32, ReduceOp::Sum, 0, 11, i));
}

TEST(Reference, CopyInputsAreFiniteRandomBits) {
  for (ncclDataType_t type : kAllTypes) {
    std::set<double> seen;
    for (size_t i = 0; i < 1000; ++i) {
      double v = inputValue(type, ReduceOp::None, 1, 3, i);
      ASSERT_TRUE(std::isfinite(v)) << typeName(type);
      seen.insert(v);
    }
    EXPECT_GT(seen.size(), typeSize(type) == 1 ? 100u : 900u) << typeName(type);
  }
}

// ---- reductions built by hand ------------------------------------------------------------

TEST(Reference, AllReduceInt32SumAcceptsTheSumAndRejectsAnOffByOne) {
  CheckSpec spec{Collective::AllReduce, ncclInt32, ReduceOp::Sum, 1, 3, 0, 5, 1};
  Bytes in0 = inputOf(spec, 0), in1 = inputOf(spec, 1), in2 = inputOf(spec, 2);
  Bytes out(in0.size());
  for (size_t i = 0; i < 5; ++i) put<int32_t>(out, i, at<int32_t>(in0, i) + at<int32_t>(in1, i) + at<int32_t>(in2, i));
  for (int rank = 0; rank < 3; ++rank) {
    CheckResult result = check(spec, rank, out.data());
    EXPECT_EQ(result.checked, 5u);
    EXPECT_EQ(result.wrong, 0u) << result.firstMismatch;
  }
  put<int32_t>(out, 2, at<int32_t>(out, 2) + 1);
  CheckResult result = check(spec, 1, out.data());
  EXPECT_EQ(result.wrong, 1u);
  EXPECT_NE(result.firstMismatch.find("output element 2"), std::string::npos) << result.firstMismatch;
  EXPECT_NE(result.firstMismatch.find("allreduce int32 sum rank 1 of 3"), std::string::npos) << result.firstMismatch;
}

TEST(Reference, Int8SumAndProdWrapLikeArithmeticInTheType) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod}) {
    CheckSpec spec{Collective::AllReduce, ncclInt8, op, 1, 64, 0, 200, 5};
    std::vector<int8_t> expected(spec.count, op == ReduceOp::Prod ? 1 : 0);
    for (int r = 0; r < spec.nRanks; ++r) {
      Bytes in = inputOf(spec, r);
      for (size_t i = 0; i < spec.count; ++i)
        expected[i] = static_cast<int8_t>(op == ReduceOp::Prod ? expected[i] * static_cast<int8_t>(in[i])
                                                               : expected[i] + static_cast<int8_t>(in[i]));
    }
    CheckResult result = check(spec, 0, expected.data());
    EXPECT_EQ(result.wrong, 0u) << result.firstMismatch;
  }
}

TEST(Reference, IntegerAvgTruncatesTowardZeroAndPreMulSumScales) {
  CheckSpec spec{Collective::AllReduce, ncclInt32, ReduceOp::Avg, 1, 3, 0, 300, 9};
  CheckSpec mulSpec = spec;
  mulSpec.op = ReduceOp::PreMulSum;
  mulSpec.preMulScalar = 3;
  std::vector<int32_t> avg(spec.count), mul(spec.count);
  bool sawNegativeRemainder = false;
  for (size_t i = 0; i < spec.count; ++i) {
    int32_t sum = 0, mulSum = 0;
    for (int r = 0; r < 3; ++r) {
      sum += static_cast<int32_t>(inputValue(ncclInt32, ReduceOp::Avg, r, 9, i));
      mulSum += 3 * static_cast<int32_t>(inputValue(ncclInt32, ReduceOp::PreMulSum, r, 9, i));
    }
    avg[i] = sum / 3;
    mul[i] = mulSum;
    sawNegativeRemainder |= sum < 0 && sum % 3 != 0;
  }
  ASSERT_TRUE(sawNegativeRemainder);
  EXPECT_EQ(check(spec, 2, avg.data()).wrong, 0u);
  EXPECT_EQ(check(mulSpec, 2, mul.data()).wrong, 0u);
}

double roundTo(ncclDataType_t type, double v) {
  switch (type) {
    case ncclFloat16: return halfBitsToDouble(doubleToHalfBits(v));
    case ncclBfloat16: return bf16BitsToDouble(doubleToBf16Bits(v));
    case ncclFloat8e4m3: return fp8BitsToDouble(doubleToFp8Bits(v, true), true);
    case ncclFloat8e5m2: return fp8BitsToDouble(doubleToFp8Bits(v, false), false);
    case ncclFloat32: return static_cast<float>(v);
    default: return v;
  }
}

void storeAs(ncclDataType_t type, Bytes& out, size_t i, double v) {
  switch (type) {
    case ncclFloat16: put<uint16_t>(out, i, doubleToHalfBits(v)); break;
    case ncclBfloat16: put<uint16_t>(out, i, doubleToBf16Bits(v)); break;
    case ncclFloat8e4m3: put<uint8_t>(out, i, doubleToFp8Bits(v, true)); break;
    case ncclFloat8e5m2: put<uint8_t>(out, i, doubleToFp8Bits(v, false)); break;
    case ncclFloat32: put<float>(out, i, static_cast<float>(v)); break;
    default: put<double>(out, i, v); break;
  }
}

// An implementation's answer: inputs reduced one rank at a time in the given order, the
// partial result rounded to the type after every step (and each x*scalar rounded first).
double steppedReduction(const CheckSpec& spec, size_t index, bool reverse) {
  double scalar = spec.op == ReduceOp::Avg ? roundTo(spec.type, 1.0 / spec.nRanks) : roundTo(spec.type, spec.preMulScalar);
  double acc = 0;
  for (int step = 0; step < spec.nRanks; ++step) {
    int r = reverse ? spec.nRanks - 1 - step : step;
    double x = inputValue(spec.type, spec.op, r, spec.seed, index);
    if (spec.op == ReduceOp::Avg || spec.op == ReduceOp::PreMulSum) x = roundTo(spec.type, x * scalar);
    if (step == 0)
      acc = x;
    else if (spec.op == ReduceOp::Prod)
      acc = roundTo(spec.type, acc * x);
    else if (spec.op == ReduceOp::Max)
      acc = std::max(acc, x);
    else if (spec.op == ReduceOp::Min)
      acc = std::min(acc, x);
    else
      acc = roundTo(spec.type, acc + x);
  }
  return acc;
}

TEST(Reference, FloatToleranceAcceptsEveryRoundingOrder) {
  const ncclDataType_t floats[] = {ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  for (ncclDataType_t type : floats)
    for (ReduceOp op : kAllReduceOps)
      for (int n : {1, 2, 3, 4, 8, 16}) {
        CheckSpec spec{Collective::AllReduce, type, op, 0.5, n, 0, 512, 21};
        for (bool reverse : {false, true}) {
          Bytes out(spec.count * typeSize(type));
          for (size_t i = 0; i < spec.count; ++i) storeAs(type, out, i, steppedReduction(spec, i, reverse));
          CheckResult result = check(spec, 0, out.data());
          EXPECT_EQ(result.wrong, 0u) << typeName(type) << " " << opName(op) << " n=" << n << ": "
                                      << result.firstMismatch;
        }
      }
}

TEST(Reference, FloatResultsFarOutsideToleranceAreWrong) {
  CheckSpec spec{Collective::AllReduce, ncclFloat16, ReduceOp::Avg, 1, 3, 0, 64, 4};
  Bytes out(spec.count * 2);
  for (size_t i = 0; i < spec.count; ++i) storeAs(ncclFloat16, out, i, steppedReduction(spec, i, false));
  ASSERT_EQ(check(spec, 0, out.data()).wrong, 0u);
  storeAs(ncclFloat16, out, 7, steppedReduction(spec, 7, false) + 0.25);
  storeAs(ncclFloat16, out, 9, NAN);
  CheckResult result = check(spec, 0, out.data());
  EXPECT_EQ(result.wrong, 2u);
  EXPECT_NE(result.firstMismatch.find("output element 7"), std::string::npos) << result.firstMismatch;
}

TEST(Reference, MaxAndMinMustBeExact) {
  CheckSpec spec{Collective::AllReduce, ncclFloat32, ReduceOp::Max, 1, 4, 0, 32, 2};
  Bytes out(spec.count * 4);
  for (size_t i = 0; i < spec.count; ++i) {
    double best = -INFINITY;
    for (int r = 0; r < 4; ++r) best = std::max(best, inputValue(ncclFloat32, ReduceOp::Max, r, 2, i));
    put<float>(out, i, static_cast<float>(best));
  }
  EXPECT_EQ(check(spec, 3, out.data()).wrong, 0u);
  put<float>(out, 0, std::nextafter(at<float>(out, 0), 100.0f));
  EXPECT_EQ(check(spec, 3, out.data()).wrong, 1u);
}

TEST(Reference, ReduceScatterTakesTheRanksBlock) {
  CheckSpec spec{Collective::ReduceScatter, ncclUint32, ReduceOp::Sum, 1, 3, 0, 4, 8};
  std::vector<Bytes> in = {inputOf(spec, 0), inputOf(spec, 1), inputOf(spec, 2)};
  for (int rank = 0; rank < 3; ++rank) {
    std::vector<uint32_t> out(4);
    for (size_t j = 0; j < 4; ++j)
      for (const Bytes& b : in) out[j] += at<uint32_t>(b, rank * 4 + j);
    EXPECT_EQ(check(spec, rank, out.data()).wrong, 0u) << "rank " << rank;
  }
}

TEST(Reference, ReduceChecksOnlyTheRoot) {
  CheckSpec spec{Collective::Reduce, ncclInt64, ReduceOp::Min, 1, 3, 1, 6, 8};
  std::vector<int64_t> out(6);
  for (size_t j = 0; j < 6; ++j) {
    out[j] = at<int64_t>(inputOf(spec, 0), j);
    for (int r = 1; r < 3; ++r) out[j] = std::min(out[j], at<int64_t>(inputOf(spec, r), j));
  }
  EXPECT_EQ(check(spec, 1, out.data()).wrong, 0u);
  std::vector<int64_t> garbage(6, 12345);
  EXPECT_EQ(check(spec, 0, garbage.data()).checked, 0u);
  EXPECT_GT(check(spec, 1, garbage.data()).wrong, 0u);
}

// ---- data movement built by hand ---------------------------------------------------------

TEST(Reference, AlltoAllTakesBlockRankFromEachPeer) {
  CheckSpec spec{Collective::AlltoAll, ncclFloat16, ReduceOp::None, 1, 3, 0, 2, 6};
  std::vector<Bytes> in = {inputOf(spec, 0), inputOf(spec, 1), inputOf(spec, 2)};
  const int rank = 1;
  Bytes out(6 * 2);
  for (int peer = 0; peer < 3; ++peer)
    for (size_t j = 0; j < 2; ++j) put<uint16_t>(out, peer * 2 + j, at<uint16_t>(in[peer], rank * 2 + j));
  EXPECT_EQ(check(spec, rank, out.data()).wrong, 0u);
  // Blocks from peers 0 and 2 swapped: all four of their elements are wrong.
  Bytes swapped = out;
  for (size_t j = 0; j < 2; ++j) {
    put<uint16_t>(swapped, j, at<uint16_t>(out, 4 + j));
    put<uint16_t>(swapped, 4 + j, at<uint16_t>(out, j));
  }
  CheckResult result = check(spec, rank, swapped.data());
  EXPECT_EQ(result.wrong, 4u);
  EXPECT_NE(result.firstMismatch.find("rank 0 input element 2"), std::string::npos) << result.firstMismatch;
}

TEST(Reference, GatherLikeCollectivesConcatenateInRankOrder) {
  for (Collective coll : {Collective::AllGather, Collective::Gather}) {
    CheckSpec spec{coll, ncclInt8, ReduceOp::Sum, 1, 4, 2, 3, 6};  // op is ignored: no reduction
    Bytes out;
    for (int r = 0; r < 4; ++r) {
      Bytes in = inputOf(spec, r);
      out.insert(out.end(), in.begin(), in.end());
    }
    EXPECT_EQ(check(spec, 2, out.data()).wrong, 0u) << collectiveName(coll);
    EXPECT_EQ(check(spec, 1, out.data()).checked, coll == Collective::Gather ? 0u : 12u);
  }
}

TEST(Reference, BroadcastScatterAndSendRecvTakeTheRightSource) {
  const int n = 3, root = 2;
  CheckSpec bcast{Collective::Broadcast, ncclUint64, ReduceOp::None, 1, n, root, 5, 3};
  EXPECT_EQ(check(bcast, 0, inputOf(bcast, root).data()).wrong, 0u);
  EXPECT_EQ(check(bcast, 0, inputOf(bcast, 0).data()).wrong, 5u);

  CheckSpec scatter{Collective::Scatter, ncclBfloat16, ReduceOp::None, 1, n, root, 5, 3};
  Bytes all = inputOf(scatter, root);
  Bytes block(all.begin() + 1 * 5 * 2, all.begin() + 2 * 5 * 2);  // rank 1's block
  EXPECT_EQ(check(scatter, 1, block.data()).wrong, 0u);
  EXPECT_GT(check(scatter, 0, block.data()).wrong, 0u);

  CheckSpec ring{Collective::SendRecv, ncclFloat64, ReduceOp::None, 1, n, 0, 5, 3};
  EXPECT_EQ(check(ring, 0, inputOf(ring, n - 1).data()).wrong, 0u);  // rank 0 receives from rank n-1
  EXPECT_EQ(check(ring, 2, inputOf(ring, 1).data()).wrong, 0u);
}

TEST(Reference, ZeroCountChecksNothing) {
  CheckSpec spec{Collective::AllReduce, ncclFloat32, ReduceOp::Sum, 1, 4, 0, 0, 1};
  EXPECT_EQ(check(spec, 0, nullptr).checked, 0u);
}

TEST(Reference, RejectsInconsistentSpecs) {
  CheckSpec spec{Collective::Broadcast, ncclFloat32, ReduceOp::None, 1, 4, 4, 1, 1};
  float out = 0;
  EXPECT_THROW(check(spec, 0, &out), std::invalid_argument);  // root out of range
  spec.root = 0;
  EXPECT_THROW(check(spec, 4, &out), std::invalid_argument);  // rank out of range
  spec.coll = Collective::AllReduce;
  EXPECT_THROW(check(spec, 0, &out), std::invalid_argument);  // a reduction without an op
  spec.op = ReduceOp::Sum;
  spec.type = static_cast<ncclDataType_t>(42);
  EXPECT_THROW(check(spec, 0, &out), std::invalid_argument);
}

}  // namespace
}  // namespace braid::check
