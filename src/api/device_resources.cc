#include "api/device_resources.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "core/cuda_scope.h"
#include "core/env.h"
#include "core/log.h"
#include "kernels/stream_pool.h"
#include "transport/net_device.h"
#include "transport/select.h"
#include "transport/ucx_net.h"

namespace braid::api {

transport::P2pPeerInfo toP2pInfo(const PeerInfo& p) {
  transport::P2pPeerInfo info;
  info.rank = p.rank;
  info.cudaDev = p.cudaDev;
  info.pid = p.pid;
  info.hostHash = p.hostHash;
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(p.busId, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) == 4)
    info.busId = (int64_t(domain) << 20) | (bus << 12) | (dev << 4) | fn;
  return info;
}

namespace {

// Ranks of other processes on this GPU: without MPS, the GPU runs one process's kernels at a
// time, switching every few milliseconds, and a kernel that waits for another process's kernel
// waits for the switch (2 processes on an H200: ~2.3 ms per collective at any size; ranks as
// threads of one process: microseconds). Said once, at NCCL_DEBUG=WARN or INFO.
void warnIfTimeSliced(const ncclComm& comm, const std::vector<bool>& sameGpu) {
  const PeerInfo& me = comm.peers[comm.rank];
  int other = -1;
  for (size_t r = 0; r < comm.peers.size() && other < 0; ++r)
    if (sameGpu[r] && comm.peers[r].processHash != me.processHash) other = int(r);
  static std::atomic<bool> said{false};
  if (other < 0 || !logEnabled(LogLevel::Warn, kInit) || said.exchange(true)) return;
  if (comm.served && (comm.served->plan.served(comm.rank) || comm.served->plan.leads(comm.rank))) return;  // served.h
  logMessage(LogLevel::Warn, kInit,
             "rank %d shares GPU %s with rank %d of another process, and each process runs its own GPU work "
             "(BRAID_SERVED=0, or MPS is on, or the communicator spans hosts, or some rank stages FIFOs in host "
             "memory: NCCL_P2P_DISABLE=1, GPUs without peer access). Unless MPS runs, the GPU takes the "
             "processes' kernels in turns (time slices of milliseconds), so device-memory collectives take milliseconds "
             "each. Fix: start MPS (nvidia-cuda-mps-control -d), leave BRAID_SERVED unset, or make these ranks threads "
             "of one process.",
             comm.rank, me.busId, other);
}

}  // namespace

ncclResult_t GpuResources::create(ncclComm* comm, GpuResources** out) {
  std::unique_ptr<GpuResources> res(new GpuResources(comm));
  if (comm->served && comm->served->plan.served(comm->rank)) {  // no kernels here: the words are the leader's too
    BRAID_CHECK(ServedMember::connect(comm, &res->served_));
    res->abortHost_ = res->served_->abortWord();
    res->errorHost_ = res->served_->errorWord();
  } else {
    BRAID_CHECK(res->allocateWords());
  }
  // Channels and send/recv parts are the tuner's (api/tuning.h), which knows the SMs and the
  // ranks per GPU.
  for (const PeerInfo& p : comm->peers)
    res->sameGpu_.push_back(p.hostHash == comm->peers[comm->rank].hostHash &&
                            std::string(p.busId) == comm->peers[comm->rank].busId);
  warnIfTimeSliced(*comm, res->sameGpu_);
  std::vector<transport::P2pPeerInfo> p2pPeers;
  for (const PeerInfo& p : comm->peers) p2pPeers.push_back(toP2pInfo(p));
  res->ordered128_ = transport::ordered128Everywhere(p2pPeers, comm->rank, env::getInt("NCCL_P2P_DISABLE", 0) != 0,
                                                     transport::cudaGpuQueries());
  // LL where every pair's GPU connection carries it (not across hosts: transport/select.h), so
  // that every rank comes to the same answer.
  res->llEverywhere_ = true;
  for (const PeerInfo& a : comm->peers)
    for (const PeerInfo& b : comm->peers)
      res->llEverywhere_ = res->llEverywhere_ && transport::carriesLL(transport::deviceTransportOf(a, b));
  res->workCache_ = std::make_unique<kernels::WorkCache>();
  res->graphWork_ = std::make_unique<kernels::GraphWork>();
  *out = res.release();
  return ncclSuccess;
}

ncclResult_t GpuResources::allocateWords() {
  cudaError_t e = cudaHostAlloc(reinterpret_cast<void**>(&words_), 2 * sizeof(uint32_t),
                                cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return fail(ncclUnhandledCudaError, "rank %d: cudaHostAlloc of the abort flag failed: %s", comm_->rank,
                cudaGetErrorString(e));
  }
  words_[0] = words_[1] = 0;
  uint32_t* dev = nullptr;
  e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), words_, 0);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return fail(ncclUnhandledCudaError, "rank %d: cudaHostGetDevicePointer failed: %s", comm_->rank, cudaGetErrorString(e));
  }
  abortHost_ = words_;
  errorHost_ = words_ + 1;
  abortDev_ = dev;
  errorDev_ = dev + 1;
  return ncclSuccess;
}

GpuResources::~GpuResources() { close(true); }

cudaError_t GpuResources::scratch(size_t bytes, cudaStream_t stream, void** out) {
  {
    std::lock_guard<std::mutex> lock(scratchMutex_);
    // Freed memory goes back to the device at synchronisations (these copies can be large).
    if (scratchPool_ == nullptr)
      if (cudaError_t e = kernels::makeIsolatedPool(comm_->cudaDev, 0, &scratchPool_); e != cudaSuccess) return e;
  }
  return cudaMallocFromPoolAsync(out, bytes, scratchPool_, stream);
}

algo::Protocol GpuResources::usableProtocol(algo::Protocol asked) {
  if (asked == algo::Protocol::LL && !llEverywhere_) {
    if (!saidNoLL_.exchange(true))
      BRAID_INFO(kColl | kTuning | kNet,
                 "rank %d: LL asked, but this communicator has ranks on other hosts, whose GPU connections carry "
                 "Simple only (the UCX proxy moves slots that a tail counter marks full; LL has none): such calls run "
                 "with Simple",
                 comm_->rank);
    return algo::Protocol::Simple;
  }
  return kernels::usableProtocol(asked, ordered128_, comm_->rank, &saidNoLL128_);
}

ncclResult_t GpuResources::ensureLinks(algo::Protocol proto, const Links& sends, const Links& recvs) {
  auto& sendEnds = sendEnds_[int(proto)];
  auto& recvEnds = recvEnds_[int(proto)];
  std::vector<transport::P2pLink> newSends, newRecvs;
  for (auto& l : sends)
    if (!sendEnds.count(l)) newSends.push_back({l.first, l.second});
  for (auto& l : recvs)
    if (!recvEnds.count(l)) newRecvs.push_back({l.first, l.second});
  if (newSends.empty() && newRecvs.empty()) return ncclSuccess;
  // Each link's transport (transport/select.h): P2P within the host, the UCX proxy across.
  std::vector<transport::P2pLink> localSends, localRecvs, netSends, netRecvs;
  auto split = [&](const std::vector<transport::P2pLink>& links, auto& local, auto& net) {
    for (const transport::P2pLink& l : links)
      (transport::deviceTransportOf(comm_->peers[comm_->rank], comm_->peers[l.peer]) ==
               transport::DeviceTransport::NetStaged
           ? net
           : local)
          .push_back(l);
  };
  split(newSends, localSends, netSends);
  split(newRecvs, localRecvs, netRecvs);
  const kernels::FifoShape shape = fifoShape(proto);
  if (!localSends.empty() || !localRecvs.empty()) {  // collective among the linked ranks of this host
    std::vector<transport::P2pPeerInfo> peers;
    for (const PeerInfo& p : comm_->peers) peers.push_back(toP2pInfo(p));
    std::unique_ptr<transport::P2pTransport> t;
    BRAID_CHECK(transport::P2pTransport::connect(*comm_->bootstrap, peers, {shape.slotBytes, shape.nSlots}, localSends,
                                                 localRecvs, &t));
    for (auto& l : localSends) (void)t->sendEnd(l.channel, l.peer, &sendEnds[{l.channel, l.peer}]);
    for (auto& l : localRecvs) (void)t->recvEnd(l.channel, l.peer, &recvEnds[{l.channel, l.peer}]);
    transports_.push_back(std::move(t));
  }
  if (!netSends.empty() || !netRecvs.empty()) {
    const int peer = !netSends.empty() ? netSends.front().peer : netRecvs.front().peer;
    if (proto != algo::Protocol::Simple)  // usableProtocol turned LL and LL128 into Simple
      return fail(ncclInternalError, "rank %d: a %s connection to rank %d, on another host, which carries Simple only",
                  comm_->rank, algo::protocolName(proto), peer);
    if (!comm_->net)
      return fail(ncclInternalError, "rank %d: rank %d is on another host, and this communicator has no UCX transport",
                  comm_->rank, peer);
    std::unique_ptr<transport::NetDeviceLinks> t;
    const transport::DeviceMemory slots = transport::cudaDeviceMemory(comm_->rank, comm_->cudaDev);
    const bool gpuDirect = transport::netSlotsInDeviceMemory(comm_->net->cudaMemory());
    BRAID_CHECK(transport::NetDeviceLinks::connect(*comm_->net, comm_->rank,
                                                   transport::cudaPinnedMemory(comm_->rank, comm_->cudaDev),
                                                   gpuDirect ? &slots : nullptr, shape.slotBytes, shape.nSlots,
                                                   netSends, netRecvs, &t));
    for (auto& l : netSends) (void)t->sendEnd(l.channel, l.peer, &sendEnds[{l.channel, l.peer}]);
    for (auto& l : netRecvs) (void)t->recvEnd(l.channel, l.peer, &recvEnds[{l.channel, l.peer}]);
    netLinks_.push_back(std::move(t));
  }
  size_t staged = 0;
  for (auto& tr : transports_) staged += tr->hostStaged() ? tr->bytesAllocated() : 0;
  for (auto& nl : netLinks_) staged += nl->bytesAllocated();
  BRAID_INFO(kInit | kAlloc, "rank %d: %s connections made; GPU connections now use %zu bytes of FIFO memory (%zu of them pinned host memory)",
             comm_->rank, algo::protocolName(proto), bytesAllocated(), staged);
  return ncclSuccess;
}

bool GpuResources::linkEnds(algo::Protocol proto, const Links& sends, const Links& recvs, kernels::Launch* launch) const {
  const auto& sendEnds = sendEnds_[int(proto)];
  const auto& recvEnds = recvEnds_[int(proto)];
  std::vector<kernels::SendConn> sendConns;
  std::vector<kernels::RecvConn> recvConns;
  sendConns.reserve(sends.size());
  recvConns.reserve(recvs.size());
  for (auto& [channel, peer] : sends) {
    auto it = sendEnds.find({channel, peer});
    if (it == sendEnds.end()) return false;
    sendConns.push_back({channel, peer, it->second});
  }
  for (auto& [channel, peer] : recvs) {
    auto it = recvEnds.find({channel, peer});
    if (it == recvEnds.end()) return false;
    recvConns.push_back({channel, peer, it->second});
  }
  launch->protocol = proto;
  launch->sends = std::move(sendConns);
  launch->recvs = std::move(recvConns);
  return true;
}

bool GpuResources::anyHostStaged() const {
  if (!netLinks_.empty()) return true;
  for (auto& t : transports_)
    if (t->hostStaged()) return true;
  return false;
}

void GpuResources::launched() const {
  if (!netLinks_.empty() && comm_->net) comm_->net->kick();
}

size_t GpuResources::bytesAllocated() const {
  size_t total = 0;
  for (auto& t : transports_) total += t->bytesAllocated();
  for (auto& t : netLinks_) total += t->bytesAllocated();
  return total;
}

void GpuResources::stopInFlight() {
  if (!abortHost_) return;
  *abortHost_ = 1;
  if (served_) served_->release();
  DeviceScope scope(comm_->cudaDev);
  (void)cudaDeviceSynchronize();  // the communicator's kernels return at the abort word
  (void)cudaGetLastError();
  if (!served_) *abortHost_ = 0;  // a served rank's kernels are the leader's: they may not have seen it yet
}

void GpuResources::close(bool abort) {
  if (abort && abortHost_) *abortHost_ = 1;
  if (abort && served_) served_->release();
  if (comm_->cudaDev >= 0) {
    DeviceScope scope(comm_->cudaDev);
    (void)cudaDeviceSynchronize();  // no kernel may still use the FIFOs (abort makes them return)
    (void)cudaGetLastError();
    if (served_) served_->close();  // the leader ran this rank's last work: the streams waited for it
    if (workCache_) {
      const kernels::WorkCache::Stats st = workCache_->stats();
      BRAID_INFO(kInit | kAlloc, "rank %d: launch work kept on the GPU: reused %llu times, uploaded %llu, evicted %llu",
                 comm_->rank, (unsigned long long)st.hits, (unsigned long long)st.misses, (unsigned long long)st.evictions);
    }
    if (graphWork_) {
      const kernels::GraphWork::Stats st = graphWork_->stats();
      BRAID_INFO(kInit | kAlloc, "rank %d: work of captured launches: %zu buffers, %zu bytes, reused %zu times",
                 comm_->rank, st.buffers, st.bytes, st.reused);
    }
    workCache_.reset();  // nothing reads the kept work any more
    graphWork_.reset();  // nor the captured work: a graph must not replay after its communicator
    if (scratchPool_ != nullptr) (void)cudaMemPoolDestroy(scratchPool_);  // its copies were freed after their launches
    scratchPool_ = nullptr;
    for (auto& t : transports_)
      if (!abort) t->close();
    transports_.clear();
    netLinks_.clear();  // their pinned FIFOs go with the UcxNet, after its proxy stopped
    if (words_) (void)cudaFreeHost(words_);
  }
  words_ = nullptr;
  abortHost_ = nullptr;
  errorHost_ = nullptr;
  served_.reset();
}

}  // namespace braid::api
