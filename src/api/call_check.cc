#include "api/call_check.h"

#include <algorithm>
#include <string>

#include "core/comm.h"
#include "core/env.h"
#include "core/log.h"
#include "transport/host_fifo.h"

namespace braid::api {
namespace {

constexpr uint32_t kCheckMagic = 0x43484b31;  // "CHK1"
constexpr int kShownCalls = 4;                // calls of a group named one by one in the message

// What one rank's group of collectives on a communicator is. Fixed size: one FIFO slice.
struct CheckMessage {
  uint32_t magic = kCheckMagic;
  uint32_t nCalls = 0;
  uint64_t digest = 0;          // of every call, so that long groups are compared in full
  CallDesc calls[kShownCalls];  // the first ones, to name them in the error
};

uint64_t digestOf(std::span<const CallDesc> descs) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (const CallDesc& d : descs) {
    mix(d.seq);
    mix(d.kind);
    mix(d.count);
    mix(d.type);
    mix(static_cast<uint32_t>(d.root));
    mix(d.op >= ncclNumOps ? uint32_t(ncclNumOps) : static_cast<uint32_t>(d.op));  // user ops: only "some PreMulSum"
    mix(d.onDevice);
  }
  return h;
}

CallKind kindOf(const Task& t) {
  switch (t.coll) {
    case algo::Coll::AllReduce: return CallKind::AllReduce;
    case algo::Coll::Broadcast: return CallKind::Broadcast;
    case algo::Coll::Reduce: return CallKind::Reduce;
    case algo::Coll::AllGather: return CallKind::AllGather;
    case algo::Coll::ReduceScatter: return CallKind::ReduceScatter;
    case algo::Coll::AlltoAll: return CallKind::AlltoAll;
    case algo::Coll::Gather: return CallKind::Gather;
    case algo::Coll::Scatter: return CallKind::Scatter;
    case algo::Coll::SendRecv: return t.isSend ? CallKind::Send : CallKind::Recv;
  }
  return CallKind::AllReduce;
}

// Whether a group's data checks it: with a count, each of these makes every rank receive data
// that depends on every rank's input, so a rank that differs is refused by some receiver's slot
// signature, or no rank finishes.
bool dataChecks(std::span<const CallDesc> colls) {
  return std::all_of(colls.begin(), colls.end(), [](const CallDesc& d) {
    const auto k = static_cast<CallKind>(d.kind);
    return d.count > 0 && (k == CallKind::AllReduce || k == CallKind::AllGather || k == CallKind::ReduceScatter ||
                           k == CallKind::AlltoAll);
  });
}

// Whether the check message from rank `from` to rank `to` goes late (host/engine.h CheckLane):
// both ends decide alike. Only on communicators across hosts, where it saves a network message
// per call, and never into the FIFO of a rank of the same process: that one is the receiver's
// memory, which it frees when it destroys its communicator, possibly before a late message
// comes (another process's FIFO stays mapped in the sender; a UCX peer that is gone drops it).
bool lateEdge(const ncclComm* comm, int from, int to, bool byData) {
  return byData && comm->net != nullptr && comm->peers[size_t(from)].processHash != comm->peers[size_t(to)].processHash;
}

bool rootedKind(CallKind k) {
  return k == CallKind::Broadcast || k == CallKind::Reduce || k == CallKind::Gather || k == CallKind::Scatter ||
         k == CallKind::Send || k == CallKind::Recv;
}

}  // namespace

// A message rides on a data slot's header where it fits (host/engine.h CheckLane).
static_assert(sizeof(CheckMessage) <= kSlotCheckBytes);

struct CallCheck::Lane {
  host::OpContext ctx;
  CheckMessage mine, theirs;
  algo::Step send, recv;
  host::CheckLane ride;
  ncclComm* comm = nullptr;
  int prev = -1;
};

CallCheck::CallCheck() = default;
CallCheck::~CallCheck() = default;

CallDesc callDescOf(const Task& t) {
  CallDesc d;
  CallKind k = kindOf(t);
  d.kind = static_cast<uint8_t>(k);
  d.count = t.count;
  d.type = static_cast<uint8_t>(t.type);
  d.root = rootedKind(k) ? t.root : -1;
  d.op = algo::collReduces(t.coll) ? static_cast<int32_t>(t.op) : -1;
  d.onDevice = t.onDevice;
  return d;
}

bool checkDeviceCalls() {
  static const bool on = env::getInt("BRAID_CHECK_CALLS", 0) > 0;
  return on;
}

bool checkHostCalls() {
  static const bool on = env::getInt("BRAID_CHECK_CALLS", 0) >= 0;
  return on;
}

void CallCheck::add(ncclComm* comm, std::span<const CallDesc> descs, std::vector<host::LaneProgram>* programs) {
  if (comm->nRanks == 1) return;
  size_t n = 0;
  for (const CallDesc& d : descs)
    if (d.seq != 0) ++n;
  if (n == 0) return;
  Lane& l = *lanes_.emplace_back(std::make_unique<Lane>());
  l.comm = comm;
  l.prev = (comm->rank + comm->nRanks - 1) % comm->nRanks;
  std::vector<CallDesc> colls;
  for (const CallDesc& d : descs)
    if (d.seq != 0) colls.push_back(d);
  l.mine.nCalls = static_cast<uint32_t>(colls.size());
  l.mine.digest = digestOf(colls);
  for (size_t i = 0; i < colls.size() && i < kShownCalls; ++i) l.mine.calls[i] = colls[i];
  l.theirs = CheckMessage{};
  // The engine moves the messages itself (host/engine.h CheckLane); the steps say which
  // connections the lane needs and what it waits for (hang reports), the context its call.
  l.ctx.caller = callName(static_cast<CallKind>(colls.front().kind));
  l.send.sendPeer = (comm->rank + 1) % comm->nRanks;
  l.send.count = sizeof(CheckMessage);
  l.recv.recvPeer = l.prev;
  l.recv.count = sizeof(CheckMessage);
  // The message rides on the group's first data slot where that goes to the successor first
  // thing (a ring, a 2-rank exchange): the channel's data lane whose first step is a send there
  // that waits for nothing.
  l.ride.pred = l.prev;
  l.ride.succ = l.send.sendPeer;
  l.ride.seq = colls.front().seq;
  l.ride.mine = &l.mine;
  l.ride.theirs = &l.theirs;
  l.ride.bytes = sizeof(CheckMessage);
  const bool byData = dataChecks(colls);
  l.ride.lateToSucc = lateEdge(comm, comm->rank, l.ride.succ, byData);
  l.ride.lateFromPred = lateEdge(comm, l.prev, comm->rank, byData);
  if (l.ride.lateToSucc) comm->checksByData.fetch_add(1, std::memory_order_relaxed);
  for (host::LaneProgram& p : *programs)
    if (!l.ride.rides && !l.ride.lateToSucc && p.comm == comm && p.channel == kCheckChannel && !p.steps.empty() &&
        p.carries == nullptr && p.steps.front().second->sendPeer == l.ride.succ && p.steps.front().second->recvPeer < 0) {
      p.carries = &l.ride;
      l.ride.rides = true;
    }
  host::LaneProgram prog{comm, kCheckChannel, {{&l.ctx, &l.send}, {&l.ctx, &l.recv}}, {}};
  prog.check = &l.ride;
  Lane* lane = &l;
  prog.onFinish = [lane]() -> ncclResult_t {
    const CheckMessage& a = lane->mine;
    const CheckMessage& b = lane->theirs;
    if (b.magic == kCheckMagic && a.nCalls == b.nCalls && a.digest == b.digest) return ncclSuccess;
    ncclComm* c = lane->comm;
    std::string text;
    CallDesc mineShown{}, theirsShown{};
    if (b.magic != kCheckMagic) {
      text = "rank " + std::to_string(lane->prev) + " sent no call description (a corrupted check message)";
    } else {
      size_t i = 0;
      while (i < a.nCalls && i < b.nCalls && i < kShownCalls && sameCall(a.calls[i], b.calls[i])) ++i;
      if (i < a.nCalls && i < b.nCalls && i < kShownCalls) {
        mineShown = a.calls[i];
        theirsShown = b.calls[i];
        text = "rank " + std::to_string(c->rank) + " called " + describeCall(mineShown) + " while rank " +
               std::to_string(lane->prev) + " called " + describeCall(theirsShown);
      } else {
        mineShown = a.calls[0];
        theirsShown = b.calls[0];
        text = "rank " + std::to_string(c->rank) + " issued a group of " + std::to_string(a.nCalls) +
               " collective(s) from " + describeCall(a.calls[0]) + " while rank " + std::to_string(lane->prev) +
               " issued " + std::to_string(b.nCalls) + " from " + describeCall(b.calls[0]) + ", which differ";
      }
    }
    text += ": the ranks issued mismatched collectives. Fix: call the same collectives with the same count, type, "
            "op and root, in the same order, on every rank.";
    markCommFailed(c, ncclInvalidUsage, text.c_str());
    if (c->liveness) c->liveness->announceMismatch(mineShown, lane->prev, theirsShown);
    return fail(ncclInvalidUsage, "%s (rank %d): %s", lane->ctx.caller, c->rank, text.c_str());
  };
  // First, so that each pass of the engine takes the check before the data: a mismatch is then
  // named by the check (both calls) rather than by a data slot's signature (one call).
  programs->insert(programs->begin(), std::move(prog));
}

}  // namespace braid::api
