// A collective of ranks that share one GPU, as one pass over their buffers: each output range is
// a job that reads its elements of one rank's input (a copy) or of every rank's (a fold, in rank
// order) and writes them to one rank's output or to every rank's. The leader of a GPU shared by
// several processes without MPS runs it for all of them (src/api/served.h), with every buffer
// mapped into its context: one short kernel instead of the ranks' ring steps (2(n-1) of them for
// an all-reduce), and the least memory traffic the collective needs (an all-reduce: n reads, n
// writes of the buffer). No connection is involved, so there is no schedule to prove: each
// element of an output is written by one thread, from elements that thread alone reads (so in
// place needs nothing more: NCCL's in-place layouts put a rank's input where that same job's
// output goes), and nothing waits.
// Plain C++ header.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "algo/schedule.h"
#include "kernels/pack.h"
#include "kernels/work_layout.h"

namespace braid::kernels {

constexpr uint32_t kMostLocalRanks = 32;  // rank sets are 32-bit masks; the parameters hold every rank's buffers

struct LocalRank {
  const void* in = nullptr;
  void* out = nullptr;
  uint64_t scalarBits = 0;              // PreMulSum: this rank's scalar (DevOp's)
  const void* deviceScalar = nullptr;   // PreMulSum: or its scalar in device memory, which wins
};

// `count` elements from offset srcOff of the inputs of the ranks in `from` (one rank: a copy;
// several: folded with the op, lowest rank first) to offset dstOff of the outputs of those in `to`.
struct LocalJob {
  uint32_t from = 0, to = 0;  // rank masks
  uint64_t srcOff = 0, dstOff = 0;
};

struct LocalCollective {
  ElemType type = ElemType::Float32;  // the kernels' type: the call's, or Uint8 for collectives that only move bytes
  RedKind kind = RedKind::Sum;
  int32_t divisor = 0;   // SumPostDiv: the final division; 0: none
  uint32_t nRanks = 0, nJobs = 0;
  uint64_t count = 0;    // elements of each job
  LocalRank ranks[kMostLocalRanks];
  LocalJob jobs[kMostLocalRanks];
};

// The one pass of collective `coll` (Broadcast, Reduce, AllGather, ReduceScatter, AllReduce) of
// `count` elements of `type` (NCCL's count: per rank for the gathers and scatters) with `root`,
// where ranks[r] is rank r's packed work (one kernel): its sole op gives that rank's buffers
// (kInput, kOutput) and scalar. ncclInvalidArgument when it cannot run so: another collective, a
// kernel holding other ops, ranks whose types or ops differ, or more than kMostLocalRanks ranks.
ncclResult_t localCollectiveOf(algo::Coll coll, uint64_t count, ncclDataType_t type, int root,
                               const std::vector<const PackedKernel*>& ranks, LocalCollective* out);

// Enqueues the pass on `stream` (every buffer on the stream's device). The launch's CUDA error.
cudaError_t localCollectiveAsync(const LocalCollective& work, cudaStream_t stream);

}  // namespace braid::kernels
