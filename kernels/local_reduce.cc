#include "kernels/local_reduce.h"

#include <cstring>

#include "core/log.h"

namespace braid::kernels {

ncclResult_t localAllReduceOf(const std::vector<const PackedKernel*>& ranks, uint64_t count, LocalAllReduce* out) {
  *out = LocalAllReduce{};
  if (ranks.empty() || ranks.size() > kMostLocalRanks)
    return fail(ncclInvalidArgument, "executor: a one-pass all-reduce of %zu ranks (1 to %u)", ranks.size(), kMostLocalRanks);
  out->type = ranks[0]->type;
  out->nRanks = uint32_t(ranks.size());
  out->count = count;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const PackedKernel& k = *ranks[r];
    DevOp op{};
    void* buffers[2] = {nullptr, nullptr};
    const bool one = k.index.nOps == 1 && k.index.ops <= k.blob.size() && k.blob.size() - k.index.ops >= sizeof(op);
    if (one) std::memcpy(&op, k.blob.data() + k.index.ops, sizeof(op));
    const size_t at = size_t(k.index.buffers) + size_t(op.firstBuffer) * sizeof(void*);
    if (!one || !op.reduces || op.nBuffers < 2 || at > k.blob.size() || k.blob.size() - at < sizeof(buffers))
      return fail(ncclInvalidArgument, "executor: rank %zu's work is not one all-reduce (a one-pass all-reduce)", r);
    std::memcpy(buffers, k.blob.data() + at, sizeof(buffers));
    if (r == 0) {
      out->kind = RedKind(op.kind);
      out->divisor = op.nRanks;
    }
    if (k.type != out->type || RedKind(op.kind) != out->kind || op.nRanks != out->divisor)
      return fail(ncclInvalidArgument, "executor: rank %zu's all-reduce differs in type or op from rank 0's "
                  "(a one-pass all-reduce)", r);
    out->ranks[r] = LocalRank{buffers[algo::kInput], buffers[algo::kOutput], op.scalarBits, op.deviceScalar};
  }
  return ncclSuccess;
}

}  // namespace braid::kernels
