// Runs one group's tasks: builds each task's schedule and hands it to the engine for its
// memory kind.
#include <cuda_runtime.h>

#include <map>
#include <span>

#include "api/group.h"
#include "api/plan.h"
#include "api/redop.h"
#include "api/tuning.h"
#include "core/comm.h"
#include "core/log.h"
#include "core/numeric.h"
#include "host/engine.h"
#include "host/fifo.h"

namespace braid::api {
namespace {

uint64_t signatureOf(const Task& t) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
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

ncclResult_t addCollective(HostRun& run, const Task& t) {
  ncclComm* comm = t.comm;
  host::OpContext& ctx = run.contexts.emplace_back();
  ctx.caller = t.caller;
  ctx.elemSize = sizeOfType(t.type);
  ctx.reduces = algo::collReduces(t.coll);
  ctx.signature = signatureOf(t);
  ctx.bufs = {const_cast<char*>(static_cast<const char*>(t.sendbuff)), static_cast<char*>(t.recvbuff)};
  ctx.bufIsInput = {true, false};
  if (t.coll == algo::Coll::AlltoAll && t.sendbuff == t.recvbuff) {
    // In place, a block may arrive before this rank has sent its own block to that peer.
    ctx.staging.assign(ctx.bufs[0], ctx.bufs[0] + t.count * comm->nRanks * ctx.elemSize);
    ctx.bufs[0] = ctx.staging.data();
  }
  if (ctx.reduces) BRAID_CHECK(hostOpFor(comm, t.op, t.type, t.caller, &ctx.op));
  // One progress thread runs every lane: more than one lane would only cut the data finer.
  const algo::RankPlan& plan = comm->hostPlans->get(collArgsFor(t, 1, 64, kFifoSlots * kFifoSlotBytes));
  for (const algo::Lane& lane : plan.lanes) {
    auto key = std::make_pair(comm, lane.channel);
    auto it = run.collectiveProgram.find(key);
    if (it == run.collectiveProgram.end()) {
      it = run.collectiveProgram.emplace(key, run.programs.size()).first;
      run.programs.push_back({comm, lane.channel, {}});
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
    ctx.elemSize = sizeOfType(t.type);
    ctx.signature = signatureOf(t);
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
    host::LaneProgram prog{comm, kP2pChannelBase + lane.channel, {}};
    for (const algo::Step& s : lane.steps) {
      uint16_t buf = s.src != algo::kNoBuf ? s.src : s.dst;
      prog.steps.push_back({ctxOf[buf / 2], &s});
    }
    run.programs.push_back(std::move(prog));
  }
}

ncclResult_t runHostTasks(std::span<const Task* const> tasks) {
  // A host-memory call with a stream completes after the stream's earlier work.
  for (const Task* t : tasks)
    if (t->stream && cudaStreamSynchronize(t->stream) != cudaSuccess) {
      cudaError_t err = cudaGetLastError();
      return fail(ncclUnhandledCudaError, "%s (rank %d): cudaStreamSynchronize on the call's stream failed: %s",
                  t->caller, t->comm->rank, cudaGetErrorString(err));
    }
  for (const Task* t : tasks) t->comm->hostPlans->startRun();
  HostRun run;
  run.contexts.reserve(tasks.size());
  run.plans.reserve(tasks.size());
  std::map<ncclComm*, std::vector<const Task*>> p2p;
  std::vector<ncclComm*> order;
  for (const Task* t : tasks) {
    if (t->coll == algo::Coll::SendRecv) {
      if (!p2p.count(t->comm)) order.push_back(t->comm);
      p2p[t->comm].push_back(t);
    } else {
      BRAID_CHECK(addCollective(run, *t));
    }
  }
  for (ncclComm* comm : order) addP2p(run, comm, p2p[comm]);
  ncclResult_t rc = host::runPrograms(run.programs);
  if (rc != ncclSuccess) {
    // The peers' FIFOs may now hold half a collective: the communicator can only be aborted.
    for (const Task* t : tasks) {
      t->comm->asyncError.store(rc);
      t->comm->state.store(ncclComm::State::Failed);
    }
  }
  return rc;
}

// ncclGroupSimulateEnd: the tuner's estimate for each task (what the engine for its memory
// would run), summed; a zero count is a no-op and costs nothing.
float estimateMicroseconds(std::span<const Task> tasks) {
  double us = 0;
  for (const Task& t : tasks)
    if (t.count > 0) us += t.comm->tuning->choose(t).best.microseconds;
  return static_cast<float>(us);
}

}  // namespace

ncclResult_t runDeviceTasks(std::span<const Task* const> tasks);

ncclResult_t executeTasks(std::span<Task> tasks, ncclSimInfo_t* simInfo) {
  if (simInfo) {
    simInfo->estimatedTime = estimateMicroseconds(tasks);
    return ncclSuccess;
  }
  if (tasks.size() == 1) {  // a call outside a group: no allocation on this path
    const Task* one[1] = {&tasks[0]};
    if (one[0]->count == 0) return ncclSuccess;
    return one[0]->onDevice ? runDeviceTasks(one) : runHostTasks(one);
  }
  std::vector<const Task*> host, device;
  for (const Task& t : tasks) {
    if (t.count == 0) continue;  // NCCL: a zero count is a no-op
    (t.onDevice ? device : host).push_back(&t);
  }
  if (!device.empty()) BRAID_CHECK(runDeviceTasks(device));
  if (!host.empty()) BRAID_CHECK(runHostTasks(host));
  return ncclSuccess;
}

}  // namespace braid::api
