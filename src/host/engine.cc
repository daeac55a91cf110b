#include "host/engine.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "core/comm.h"
#include "core/env.h"
#include "core/log.h"
#include "transport/host_fifo.h"
#include "transport/host_transport.h"
#include "transport/ucx_net.h"

namespace braid::host {
namespace {

using Clock = std::chrono::steady_clock;

// How long a lane blocked only on live peers keeps waiting after another rank's death.
constexpr double kLiveWaitAfterDeathSeconds = 1.0;
// How long a run makes no progress before its late call check messages go (CheckLane):
// far above a small call's time (tens of us), far below a hang report's. BRAID_CHECK_LATE_US
// (tests: 0 sends them in nearly every call).
std::chrono::microseconds lateCheckAfter() {
  static const std::chrono::microseconds after(env::getInt("BRAID_CHECK_LATE_US", 1000));
  return after;
}

struct LaneState {
  LaneProgram* program;
  size_t step = 0;
  uint64_t done = 0;   // elements of the current step already processed
  bool finished = false;
  bool carried = false;  // its first slot went, with the call check's message if it carries one
  bool compared = false;  // a check lane: the predecessor's message arrived and was compared
};

static_assert(sizeof(CallDesc) <= kSlotCheckBytes, "a data slot's header carries its sender's call");

// Whether the run waits for this lane: a data lane, or a check lane with a message to send or
// to take on an edge that is not late.
bool holdsRun(const LaneState& st) {
  const CheckLane* ck = st.program->check;
  return ck == nullptr || (!ck->lateToSucc && st.step == 0) || (!ck->lateFromPred && !ck->arrived);
}

// A late message of an earlier call (CheckLane): its call ended here without it.
bool staleFor(const CheckLane& ck, const SlotHeader& h) {
  return h.signature == kLateCheckSlotSignature && h.checkSeq < ck.seq;
}

// A slot from `from` on `channel` that carries the call check's message: it is the
// predecessor's message for that communicator's check lane (in call order: a rank's messages
// and data travel on one FIFO). True when a check lane took it now.
bool takeCheck(const std::vector<LaneProgram*>& checkLanes, const ncclComm* comm, int channel, int from,
               const SlotHeader& h) {
  bool taken = false;
  for (LaneProgram* p : checkLanes) {
    CheckLane& ck = *p->check;
    if (p->comm == comm && p->channel == channel && ck.pred == from && !ck.arrived && !staleFor(ck, h)) {
      std::memcpy(ck.theirs, h.check, ck.bytes);
      ck.arrived = taken = true;
    }
  }
  return taken;
}

// The call check's lane: its message in a slot of its own unless it rides on a data slot (on a
// late edge only once the run has `stalled`), then the predecessor's, from the head of its
// FIFO (a slot of its own is taken; a data slot it rides on stays for the data lane), compared
// as soon as it is there. Done when both are. Returns what moved.
int advanceCheck(LaneState& st, bool stalled, ncclResult_t* error) {
  LaneProgram& prog = *st.program;
  CheckLane& ck = *prog.check;
  ncclComm* comm = prog.comm;
  int moved = 0;
  if (st.step == 0 && (!ck.lateToSucc || stalled)) {
    if (!ck.rides) {
      HostConnection* sc = comm->host->sendConn(prog.channel, ck.succ);
      FifoControl* sctl = FifoLayout::control(sc->base);
      if (sc->posted - sctl->head.load(std::memory_order_acquire) >= kFifoSlots) return 0;
      SlotHeader& h = sctl->headers[sc->posted % kFifoSlots];
      h.bytes = 0;
      h.signature = ck.lateToSucc ? kLateCheckSlotSignature : kCheckSlotSignature;
      h.credit = 0;
      h.checkSeq = ck.seq;
      std::memcpy(h.check, ck.mine, ck.bytes);
      sctl->tail.store(++sc->posted, std::memory_order_release);
    }
    (ck.rides ? comm->checksRode : ck.lateToSucc ? comm->checksLate : comm->checksAlone).fetch_add(1, std::memory_order_relaxed);
    st.step = 1;
    ++moved;
  }
  HostConnection* rc = comm->host->recvConn(prog.channel, ck.pred);
  FifoControl* rctl = FifoLayout::control(rc->base);
  while (!ck.arrived && rctl->tail.load(std::memory_order_acquire) > rc->consumed) {
    const SlotHeader& h = rctl->headers[rc->consumed % kFifoSlots];
    if (h.checkSeq == 0) break;  // data without a message: a data lane's, or a mismatch that it names
    if (ck.lateFromPred && h.checkSeq > ck.seq) break;  // the predecessor has finished this call: its next one's
    if (!staleFor(ck, h)) {
      std::memcpy(ck.theirs, h.check, ck.bytes);
      ck.arrived = true;
    }
    if (!isCheckSlot(h.signature)) break;  // a data slot it rides on stays for the data lane
    rctl->head.store(++rc->consumed, std::memory_order_release);
    ++moved;
  }
  if (ck.arrived && !std::exchange(st.compared, true) && prog.onFinish) {
    *error = prog.onFinish();
    if (*error != ncclSuccess) return moved;
  }
  if (st.step == 0 || !ck.arrived) return moved;
  st.step = prog.steps.size();
  st.finished = true;
  return moved + 1;
}

bool opHasPre(const OpContext& ctx, const algo::Step& s) {
  return ctx.reduces && ctx.op.kind == HostOpKind::PreMulSum && s.src != algo::kNoBuf && ctx.bufIsInput[s.src];
}
bool opHasPost(const OpContext& ctx, const algo::Step& s) {
  return ctx.reduces && ctx.op.kind == HostOpKind::SumPostDiv && (s.flags & algo::kFinal);
}

// Which sides of a lane's current step cannot go on: no data yet from its recv peer, no free
// slot towards its send peer.
struct Blocked {
  bool recv = false, send = false;
};
Blocked blockedSides(const LaneState& st) {
  const LaneProgram& prog = *st.program;
  const algo::Step& s = *prog.steps[st.step].second;
  Blocked b;
  if (s.recvPeer >= 0) {
    HostConnection* rc = prog.comm->host->recvConn(prog.channel, s.recvPeer);
    b.recv = FifoLayout::control(rc->base)->tail.load(std::memory_order_acquire) <= rc->consumed;
  }
  if (s.sendPeer >= 0) {
    HostConnection* sc = prog.comm->host->sendConn(prog.channel, s.sendPeer);
    b.send = sc->posted - FifoLayout::control(sc->base)->head.load(std::memory_order_acquire) >= kFifoSlots;
  }
  return b;
}

// What a stalled lane waits for, for timeout messages.
std::string describeWait(const LaneState& st) {
  const auto& [ctx, s] = st.program->steps[st.step];
  Blocked b = blockedSides(st);
  if (!b.recv && !b.send) b = {s->recvPeer >= 0, s->sendPeer >= 0};  // between two checks: name both
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s step %zu on channel %d: %s%s%s", ctx->caller, st.step, st.program->channel,
                b.recv ? ("data from rank " + std::to_string(s->recvPeer)).c_str() : "", b.recv && b.send ? " and " : "",
                b.send ? ("space towards rank " + std::to_string(s->sendPeer)).c_str() : "");
  return buf;
}

// Processes as many slices of the lane's current step as are ready. Returns the number of
// slices done; sets *error on a mismatch.
int advance(LaneState& st, const std::vector<LaneProgram*>& checkLanes, bool stalled, ncclResult_t* error) {
  LaneProgram& prog = *st.program;
  if (prog.check != nullptr) return advanceCheck(st, stalled, error);
  ncclComm* comm = prog.comm;
  int slices = 0;
  while (st.step < prog.steps.size() && slices < 4) {
    const OpContext& ctx = *prog.steps[st.step].first;
    const algo::Step& s = *prog.steps[st.step].second;
    if (st.done >= s.count) {
      ++st.step;
      st.done = 0;
      continue;
    }
    uint64_t sliceElems = hostSliceBytes(comm->net != nullptr) / ctx.elemSize;
    uint64_t n = std::min<uint64_t>(sliceElems, s.count - st.done);
    size_t bytes = n * ctx.elemSize;
    HostConnection* rc = s.recvPeer >= 0 ? comm->host->recvConn(prog.channel, s.recvPeer) : nullptr;
    HostConnection* sc = s.sendPeer >= 0 ? comm->host->sendConn(prog.channel, s.sendPeer) : nullptr;
    FifoControl* rctl = rc ? FifoLayout::control(rc->base) : nullptr;
    FifoControl* sctl = sc ? FifoLayout::control(sc->base) : nullptr;
    if (rctl && rctl->tail.load(std::memory_order_acquire) <= rc->consumed) break;
    if (sctl && sc->posted - sctl->head.load(std::memory_order_acquire) >= kFifoSlots) break;
    const char* recvPtr = nullptr;
    if (rctl) {
      const SlotHeader& h = rctl->headers[rc->consumed % kFifoSlots];
      const bool took = h.checkSeq != 0 && takeCheck(checkLanes, comm, prog.channel, s.recvPeer, h);
      if (isCheckSlot(h.signature) && h.checkSeq != 0) {  // a check message of its own: the check lane's
        rctl->head.store(++rc->consumed, std::memory_order_release);
        ++slices;
        continue;
      }
      const bool mismatch = h.bytes != bytes || h.signature != ctx.signature;
      if (mismatch && took) break;  // the check lane compares the message it carried first: it names both calls
      if (mismatch) {
        // The sender's call rides in the header where no check message does (below).
        CallDesc theirs;
        if (h.checkSeq == 0) std::memcpy(&theirs, h.check, sizeof(theirs));
        else theirs.kind = static_cast<uint8_t>(CallKind::Count);  // only its signature is known here
        std::string text = "rank " + std::to_string(comm->rank) + " in " + describeCall(ctx.desc) + " received from rank " +
                           std::to_string(s.recvPeer) + " " + std::to_string(h.bytes) + " bytes of a different call" +
                           (h.checkSeq == 0 ? ", " + describeCall(theirs) : std::string()) + " (" + std::to_string(bytes) +
                           " expected): the ranks called mismatched collectives (a different order, count, type, op or "
                           "root), or a send has no matching recv. Fix: issue the same calls with the same arguments on "
                           "every rank.";
        markCommFailed(comm, ncclInvalidUsage, text.c_str());
        if (comm->liveness) comm->liveness->announceMismatch(ctx.desc, s.recvPeer, theirs);
        *error = fail(ncclInvalidUsage, "%s (rank %d): %s", ctx.caller, comm->rank, text.c_str());
        return slices;
      }
      recvPtr = FifoLayout::slot(rc->base, rc->consumed);
    }
    char* sendPtr = sctl ? FifoLayout::slot(sc->base, sc->posted) : nullptr;
    const char* srcPtr = s.src != algo::kNoBuf ? ctx.bufs[s.src] + (s.srcOff + st.done) * ctx.elemSize : nullptr;
    char* dstPtr = s.dst != algo::kNoBuf ? ctx.bufs[s.dst] + (s.dstOff + st.done) * ctx.elemSize : nullptr;
    bool compute = (recvPtr && srcPtr) || opHasPre(ctx, s) || opHasPost(ctx, s);
    char* target = dstPtr ? dstPtr : sendPtr;
    if (compute) {
      ElemwiseFn fn = selectElemwise(ctx.op, recvPtr != nullptr, srcPtr != nullptr, opHasPre(ctx, s), opHasPost(ctx, s));
      fn(target, recvPtr, srcPtr, n, ctx.op);
    } else if (target) {
      const char* from = recvPtr ? recvPtr : srcPtr;
      if (from && from != target) std::memcpy(target, from, bytes);
    }
    if (sendPtr && dstPtr) std::memcpy(sendPtr, dstPtr, bytes);
    if (sctl) {
      // Field by field: the check message's bytes are read only where checkSeq says they are there.
      SlotHeader& h = sctl->headers[sc->posted % kFifoSlots];
      h.bytes = bytes;
      h.signature = ctx.signature;
      h.credit = 0;
      h.checkSeq = 0;
      if (prog.carries != nullptr && !st.carried) {  // the group's first slot to the checked rank
        h.checkSeq = prog.carries->seq;
        std::memcpy(h.check, prog.carries->mine, prog.carries->bytes);
      } else {
        std::memcpy(h.check, &ctx.desc, sizeof(ctx.desc));  // so that a mismatch names both calls
      }
      st.carried = true;
      sctl->tail.store(++sc->posted, std::memory_order_release);
    }
    if (rctl) rctl->head.store(++rc->consumed, std::memory_order_release);
    st.done += n;
    ++slices;
  }
  if (st.step >= prog.steps.size()) st.finished = true;
  return slices;
}

bool allConnected(const std::vector<LaneProgram>& programs) {
  for (const auto& p : programs)
    for (const auto& [ctx, s] : p.steps) {
      if (s->count == 0) continue;
      if (s->recvPeer >= 0 && !p.comm->host->recvConn(p.channel, s->recvPeer)) return false;
      if (s->sendPeer >= 0 && !p.comm->host->sendConn(p.channel, s->sendPeer)) return false;
    }
  return true;
}

ncclResult_t connect(std::vector<LaneProgram>& programs) {
  if (allConnected(programs)) return ncclSuccess;  // the common case after the first call
  std::map<ncclComm*, std::pair<std::set<ConnKey>, std::set<ConnKey>>> needs;  // comm -> (recvs, sends)
  for (auto& p : programs)
    for (auto& [ctx, s] : p.steps) {
      if (s->count == 0) continue;
      if (s->recvPeer >= 0) needs[p.comm].first.insert({p.channel, s->recvPeer});
      if (s->sendPeer >= 0) needs[p.comm].second.insert({p.channel, s->sendPeer});
    }
  ncclResult_t rc = ncclSuccess;
  for (auto& [comm, n] : needs)
    if (rc == ncclSuccess) rc = comm->host->offerReceivers(n.first);
  for (auto& [comm, n] : needs)
    if (rc == ncclSuccess) rc = comm->host->attachSenders(n.second);
  for (auto& [comm, n] : needs)
    if (rc == ncclSuccess) rc = comm->host->finishReceivers(n.first);
  if (rc != ncclSuccess)  // a peer died or the call was aborted: leave nothing in /dev/shm
    for (auto& [comm, n] : needs) comm->host->abandonSetup(n.first, n.second);
  return rc;
}

// Why a stalled lane cannot go on, or ncclSuccess: its communicator was aborted or failed (a
// peer died, another rank found a mismatch), or a rank it waits for has left. The first time a
// lost peer is seen (`departureSeen` false) the run gets one more pass over its lanes.
ncclResult_t stallVerdict(const LaneState& st, bool* departureSeen, double stalledSeconds) {
  const auto& [ctx, s] = st.program->steps[st.step];
  ncclComm* comm = st.program->comm;
  if (comm->abortFlag.load())
    return fail(ncclInvalidUsage, "%s (rank %d): interrupted by ncclCommAbort (or ncclCommDestroy from another "
                "thread).", ctx->caller, comm->rank);
  // Only a lost peer this lane is blocked on counts: data it posted before leaving can still be
  // taken, and a lane that waits for a slow live peer beside a departed one must keep waiting.
  Blocked b = blockedSides(st);
  int lostPeer = -1;
  for (auto [peer, blocked] : {std::pair{s->recvPeer, b.recv}, std::pair{s->sendPeer, b.send}})
    if (blocked && comm->liveness && comm->liveness->lost(peer)) lostPeer = peer;
  // A peer that left may have posted what this lane waits for just before its goodbye, and a
  // peer's abort is often the echo of a death whose news is still on its way: one more pass.
  if (lostPeer >= 0 && !std::exchange(*departureSeen, true)) return ncclSuccess;
  if (comm->state.load() == ncclComm::State::Failed) {
    ncclResult_t rc = comm->asyncError.load();
    // A rank died, but not one this lane waits for: the live peers it waits for may still
    // complete the call (the dead rank may have sent all they need before it died), so it
    // fails only once it has made no progress for a while. So does a mismatch that others met in
    // a later call: they finished this one, so its data is on its way. A mismatch in this call
    // or an abort: at once.
    const bool death = rc == ncclRemoteError || rc == ncclSuccess || rc == ncclInProgress;
    const bool laterMismatch = rc == ncclInvalidUsage && ctx->desc.seq != 0 && comm->mismatchSeq.load() > ctx->desc.seq;
    if ((death || laterMismatch) && lostPeer < 0 && stalledSeconds < kLiveWaitAfterDeathSeconds &&
        !comm->abortFlag.load())
      return ncclSuccess;
    return fail(rc == ncclSuccess || rc == ncclInProgress ? ncclRemoteError : rc, "%s (rank %d): %s", ctx->caller,
                comm->rank, commFailureText(comm).c_str());
  }
  if (lostPeer >= 0)
    return fail(ncclRemoteError, "%s (rank %d): rank %d %s while this rank waited for %s.", ctx->caller, comm->rank,
                lostPeer, comm->liveness->lossReason(lostPeer).c_str(), describeWait(st).c_str());
  return ncclSuccess;
}

// Tells each communicator's call state which ranks its stalled lanes wait for (hang reports).
void publishWaits(const std::vector<LaneState>& lanes) {
  std::map<ncclComm*, std::vector<int>> waits;
  for (const LaneState& st : lanes) {
    if (st.finished || !holdsRun(st)) continue;
    const algo::Step* s = st.program->steps[st.step].second;
    std::vector<int>& w = waits[st.program->comm];
    for (int peer : {s->recvPeer, s->sendPeer})
      if (peer >= 0 && std::find(w.begin(), w.end(), peer) == w.end()) w.push_back(peer);
  }
  for (auto& [comm, w] : waits) comm->calls.setWaitingFor(w.data(), static_cast<int>(w.size()));
}

}  // namespace

ncclResult_t runPrograms(std::vector<LaneProgram>& programs) {
  BRAID_CHECK(connect(programs));
  std::vector<LaneState> lanes;
  std::vector<LaneProgram*> checkLanes;
  for (auto& p : programs) {
    lanes.push_back({&p});
    if (p.check != nullptr) checkLanes.push_back(&p);
  }
  static const double timeout = env::getDouble("BRAID_COLL_TIMEOUT", 600.0);  // read once: per call is costly
  auto lastProgress = Clock::now(), lastCheck = lastProgress;
  uint64_t idle = 0;
  bool departureSeen = false;
  bool stalled = false;  // no progress for lateCheckAfter(): late call check messages go
  // Communicators with ranks on other hosts: this thread moves their network traffic itself
  // while it runs the call (transport/ucx_net.h progress), and once more as the call ends, so
  // that what it posted last leaves now rather than when the proxy thread wakes.
  std::vector<transport::UcxNet*> nets;
  for (auto& p : programs)
    if (p.comm->net && std::find(nets.begin(), nets.end(), p.comm->net.get()) == nets.end()) nets.push_back(p.comm->net.get());
  for (;;) {
    bool allDone = true;
    int progress = 0;
    ncclResult_t error = ncclSuccess;
    for (auto& st : lanes) {
      if (st.finished) continue;
      int moved = advance(st, checkLanes, stalled, &error);
      if (error != ncclSuccess) return error;
      if (moved) st.program->comm->calls.noteProgress();
      progress += moved;
      if (st.finished && st.program->onFinish && st.program->check == nullptr) BRAID_CHECK(st.program->onFinish());
      if (!st.finished && holdsRun(st)) allDone = false;
    }
    bool netMoved = false;
    for (transport::UcxNet* net : nets) netMoved |= net->progress(/*flush=*/allDone);
    if (allDone) return ncclSuccess;
    if (progress) {
      idle = 0;
      departureSeen = false;
      continue;
    }
    if (idle++ == 0) lastProgress = Clock::now();  // a stall starts
    if (netMoved) continue;  // an arrival or a completion: look again before yielding
    // Nothing ready: other ranks may share our cores, so give them the CPU. A round that
    // progresses the network costs a system call or two (epoll), so 32 of them held a shared
    // core ~60 us from the rank that was to send next (2 nodes x 2 ranks on 2 cores, 8 B
    // all-reduce: ring 118 -> 83 us, tree 107 -> 60 us when yielding after every such round).
    if (idle < (nets.empty() ? 32u : 1u)) continue;
    if (idle < 2000) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(idle < 20000 ? 5 : 50));
    // The checks go by the clock, not by the count of rounds: on a loaded machine each sleep
    // above can last a scheduler slice, and 256 rounds of it took an abort 1.1 s to notice.
    auto now = Clock::now();
    if (!stalled && now - lastProgress >= lateCheckAfter()) {
      stalled = true;
      continue;
    }
    if (now - lastCheck < std::chrono::milliseconds(10)) continue;
    lastCheck = now;
    for (auto& st : lanes)  // an abort from another thread: at once (the rest may be a short wait)
      if (!st.finished && st.program->comm->abortFlag.load(std::memory_order_relaxed))
        return stallVerdict(st, &departureSeen, 0.0);
    if (idle < 2000 && now - lastProgress < std::chrono::milliseconds(100)) continue;
    for (auto& st : lanes)
      if (!st.finished && holdsRun(st))
        BRAID_CHECK(stallVerdict(st, &departureSeen, std::chrono::duration<double>(now - lastProgress).count()));
    publishWaits(lanes);
    if (timeout > 0 && std::chrono::duration<double>(now - lastProgress).count() > timeout) {
      for (auto& st : lanes) {
        if (st.finished || !holdsRun(st)) continue;
        return fail(ncclRemoteError,
                    "rank %d: no progress for %.0f s waiting for %s. Did every rank call the same collective (and "
                    "every send have a matching recv)? BRAID_COLL_TIMEOUT sets the limit.",
                    st.program->comm->rank, timeout, describeWait(st).c_str());
      }
    }
  }
}

}  // namespace braid::host
