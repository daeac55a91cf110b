// An all-reduce of ranks that share one GPU, as one pass over their buffers: every thread reads
// its elements of every rank's input, folds them in rank order and writes the result to every
// rank's output. The leader of a GPU shared by several processes without MPS runs it for all of
// them (src/api/served.h), with every buffer mapped into its context: one short kernel instead of
// 2(n-1) ring steps, and the least memory traffic an all-reduce needs (n reads, n writes).
// No connection is involved, so there is no schedule to prove: an element is read and written by
// one thread only (in place too), and the kernel never waits for anything.
// Plain C++ header.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/pack.h"
#include "kernels/work_layout.h"

namespace braid::kernels {

constexpr uint32_t kMostLocalRanks = 32;  // the kernel's parameters hold every rank's buffers

struct LocalRank {
  const void* in = nullptr;
  void* out = nullptr;
  uint64_t scalarBits = 0;              // PreMulSum: this rank's scalar (DevOp's)
  const void* deviceScalar = nullptr;   // PreMulSum: or its scalar in device memory, which wins
};

struct LocalAllReduce {
  ElemType type = ElemType::Float32;
  RedKind kind = RedKind::Sum;
  int32_t divisor = 1;  // SumPostDiv
  uint32_t nRanks = 0;
  uint64_t count = 0;   // elements of every rank's input and output
  LocalRank ranks[kMostLocalRanks];
};

// The one pass for ranks whose packed work (one kernel each, in the order their results are
// folded) is an all-reduce of `count` elements: each kernel's sole op gives that rank's buffers
// (kInput, kOutput) and scalar. ncclInvalidArgument when they cannot run so: a kernel holds other
// ops, the ranks' types or ops differ, or there are more than kMostLocalRanks.
ncclResult_t localAllReduceOf(const std::vector<const PackedKernel*>& ranks, uint64_t count, LocalAllReduce* out);

// Enqueues the pass on `stream` (every buffer on the stream's device). The launch's CUDA error.
cudaError_t localAllReduceAsync(const LocalAllReduce& work, cudaStream_t stream);

}  // namespace braid::kernels
