#include "kernels/pack.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>

#include "core/log.h"
#include "core/numeric.h"

namespace braid::kernels {
namespace {

using algo::Protocol;

using ConnKey = std::pair<int, int>;  // (channel, peer)

// ElemType mirrors ncclDataType_t (kernelTypeOf converts by value).
#define BRAID_SAME_CODE(T, NCCL) static_assert(int(ElemType::T) == int(NCCL), "ElemType::" #T " must equal " #NCCL);
BRAID_ELEM_TYPES(BRAID_SAME_CODE)
#undef BRAID_SAME_CODE
static_assert(kNumElemTypes == int(ncclNumTypes), "one kernel type per ncclDataType_t");

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

// Connection ends in the launch's order, and a sorted index for finding one by key.
struct ConnTable {
  std::vector<std::pair<ConnKey, int16_t>> index;  // sorted by key
  int16_t find(ConnKey key) const {
    auto it = std::lower_bound(index.begin(), index.end(), std::make_pair(key, int16_t(-1)));
    return it != index.end() && it->first == key ? it->second : kNoConn;
  }
};

struct Tables {
  std::vector<DevSendEnd> sends;
  std::vector<DevRecvEnd> recvs;
  ConnTable sendIndex, recvIndex;
  uint32_t slotBytes = 0, nSlots = 0;
};

ncclResult_t checkSlots(Tables& t, Protocol protocol, uint32_t slotBytes, uint32_t nSlots, bool ordered128,
                        int channel, int peer) {
  const uint32_t unit = protocol == Protocol::LL128 ? kLL128LineBytes : 16;
  if (!shapeFits(protocol, {slotBytes, nSlots}))
    return fail(ncclInvalidArgument, "executor: %s connection (channel %d, peer %d) has %u slots of %u bytes; need at least one slot of a multiple of %u bytes",
                algo::protocolName(protocol), channel, peer, nSlots, slotBytes, unit);
  // 128-byte lines carry their flag in the same store as their data: safe only where such a
  // store arrives whole and in order (proto_ll128.cuh). Anywhere else LL128 hands over stale data.
  if (protocol == Protocol::LL128 && !ordered128)
    return fail(ncclInvalidArgument, "executor: LL128 on connection (channel %d, peer %d), which does not carry 128-byte stores whole and in order (not on this GPU or NVLink, or staged in host memory); run it with Simple or LL",
                channel, peer);
  if (t.slotBytes == 0) {
    t.slotBytes = slotBytes;
    t.nSlots = nSlots;
  } else if (t.slotBytes != slotBytes || t.nSlots != nSlots) {
    return fail(ncclInvalidArgument, "executor: connections of one launch must share one FIFO shape (%u x %u bytes, but (channel %d, peer %d) has %u x %u)",
                t.nSlots, t.slotBytes, channel, peer, nSlots, slotBytes);
  }
  return ncclSuccess;
}

ncclResult_t sortIndex(ConnTable& table, const char* what) {
  std::sort(table.index.begin(), table.index.end());
  auto twice = std::adjacent_find(table.index.begin(), table.index.end(),
                                  [](const auto& a, const auto& b) { return a.first == b.first; });
  if (twice != table.index.end())
    return fail(ncclInvalidArgument, "executor: %s connection (channel %d, peer %d) given twice", what, twice->first.first,
                twice->first.second);
  return ncclSuccess;
}

ncclResult_t buildConnTables(const Launch& w, Tables* t) {
  if (w.sends.size() + w.recvs.size() > 0x7fff) return fail(ncclInvalidArgument, "executor: too many connections (%zu)", w.sends.size() + w.recvs.size());
  t->sends.reserve(w.sends.size());
  t->sendIndex.index.reserve(w.sends.size());
  for (const SendConn& c : w.sends) {
    BRAID_CHECK(checkSlots(*t, w.protocol, c.end.slotBytes, c.end.nSlots, c.end.ordered128, c.channel, c.peer));
    if (c.end.peerFifo == nullptr || c.end.peerTail == nullptr || c.end.localHead == nullptr)
      return fail(ncclInvalidArgument, "executor: send connection (channel %d, peer %d) has a null pointer", c.channel, c.peer);
    t->sendIndex.index.push_back({ConnKey{c.channel, c.peer}, int16_t(t->sends.size())});
    t->sends.push_back(DevSendEnd{c.end.peerFifo, c.end.peerTail, c.end.localHead, c.end.slotSizes});
  }
  t->recvs.reserve(w.recvs.size());
  t->recvIndex.index.reserve(w.recvs.size());
  for (const RecvConn& c : w.recvs) {
    BRAID_CHECK(checkSlots(*t, w.protocol, c.end.slotBytes, c.end.nSlots, c.end.ordered128, c.channel, c.peer));
    if (c.end.localFifo == nullptr || c.end.localTail == nullptr || c.end.peerHead == nullptr)
      return fail(ncclInvalidArgument, "executor: recv connection (channel %d, peer %d) has a null pointer", c.channel, c.peer);
    t->recvIndex.index.push_back({ConnKey{c.channel, c.peer}, int16_t(t->recvs.size())});
    t->recvs.push_back(DevRecvEnd{c.end.localFifo, c.end.localTail, c.end.peerHead});
  }
  BRAID_CHECK(sortIndex(t->sendIndex, "send"));
  return sortIndex(t->recvIndex, "recv");
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
    out->recvConn = t.recvIndex.find({channel, s.recvPeer});
    if (out->recvConn == kNoConn)
      return fail(ncclInvalidArgument, "executor: a step receives from rank %d on channel %d, but the launch has no such connection", s.recvPeer, channel);
  }
  if (s.sendPeer != algo::kNoPeer) {
    out->sendConn = t.sendIndex.find({channel, s.sendPeer});
    if (out->sendConn == kNoConn)
      return fail(ncclInvalidArgument, "executor: a step sends to rank %d on channel %d, but the launch has no such connection", s.sendPeer, channel);
  }
  if (s.recvPeer == algo::kNoPeer && s.src == algo::kNoBuf && s.count > 0)
    return fail(ncclInvalidArgument, "executor: op %d: a step has neither a recv nor a src", lw.op);
  if ((s.flags & algo::kReduce) && (s.recvPeer == algo::kNoPeer || s.src == algo::kNoBuf))
    return fail(ncclInvalidArgument, "executor: op %d: a reduce step needs both a recv and a src", lw.op);
  return ncclSuccess;
}

// Every lane's steps, converted once: lane i's are steps[first[i] .. first[i+1]).
struct ConvertedLanes {
  std::vector<DevStep> steps;
  std::vector<uint32_t> first;
  std::vector<std::vector<int16_t>> sendsOfOp, recvsOfOp;  // connections each op's lanes use
};

ncclResult_t convertLanes(const Launch& w, const Tables& t, ConvertedLanes* c) {
  size_t total = 0;
  for (const LaneWork& lw : w.lanes) total += lw.lane->steps.size();
  c->steps.reserve(total);
  c->first.reserve(w.lanes.size() + 1);
  c->sendsOfOp.resize(w.ops.size());
  c->recvsOfOp.resize(w.ops.size());
  for (const LaneWork& lw : w.lanes) {
    c->first.push_back(uint32_t(c->steps.size()));
    const OpWork& op = w.ops[lw.op];
    const size_t scale = op.reduces ? 1 : sizeOfType(op.type);
    for (const algo::Step& s : lw.lane->steps) {
      if (s.count == 0) continue;
      DevStep& d = c->steps.emplace_back();
      BRAID_CHECK(convertStep(w, t, lw, s, scale, &d));
      if (d.sendConn != kNoConn) c->sendsOfOp[lw.op].push_back(d.sendConn);
      if (d.recvConn != kNoConn) c->recvsOfOp[lw.op].push_back(d.recvConn);
    }
  }
  c->first.push_back(uint32_t(c->steps.size()));
  return ncclSuccess;
}

// A kernel's tables, as rows.
struct KernelRows {
  std::vector<DevLane> lanes;
  std::vector<DevOp> ops;
  std::vector<void*> buffers;
  std::vector<DevSendEnd> sends;
  std::vector<DevRecvEnd> recvs;
  std::vector<DevRankWords> words;
  std::vector<DevStep> steps;
};

// Lays the tables out in one blob, each 16-byte aligned, steps last.
void layoutKernel(ElemType type, const KernelRows& r, PackedKernel* k) {
  k->type = type;
  k->nBlocks = unsigned(r.lanes.size());
  std::vector<unsigned char>& blob = k->blob;
  blob.clear();
  blob.reserve(16 * 7 + r.lanes.size() * sizeof(DevLane) + r.ops.size() * sizeof(DevOp) + r.buffers.size() * sizeof(void*) +
               r.sends.size() * sizeof(DevSendEnd) + r.recvs.size() * sizeof(DevRecvEnd) +
               r.words.size() * sizeof(DevRankWords) + r.steps.size() * sizeof(DevStep));
  k->index.lanes = appendTable(blob, r.lanes);
  k->index.ops = appendTable(blob, r.ops);
  k->index.buffers = appendTable(blob, r.buffers);
  k->index.sends = appendTable(blob, r.sends);
  k->index.recvs = appendTable(blob, r.recvs);
  k->index.words = appendTable(blob, r.words);
  k->index.steps = appendTable(blob, r.steps);
  k->index.nLanes = uint32_t(r.lanes.size());
  k->index.nOps = uint32_t(r.ops.size());
  k->index.nSends = uint32_t(r.sends.size());
  k->index.nRecvs = uint32_t(r.recvs.size());
  k->index.nWords = uint32_t(r.words.size());
  blob.resize((blob.size() + 15) & ~size_t(15));
}

// Packs the kernel for `laneIds` (lanes of ops of kernel type `type`).
void packKernel(const Launch& w, const Tables& t, const ConvertedLanes& c, ElemType type,
                const std::vector<int>& laneIds, std::vector<PackedKernel>* out) {
  KernelRows rows;
  std::vector<DevLane>& lanes = rows.lanes;
  std::vector<DevOp>& ops = rows.ops;
  std::vector<void*>& buffers = rows.buffers;
  std::vector<DevStep>& steps = rows.steps;
  lanes.reserve(laneIds.size());
  std::vector<int> opSlot(w.ops.size(), -1);  // launch op index -> index in `ops`
  for (int id : laneIds) {
    const uint32_t begin = c.first[id], end = c.first[id + 1];
    if (begin == end) continue;  // nothing left once empty steps are dropped
    const int opIndex = w.lanes[id].op;
    if (opSlot[opIndex] < 0) {
      const OpWork& op = w.ops[opIndex];
      opSlot[opIndex] = int(ops.size());
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
    DevLane dl{};
    dl.firstStep = uint32_t(steps.size());
    dl.nSteps = end - begin;
    dl.op = uint32_t(opSlot[opIndex]);
    steps.insert(steps.end(), c.steps.begin() + begin, c.steps.begin() + end);
    lanes.push_back(dl);
  }
  if (lanes.empty()) return;
  rows.sends = t.sends;
  rows.recvs = t.recvs;
  layoutKernel(type, rows, &out->emplace_back());
}

}  // namespace

ncclResult_t packLaunch(const Launch& w, PackedLaunch* out) {
  std::vector<std::vector<int>> lanesOfOp(w.ops.size());
  for (size_t i = 0; i < w.lanes.size(); ++i) {
    const LaneWork& lw = w.lanes[i];
    if (lw.lane == nullptr || lw.op < 0 || size_t(lw.op) >= w.ops.size())
      return fail(ncclInvalidArgument, "executor: lane %zu names op %d of %zu, or has no steps", i, lw.op, w.ops.size());
    if (!validDataType(w.ops[lw.op].type))
      return fail(ncclInvalidArgument, "executor: op %d has data type %d", lw.op, int(w.ops[lw.op].type));
    lanesOfOp[lw.op].push_back(int(i));
  }
  if (int(w.protocol) >= algo::kNumProtocols)
    return fail(ncclInvalidArgument, "executor: protocol %d; need LL, LL128 or Simple", int(w.protocol));
  Tables tables;
  BRAID_CHECK(buildConnTables(w, &tables));
  ConvertedLanes converted;
  BRAID_CHECK(convertLanes(w, tables, &converted));

  // Every rank sees the ops in the same order and each kernel holds whole ops, so no kernel
  // waits on work enqueued after it. A connection's stamp is the batch that last used it.
  std::vector<uint32_t> sendStamp(tables.sends.size(), 0), recvStamp(tables.recvs.size(), 0);
  uint32_t stamp = 0;
  out->kernels.clear();
  for (int type = 0; type < kNumElemTypes; ++type) {
    std::vector<int> batch;
    ++stamp;
    for (size_t op = 0; op < w.ops.size(); ++op) {
      if (lanesOfOp[op].empty() || int(kernelTypeOf(w.ops[op])) != type) continue;
      const auto& sends = converted.sendsOfOp[op];
      const auto& recvs = converted.recvsOfOp[op];
      bool clash = std::any_of(sends.begin(), sends.end(), [&](int16_t s) { return sendStamp[s] == stamp; }) ||
                   std::any_of(recvs.begin(), recvs.end(), [&](int16_t r) { return recvStamp[r] == stamp; });
      if (clash) {
        packKernel(w, tables, converted, static_cast<ElemType>(type), batch, &out->kernels);
        batch.clear();
        ++stamp;
      }
      batch.insert(batch.end(), lanesOfOp[op].begin(), lanesOfOp[op].end());
      for (int16_t s : sends) sendStamp[s] = stamp;
      for (int16_t r : recvs) recvStamp[r] = stamp;
    }
    if (!batch.empty()) packKernel(w, tables, converted, static_cast<ElemType>(type), batch, &out->kernels);
  }
  out->protocol = w.protocol;
  out->slotBytes = tables.slotBytes;
  out->nSlots = tables.nSlots;
  return ncclSuccess;
}

std::vector<uint32_t> pointerOffsets(const PackedKernel& k) {
  std::vector<uint32_t> out;
  auto note = [&](size_t offset) {
    void* p = nullptr;
    std::memcpy(&p, k.blob.data() + offset, sizeof(p));
    if (p != nullptr) out.push_back(uint32_t(offset));
  };
  uint32_t nBuffers = 0;
  for (uint32_t i = 0; i < k.index.nOps; ++i) {
    const size_t at = k.index.ops + i * sizeof(DevOp);
    DevOp op;
    std::memcpy(&op, k.blob.data() + at, sizeof(op));
    note(at + offsetof(DevOp, deviceScalar));
    nBuffers = std::max(nBuffers, op.firstBuffer + op.nBuffers);
  }
  for (uint32_t i = 0; i < nBuffers; ++i) note(k.index.buffers + i * sizeof(void*));
  for (uint32_t i = 0; i < k.index.nSends; ++i) {
    const size_t at = k.index.sends + i * sizeof(DevSendEnd);
    for (size_t f : {offsetof(DevSendEnd, fifo), offsetof(DevSendEnd, tail), offsetof(DevSendEnd, head),
                     offsetof(DevSendEnd, sizes)})
      note(at + f);
  }
  for (uint32_t i = 0; i < k.index.nRecvs; ++i) {
    const size_t at = k.index.recvs + i * sizeof(DevRecvEnd);
    for (size_t f : {offsetof(DevRecvEnd, fifo), offsetof(DevRecvEnd, tail), offsetof(DevRecvEnd, head)}) note(at + f);
  }
  for (uint32_t i = 0; i < k.index.nWords; ++i) {
    const size_t at = k.index.words + i * sizeof(DevRankWords);
    for (size_t f : {offsetof(DevRankWords, abortFlag), offsetof(DevRankWords, errorOut)}) note(at + f);
  }
  return out;
}

ncclResult_t mergeKernels(const std::vector<MergePart>& parts, PackedKernel* out) {
  if (parts.empty()) return fail(ncclInvalidArgument, "executor: merging no kernels");
  KernelRows all;
  for (size_t i = 0; i < parts.size(); ++i) {
    const PackedKernel& k = *parts[i].kernel;
    if (k.type != parts[0].kernel->type)
      return fail(ncclInvalidArgument, "executor: merging kernels of element types %d and %d", int(parts[0].kernel->type), int(k.type));
    KernelRows part;
    bool ok = readTable(k, k.index.lanes, k.index.nLanes, &part.lanes) && readTable(k, k.index.ops, k.index.nOps, &part.ops) &&
              readTable(k, k.index.sends, k.index.nSends, &part.sends) &&
              readTable(k, k.index.recvs, k.index.nRecvs, &part.recvs) && k.index.nWords == 0;
    uint64_t nBuffers = 0, nSteps = 0;
    for (const DevOp& op : part.ops) nBuffers = std::max(nBuffers, uint64_t(op.firstBuffer) + op.nBuffers);
    for (const DevLane& lane : part.lanes) {
      nSteps = std::max(nSteps, uint64_t(lane.firstStep) + lane.nSteps);
      ok = ok && lane.op < part.ops.size() && lane.words == 0;
    }
    ok = ok && readTable(k, k.index.buffers, nBuffers, &part.buffers) && readTable(k, k.index.steps, nSteps, &part.steps);
    if (all.sends.size() + part.sends.size() + all.recvs.size() + part.recvs.size() > 0x7fff)
      return fail(ncclInvalidArgument, "executor: too many connections in a merged launch");
    for (const DevStep& s : part.steps)
      ok = ok && s.sendConn < int16_t(part.sends.size()) && s.recvConn < int16_t(part.recvs.size()) &&
           s.sendConn >= kNoConn && s.recvConn >= kNoConn;
    if (!ok) return fail(ncclInvalidArgument, "executor: part %zu of a merged launch is malformed (a table or an index outside its work)", i);
    uint32_t wordsIndex = 0;  // the launch's own
    if (parts[i].words.abortFlag != nullptr || parts[i].words.errorOut != nullptr) {
      all.words.push_back(parts[i].words);
      wordsIndex = uint32_t(all.words.size());
    }
    for (DevLane lane : part.lanes) {
      lane.firstStep += uint32_t(all.steps.size());
      lane.op += uint32_t(all.ops.size());
      lane.words = wordsIndex;
      all.lanes.push_back(lane);
    }
    for (DevOp op : part.ops) {
      op.firstBuffer += uint32_t(all.buffers.size());
      all.ops.push_back(op);
    }
    for (DevStep s : part.steps) {
      if (s.sendConn != kNoConn) s.sendConn = int16_t(s.sendConn + all.sends.size());
      if (s.recvConn != kNoConn) s.recvConn = int16_t(s.recvConn + all.recvs.size());
      all.steps.push_back(s);
    }
    all.buffers.insert(all.buffers.end(), part.buffers.begin(), part.buffers.end());
    all.sends.insert(all.sends.end(), part.sends.begin(), part.sends.end());
    all.recvs.insert(all.recvs.end(), part.recvs.begin(), part.recvs.end());
  }
  layoutKernel(parts[0].kernel->type, all, out);
  return ncclSuccess;
}

}  // namespace braid::kernels
