#include "api/device_resources.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "api/served.h"
#include "core/cuda_scope.h"
#include "core/env.h"
#include "core/log.h"
#include "kernels/stream_pool.h"
#include "transport/select.h"
#include "transport/ucx_net.h"

namespace braid::api {

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
  if (comm.cudaDev >= 0 && mpsEnabled(comm.cudaDev)) {  // the processes' kernels run together: nothing to warn of
    BRAID_INFO(kInit, "rank %d shares GPU %s with rank %d of another process; MPS is on, so their kernels run together",
               comm.rank, me.busId, other);
    return;
  }
  logMessage(LogLevel::Warn, kInit,
             "rank %d shares GPU %s with rank %d of another process, and each process runs its own GPU work "
             "(BRAID_SERVED=0, or the communicator spans hosts, or some rank stages FIFOs in host memory: "
             "NCCL_P2P_DISABLE=1, GPUs without peer access), while MPS is off: the GPU takes the "
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
  res->ordered128_ = transport::ll128Everywhere(comm->peers, comm->rank);
  res->llEverywhere_ = transport::llEverywhere(comm->peers);  // not across hosts (transport/select.h)
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
  // Each link's transport (transport/select.h), connected transport by transport in one order
  // on every rank (P2P's connect is collective among the ranks it links).
  const PeerInfo& me = comm_->peers[comm_->rank];
  const kernels::FifoShape shape = fifoShape(proto);
  const transport::DeviceConnectContext ctx{comm_->bootstrap.get(), &comm_->peers, comm_->rank, comm_->cudaDev,
                                            comm_->net.get(), shape.slotBytes, shape.nSlots};
  for (const transport::DeviceTransport* t : transport::deviceTransports()) {
    std::vector<transport::P2pLink> ts, tr;
    for (const transport::P2pLink& l : newSends)
      if (&transport::deviceTransportOf(me, comm_->peers[l.peer]) == t) ts.push_back(l);
    for (const transport::P2pLink& l : newRecvs)
      if (&transport::deviceTransportOf(me, comm_->peers[l.peer]) == t) tr.push_back(l);
    if (ts.empty() && tr.empty()) continue;
    if (proto == algo::Protocol::LL128 ? !t->carriesLL128() : proto == algo::Protocol::LL && !t->carriesLL())
      return fail(ncclInternalError, "rank %d: a %s connection to rank %d over %s, which does not carry it "
                  "(usableProtocol should have fallen back to Simple)",
                  comm_->rank, algo::protocolName(proto), (ts.empty() ? tr : ts).front().peer, t->name());
    std::unique_ptr<transport::DeviceLinks> links;
    BRAID_CHECK(t->connect(ctx, ts, tr, &links));
    for (auto& l : ts) (void)links->sendEnd(l.channel, l.peer, &sendEnds[{l.channel, l.peer}]);
    for (auto& l : tr) (void)links->recvEnd(l.channel, l.peer, &recvEnds[{l.channel, l.peer}]);
    links_.push_back(std::move(links));
  }
  size_t staged = 0;
  for (auto& l : links_) staged += l->hostBytes();
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

bool GpuResources::systemScope() const {
  for (auto& l : links_)
    if (l->systemScope()) return true;
  return false;
}

void GpuResources::launched(int channels) const {
  if (comm_->net && std::any_of(links_.begin(), links_.end(), [](auto& l) { return l->proxied(); }))
    comm_->net->kick(channels);
}

size_t GpuResources::bytesAllocated() const {
  size_t total = 0;
  for (auto& l : links_) total += l->bytesAllocated();
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
    for (auto& l : links_)
      if (!abort) (void)l->close();
    links_.clear();  // the UCX links' FIFOs go with the UcxNet, after its proxy stopped
    if (words_) (void)cudaFreeHost(words_);
  }
  words_ = nullptr;
  abortHost_ = nullptr;
  errorHost_ = nullptr;
  served_.reset();
}

}  // namespace braid::api
