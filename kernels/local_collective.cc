#include "kernels/local_collective.h"

#include "core/log.h"
#include "core/numeric.h"

namespace braid::kernels {

ncclResult_t localCollectiveOf(algo::Coll coll, uint64_t count, ncclDataType_t type, int root,
                               const std::vector<const PackedKernel*>& ranks, LocalCollective* out) {
  *out = LocalCollective{};
  const uint32_t n = uint32_t(ranks.size());
  if (n == 0 || n > kMostLocalRanks)
    return fail(ncclInvalidArgument, "executor: a one-pass collective of %u ranks (1 to %u)", n, kMostLocalRanks);
  const bool rooted = coll == algo::Coll::Broadcast || coll == algo::Coll::Reduce;
  if (rooted && (root < 0 || uint32_t(root) >= n))
    return fail(ncclInvalidArgument, "executor: a one-pass collective rooted at rank %d of %u", root, n);
  const uint32_t all = n == 32 ? ~0u : (1u << n) - 1;
  LocalJob* jobs = out->jobs;
  bool reduces = true;
  const char* name = "all-reduce";
  switch (coll) {
    case algo::Coll::AllReduce: jobs[0] = {all, all, 0, 0}; out->nJobs = 1; break;
    case algo::Coll::Broadcast:
      jobs[0] = {1u << root, all, 0, 0};
      out->nJobs = 1;
      reduces = false;
      name = "broadcast";
      break;
    case algo::Coll::Reduce: jobs[0] = {all, 1u << root, 0, 0}; out->nJobs = 1; name = "reduce"; break;
    case algo::Coll::AllGather:
      for (uint32_t i = 0; i < n; ++i) jobs[i] = {1u << i, all, 0, i * count};
      out->nJobs = n;
      reduces = false;
      name = "all-gather";
      break;
    case algo::Coll::ReduceScatter:
      for (uint32_t r = 0; r < n; ++r) jobs[r] = {all, 1u << r, r * count, 0};
      out->nJobs = n;
      name = "reduce-scatter";
      break;
    default:
      return fail(ncclInvalidArgument, "executor: no one-pass form of collective %d", int(coll));
  }
  // Collectives that only move bytes run in the byte kernel (kernelTypeOf): count bytes.
  out->type = reduces ? ElemType(int(type)) : ElemType::Uint8;
  const uint64_t scale = reduces ? 1 : sizeOfType(type);
  out->count = count * scale;
  for (uint32_t j = 0; j < out->nJobs; ++j) {
    jobs[j].srcOff *= scale;
    jobs[j].dstOff *= scale;
  }
  out->nRanks = n;
  for (uint32_t r = 0; r < n; ++r) {
    const PackedKernel& k = *ranks[r];
    std::vector<DevOp> ops;
    std::vector<void*> buffers;
    const bool one = k.index.nOps == 1 && readTable(k, k.index.ops, 1, &ops) && (ops[0].reduces != 0) == reduces &&
                     k.type == out->type && ops[0].nBuffers >= 2 &&
                     readTable(k, k.index.buffers + uint64_t(ops[0].firstBuffer) * sizeof(void*), 2, &buffers);
    if (!one)
      return fail(ncclInvalidArgument, "executor: rank %u's work is not one %s of this type (a one-pass collective)", r, name);
    const DevOp& op = ops[0];
    if (reduces) {
      if (r == 0) {
        out->kind = RedKind(op.kind);
        out->divisor = out->kind == RedKind::SumPostDiv ? op.nRanks : 0;
      }
      if (RedKind(op.kind) != out->kind || (out->kind == RedKind::SumPostDiv && op.nRanks != out->divisor))
        return fail(ncclInvalidArgument, "executor: rank %u's %s differs in its op from rank 0's (a one-pass collective)", r,
                    name);
    }
    out->ranks[r] = LocalRank{buffers[algo::kInput], buffers[algo::kOutput], op.scalarBits, op.deviceScalar};
  }
  return ncclSuccess;
}

}  // namespace braid::kernels
