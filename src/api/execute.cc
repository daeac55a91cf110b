// Runs one group's tasks: builds each task's schedule and hands it to the engine for its
// memory kind.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "api/call_check.h"
#include "api/group.h"
#include "api/plan.h"
#include "api/redop.h"
#include "api/shadow.h"
#include "api/tuning.h"
#include "core/comm.h"
#include "core/log.h"
#include "core/numeric.h"
#include "host/engine.h"
#include "transport/host_fifo.h"

namespace braid::api {
namespace {

// What every FIFO slot of the call carries; the receiver compares it with its own. It holds
// the collective's number too, so data of another call (a rank that skipped one) is refused
// even where the arguments agree: whatever reached a rank came from ranks that made its call.
uint64_t signatureOf(const Task& t, uint64_t seq) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(seq);
  mix(static_cast<uint64_t>(t.coll));
  mix(t.count);
  mix(static_cast<uint64_t>(t.type));
  if (t.coll != algo::Coll::SendRecv) {
    mix(static_cast<uint64_t>(t.op) < ncclNumOps ? static_cast<uint64_t>(t.op) : 0xffff);
    mix(static_cast<uint64_t>(t.root));
  }
  return h;
}

// Everything the engine needs to outlive the run: contexts and plans own the steps. Both are
// reserved for the group's size up front, so references into them stay valid.
struct HostRun {
  std::vector<host::OpContext> contexts;
  std::vector<algo::RankPlan> plans;  // P2P plans; collective plans live in the comm's cache
  std::vector<host::LaneProgram> programs;
  std::map<std::pair<ncclComm*, int>, size_t> collectiveProgram;  // (comm, channel) -> program index
};

ncclResult_t addCollective(HostRun& run, const Task& t, uint64_t seq) {
  ncclComm* comm = t.comm;
  host::OpContext& ctx = run.contexts.emplace_back();
  ctx.caller = t.caller;
  ctx.desc = callDescOf(t);
  ctx.desc.seq = seq;
  ctx.elemSize = sizeOfType(t.type);
  ctx.reduces = algo::collReduces(t.coll);
  ctx.signature = signatureOf(t, seq);
  ctx.bufs = {const_cast<char*>(static_cast<const char*>(t.sendbuff)), static_cast<char*>(t.recvbuff)};
  ctx.bufIsInput = {true, false};
  if (t.coll == algo::Coll::AlltoAll && t.sendbuff == t.recvbuff) {
    // In place, a block may arrive before this rank has sent its own block to that peer.
    ctx.staging.assign(ctx.bufs[0], ctx.bufs[0] + t.count * comm->nRanks * ctx.elemSize);
    ctx.bufs[0] = ctx.staging.data();
  }
  if (ctx.reduces) BRAID_CHECK(hostOpFor(comm, t.op, t.type, t.caller, &ctx.op));
  // One progress thread runs every lane: more than one lane would only cut the data finer. The
  // algorithm is the tuner's (the collective's default unless NCCL_ALGO narrows it: algo/tuner.h),
  // the same on every rank.
  const algo::Algorithm* algorithm = comm->tuning->choose(t).best.algorithm;
  const algo::RankPlan& plan = comm->hostPlans->get(collArgsFor(t, 1, 64, kFifoSlots * hostSliceBytes(comm->net != nullptr)), algorithm);
  for (const algo::Lane& lane : plan.lanes) {
    auto key = std::make_pair(comm, lane.channel);
    auto it = run.collectiveProgram.find(key);
    if (it == run.collectiveProgram.end()) {
      it = run.collectiveProgram.emplace(key, run.programs.size()).first;
      run.programs.push_back({comm, lane.channel, {}, {}});
    }
    for (const algo::Step& s : lane.steps) run.programs[it->second].steps.push_back({&ctx, &s});
  }
  return ncclSuccess;
}

void addP2p(HostRun& run, ncclComm* comm, const std::vector<const Task*>& tasks) {
  std::vector<algo::P2pOp> ops;
  size_t nBufs = 2 * tasks.size();
  std::vector<host::OpContext*> ctxOf;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = *tasks[i];
    ops.push_back({t.isSend, t.root, t.count});
    host::OpContext& ctx = run.contexts.emplace_back();
    ctx.caller = t.caller;
    ctx.desc = callDescOf(t);
    ctx.elemSize = sizeOfType(t.type);
    ctx.signature = signatureOf(t, 0);  // send/recv: matched by their order on each connection
    ctxOf.push_back(&ctx);
  }
  // Every op sees the whole buffer table: a send to oneself becomes a copy into another
  // op's recv buffer.
  std::vector<char*> bufs(nBufs, nullptr);
  std::vector<bool> isInput(nBufs, false);
  for (size_t i = 0; i < tasks.size(); ++i) {
    bufs[2 * i] = const_cast<char*>(static_cast<const char*>(tasks[i]->sendbuff));
    bufs[2 * i + 1] = static_cast<char*>(tasks[i]->recvbuff);
    isInput[2 * i] = true;
    if (tasks[i]->isSend && tasks[i]->count > 0 && sendOverlapsARecv(*tasks[i], tasks)) {
      std::vector<char>& copy = ctxOf[i]->staging;
      copy.assign(bufs[2 * i], bufs[2 * i] + tasks[i]->count * ctxOf[i]->elemSize);
      bufs[2 * i] = copy.data();
    }
  }
  for (host::OpContext* ctx : ctxOf) {
    ctx->bufs = bufs;
    ctx->bufIsInput = isInput;
  }
  algo::RankPlan& plan = run.plans.emplace_back(algo::buildP2p(comm->rank, comm->nRanks, ops));
  for (const algo::Lane& lane : plan.lanes) {
    host::LaneProgram prog{comm, kP2pChannelBase + lane.channel, {}, {}};
    for (const algo::Step& s : lane.steps) {
      uint16_t buf = s.src != algo::kNoBuf ? s.src : s.dst;
      prog.steps.push_back({ctxOf[buf / 2], &s});
    }
    run.programs.push_back(std::move(prog));
  }
}

// Each communicator's calls of a run, numbered in order (CallState::begin), and marked
// complete when the run ends, however it ends.
class NumberedCalls {
 public:
  explicit NumberedCalls(std::span<const Task* const> tasks) : seq_(tasks.size()) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      auto it = std::find_if(byComm_.begin(), byComm_.end(), [&](auto& e) { return e.comm == tasks[i]->comm; });
      if (it == byComm_.end()) it = byComm_.insert(byComm_.end(), {tasks[i]->comm, {}, {}});
      it->descs.push_back(callDescOf(*tasks[i]));
      it->tasks.push_back(i);
    }
    for (Entry& e : byComm_) {
      e.comm->calls.begin(e.descs.data(), e.descs.size());
      for (size_t k = 0; k < e.tasks.size(); ++k) seq_[e.tasks[k]] = e.descs[k].seq;
    }
  }
  ~NumberedCalls() {
    for (Entry& e : byComm_) e.comm->calls.complete();
  }
  uint64_t seqOf(size_t task) const { return seq_[task]; }
  void addChecks(CallCheck* check, std::vector<host::LaneProgram>* programs) const {
    for (const Entry& e : byComm_) check->add(e.comm, e.descs, programs);
  }

 private:
  struct Entry {
    ncclComm* comm;
    std::vector<CallDesc> descs;
    std::vector<size_t> tasks;
  };
  std::vector<Entry> byComm_;
  std::vector<uint64_t> seq_;
};

ncclResult_t runHostTasks(std::span<const Task* const> tasks) {
  // A host-memory call with a stream completes after the stream's earlier work.
  for (const Task* t : tasks)
    if (t->stream && cudaStreamSynchronize(t->stream) != cudaSuccess) {
      cudaError_t err = cudaGetLastError();
      return fail(ncclUnhandledCudaError, "%s (rank %d): cudaStreamSynchronize on the call's stream failed: %s",
                  t->caller, t->comm->rank, cudaGetErrorString(err));
    }
  for (const Task* t : tasks) t->comm->hostPlans->startRun();
  NumberedCalls calls(tasks);
  HostRun run;
  run.contexts.reserve(tasks.size());
  run.plans.reserve(tasks.size());
  std::map<ncclComm*, std::vector<const Task*>> p2p;
  std::vector<ncclComm*> order;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task* t = tasks[i];
    if (t->coll == algo::Coll::SendRecv) {
      if (!p2p.count(t->comm)) order.push_back(t->comm);
      p2p[t->comm].push_back(t);
    } else {
      BRAID_CHECK(addCollective(run, *t, calls.seqOf(i)));
    }
  }
  for (ncclComm* comm : order) addP2p(run, comm, p2p[comm]);
  CallCheck check;
  if (checkHostCalls()) calls.addChecks(&check, &run.programs);
  ncclResult_t rc = host::runPrograms(run.programs);
  if (rc != ncclSuccess) {
    // The peers' FIFOs may now hold half a collective: the communicator can only be aborted.
    std::string why = lastError();
    for (const Task* t : tasks) markCommFailed(t->comm, rc, why.c_str(), /*cause=*/false);
    // A peer's failure seen first here (a closed connection, a peer that gave up) is often the
    // echo of a death elsewhere: name the cause when its news arrives within half a second.
    if (rc == ncclRemoteError) {
      const Task& t = *tasks.front();
      std::string cause = awaitFailureCause(t.comm, 0.5);
      if (!cause.empty() && cause != why) return fail(rc, "%s (rank %d): %s", t.caller, t.comm->rank, cause.c_str());
    }
  }
  return rc;
}

// ncclGroupSimulateEnd: the tuner's estimate for each task (what the engine for its memory
// would run), summed; a zero count is a no-op and costs nothing. A communicator's device tasks
// share one launch and its protocol (CommTuning::launchProtocol, as device_tasks.cc asks it), so
// each is estimated under that one, not its own best.
float estimateMicroseconds(std::span<const Task> tasks) {
  std::map<ncclComm*, std::vector<const Task*>> deviceTasks;
  double us = 0;
  for (const Task& t : tasks) {
    if (t.count == 0) continue;
    if (t.onDevice) deviceTasks[t.comm].push_back(&t);
    else us += t.comm->tuning->choose(t).best.microseconds;
  }
  for (auto& [comm, launch] : deviceTasks) {
    const algo::Protocol protocol = comm->tuning->launchProtocol(launch);
    for (const Task* t : launch) us += comm->tuning->choose(*t, protocol).best.microseconds;
  }
  return static_cast<float>(us);
}

}  // namespace

ncclResult_t runDeviceTasks(std::span<const Task* const> tasks);

namespace {
// braid's launch between the shadow's two halves (both no-ops unless BRAID_SHADOW is set).
ncclResult_t runDeviceTasksShadowed(std::span<const Task* const> tasks) {
  ShadowGroup shadow(tasks);
  BRAID_CHECK(shadow.before());
  BRAID_CHECK(runDeviceTasks(tasks));
  return shadow.after();
}
}  // namespace

ncclResult_t executeTasks(std::span<Task> tasks, ncclSimInfo_t* simInfo) {
  if (simInfo) {
    simInfo->estimatedTime = estimateMicroseconds(tasks);
    return ncclSuccess;
  }
  if (tasks.size() == 1) {  // a call outside a group: the caller holds its communicator
    const Task* one[1] = {&tasks[0]};
    if (one[0]->count == 0) return ncclSuccess;
    return one[0]->onDevice ? runDeviceTasksShadowed(one) : runHostTasks(one);
  }
  // A group: its communicators may have been destroyed (or have failed) on other threads
  // since the calls were queued; hold each for the run.
  std::vector<std::unique_ptr<CommUse>> uses;
  std::vector<ncclComm*> held;
  for (const Task& t : tasks) {
    if (std::find(held.begin(), held.end(), t.comm) != held.end()) continue;
    held.push_back(t.comm);
    uses.push_back(std::make_unique<CommUse>(t.comm, t.caller));
    BRAID_CHECK(uses.back()->result());
    BRAID_CHECK(checkCommReady(t.comm, t.caller));
  }
  std::vector<const Task*> host, device;
  for (const Task& t : tasks) {
    if (t.count == 0) continue;  // NCCL: a zero count is a no-op
    (t.onDevice ? device : host).push_back(&t);
  }
  if (!device.empty()) BRAID_CHECK(runDeviceTasksShadowed(device));
  if (!host.empty()) BRAID_CHECK(runHostTasks(host));
  return ncclSuccess;
}

}  // namespace braid::api
