// Per-communicator resources: ring order from the topology, and the transports, which
// connect lazily on first use.
#include "api/resources.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "api/plan.h"
#include "api/real_served.h"
#include "api/served.h"
#include "api/tuning.h"
#include "core/comm.h"
#include "core/log.h"
#include "transport/host_transport.h"
#include "topo/topo.h"
#include "transport/select.h"
#include "transport/ucx_net.h"

namespace braid::api {

namespace {

// The ring order from the topology, and the node of every rank. Every rank of one host computes
// the same order from the same machine; across hosts the views differ, so all ranks adopt rank
// 0's. The ring visits each host's ranks in one run (topo::ringOrders), hosts in node order.
ncclResult_t chooseRing(ncclComm* comm) {
  int n = comm->nRanks;
  comm->ring.resize(n);
  std::iota(comm->ring.begin(), comm->ring.end(), 0);
  if (n == 1) return ncclSuccess;
  std::vector<topo::RankLocation> locs;
  for (const PeerInfo& p : comm->peers) locs.push_back({p.rank, p.hostHash, p.cudaDev, p.busId});
  // Once per communicator (every plan's CollArgs copies it): the same on every rank, since
  // every rank has every peer's hostHash; ringOrders joins the hosts in this order.
  comm->nodeOf = topo::nodeOfRanks(locs);
  topo::System sys = topo::loadSystem(comm->rank);
  topo::RingInfo info;
  std::vector<std::vector<int>> rings = topo::ringOrders(sys, locs, 1, &info);
  std::vector<int32_t> all(static_cast<size_t>(n) * n);
  if (!rings.empty() && static_cast<int>(rings[0].size()) == n)
    std::copy(rings[0].begin(), rings[0].end(), all.begin() + static_cast<size_t>(comm->rank) * n);
  else
    std::iota(all.begin() + static_cast<size_t>(comm->rank) * n, all.begin() + static_cast<size_t>(comm->rank + 1) * n, 0);
  BRAID_CHECK(comm->bootstrap->allGather(all.data(), n * sizeof(int32_t)));
  comm->ring.assign(all.begin(), all.begin() + n);
  comm->ringBandwidth = info.bw.empty() ? 0.0 : info.bw[0];
  std::string order;
  for (int r : comm->ring) order += " " + std::to_string(r);
  BRAID_INFO(kGraph | kInit, "rank %d: ring%s (%.1f GB/s per link%s%s)", comm->rank, order.c_str(), comm->ringBandwidth,
             info.fallback ? ", rank order: " : "", info.fallback ? info.note.c_str() : "");
  return ncclSuccess;
}

}  // namespace

ncclResult_t createResources(ncclComm* comm) {
  BRAID_CHECK(chooseRing(comm));
  std::unique_ptr<CommTuning> tuning;
  BRAID_CHECK(CommTuning::create(comm, &tuning));  // NCCL_ALGO/NCCL_PROTO: a bad value fails init
  comm->tuning = std::move(tuning);
  // Collective: UCX to the other hosts; or (auto) the real NCCL serves the communicator.
  if (transport::needsNetwork(comm->peers, comm->rank)) BRAID_CHECK(connectOtherHosts(comm));
  if (!comm->servedByReal.load()) {
    const bool cuda = comm->net && comm->net->cudaMemory();
    transport::logChoices(comm->peers, comm->rank, transport::gpuDirectChoice(cuda));
    BRAID_CHECK(planServing(comm));  // collective when a GPU has ranks of several processes
  }
  comm->host = std::make_shared<HostTransport>(comm);
  comm->hostPlans = std::make_shared<PlanCache>();
  comm->devicePlans = std::make_shared<PlanCache>();
  BRAID_INFO(kInit, "comm %p rank %d nRanks %d cudaDev %d busId %s - Init COMPLETE%s", static_cast<void*>(comm),
             comm->rank, comm->nRanks, comm->cudaDev, comm->peers[comm->rank].busId[0] ? comm->peers[comm->rank].busId : "host",
             comm->servedByReal.load() ? " (served by the real NCCL)" : "");
  return ncclSuccess;
}

void destroyResources(ncclComm* comm, bool abort) {
  if (const uint64_t rode = comm->checksRode.load(), alone = comm->checksAlone.load(), late = comm->checksLate.load(),
      byData = comm->checksByData.load();
      rode + alone + byData > 0) {
    // Each part only where it happened, so that a test can ask for it by its words.
    auto n = [](uint64_t v) { return std::to_string(v); };
    std::string text = n(byData) + " groups checked by their data alone";
    if (late > 0) text += " (" + n(late) + " late messages sent after a stall)";
    text += "; " + n(alone) + " messages in slots of their own";
    if (rode > 0) text += ", " + n(rode) + " messages rode on data slots";
    BRAID_INFO(kColl, "rank %d: call check: %s", comm->rank, text.c_str());
  }
  if (const auto& t = comm->enqueueTimes; t.calls.load() > 0) {
    auto us = [](const std::atomic<uint64_t>& ns, const std::atomic<uint64_t>& n) {
      return double(ns.load()) / 1e3 / double(std::max<uint64_t>(1, n.load()));
    };
    auto count = [](const std::atomic<uint64_t>& n) { return static_cast<unsigned long long>(n.load()); };
    BRAID_INFO(kColl,
               "rank %d: host time of device calls: checks %.2f us a call (%llu calls); %llu launches replayed a kept "
               "one, %.2f us each (the kernel launch %.2f); %llu planned, %.2f us each (planning %.2f, packing and "
               "launch %.2f; the first ones also connect and load kernels)",
               comm->rank, us(t.checkNs, t.calls), count(t.calls), count(t.replays), us(t.replayNs, t.replays),
               us(t.replayLaunchNs, t.replays), count(t.runs), us(t.runNs, t.runs), us(t.planNs, t.runs),
               us(t.launchNs, t.runs));
    if (t.postsWaitNs.load() + t.servedWaitNs.load() + t.postSendNs.load() + t.servedStreamNs.load() > 0)
      BRAID_INFO(kColl, "rank %d: host time of device calls, served GPU: a planned run waits %.2f us for the posts of "
                 "the ranks this rank serves and %.2f us for their side to be enqueued, sends its post in %.2f us, and "
                 "issues stream operations and kernels in %.2f us", comm->rank, us(t.postsWaitNs, t.runs),
                 us(t.servedWaitNs, t.runs), us(t.postSendNs, t.runs), us(t.servedStreamNs, t.runs));
  }
  if (comm->served) comm->served->stop(abort);  // a leader waits for its served ranks to finish first
  if (comm->device) comm->device->close(abort);
  setCommDevice(comm, nullptr);
  if (comm->net) comm->net->close(abort);  // its proxy stops touching the host FIFOs first
  if (comm->host) comm->host->close(abort);
  comm->host.reset();
  comm->net.reset();
}

}  // namespace braid::api
