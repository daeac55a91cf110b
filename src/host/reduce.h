// The CPU engine's element-wise kernels: what one schedule step computes on host memory.
//
// A step (src/algo/schedule.h) computes, element by element,
//   value = recv (op) pre(src)    both present
//   value = pre(src)              src only
//   value = recv                  recv only
//   value = post(value)           if the step is final
// where pre() is the PreMulSum multiply, applied only to a rank's raw contribution (a value
// read from an input buffer), and post() is the integer-average division. The results match
// NCCL's device reductions (src/device/reduce_kernel.h) bit for bit:
//   - integers wrap (two's complement); min/max compare signed or unsigned as the type is;
//   - fp16, bf16 and fp8 compute in float and round to the type after every operation
//     (round to nearest even; fp8 saturates to its largest finite value, also for inf);
//     PreMulSum rounds the product to the type before adding, as NCCL does;
//   - float min/max ignore a NaN operand (two NaNs give NaN), and treat -0 < +0;
//   - a NaN produced by arithmetic is the canonical NaN, as on the GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "nccl.h"

namespace braid::host {

// NCCL's device-side reduction kinds (ncclDevRedOp_t): ncclAvg becomes PreMulSum(1/n) for
// floating types and SumPostDiv(n) for integers; ncclRedOpCreatePreMulSum gives PreMulSum.
enum class HostOpKind : uint8_t { Sum, Prod, Max, Min, PreMulSum, SumPostDiv };

struct HostOp {
  HostOpKind kind = HostOpKind::Sum;
  ncclDataType_t type = ncclFloat32;
  int nRanks = 1;       // SumPostDiv divides by it
  uint64_t scalar = 0;  // PreMulSum: the scalar's bits in `type`, in the low sizeOfType bytes
};

// A built-in op (ncclSum .. ncclAvg) for `type` on a communicator of nRanks. Avg uses the
// same scalar as NCCL (1/n rounded to double, then float, then the type). Empty when op or
// type is not valid or nRanks < 1.
std::optional<HostOp> makeHostOp(ncclRedOp_t op, ncclDataType_t type, int nRanks);
// ncclRedOpCreatePreMulSum with ncclScalarHostImmediate: `scalar` points to one value of
// `type` (sizeOfType bytes are copied). Empty when the type is not valid or scalar is null.
std::optional<HostOp> makePreMulSumOp(ncclDataType_t type, const void* scalar, int nRanks);

// dst[i] = post(recv[i] (op) pre(src[i])) for i < n, with the parts a step does not have left
// out. dst may be the same pointer as recv or src; other overlap is not allowed. recv/src
// that a step does not have are ignored (may be null). Pointers need only the alignment of
// the element type.
using ElemwiseFn = void (*)(void* dst, const void* recv, const void* src, size_t n, const HostOp& op);

// The kernel for one step shape. premulSrc: src is an input buffer (a raw contribution);
// final: the value is a complete reduction. Returns nullptr for an invalid HostOp or when the
// step has neither recv nor src.
ElemwiseFn selectElemwise(const HostOp& op, bool hasRecv, bool hasSrc, bool premulSrc, bool final);

// nccl-tests' names: "sum", "prod", "max", "min", "avg", "mulsum" (for user PreMulSum ops).
const char* redOpName(ncclRedOp_t op);
const char* hostOpKindName(HostOpKind kind);

// One element as text for error messages: "-3", "1.5", "nan (0x7fff)"; narrow floating types
// also show their bits: "0.333 (0x3555)".
std::string formatValue(ncclDataType_t type, const void* value);

}  // namespace braid::host
