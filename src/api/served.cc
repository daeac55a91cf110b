#include "api/served.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "api/device_resources.h"
#include "api/served_leader.h"
#include "api/served_wire.h"
#include "core/env.h"
#include "core/log.h"
#include "kernels/pack.h"
#include "transport/cuda_driver.h"
#include "transport/ipc_refs.h"
#include "transport/p2p.h"

namespace braid::api {

bool mpsEnabled(int cudaDev) {
  int on = 0;
  if (cudaDeviceGetAttribute(&on, cudaDevAttrMpsEnabled, cudaDev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return on != 0;
}

namespace {
using namespace served_wire;

// BRAID_SERVED: auto (default; off under MPS), 0 (never), 1 (also under MPS).
int servedSetting() {
  const std::string v = env::getString("BRAID_SERVED", "auto");
  if (v == "0") return 0;
  if (v == "1") return 1;
  return 2;
}

// Why this rank's FIFOs would be staged in host memory ("" when they would not), by the P2P
// transport's own rule (planStaging) over the communicator's other GPU ranks on this host. A
// leader cannot run such a rank's kernels: the staged regions are shared memory that only the
// linked peers map, by a name removed once they have.
std::string stagingReason(const ncclComm& comm) {
  const bool p2pDisabled = env::getInt("NCCL_P2P_DISABLE", 0) != 0;
  if (p2pDisabled) return "NCCL_P2P_DISABLE=1";
  std::vector<transport::P2pPeerInfo> peers;
  std::vector<int> linked;
  for (const PeerInfo& p : comm.peers) {
    peers.push_back(transport::p2pPeerInfo(p));
    if (p.rank != comm.rank && p.cudaDev >= 0 && p.hostHash == comm.peers[size_t(comm.rank)].hostHash)
      linked.push_back(p.rank);
  }
  const std::vector<transport::StageReason> reasons =
      transport::planStaging(peers[size_t(comm.rank)], peers, linked, p2pDisabled, transport::cudaGpuQueries());
  for (size_t i = 0; i < linked.size(); ++i)
    if (reasons[i] != transport::StageReason::kNone)
      return std::string(transport::stageReasonName(reasons[i])) + " to rank " + std::to_string(linked[i]);
  return "";
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

}  // namespace

std::mutex& servedLaunchMutex(int cudaDev) {
  static std::mutex guard;
  static std::map<int, std::unique_ptr<std::mutex>> byDevice;
  std::lock_guard<std::mutex> lock(guard);
  std::unique_ptr<std::mutex>& m = byDevice[cudaDev];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

void* scratchToken(size_t index) { return reinterpret_cast<void*>(kScratchTokenBase + index * 16); }

bool ServedPlan::any() const {
  for (size_t r = 0; r < leaderOf.size(); ++r)
    if (leaderOf[r] != int(r)) return true;
  return false;
}

bool ServedPlan::leads(int rank) const {
  for (size_t r = 0; r < leaderOf.size(); ++r)
    if (int(r) != rank && leaderOf[r] == rank) return true;
  return false;
}

Served::~Served() { stop(true); }

void Served::leaderLaunched(const std::vector<ServedGate>& perRank) {
  if (leader) leader->leaderLaunched(perRank);
}

ncclResult_t Served::gate(cudaStream_t stream, uint64_t firstColl) {
  return leader ? leader->gate(stream, firstColl) : ncclSuccess;
}

ncclResult_t Served::launchFused(const kernels::Launch& L, const kernels::PackedLaunch& own, const SoleCollective& sole,
                                 uint64_t firstColl, uint64_t lastColl, unsigned* widest, bool* fused) {
  *fused = false;
  return leader ? leader->launchFused(L, own, sole, firstColl, lastColl, widest, fused) : ncclSuccess;
}

void Served::release() {
  if (leader) leader->releaseLeader();
}

void Served::stop(bool abort) {
  if (leader) leader->stop(abort);
  leader.reset();
}

// ---------------------------------------------------------------------------------------------
// The plan.

ncclResult_t planServing(ncclComm* comm) {
  const int n = comm->nRanks;
  auto sameGpu = [&](int a, int b) {
    const PeerInfo &pa = comm->peers[size_t(a)], &pb = comm->peers[size_t(b)];
    return pa.cudaDev >= 0 && pb.cudaDev >= 0 && pa.hostHash == pb.hostHash && pa.busId[0] != 0 &&
           std::strcmp(pa.busId, pb.busId) == 0;
  };
  std::vector<int> lowest(static_cast<size_t>(n), -1);  // the lowest rank on each rank's GPU
  bool shared = false;                     // some GPU has ranks of several processes
  bool oneHost = true;
  for (int r = 0; r < n; ++r) {
    oneHost = oneHost && comm->peers[size_t(r)].hostHash == comm->peers[0].hostHash;
    for (int l = 0; l <= r && lowest[size_t(r)] < 0; ++l)
      if (l == r || sameGpu(l, r)) lowest[size_t(r)] = l;
    const int l = lowest[size_t(r)];
    shared = shared || (l != r && comm->peers[size_t(l)].processHash != comm->peers[size_t(r)].processHash);
  }
  if (!shared) return ncclSuccess;
  // Each rank's view, so that every rank takes its leader's: MPS, BRAID_SERVED, a socket nonce.
  // And whether it stages FIFOs in host memory: then no rank is served (stagingReason).
  struct View {
    int32_t mps, setting, staged, pad;
    uint64_t nonce;
  };
  std::vector<View> views(static_cast<size_t>(n));
  View& mine = views[size_t(comm->rank)];
  mine.mps = comm->cudaDev >= 0 && mpsEnabled(comm->cudaDev) ? 1 : 0;
  mine.setting = servedSetting();
  const std::string staging = stagingReason(*comm);
  mine.staged = staging.empty() ? 0 : 1;
  mine.nonce = std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
  BRAID_CHECK(comm->bootstrap->allGather(views.data(), sizeof(View)));
  int stagingRank = -1;
  for (int r = 0; r < n && stagingRank < 0; ++r)
    if (views[size_t(r)].staged) stagingRank = r;
  auto served = std::make_shared<Served>();
  ServedPlan& plan = served->plan;
  plan.leaderOf.resize(size_t(n));
  for (int r = 0; r < n; ++r) {
    const int l = lowest[size_t(r)];
    const View& v = views[size_t(l)];
    const bool serve = l != r && comm->peers[size_t(l)].processHash != comm->peers[size_t(r)].processHash && oneHost &&
                       stagingRank < 0 && v.setting != 0 && (v.mps == 0 || v.setting == 1);
    plan.leaderOf[size_t(r)] = serve ? l : r;
  }
  if (stagingRank >= 0 && (comm->rank == 0 || mine.staged))
    BRAID_INFO(kInit | kP2p, "served: no rank is served by another's process: rank %d stages FIFOs in host memory (%s), "
               "which a serving process cannot map; each process runs its own GPU work",
               mine.staged ? comm->rank : stagingRank, mine.staged ? staging.c_str() : "its log says why");
  const int me = comm->rank;
  const int myLeader = lowest[size_t(me)];
  const View& lv = views[size_t(myLeader)];
  std::vector<int> servedHere;
  for (int r = 0; r < n; ++r)
    if (plan.leaderOf[size_t(r)] == myLeader && r != myLeader) servedHere.push_back(r);
  if (!servedHere.empty()) {
    char name[96];
    std::snprintf(name, sizeof(name), "braid-served-%016llx-%d-%016llx",
                  static_cast<unsigned long long>(comm->peers[size_t(myLeader)].hostHash),
                  comm->peers[size_t(myLeader)].pid, static_cast<unsigned long long>(lv.nonce));
    plan.socketName = name;
  }
  if (me == myLeader && !servedHere.empty()) {
    BRAID_CHECK(ServedLeader::start(comm, plan.socketName, &served->leader));
    BRAID_INFO(kInit | kP2p, "served: GPU %s is shared with ranks of other processes and MPS is %s: rank %d's process "
               "runs the GPU work of ranks %s, which only order their streams (BRAID_SERVED=0 turns it off)",
               comm->peers[size_t(me)].busId, lv.mps ? "on (BRAID_SERVED=1)" : "off", me, rankList(servedHere).c_str());
  }
  comm->served = std::move(served);
  return ncclSuccess;
}

// ---------------------------------------------------------------------------------------------
// The served rank's end.

ncclResult_t ServedMember::connect(ncclComm* comm, std::unique_ptr<ServedMember>* out) {
  std::unique_ptr<ServedMember> m(new ServedMember);
  m->comm_ = comm;
  m->counts_.assign(size_t(comm->nRanks), PeerCounts{0, 0});
  const ServedPlan& plan = comm->served->plan;
  const int leader = plan.leaderOf[size_t(comm->rank)];
  const Deadline deadline = deadlineIn(env::initTimeoutSeconds());
  BRAID_CHECK(transport::connectServed(comm->rank, plan.socketName, deadline, &comm->abortFlag, &m->fd_));
  std::unique_ptr<transport::ServedPage> page;
  BRAID_CHECK(transport::ServedPage::create(comm->rank, &page));
  m->page_ = std::move(page);
  HelloFrame h{};
  h.magic = kMagic;
  h.kind = kHello;
  h.rank = comm->rank;
  h.pid = comm->peers[size_t(comm->rank)].pid;
  std::snprintf(h.page, sizeof(h.page), "%s", m->page_->name().c_str());
  std::vector<unsigned char> frame;
  put(&frame, h);
  std::string why;
  std::vector<unsigned char> ack;
  if (!transport::sendFrame(m->fd_, frame, deadline, &why) || !transport::recvFrame(m->fd_, &ack, deadline, &why) || ack.size() != 1)
    return fail(ncclSystemError, "served: rank %d: rank %d, whose process runs this GPU's work, did not take this rank "
                "(%s; its log says why). Fix: start MPS, or set BRAID_SERVED=0", comm->rank, leader, why.c_str());
  m->page_->unlinkName();
  BRAID_INFO(kInit | kP2p, "served: rank %d: rank %d's process runs this rank's GPU work; this rank orders its streams only",
             comm->rank, leader);
  *out = std::move(m);
  return ncclSuccess;
}

ServedMember::~ServedMember() {
  if (fd_ >= 0) (void)::close(fd_);
}

ncclResult_t ServedMember::post(const kernels::Launch& L, const SoleCollective& sole, const std::vector<ServedCopy>& copies,
                                const std::vector<size_t>& scratchBytes, const std::vector<ServedGate>& perRank) {
  const int rank = comm_->rank;
  const int64_t pid = comm_->peers[size_t(rank)].pid;
  const uint64_t host = comm_->peers[size_t(rank)].hostHash;
  auto describe = [&](const void* p, const char* what, WireRef* out) -> ncclResult_t {
    *out = WireRef{};
    const uintptr_t v = reinterpret_cast<uintptr_t>(p);
    if (v >= kScratchTokenBase && v < kScratchTokenBase + 16 * scratchBytes.size()) {
      out->scratch = uint32_t((v - kScratchTokenBase) / 16 + 1);
      return ncclSuccess;
    }
    return transport::describePointer(p, pid, host, what, &out->ipc);
  };
  kernels::PackedLaunch packed;
  BRAID_CHECK(kernels::packLaunch(L, &packed));
  std::vector<unsigned char> frame;
  PostHeader h{};
  h.magic = kMagic;
  h.kind = kPost;
  h.nPeers = uint32_t(comm_->nRanks);
  h.protocol = uint8_t(packed.protocol);
  h.peersOnThisGpu = L.peersOnThisGpu ? 1 : 0;
  h.threadsPerBlock = uint16_t(L.threadsPerBlock);
  h.slotBytes = packed.slotBytes;
  h.nSlots = packed.nSlots;
  h.slicesPerStep = L.slicesPerStep;
  h.nScratch = uint32_t(scratchBytes.size());
  h.nCopies = uint32_t(copies.size());
  h.nKernels = uint32_t(packed.kernels.size());
  h.soleColl = sole.any ? uint32_t(sole.coll) + 1 : 0;
  h.soleType = uint32_t(sole.type);
  h.soleRoot = sole.root;
  h.soleCount = sole.count;
  put(&frame, h);
  const size_t countsAt = frame.size();
  frame.resize(countsAt + size_t(comm_->nRanks) * sizeof(PeerCounts));  // filled in below, in post order
  for (size_t b : scratchBytes) put(&frame, uint64_t(b));
  for (const ServedCopy& c : copies) {
    WireCopy w{};
    BRAID_CHECK(describe(c.dst, "a copy's destination", &w.dst));
    BRAID_CHECK(describe(c.src, "a copy's source", &w.src));
    w.bytes = c.bytes;
    put(&frame, w);
  }
  for (const kernels::PackedKernel& k : packed.kernels) {
    const std::vector<uint32_t> offsets = kernels::pointerOffsets(k);
    KernelHeader kh{};
    kh.type = uint32_t(k.type);
    kh.nBlocks = k.nBlocks;
    kh.index = k.index;
    kh.blobBytes = uint32_t(k.blob.size());
    kh.nPointers = uint32_t(offsets.size());
    put(&frame, kh);
    put(&frame, k.blob.data(), k.blob.size());
    for (uint32_t off : offsets) {
      WirePointer wp{};
      wp.offset = off;
      void* p = nullptr;
      std::memcpy(&p, k.blob.data() + off, sizeof(p));
      BRAID_CHECK(describe(p, "a buffer of the call", &wp.ref));
      put(&frame, wp);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const uint32_t seq = posted_.load() + 1 == 0 ? 1 : posted_.load() + 1;  // 0 means "none yet"
  std::memcpy(frame.data() + offsetof(PostHeader, seq), &seq, sizeof(seq));
  // So far, this post included: the last collective number, and the send/recv ops per rank.
  std::vector<PeerCounts> counts = counts_;
  uint64_t collSeq = lastColl_;
  for (size_t r = 0; r < counts.size() && r < perRank.size(); ++r) {
    counts[r].sendsTo += perRank[r].sends;
    counts[r].recvsFrom += perRank[r].recvs;
    collSeq = std::max(collSeq, perRank[r].collSeq);
  }
  std::memcpy(frame.data() + offsetof(PostHeader, collSeq), &collSeq, sizeof(collSeq));
  std::memcpy(frame.data() + countsAt, counts.data(), counts.size() * sizeof(PeerCounts));
  page_->host()->posted = seq;
  std::string why;
  const auto sendStart = ncclComm::EnqueueTimes::Clock::now();
  const bool sent = transport::sendFrame(fd_, frame, deadlineIn(kSendSeconds), &why);
  ncclComm::EnqueueTimes::add(comm_->enqueueTimes.postSendNs, sendStart);
  if (!sent)
    return fail(ncclSystemError, "served: rank %d: cannot hand this call's GPU work to rank %d, whose process runs it (%s). "
                "Is that process gone?", rank, comm_->served->plan.leaderOf[size_t(rank)], why.c_str());
  posted_.store(seq);
  counts_ = std::move(counts);
  lastColl_ = collSeq;
  lastCollWord_.store(uint32_t(collSeq));
  transport::ServedWords* words = page_->device();
  const auto streamStart = ncclComm::EnqueueTimes::Clock::now();
  // ready and readyColl in one stream operation where the driver can (transport/served_link.h):
  // each costs a context switch without MPS (4 processes, 8 B: 56-62 -> 49-52 us, perf/NOTES.md).
  cudaError_t e = transport::streamWrite64(L.stream, reinterpret_cast<uint64_t*>(&words->ready),
                                           uint64_t(uint32_t(collSeq)) << 32 | seq);
  if (e == cudaErrorNotSupported) {
    e = transport::streamWrite(L.stream, &words->ready, seq);
    if (e == cudaSuccess && collSeq > 0) e = transport::streamWrite(L.stream, &words->readyColl, uint32_t(collSeq));
  }
  if (e == cudaSuccess) e = transport::streamWaitAtLeast(L.stream, &words->done, seq);
  ncclComm::EnqueueTimes::add(comm_->enqueueTimes.servedStreamNs, streamStart);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(ncclUnhandledCudaError, "served: rank %d: ordering the stream around the GPU work rank %d runs "
                "(cuStreamWriteValue32/cuStreamWaitValue32): %s", rank, comm_->served->plan.leaderOf[size_t(rank)],
                cudaGetErrorString(e));
  }
  return ncclSuccess;
}

void ServedMember::release() {
  page_->host()->abort = 1;
  page_->host()->done = posted_.load();
  // Ahead of any collective the leader's stream can be waiting for (it is never 2^30 calls ahead).
  page_->host()->readyColl = lastCollWord_.load() + (1u << 30);
}

void ServedMember::close() {
  if (fd_ < 0) return;
  std::vector<unsigned char> bye;
  put(&bye, kMagic);
  put(&bye, uint32_t(kBye));
  std::string why;
  (void)transport::sendFrame(fd_, bye, deadlineIn(1), &why);  // a leader already gone needs no goodbye
  (void)::close(fd_);
  fd_ = -1;
}

}  // namespace braid::api
