// Packing a launch into the kernels' work blobs (work_layout.h): plain C++, no CUDA calls,
// so the CPU tests can read back exactly what a kernel would. Every call of a collective
// pays for it on the host, so it avoids maps and sets: a 64-lane launch is packed in a few
// microseconds.
#pragma once
#include <cstring>
#include <vector>

#include "kernels/executor.h"
#include "kernels/work_layout.h"

namespace braid::kernels {

// One kernel to enqueue: its element type, grid and packed work.
struct PackedKernel {
  ElemType type = ElemType::Uint8;
  unsigned nBlocks = 0;
  std::vector<unsigned char> blob;
  WorkIndex index{};
};

struct PackedLaunch {
  std::vector<PackedKernel> kernels;  // in enqueue order
  algo::Protocol protocol = algo::Protocol::Simple;  // every kernel's
  uint32_t slotBytes = 0, nSlots = 0;  // the FIFO shape all connections share
};

// Checks and packs `w` (everything but the CUDA side: device, stream, thread count).
// Kernels in (type, op) order: ops of one type share a kernel unless they use a common
// connection (a connection has one sending and one receiving lane at a time), so such an op
// waits for the next kernel. Returns ncclInvalidArgument for a malformed launch, also for
// connections whose FIFO shape does not fit the protocol, and for LL128 over a connection
// not marked ordered128.
ncclResult_t packLaunch(const Launch& w, PackedLaunch* out);

// The byte offsets in `k.blob` of every non-null device pointer the kernel follows: the op
// buffer table, device scalars, the connection ends' FIFOs and counters. A process that runs
// another's packed work (src/api/served.h) rewrites these into its own addresses.
std::vector<uint32_t> pointerOffsets(const PackedKernel& k);

// `n` rows of a table of `k` at byte offset `at`, or false when they do not lie inside the blob.
template <typename Row>
bool readTable(const PackedKernel& k, uint64_t at, uint64_t n, std::vector<Row>* rows) {
  if (at > k.blob.size() || n > (k.blob.size() - at) / sizeof(Row)) return false;
  rows->resize(size_t(n));
  if (n > 0) std::memcpy(rows->data(), k.blob.data() + at, size_t(n) * sizeof(Row));
  return true;
}

// One part of a merged kernel: a packed kernel (with no words table of its own), and the abort
// and error words its lanes take (both null: the merged launch's own, KernelParams).
struct MergePart {
  const PackedKernel* kernel = nullptr;
  DevRankWords words{nullptr, nullptr};
};

// One kernel that runs every part's lanes, in order: the tables are concatenated, and each
// lane's op, steps and words and each step's connections rebased. The leader of a GPU shared
// by several processes launches its ranks' work so, once (src/api/served.h): every launch and
// stream operation there costs a context switch. The parts must share one element type (and,
// which the caller checks, protocol, FIFO shape and slicing). ncclInvalidArgument when they do
// not, or a part is malformed (an index outside its tables).
ncclResult_t mergeKernels(const std::vector<MergePart>& parts, PackedKernel* out);

}  // namespace braid::kernels
