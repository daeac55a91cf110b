// Deterministic inputs and an independent reference for every NCCL collective, type and
// reduction op: used by braid-perf (-c 1), the multi-process correctness tests and the GPU
// tests. Pure host code; knows nothing of braid's implementation.
//
// Inputs. Every element is a pure function of (type, op, seed, rank, index), so any rank can
// regenerate any other rank's input. For reductions the values are small, so that results
// stay exact in the type for the usual rank counts:
//   sum/max/min/avg/premulsum  int8 -2..2, uint8 0..3, (u)int32/64 -1000..1000 (0..2000),
//                              float/double k/8 for |k| <= 64, half k/4 for |k| <= 8,
//                              bfloat16 -3..3, fp8 e4m3 -2..2, fp8 e5m2 -1..1
//   prod                       signed ints {1,-1,2}, unsigned {1,2}, floats {+-1,+-2,+-0.5}
// Collectives that only move data use random bit patterns (finite, for float types), so that
// a misplaced element is caught with near certainty; their results must match bit for bit.
//
// Reference. Integer reductions are computed exactly in 64-bit modular arithmetic and wrapped
// to the type's width (what C++ arithmetic in the type does); avg is the sum divided by
// nRanks, truncated toward zero (NCCL's SumPostDiv). Float reductions are computed in double.
//
// Tolerance (floats; integers and max/min must be exact, copies bit-exact):
//   |got - exact| <= (nRanks + 2) * u * scale + (nRanks + 2) * smallest subnormal
// where u is the type's unit roundoff (fp64 2^-53, fp32 2^-24, fp16 2^-11, bf16 2^-8,
// e4m3 2^-4, e5m2 2^-3) and scale is sum_r |x_r * s| (s = 1 for sum, 1/nRanks for avg,
// the scalar for premulsum) or |prod_r x_r| for prod. This bounds any summation order with
// one rounding to the type per step (at most nRanks - 1), plus the rounding of the scalar
// and of the products x_r * s. Examples: fp32 sum over 8 ranks: 6e-7 of sum|x|; fp16 over
// 8 ranks: 4.9e-3 of sum|x|; bf16 over 4 ranks: 2.3e-2 of sum|x|.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "nccl.h"

namespace braid::check {

enum class Collective { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll, Gather, Scatter, SendRecv };
inline constexpr Collective kAllCollectives[] = {
    Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::Broadcast, Collective::Reduce,
    Collective::AlltoAll,  Collective::Gather,    Collective::Scatter,       Collective::SendRecv};

// None: the collective moves data and reduces nothing.
enum class ReduceOp { Sum, Prod, Max, Min, Avg, PreMulSum, None };
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max,
                                             ReduceOp::Min, ReduceOp::Avg,  ReduceOp::PreMulSum};

inline constexpr ncclDataType_t kAllTypes[] = {ncclInt8,  ncclUint8, ncclInt32,  ncclUint32,
                                               ncclInt64, ncclUint64, ncclFloat16, ncclFloat32,
                                               ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

// Names as nccl-tests prints them: "allreduce", "int8".."f8e5m2", "sum".."mulsum", "none".
const char* collectiveName(Collective coll);
const char* typeName(ncclDataType_t type);
const char* opName(ReduceOp op);
// Also accept common aliases ("all_reduce", "fp16", "bf16", "premulsum", ...).
bool parseCollective(std::string_view name, Collective* coll);
bool parseType(std::string_view name, ncclDataType_t* type);
bool parseOp(std::string_view name, ReduceOp* op);

size_t typeSize(ncclDataType_t type);
bool isReduction(Collective coll);  // AllReduce, ReduceScatter, Reduce
bool hasRoot(Collective coll);      // Broadcast, Reduce, Gather, Scatter
// Reduce and Gather produce output only at the root.
bool hasOutput(Collective coll, int rank, int root);

// Element counts of one rank's buffers for a call whose NCCL count argument is `count`
// (sendcount for AllGather/Gather, recvcount for ReduceScatter/Scatter, the per-peer count
// for AlltoAll). The same on every rank: the root's needs.
struct BufferCounts {
  size_t send = 0;
  size_t recv = 0;
};
BufferCounts bufferCounts(Collective coll, size_t count, int nRanks);

// In place, one buffer of max(send, recv) elements holds both; NCCL's convention puts the
// input at inPlaceInputOffset and the output at inPlaceOutputOffset (in elements).
size_t inPlaceInputOffset(Collective coll, size_t count, int rank);
size_t inPlaceOutputOffset(Collective coll, size_t count, int rank);

// The op whose input domain a collective's inputs use: `op` for reductions, None otherwise.
ReduceOp inputOp(Collective coll, ReduceOp op);

// Input element `index` of `rank`, converted to double (exact for the small reduction
// values; for random-bit integers above 2^53 only approximately).
double inputValue(ncclDataType_t type, ReduceOp op, int rank, uint64_t seed, size_t index);
// Writes `value` rounded to the type (nearest even; integers truncated and wrapped) at `host`:
// how braid-perf makes the PreMulSum scalar.
void storeValue(ncclDataType_t type, double value, void* host);
// Writes `count` input elements of `rank` in the type's representation.
void fillInput(ncclDataType_t type, ReduceOp op, int rank, uint64_t seed, size_t count, void* host);

struct CheckSpec {
  Collective coll = Collective::AllReduce;
  ncclDataType_t type = ncclFloat32;
  ReduceOp op = ReduceOp::Sum;  // ignored for collectives that do not reduce
  double preMulScalar = 1.0;    // for PreMulSum; rounded to the type like NCCL's scalar
  int nRanks = 1;
  int root = 0;
  size_t count = 0;  // the NCCL count argument, as for bufferCounts
  uint64_t seed = 0;
};

// Fills rank's send buffer (bufferCounts(...).send elements) for this collective.
void fillInput(const CheckSpec& spec, int rank, void* host);

struct CheckResult {
  size_t checked = 0;  // elements compared
  size_t wrong = 0;    // elements outside the tolerance
  std::string firstMismatch;  // empty when wrong == 0
};

// Compares `output` (rank's recv buffer: bufferCounts(...).recv elements, or the region at
// inPlaceOutputOffset in place) with the reference. Ranks without output (Reduce and Gather
// off the root) check nothing. Throws std::invalid_argument for an inconsistent spec.
CheckResult check(const CheckSpec& spec, int rank, const void* output);

// The stated tolerance (see the top of this file) for a float type; 0 for integers.
double tolerance(ncclDataType_t type, int nRanks, double scale);
double unitRoundoff(ncclDataType_t type);

}  // namespace braid::check
