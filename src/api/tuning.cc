#include "api/tuning.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "api/plan.h"
#include "core/comm.h"
#include "core/env.h"
#include "core/log.h"
#include "core/numeric.h"
#include "topo/topo.h"

namespace braid::api {

ncclResult_t CommTuning::create(ncclComm* comm, std::unique_ptr<CommTuning>* out) {
  std::unique_ptr<CommTuning> t(new CommTuning(comm));
  std::vector<std::string> notes;
  std::string error;
  if (!algo::parseTuningEnv(env::get("NCCL_ALGO"), env::get("NCCL_PROTO"), &t->constraints_, &notes, &error))
    return fail(ncclInvalidUsage, "rank %d: %s. Fix: correct the value, or unset the variable to let braid choose.",
                comm->rank, error.c_str());
  for (const std::string& n : notes) BRAID_INFO(kTuning | kEnv, "rank %d: %s", comm->rank, n.c_str());
  const bool protoAsked = env::get("NCCL_PROTO") != nullptr;
  std::vector<int> perNode;
  for (int node : comm->nodeOf) {
    if (node >= static_cast<int>(perNode.size())) perNode.resize(static_cast<size_t>(node) + 1, 0);
    ++perNode[static_cast<size_t>(node)];
  }
  t->nNodes_ = std::max<int>(1, static_cast<int>(perNode.size()));
  t->ranksPerNode_ = perNode.empty() ? comm->nRanks : *std::max_element(perNode.begin(), perNode.end());
  if (comm->cudaDev >= 0) {
    // Ranks that share a GPU share its SMs: the tuner caps their channels by them.
    if (cudaError_t e = cudaDeviceGetAttribute(&t->sms_, cudaDevAttrMultiProcessorCount, comm->cudaDev); e != cudaSuccess) {
      cudaGetLastError();
      return fail(ncclUnhandledCudaError, "rank %d: cudaDeviceGetAttribute(multiProcessorCount) of device %d failed: %s",
                  comm->rank, comm->cudaDev, cudaGetErrorString(e));
    }
  }
  std::vector<RankPlace> places;
  for (const PeerInfo& p : comm->peers) places.push_back({p.hostHash, p.busId});
  // The same facts on every rank: all ranks' places, the agreed ring, this host's topology
  // (loadSystem is cached per process, and chooseRing loaded it already; -1: never dumps it again).
  const bool p2pDisabled = env::getInt("NCCL_P2P_DISABLE", 0) != 0;  // the transport stages then
  const bool anyGpu = comm->nRanks > 1 && comm->cudaDev >= 0;
  t->links_ = linkFacts(anyGpu ? topo::loadSystem(-1) : topo::System{}, places, comm->ring, comm->rank, p2pDisabled);
  t->protocols_ = deviceProtocols(t->links_, protoAsked);
  if (comm->rank == 0 && anyGpu)
    BRAID_INFO(kTuning | kInit, "rank 0: tuner inputs: ring %s; every pair %s; %d ranks on the busiest GPU; %d SMs; executor "
               "protocols %s", describeHops(t->links_.ring).c_str(), describeHops(t->links_.mesh).c_str(),
               t->links_.ranksPerGpu, t->sms_,
               algo::describeProtocols(t->protocols_).c_str());
  *out = std::move(t);
  return ncclSuccess;
}

algo::TunerResult CommTuning::choose(const Task& t, std::optional<algo::Protocol> launch) {
  algo::TunerInput in;
  in.coll = t.coll;
  in.elemSize = static_cast<uint32_t>(sizeOfType(t.type));
  in.bytes = t.coll == algo::Coll::SendRecv ? t.count * in.elemSize : collectiveBytes(t);
  in.nRanks = comm_->nRanks;
  in.ranksPerGpu = links_.ranksPerGpu;
  in.nNodes = nNodes_;
  in.ranksPerNode = ranksPerNode_;
  in.ring = links_.ring;
  in.mesh = links_.mesh;
  if (t.coll == algo::Coll::SendRecv && t.root >= 0 && static_cast<size_t>(t.root) < links_.toRank.size())
    in.mesh = links_.toRank[static_cast<size_t>(t.root)];
  in.sms = sms_;
  in.executorProtocols = t.onDevice ? deviceTaskProtocols(t.coll, constraints_, protocols_, launch) : protocols_;
  in.minChannels = comm_->config.minCTAs;
  in.maxChannels = comm_->config.maxCTAs;
  in.hostMemory = !t.onDevice;
  in.constraints = &constraints_;
  algo::TunerResult r = algo::tune(in);
  if (!r.warning.empty() || logEnabled(LogLevel::Info, kTuning)) logOnce(t, in, r);
  return r;
}

algo::Protocol CommTuning::p2pLaunchProtocol() const { return api::p2pLaunchProtocol(constraints_, protocols_); }

algo::Protocol CommTuning::launchProtocol(std::span<const Task* const> tasks) {
  for (const Task* t : tasks)
    if (t->coll != algo::Coll::SendRecv) return choose(*t).best.protocol;
  return p2pLaunchProtocol();
}

void CommTuning::noteBlocks(size_t blocks) {
  const size_t onGpu = blocks * static_cast<size_t>(std::max(1, links_.ranksPerGpu));
  if (sms_ <= 0 || onGpu <= static_cast<size_t>(sms_) || warnedBlocks_.exchange(true)) return;
  BRAID_WARN("rank %d: a kernel of %zu blocks a rank, with %d ranks on one GPU of %d SMs: %zu blocks that wait for each "
             "other, more than the GPU may hold at once, so the launch can stall (the hang report names it after "
             "BRAID_HANG_TIMEOUT). Fix: fewer peers per group (e.g. an all-to-all in smaller groups), fewer ranks per GPU, "
             "or a lower NCCL_MAX_CTAS.",
             comm_->rank, blocks, links_.ranksPerGpu, sms_, onGpu);
}

void CommTuning::logOnce(const Task& t, const algo::TunerInput& in, const algo::TunerResult& r) {
  const algo::TunerChoice& c = r.best;
  auto name = [](const algo::TunerChoice& x) { return x.algorithm ? x.algorithm->name : "p2p"; };
  std::lock_guard<std::mutex> lock(loggedMutex_);
  if (!r.warning.empty() && logged_.insert({static_cast<int>(t.coll), t.onDevice, nullptr, -1, 0, 0}).second)
    BRAID_WARN("rank %d: %s", comm_->rank, r.warning.c_str());
  if (!logEnabled(LogLevel::Info, kTuning)) return;
  if (!logged_.insert({static_cast<int>(t.coll), t.onDevice, c.algorithm, static_cast<int>(c.protocol), c.channels,
                       c.slicesPerStep}).second)
    return;
  char runnerUp[96] = "";
  if (r.hasRunnerUp)
    std::snprintf(runnerUp, sizeof(runnerUp), " (runner-up %s/%s %.1f us)", name(r.runnerUp),
                  algo::protocolName(r.runnerUp.protocol), r.runnerUp.microseconds);
  logMessage(LogLevel::Info, kTuning, "rank %d: %s of %llu bytes on %s memory: %s/%s, %d channel%s, %d slice%s per step, "
             "%.1f us estimated%s", comm_->rank, algo::collName(t.coll), static_cast<unsigned long long>(in.bytes),
             t.onDevice ? "device" : "host", name(c), algo::protocolName(c.protocol), c.channels, c.channels == 1 ? "" : "s",
             c.slicesPerStep, c.slicesPerStep == 1 ? "" : "s", c.microseconds, runnerUp);
}

}  // namespace braid::api
