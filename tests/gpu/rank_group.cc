#include "rank_group.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>
#include <tuple>

#include "core/numeric.h"
#include "thread_bootstrap.h"

namespace braid::gputest {

bool cudaOk(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "CUDA error: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

std::unique_ptr<RankGroup> RankGroup::create(const GroupOptions& options) {
  std::unique_ptr<RankGroup> g(new RankGroup());
  g->options_ = options;
  const int n = options.nRanks;
  void* flags = nullptr;
  if (!GPU_OK(cudaHostAlloc(&flags, 4096, cudaHostAllocMapped | cudaHostAllocPortable))) return nullptr;
  std::memset(flags, 0, 4096);
  g->abortFlag_ = static_cast<volatile uint32_t*>(flags);
  g->errors_ = static_cast<uint32_t*>(flags) + 32;
  g->streams_.resize(n);
  for (auto& t : g->transports_) t.resize(n);
  for (int r = 0; r < n; ++r) {
    if (!GPU_OK(cudaSetDevice(g->device(r)))) return nullptr;
    if (!GPU_OK(cudaStreamCreateWithFlags(&g->streams_[r], cudaStreamNonBlocking))) return nullptr;
    g->caches_.push_back(std::make_unique<kernels::WorkCache>(options.workCacheEntries));
    g->graphWork_.push_back(std::make_unique<kernels::GraphWork>());
  }
  std::vector<transport::P2pPeerInfo> peers(n);
  for (int r = 0; r < n; ++r) {
    peers[r].rank = r;
    peers[r].cudaDev = g->device(r);
    peers[r].pid = 1;
    peers[r].hostHash = 1;
    peers[r].busId = g->device(r);
  }
  g->hub_ = std::make_unique<ThreadBootstrapHub>(n);
  for (int r = 0; r < n; ++r) g->boots_.push_back(std::make_unique<ThreadBootstrap>(*g->hub_, r));
  for (algo::Protocol proto : options.protocols) {
    const kernels::FifoShape shape = g->fifoShape(proto);
    auto& transports = g->transports_[int(proto)];
    std::vector<ncclResult_t> results(n, ncclSuccess);
    g->onEachRank([&](int r) {
      ThreadBootstrap& boot = *g->boots_[r];
      std::vector<transport::P2pLink> links;
      for (int c = 0; c < options.nChannels; ++c)
        for (int p = 0; p < n; ++p)
          if (p != r) links.push_back({c, p});
      (void)cudaSetDevice(g->device(r));
      results[r] = transport::P2pTransport::connect(boot, peers, {shape.slotBytes, shape.nSlots}, links, links, &transports[r]);
    });
    for (int r = 0; r < n; ++r) {
      if (results[r] != ncclSuccess) {
        std::fprintf(stderr, "p2p connect (%s) failed on rank %d: %d\n", algo::protocolName(proto), r, int(results[r]));
        return nullptr;
      }
    }
    if (proto == algo::Protocol::LL128) {
      g->ordered128_ = true;
      for (int r = 0; r < n; ++r)
        for (const transport::P2pLink& l : transports[r]->sendLinks()) {
          transport::FifoSendEnd e;
          g->ordered128_ = g->ordered128_ && transports[r]->sendEnd(l.channel, l.peer, &e) && e.ordered128;
        }
    }
  }
  return g;
}

RankGroup::~RankGroup() {
  // Close the transports together: the teardown barrier needs every rank.
  for (auto& transports : transports_) {
    bool all = !transports.empty();
    for (auto& t : transports) all = all && t != nullptr;
    if (all) {
      onEachRank([&](int r) {
        (void)cudaSetDevice(device(r));
        if (transports[r]->close() != ncclSuccess) std::fprintf(stderr, "p2p close failed on rank %d\n", r);
      });
    }
    transports.clear();
  }
  for (size_t r = 0; r < caches_.size(); ++r) {  // cudaFree waits for the work that reads them
    (void)cudaSetDevice(device(int(r)));
    caches_[r].reset();
    graphWork_[r].reset();
  }
  for (cudaStream_t s : streams_) (void)cudaStreamDestroy(s);
  if (abortFlag_ != nullptr) (void)cudaFreeHost(const_cast<uint32_t*>(abortFlag_));
}

void RankGroup::clearErrors() {
  for (int r = 0; r < options_.nRanks; ++r) errors_[r] = 0;
  *abortFlag_ = 0;
}

kernels::FifoShape RankGroup::fifoShape(algo::Protocol p) const {
  switch (p) {
    case algo::Protocol::LL: return {options_.llSlotBytes, options_.nSlots};
    case algo::Protocol::LL128: return {options_.ll128SlotBytes, options_.nSlots};
    case algo::Protocol::Simple: break;
  }
  return {options_.slotBytes, options_.nSlots};
}

uint64_t RankGroup::maxStepElems(ncclDataType_t type, algo::Protocol p) const {
  return kernels::maxStepBytes(p, fifoShape(p)) / sizeOfType(type);
}

algo::Protocol RankGroup::usableProtocol(algo::Protocol asked) {
  return kernels::usableProtocol(asked, ordered128_, 0, &saidNoLL128_);
}

size_t RankGroup::fifoBytesPerRank() const {
  size_t bytes = 0;
  for (const auto& transports : transports_)
    if (!transports.empty() && transports[0]) bytes += transports[0]->bytesAllocated();  // no links: none
  return bytes;
}

void RankGroup::onEachRank(const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < options_.nRanks; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

bool RankGroup::synchronize() {
  bool ok = true;
  for (int r = 0; r < options_.nRanks; ++r) ok = GPU_OK(cudaStreamSynchronize(streams_[r])) && ok;
  return ok;
}

bool RankGroup::settle() {
  bool ok = true;
  for (int d = 0; d < options_.nDevices; ++d) ok = GPU_OK(cudaSetDevice(d)) && GPU_OK(cudaDeviceSynchronize()) && ok;
  return ok;
}

bool RankGroup::waitOrAbort(double seconds) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    bool done = true;
    for (int r = 0; r < options_.nRanks; ++r) done = done && cudaStreamQuery(streams_[r]) != cudaErrorNotReady;
    if (done) return synchronize();
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  // Read the counters on a stream of their own, which does not wait for the ranks' streams.
  cudaStream_t peek = nullptr;
  (void)cudaStreamCreateWithFlags(&peek, cudaStreamNonBlocking);
  for (int r = 0; r < options_.nRanks && peek != nullptr; ++r) {
    for (int proto = 0; proto < algo::kNumProtocols; ++proto) {
      if (transports_[proto].empty()) continue;
      const transport::P2pTransport& t = *transports_[proto][r];
      for (const transport::P2pLink& l : t.recvLinks()) {
        transport::FifoRecvEnd e;
        // The counters, and each side's own step (LL and LL128 move no tail).
        uint64_t tail = 0, head = 0, recvStep = 0;
        if (!t.recvEnd(l.channel, l.peer, &e)) continue;
        (void)cudaMemcpyAsync(&tail, e.localTail, 8, cudaMemcpyDeviceToHost, peek);
        (void)cudaMemcpyAsync(&head, e.peerHead, 8, cudaMemcpyDeviceToHost, peek);
        (void)cudaMemcpyAsync(&recvStep, e.localTail + transport::kOwnStepWords, 8, cudaMemcpyDeviceToHost, peek);
        (void)cudaStreamSynchronize(peek);
        if (tail != 0 || head != 0 || recvStep != 0)
          std::fprintf(stderr, "hang: %s rank %d <- rank %d channel %d: tail %llu head %llu recv step %llu\n",
                       algo::protocolName(algo::Protocol(proto)), r, l.peer, l.channel, (unsigned long long)tail,
                       (unsigned long long)head, (unsigned long long)recvStep);
      }
    }
    std::fprintf(stderr, "hang: rank %d stream %s\n", r, cudaStreamQuery(streams_[r]) == cudaErrorNotReady ? "busy" : "done");
  }
  if (peek != nullptr) (void)cudaStreamDestroy(peek);
  *abortFlag_ = 1;
  synchronize();
  return false;
}

ncclResult_t RankGroup::enqueue(int rank, const std::vector<CollCall>& calls, algo::Protocol protocol) {
  if (!connected(protocol)) {
    std::fprintf(stderr, "RankGroup::enqueue: %s is not connected (GroupOptions::protocols)\n", algo::protocolName(protocol));
    return ncclInvalidUsage;
  }
  const auto& transports = transports_[int(protocol)];
  std::vector<algo::RankPlan> plans(calls.size());
  kernels::Launch launch;
  launch.protocol = protocol;
  launch.cudaDev = device(rank);
  launch.stream = streams_[rank];
  launch.abortFlag = abortFlag_;
  launch.errorOut = errors_ + rank;
  launch.threadsPerBlock = options_.threadsPerBlock;
  // GPU-scope fences only with every peer on this GPU and nothing staged, as the API decides.
  launch.peersOnThisGpu = options_.nDevices == 1 && !transports[rank]->hostStaged();
  launch.slicesPerStep = options_.slicesPerStep;  // as the API sets it: all ranks share the GPU
  std::set<std::pair<int, int>> sendKeys, recvKeys;
  for (size_t i = 0; i < calls.size(); ++i) {
    algo::CollArgs args = calls[i].args;
    args.rank = rank;
    args.nRanks = options_.nRanks;
    if (args.maxStepElems == 0) args.maxStepElems = maxStepElems(calls[i].type, protocol);
    plans[i] = calls[i].algorithm->build(args);
    kernels::OpWork op;
    op.type = calls[i].type;
    op.red = calls[i].red;
    op.reduces = algo::collReduces(args.coll);
    op.buffers = {calls[i].input, calls[i].output};
    launch.ops.push_back(op);
    for (const algo::Lane& lane : plans[i].lanes) {
      launch.lanes.push_back({int(i), &lane});
      for (const algo::Step& s : lane.steps) {
        if (s.sendPeer != algo::kNoPeer) sendKeys.insert({lane.channel, s.sendPeer});
        if (s.recvPeer != algo::kNoPeer) recvKeys.insert({lane.channel, s.recvPeer});
      }
    }
  }
  for (auto [c, p] : sendKeys) {
    kernels::SendConn sc{c, p, {}};
    if (!transports[rank]->sendEnd(c, p, &sc.end)) return ncclInternalError;
    launch.sends.push_back(sc);
  }
  for (auto [c, p] : recvKeys) {
    kernels::RecvConn rc{c, p, {}};
    if (!transports[rank]->recvEnd(c, p, &rc.end)) return ncclInternalError;
    launch.recvs.push_back(rc);
  }
  launch.workCache = workCache(rank);
  launch.graphWork = graphWork_[rank].get();
  return kernels::launch(launch);
}

}  // namespace braid::gputest
