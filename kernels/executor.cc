// Packs one rank's launch into the kernels' work blob and enqueues the kernels.
#include "kernels/executor.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>

#include "core/cuda_scope.h"
#include "core/log.h"
#include "core/numeric.h"
#include "kernels/kernel_entry.h"

namespace braid::kernels {
namespace {

using ConnKey = std::pair<int, int>;  // (channel, peer)

// Ops that only move bytes run in the uint8 kernel with counts and offsets in bytes, so
// that one kernel serves all their types and a group of them shares one launch.
ElemType kernelTypeOf(const OpWork& op) {
  return op.reduces ? static_cast<ElemType>(int(op.type)) : ElemType::Uint8;
}

template <typename Row>
uint32_t appendTable(std::vector<unsigned char>& blob, const std::vector<Row>& rows) {
  size_t offset = (blob.size() + 15) & ~size_t(15);
  blob.resize(offset + rows.size() * sizeof(Row));
  if (!rows.empty()) std::memcpy(blob.data() + offset, rows.data(), rows.size() * sizeof(Row));
  return static_cast<uint32_t>(offset);
}

ncclResult_t deviceFail(int dev, cudaError_t e) {
  return fail(ncclUnhandledCudaError, "executor: cudaSetDevice(%d): %s", dev, cudaGetErrorString(e));
}

struct Tables {
  std::vector<DevSendEnd> sends;
  std::vector<DevRecvEnd> recvs;
  std::map<ConnKey, int16_t> sendIndex, recvIndex;
  uint32_t slotBytes = 0, nSlots = 0;
};

ncclResult_t checkSlots(Tables& t, uint32_t slotBytes, uint32_t nSlots, int channel, int peer) {
  if (slotBytes == 0 || slotBytes % 16 != 0 || nSlots == 0)
    return fail(ncclInvalidArgument, "executor: connection (channel %d, peer %d) has %u slots of %u bytes; need at least one slot of a multiple of 16 bytes",
                channel, peer, nSlots, slotBytes);
  if (t.slotBytes == 0) {
    t.slotBytes = slotBytes;
    t.nSlots = nSlots;
  } else if (t.slotBytes != slotBytes || t.nSlots != nSlots) {
    return fail(ncclInvalidArgument, "executor: connections of one launch must share one FIFO shape (%u x %u bytes, but (channel %d, peer %d) has %u x %u)",
                t.nSlots, t.slotBytes, channel, peer, nSlots, slotBytes);
  }
  return ncclSuccess;
}

ncclResult_t buildConnTables(const Launch& w, Tables* t) {
  if (w.sends.size() + w.recvs.size() > 0x7fff) return fail(ncclInvalidArgument, "executor: too many connections (%zu)", w.sends.size() + w.recvs.size());
  for (const SendConn& c : w.sends) {
    BRAID_CHECK(checkSlots(*t, c.end.slotBytes, c.end.nSlots, c.channel, c.peer));
    if (c.end.peerFifo == nullptr || c.end.peerTail == nullptr || c.end.localHead == nullptr)
      return fail(ncclInvalidArgument, "executor: send connection (channel %d, peer %d) has a null pointer", c.channel, c.peer);
    if (!t->sendIndex.emplace(ConnKey{c.channel, c.peer}, int16_t(t->sends.size())).second)
      return fail(ncclInvalidArgument, "executor: send connection (channel %d, peer %d) given twice", c.channel, c.peer);
    t->sends.push_back(DevSendEnd{c.end.peerFifo, c.end.peerTail, c.end.localHead});
  }
  for (const RecvConn& c : w.recvs) {
    BRAID_CHECK(checkSlots(*t, c.end.slotBytes, c.end.nSlots, c.channel, c.peer));
    if (c.end.localFifo == nullptr || c.end.localTail == nullptr || c.end.peerHead == nullptr)
      return fail(ncclInvalidArgument, "executor: recv connection (channel %d, peer %d) has a null pointer", c.channel, c.peer);
    if (!t->recvIndex.emplace(ConnKey{c.channel, c.peer}, int16_t(t->recvs.size())).second)
      return fail(ncclInvalidArgument, "executor: recv connection (channel %d, peer %d) given twice", c.channel, c.peer);
    t->recvs.push_back(DevRecvEnd{c.end.localFifo, c.end.localTail, c.end.peerHead});
  }
  return ncclSuccess;
}

ncclResult_t checkBuffer(const OpWork& op, int opIndex, uint16_t index) {
  if (index == algo::kNoBuf) return ncclSuccess;
  if (index >= op.buffers.size() || op.buffers[index] == nullptr)
    return fail(ncclInvalidArgument, "executor: op %d: a step uses buffer %u, which the op does not provide", opIndex, unsigned(index));
  return ncclSuccess;
}

ncclResult_t convertStep(const Launch& w, const Tables& t, const LaneWork& lw, const algo::Step& s, size_t scale,
                         DevStep* out) {
  const OpWork& op = w.ops[lw.op];
  BRAID_CHECK(checkBuffer(op, lw.op, s.src));
  BRAID_CHECK(checkBuffer(op, lw.op, s.dst));
  std::memset(out, 0, sizeof(*out));
  out->srcOff = s.srcOff * scale;
  out->dstOff = s.dstOff * scale;
  out->count = s.count * scale;
  out->src = s.src;
  out->dst = s.dst;
  out->flags = s.flags;
  out->recvConn = kNoConn;
  out->sendConn = kNoConn;
  const int channel = lw.lane->channel;
  if (s.recvPeer != algo::kNoPeer) {
    auto it = t.recvIndex.find({channel, s.recvPeer});
    if (it == t.recvIndex.end())
      return fail(ncclInvalidArgument, "executor: a step receives from rank %d on channel %d, but the launch has no such connection", s.recvPeer, channel);
    out->recvConn = it->second;
  }
  if (s.sendPeer != algo::kNoPeer) {
    auto it = t.sendIndex.find({channel, s.sendPeer});
    if (it == t.sendIndex.end())
      return fail(ncclInvalidArgument, "executor: a step sends to rank %d on channel %d, but the launch has no such connection", s.sendPeer, channel);
    out->sendConn = it->second;
  }
  if (s.recvPeer == algo::kNoPeer && s.src == algo::kNoBuf && s.count > 0)
    return fail(ncclInvalidArgument, "executor: op %d: a step has neither a recv nor a src", lw.op);
  if ((s.flags & algo::kReduce) && (s.recvPeer == algo::kNoPeer || s.src == algo::kNoBuf))
    return fail(ncclInvalidArgument, "executor: op %d: a reduce step needs both a recv and a src", lw.op);
  return ncclSuccess;
}

// One kernel to enqueue: its type, grid and packed work.
struct PackedKernel {
  ElemType type;
  unsigned nBlocks = 0;
  std::vector<unsigned char> blob;
  WorkIndex index{};
};

// Packs the kernel for the lanes whose ops run in kernel type `type` (no CUDA calls).
ncclResult_t packKernel(const Launch& w, const Tables& t, ElemType type, const std::vector<int>& laneIds,
                        std::vector<PackedKernel>* out) {
  std::vector<DevLane> lanes;
  std::vector<DevOp> ops;
  std::vector<void*> buffers;
  std::vector<DevStep> steps;
  std::map<int, uint32_t> opSlot;  // launch op index -> index in `ops`
  for (int id : laneIds) {
    const LaneWork& lw = w.lanes[id];
    const OpWork& op = w.ops[lw.op];
    auto [it, added] = opSlot.emplace(lw.op, uint32_t(ops.size()));
    if (added) {
      DevOp d{};
      d.scalarBits = op.red.scalarBits;
      d.deviceScalar = op.red.deviceScalar;
      d.firstBuffer = uint32_t(buffers.size());
      d.nBuffers = uint32_t(op.buffers.size());
      d.nRanks = op.red.nRanks;
      d.kind = op.reduces ? uint8_t(op.red.kind) : uint8_t(RedKind::Sum);
      d.reduces = op.reduces ? 1 : 0;
      ops.push_back(d);
      buffers.insert(buffers.end(), op.buffers.begin(), op.buffers.end());
    }
    const size_t scale = op.reduces ? 1 : sizeOfType(op.type);
    DevLane dl{};
    dl.firstStep = uint32_t(steps.size());
    dl.op = it->second;
    for (const algo::Step& s : lw.lane->steps) {
      if (s.count == 0) continue;
      DevStep ds;
      BRAID_CHECK(convertStep(w, t, lw, s, scale, &ds));
      steps.push_back(ds);
    }
    dl.nSteps = uint32_t(steps.size() - dl.firstStep);
    if (dl.nSteps > 0) lanes.push_back(dl);
  }
  if (lanes.empty()) return ncclSuccess;

  PackedKernel k;
  k.type = type;
  k.nBlocks = unsigned(lanes.size());
  std::vector<unsigned char>& blob = k.blob;
  k.index.lanes = appendTable(blob, lanes);
  k.index.ops = appendTable(blob, ops);
  k.index.buffers = appendTable(blob, buffers);
  k.index.sends = appendTable(blob, t.sends);
  k.index.recvs = appendTable(blob, t.recvs);
  k.index.steps = appendTable(blob, steps);
  k.index.nLanes = uint32_t(lanes.size());
  k.index.nOps = uint32_t(ops.size());
  k.index.nSends = uint32_t(t.sends.size());
  k.index.nRecvs = uint32_t(t.recvs.size());
  blob.resize((blob.size() + 15) & ~size_t(15));
  out->push_back(std::move(k));
  return ncclSuccess;
}

// Enqueues one packed kernel (and its upload, when the work does not fit the parameters).
ncclResult_t enqueueKernel(const Launch& w, const Tables& t, const PackedKernel& k) {
  const std::vector<unsigned char>& blob = k.blob;
  KernelParams params;
  std::memset(&params, 0, sizeof(params));
  params.index = k.index;
  params.abortFlag = w.abortFlag;
  params.errorOut = w.errorOut;
  params.slotBytes = t.slotBytes;
  params.nSlots = t.nSlots;
  params.flags = w.peersOnThisGpu ? kPeersOnThisGpu : 0;
  params.slicesPerStep = effectiveSlicesPerStep(uint32_t(w.slicesPerStep), t.nSlots);

  unsigned char* spilled = nullptr;
  cudaError_t e = cudaSuccess;
  if (blob.size() <= kInlineWorkBytes) {
    std::memcpy(params.inlineWork, blob.data(), blob.size());
  } else {
    e = cudaMallocAsync(reinterpret_cast<void**>(&spilled), blob.size(), w.stream);
    if (e != cudaSuccess) return fail(ncclUnhandledCudaError, "executor: cudaMallocAsync(%zu) for the work: %s", blob.size(), cudaGetErrorString(e));
    for (size_t off = 0; off < blob.size() && e == cudaSuccess; off += kUploadChunkBytes) {
      UploadParams up;
      up.dst = spilled + off;
      up.bytes = uint32_t(std::min(kUploadChunkBytes, blob.size() - off));
      std::memcpy(up.data, blob.data() + off, up.bytes);
      e = launchUpload(up, w.stream);
    }
    params.spilledWork = spilled;
  }
  if (e == cudaSuccess) e = kExecutorLaunchers[int(k.type)](params, k.nBlocks, unsigned(w.threadsPerBlock), w.stream);
  if (spilled != nullptr) {
    cudaError_t f = cudaFreeAsync(spilled, w.stream);
    if (e == cudaSuccess) e = f;
  }
  if (e != cudaSuccess) return fail(ncclUnhandledCudaError, "executor: kernel launch (%u lanes, %zu work bytes): %s", k.nBlocks, blob.size(), cudaGetErrorString(e));
  return ncclSuccess;
}

// The connections (direction, channel, peer) that an op's lanes use on this rank.
std::set<std::tuple<int, int, int>> connectionsOf(const Launch& w, const std::vector<int>& laneIds) {
  std::set<std::tuple<int, int, int>> used;
  for (int id : laneIds) {
    const algo::Lane& lane = *w.lanes[id].lane;
    for (const algo::Step& s : lane.steps) {
      if (s.count == 0) continue;
      if (s.sendPeer != algo::kNoPeer) used.emplace(0, lane.channel, s.sendPeer);
      if (s.recvPeer != algo::kNoPeer) used.emplace(1, lane.channel, s.recvPeer);
    }
  }
  return used;
}

}  // namespace

size_t inlineWorkCapacity() { return kInlineWorkBytes; }

ncclResult_t preloadKernels(int cudaDev) {
  // Every launch asks: once loaded, a device is one atomic load away (devices 0..63).
  static std::atomic<uint64_t> loadedMask{0};
  const uint64_t bit = cudaDev >= 0 && cudaDev < 64 ? uint64_t(1) << cudaDev : 0;
  if (bit != 0 && (loadedMask.load(std::memory_order_acquire) & bit) != 0) return ncclSuccess;
  static std::mutex mutex;
  static std::set<int> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded.count(cudaDev) > 0) return ncclSuccess;
  DeviceScope scope(cudaDev);
  if (scope.error() != cudaSuccess) return deviceFail(cudaDev, scope.error());
  cudaError_t e = preloadAllKernels();
  if (e != cudaSuccess) return fail(ncclUnhandledCudaError, "executor: loading the kernels on device %d: %s", cudaDev, cudaGetErrorString(e));
  loaded.insert(cudaDev);
  loadedMask.fetch_or(bit, std::memory_order_release);
  return ncclSuccess;
}

ncclResult_t launch(const Launch& w) {
  if (w.threadsPerBlock < 32 || w.threadsPerBlock > 512 || w.threadsPerBlock % 32 != 0)
    return fail(ncclInvalidArgument, "executor: threadsPerBlock %d; need a multiple of 32 in [32, 512]", w.threadsPerBlock);
  if (w.slicesPerStep < 1 || w.slicesPerStep > 64)
    return fail(ncclInvalidArgument, "executor: slicesPerStep %d; need 1..64", w.slicesPerStep);
  std::vector<std::vector<int>> lanesOfOp(w.ops.size());
  for (size_t i = 0; i < w.lanes.size(); ++i) {
    const LaneWork& lw = w.lanes[i];
    if (lw.lane == nullptr || lw.op < 0 || size_t(lw.op) >= w.ops.size())
      return fail(ncclInvalidArgument, "executor: lane %zu names op %d of %zu, or has no steps", i, lw.op, w.ops.size());
    if (!validDataType(w.ops[lw.op].type))
      return fail(ncclInvalidArgument, "executor: op %d has data type %d", lw.op, int(w.ops[lw.op].type));
    lanesOfOp[lw.op].push_back(int(i));
  }
  Tables tables;
  BRAID_CHECK(buildConnTables(w, &tables));

  // Kernels in (type, op) order. Ops of one type share a kernel unless they use a common
  // connection: a connection has one sending and one receiving lane at a time, so such an
  // op waits for the next kernel. Every rank sees the ops in the same order and each
  // kernel holds whole ops, so no kernel waits on work enqueued after it. Everything is
  // packed (and checked) before anything is enqueued.
  std::vector<PackedKernel> kernels;
  for (int type = 0; type < kNumElemTypes; ++type) {
    std::vector<int> batch;
    std::set<std::tuple<int, int, int>> batchConns;
    for (size_t op = 0; op < w.ops.size(); ++op) {
      if (lanesOfOp[op].empty() || int(kernelTypeOf(w.ops[op])) != type) continue;
      auto conns = connectionsOf(w, lanesOfOp[op]);
      bool clash = std::any_of(conns.begin(), conns.end(), [&](const auto& c) { return batchConns.count(c) > 0; });
      if (clash) {
        BRAID_CHECK(packKernel(w, tables, static_cast<ElemType>(type), batch, &kernels));
        batch.clear();
        batchConns.clear();
      }
      batch.insert(batch.end(), lanesOfOp[op].begin(), lanesOfOp[op].end());
      batchConns.insert(conns.begin(), conns.end());
    }
    if (!batch.empty()) BRAID_CHECK(packKernel(w, tables, static_cast<ElemType>(type), batch, &kernels));
  }
  if (kernels.empty()) return ncclSuccess;
  BRAID_CHECK(preloadKernels(w.cudaDev));
  DeviceScope scope(w.cudaDev);
  if (scope.error() != cudaSuccess) return deviceFail(w.cudaDev, scope.error());
  for (const PackedKernel& k : kernels) BRAID_CHECK(enqueueKernel(w, tables, k));
  return ncclSuccess;
}

}  // namespace braid::kernels
