// P2P transport: the staging decision, region layout, export/import of the FIFO regions
// (device memory by CUDA IPC, staged host memory by POSIX shared memory), teardown.
#include "transport/p2p.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "core/cuda_scope.h"
#include "core/env.h"
#include "core/log.h"
#include "transport/cuda_driver.h"
#include "transport/ipc_refs.h"
#include "transport/shared_pages.h"

namespace braid::transport {
namespace {

constexpr size_t kRegionAlign = size_t(2) << 20;  // share whole 2 MiB pages only
constexpr size_t kCounterBytes = 128;             // a counter and this side's own step (p2p_fifo.h) per line
constexpr size_t kRecordAlign = 4096;
constexpr uint32_t kTagHeader = 0x50325000;       // "P2P" + 0: header; +1: entries; +2: ack
constexpr uint32_t kTagAck = kTagHeader + 2;
constexpr uint32_t kMagic = 0xb2a1d005;           // 5: the header carries the region's buffer id

enum EntryKind : int32_t { kRecvRecord = 0, kHeadCounter = 1 };

// What a rank tells one peer: its region, and where in it the records for that peer are.
struct Header {
  uint32_t magic;
  uint32_t nEntries;
  int64_t pid;
  uint64_t hostHash;
  uint64_t base;   // the region's device address in the sender's process (same-process peers use it)
  uint64_t bytes;  // the region's size
  int32_t hostStaged;
  int32_t ordered128;  // the sender sees an ordered128Path to the receiver and stages nothing
  cudaIpcMemHandle_t handle;    // device memory: for cudaIpcOpenMemHandle
  uint64_t bufferId;            // device memory: its CU_POINTER_ATTRIBUTE_BUFFER_ID in the sender (ipc_refs.h)
  char shmName[kShmNameBytes];  // staged: the shared-memory object, NUL-terminated
};
struct Entry {
  int32_t channel;
  int32_t kind;
  uint64_t offset;
};

size_t roundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

bool sameProcess(const P2pPeerInfo& a, const P2pPeerInfo& b) { return a.hostHash == b.hostHash && a.pid == b.pid; }

ncclResult_t cudaFail(int rank, const char* what, cudaError_t e) {
  (void)cudaGetLastError();  // leave no (non-sticky) error behind for the next CUDA call
  return fail(ncclUnhandledCudaError, "p2p: rank %d: %s: %s", rank, what, cudaGetErrorString(e));
}

ncclResult_t sysFail(int rank, const char* what, const char* name, int err) {
  return fail(ncclSystemError, "p2p: rank %d: %s(%s): %s", rank, what, name, std::strerror(err));
}

// Can `fromDev` load and store `toDev`'s memory directly? (Ordinals of this process.)
bool peerAccessible(int fromDev, int toDev) {
  if (fromDev == toDev) return true;
  int can = 0;
  cudaError_t e = cudaDeviceCanAccessPeer(&can, fromDev, toDev);
  if (e != cudaSuccess) (void)cudaGetLastError();  // counts as "no": the region is staged
  return e == cudaSuccess && can != 0;
}

// NVLink between two GPUs of this process: CUDA reports native atomics between peers over
// NVLink, not over PCIe. Any error counts as "no" (LL128 is then not used on that link).
bool nvlinkBetween(int fromDev, int toDev) {
  if (fromDev == toDev) return false;
  int atomics = 0;
  cudaError_t e = cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, fromDev, toDev);
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e == cudaSuccess && atomics != 0;
}

// This process's ordinal of the GPU at `busId`, or -1 when it is not visible here.
int deviceByBusId(int64_t busId) {
  if (busId < 0) return -1;
  int dev = -1;
  if (cudaDeviceGetByPCIBusId(&dev, busIdString(busId).c_str()) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return dev;
}

// "rank 1 (no peer access between GPUs 0000:18:00.0 and 0000:2a:00.0)"
std::string describe(const P2pPeerInfo& self, const P2pPeerInfo& peer, int p, StageReason r) {
  char s[160];
  switch (r) {
    case StageReason::kP2pDisabled:
      std::snprintf(s, sizeof(s), "rank %d (NCCL_P2P_DISABLE)", p);
      break;
    case StageReason::kNoPeerAccess:
      std::snprintf(s, sizeof(s), "rank %d (no peer access between GPUs %s and %s)", p, busIdString(self.busId).c_str(),
                    busIdString(peer.busId).c_str());
      break;
    case StageReason::kGpuNotVisible:
      std::snprintf(s, sizeof(s), "rank %d (its GPU %s is not visible in this process)", p, busIdString(peer.busId).c_str());
      break;
    case StageReason::kNone:
      std::snprintf(s, sizeof(s), "rank %d (direct)", p);
      break;
  }
  return s;
}

// Peer p's region as this process reaches it.
struct Imported {
  char* base = nullptr;  // the kernels' address of the region
  void* ipc = nullptr;   // to cudaIpcCloseMemHandle
  void* host = nullptr;  // to cudaHostUnregister and munmap
  size_t bytes = 0;
};

ncclResult_t importRegion(int me, int p, const P2pPeerInfo& self, const P2pPeerInfo& peer, const Header& h,
                          StageReason reason, Imported* out) {
  if (!h.hostStaged && (reason == StageReason::kNoPeerAccess || reason == StageReason::kGpuNotVisible))
    return fail(ncclSystemError,
                "p2p: rank %d: rank %d put its FIFOs in device memory of GPU %s, which this rank's GPU %s cannot "
                "access (%s); set NCCL_P2P_DISABLE=1 on every rank to stage them in host memory",
                me, p, busIdString(peer.busId).c_str(), busIdString(self.busId).c_str(), stageReasonName(reason));
  if (h.pid == self.pid && h.hostHash == self.hostHash) {
    out->base = reinterpret_cast<char*>(h.base);  // device or staged: the same address here
    if (!h.hostStaged && peer.cudaDev != self.cudaDev) {
      cudaError_t e = cudaDeviceEnablePeerAccess(peer.cudaDev, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else if (e != cudaSuccess) return cudaFail(me, "cudaDeviceEnablePeerAccess", e);
    }
    return ncclSuccess;
  }
  if (h.hostStaged) {
    if (std::memchr(h.shmName, 0, sizeof(h.shmName)) == nullptr || h.bytes == 0)
      return fail(ncclInternalError, "p2p: rank %d: rank %d sent a malformed staged-region header", me, p);
    void* dev = nullptr;
    BRAID_CHECK(mapShared("p2p", me, h.shmName, h.bytes, false, &out->host, &dev));
    // Mapped: the name may go now (the owner removes it too once every peer acknowledged),
    // so that the owner's death from here on leaves nothing in /dev/shm.
    (void)shm_unlink(h.shmName);
    out->bytes = h.bytes;
    out->base = static_cast<char*>(dev);
    return ncclSuccess;
  }
  void* mapped = nullptr;
  cudaError_t e = cudaIpcOpenMemHandle(&mapped, h.handle, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) return cudaFail(me, "cudaIpcOpenMemHandle", e);
  out->ipc = mapped;
  out->base = static_cast<char*>(mapped);
  noteShared(mapped, h.bytes, h.pid, h.hostHash, h.base, h.bufferId, h.handle);  // a leader may map it too (ipc_refs.h)
  return ncclSuccess;
}

}  // namespace

const char* stageReasonName(StageReason r) {
  switch (r) {
    case StageReason::kNone: return "direct";
    case StageReason::kP2pDisabled: return "NCCL_P2P_DISABLE";
    case StageReason::kNoPeerAccess: return "no peer access";
    case StageReason::kGpuNotVisible: return "GPU not visible in this process";
  }
  return "?";
}

std::string busIdString(int64_t busId) {
  if (busId < 0) return "?";
  char s[32];
  std::snprintf(s, sizeof(s), "%04x:%02x:%02x.%x", unsigned(busId >> 20), unsigned((busId >> 12) & 0xff),
                unsigned((busId >> 4) & 0xff), unsigned(busId & 0xf));
  return s;
}

bool ordered128Path(const P2pPeerInfo& viewer, const P2pPeerInfo& a, const P2pPeerInfo& b, const GpuQueries& gpu) {
  if (a.hostHash != b.hostHash || a.hostHash != viewer.hostHash) return false;
  const bool sameGpu = (sameProcess(a, b) && a.cudaDev == b.cudaDev) || (a.busId >= 0 && a.busId == b.busId);
  if (sameGpu) return true;
  // This process's ordinal of each GPU: its own ordinal where the rank lives here.
  auto ordinal = [&](const P2pPeerInfo& r) { return sameProcess(r, viewer) ? r.cudaDev : gpu.deviceByBusId(r.busId); };
  const int da = ordinal(a), db = ordinal(b);
  if (da < 0 || db < 0 || da == db || !gpu.nvlink) return false;
  return gpu.canAccessPeer(da, db) && gpu.canAccessPeer(db, da) && gpu.nvlink(da, db) && gpu.nvlink(db, da);
}

bool ordered128Everywhere(const std::vector<P2pPeerInfo>& peers, int viewer, bool p2pDisabled, const GpuQueries& gpu) {
  if (p2pDisabled || viewer < 0 || size_t(viewer) >= peers.size()) return false;
  for (size_t a = 0; a < peers.size(); ++a)
    for (size_t b = a + 1; b < peers.size(); ++b)
      if (!ordered128Path(peers[viewer], peers[a], peers[b], gpu)) return false;
  return true;
}

GpuQueries cudaGpuQueries() { return GpuQueries{deviceByBusId, peerAccessible, nvlinkBetween}; }

std::vector<StageReason> planStaging(const P2pPeerInfo& self, const std::vector<P2pPeerInfo>& peers,
                                     const std::vector<int>& linked, bool p2pDisabled, const GpuQueries& gpu) {
  std::vector<StageReason> reasons;
  for (int p : linked) {
    const P2pPeerInfo& peer = peers[size_t(p)];
    const bool local = sameProcess(peer, self);
    StageReason r = StageReason::kNone;
    const bool sameGpu = (local && peer.cudaDev == self.cudaDev) || (self.busId >= 0 && peer.busId == self.busId);
    if (!sameGpu) {
      const int dev = local ? peer.cudaDev : gpu.deviceByBusId(peer.busId);
      if (dev < 0) r = StageReason::kGpuNotVisible;
      else if (!gpu.canAccessPeer(self.cudaDev, dev) || !gpu.canAccessPeer(dev, self.cudaDev)) r = StageReason::kNoPeerAccess;
    }
    if (r == StageReason::kNone && p2pDisabled) r = StageReason::kP2pDisabled;
    reasons.push_back(r);
  }
  return reasons;
}

ncclResult_t P2pTransport::connect(Bootstrap& boot, const std::vector<P2pPeerInfo>& peers, const P2pOptions& options,
                                   const std::vector<P2pLink>& sendTo, const std::vector<P2pLink>& recvFrom,
                                   std::unique_ptr<P2pTransport>* out) {
  const int me = boot.rank();
  if (me < 0 || size_t(me) >= peers.size()) return fail(ncclInternalError, "p2p: rank %d has no peer info (%zu given)", me, peers.size());
  if (options.slotBytes == 0 || options.slotBytes % 16 != 0 || options.nSlots == 0)
    return fail(ncclInvalidArgument, "p2p: FIFO of %u slots of %u bytes; need at least one slot, a multiple of 16 bytes", options.nSlots, options.slotBytes);
  const P2pPeerInfo& self = peers[me];
  std::set<int> linkedSet;
  for (const auto* links : {&sendTo, &recvFrom}) {
    for (const P2pLink& l : *links) {
      if (l.peer < 0 || size_t(l.peer) >= peers.size()) return fail(ncclInvalidArgument, "p2p: link to rank %d of %zu", l.peer, peers.size());
      if (peers[l.peer].hostHash != self.hostHash)
        return fail(ncclInvalidUsage, "p2p: rank %d: rank %d is on another host; this transport links ranks of one host", me, l.peer);
      linkedSet.insert(l.peer);
    }
  }
  const std::vector<int> linked(linkedSet.begin(), linkedSet.end());

  // Stage this rank's region in host memory when P2P is off or a linked GPU cannot reach it.
  const bool p2pDisabled = env::getInt("NCCL_P2P_DISABLE", 0) != 0;
  const GpuQueries gpu = cudaGpuQueries();
  const std::vector<StageReason> reasons = planStaging(self, peers, linked, p2pDisabled, gpu);
  bool stage = p2pDisabled;
  std::string why;
  for (size_t i = 0; i < linked.size(); ++i) {
    if (reasons[i] == StageReason::kNone) continue;
    stage = true;
    why += (why.empty() ? "" : ", ") + describe(self, peers[linked[i]], linked[i], reasons[i]);
  }
  if (!why.empty()) BRAID_INFO(kInit | kP2p, "p2p: rank %d stages its FIFO region in host memory for %s", me, why.c_str());

  std::unique_ptr<P2pTransport> t(new P2pTransport());
  t->boot_ = &boot;
  t->rank_ = me;
  t->cudaDev_ = self.cudaDev;
  t->sendTo_ = sendTo;
  t->recvFrom_ = recvFrom;
  DeviceScope scope(self.cudaDev);

  // Layout: a record (FIFO + tail) per incoming link, then a head counter per outgoing link.
  const size_t fifoBytes = size_t(options.slotBytes) * options.nSlots;
  const size_t recordBytes = roundUp(fifoBytes + kCounterBytes, kRecordAlign);
  std::vector<size_t> recvOffset(recvFrom.size()), headOffset(sendTo.size());
  size_t used = 0;
  for (size_t i = 0; i < recvFrom.size(); ++i, used += recordBytes) recvOffset[i] = used;
  for (size_t i = 0; i < sendTo.size(); ++i, used += kCounterBytes) headOffset[i] = used;
  t->regionBytes_ = roundUp(std::max<size_t>(used, 1), kRegionAlign);

  cudaError_t e;
  if (stage) {
    // Shared memory that peers in other processes map by name (new, so zero-filled).
    const std::string name = uniqueShmName("fifo", me);
    void *host = nullptr, *dev = nullptr;
    BRAID_CHECK(mapShared("p2p", me, name.c_str(), t->regionBytes_, true, &host, &dev));
    t->shmName_ = name;  // unlinked below once every peer has mapped it, or by releaseLocal()
    t->region_ = static_cast<char*>(host);
    t->regionDev_ = static_cast<char*>(dev);
    t->hostStaged_ = true;
  } else {
    void* mem = nullptr;
    e = cudaMalloc(&mem, t->regionBytes_);
    if (e != cudaSuccess) return cudaFail(me, "cudaMalloc of the FIFO region", e);
    t->region_ = t->regionDev_ = static_cast<char*>(mem);
    cudaStream_t s;
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e == cudaSuccess) {
      e = cudaMemsetAsync(t->region_, 0, t->regionBytes_, s);
      cudaError_t f = cudaStreamSynchronize(s);
      if (e == cudaSuccess) e = f;
      f = cudaStreamDestroy(s);
      if (e == cudaSuccess) e = f;
    }
    if (e != cudaSuccess) return cudaFail(me, "clearing the FIFO region", e);
  }
  BRAID_INFO(kInit | kAlloc | kP2p, "p2p: rank %d dev %d: %zu FIFO bytes (%zu in, %zu out links, %u x %u B slots) in %s%s", me,
             self.cudaDev, t->regionBytes_, recvFrom.size(), sendTo.size(), options.nSlots, options.slotBytes,
             stage ? "pinned shared host memory " : "device memory", t->shmName_.c_str());

  // Tell each linked peer where its records are.
  Header header{};
  header.magic = kMagic;
  header.pid = self.pid;
  header.hostHash = self.hostHash;
  header.base = reinterpret_cast<uint64_t>(t->regionDev_);
  header.bytes = t->regionBytes_;
  header.hostStaged = stage ? 1 : 0;
  if (stage) {
    std::snprintf(header.shmName, sizeof(header.shmName), "%s", t->shmName_.c_str());
  } else {
    e = cudaIpcGetMemHandle(&header.handle, t->region_);
    if (e != cudaSuccess) return cudaFail(me, "cudaIpcGetMemHandle", e);
    Allocation a;
    e = allocationOf(t->region_, &a);
    if (e != cudaSuccess) return cudaFail(me, "the FIFO region's buffer id", e);
    header.bufferId = a.bufferId;
    noteShared(t->region_, t->regionBytes_, self.pid, self.hostHash, header.base, a.bufferId, header.handle);
  }
  // Per peer, this side's view of LL128 on the links between them; each link takes the
  // views of both ends (below), so that both ends agree.
  std::map<int, bool> ordered128;
  for (int p : linked) ordered128[p] = !stage && ordered128Path(self, self, peers[p], gpu);
  for (int p : linked) {
    header.ordered128 = ordered128[p] ? 1 : 0;
    std::vector<Entry> entries;
    for (size_t i = 0; i < recvFrom.size(); ++i)
      if (recvFrom[i].peer == p) entries.push_back(Entry{recvFrom[i].channel, kRecvRecord, recvOffset[i]});
    for (size_t i = 0; i < sendTo.size(); ++i)
      if (sendTo[i].peer == p) entries.push_back(Entry{sendTo[i].channel, kHeadCounter, headOffset[i]});
    header.nEntries = uint32_t(entries.size());
    BRAID_CHECK(boot.send(p, kTagHeader, &header, sizeof(header)));
    BRAID_CHECK(boot.send(p, kTagHeader + 1, entries.data(), entries.size() * sizeof(Entry)));
  }

  // Map each peer's region and find the records of our links in it. Every peer gets an
  // ack (the result of mapping its region), also on failure, so that nobody waits in vain.
  std::map<std::pair<int, int>, char*> peerRecvRecord, peerHead;  // (peer, channel) -> address
  ncclResult_t importResult = ncclSuccess;
  for (size_t i = 0; i < linked.size(); ++i) {
    const int p = linked[i];
    Header h{};
    BRAID_CHECK(boot.recv(p, kTagHeader, &h, sizeof(h)));
    if (h.magic != kMagic) return fail(ncclInternalError, "p2p: rank %d: rank %d sent a malformed connection header", me, p);
    std::vector<Entry> entries(h.nEntries);
    BRAID_CHECK(boot.recv(p, kTagHeader + 1, entries.data(), entries.size() * sizeof(Entry)));
    if (h.pid != self.pid || h.hostHash != self.hostHash) t->crossProcess_ = true;
    ordered128[p] = ordered128[p] && h.ordered128 != 0 && !h.hostStaged;
    Imported im;
    ncclResult_t r = importRegion(me, p, self, peers[p], h, reasons[i], &im);
    if (im.ipc != nullptr) t->imported_.push_back(im.ipc);
    if (im.host != nullptr) t->importedHost_.push_back(HostMapping{im.host, im.bytes});
    const int32_t ack = int32_t(r);
    BRAID_CHECK(boot.send(p, kTagAck, &ack, sizeof(ack)));
    if (r != ncclSuccess) {
      if (importResult == ncclSuccess) importResult = r;
      continue;
    }
    for (const Entry& en : entries) {
      auto& table = en.kind == kRecvRecord ? peerRecvRecord : peerHead;
      table[{p, en.channel}] = im.base + en.offset;
    }
  }
  int refusedBy = -1;
  int32_t refusal = 0;
  for (int p : linked) {
    int32_t ack = 0;
    BRAID_CHECK(boot.recv(p, kTagAck, &ack, sizeof(ack)));
    if (ack != int32_t(ncclSuccess) && refusedBy < 0) refusedBy = p, refusal = ack;
  }
  // Every peer has mapped this rank's region (or given up): the name can go, so that a
  // crash from here on leaves nothing behind in /dev/shm.
  if (!t->shmName_.empty()) {
    // ENOENT: a peer that mapped it removed the name first.
    if (shm_unlink(t->shmName_.c_str()) != 0 && errno != ENOENT)
      return sysFail(me, "shm_unlink", t->shmName_.c_str(), errno);
    t->shmName_.clear();
  }
  if (importResult != ncclSuccess) return importResult;
  if (refusedBy >= 0)
    return fail(ncclRemoteError, "p2p: rank %d: rank %d could not map this rank's FIFO region (its error %d; see its log)", me,
                refusedBy, int(refusal));

  for (size_t i = 0; i < sendTo.size(); ++i) {
    auto it = peerRecvRecord.find({sendTo[i].peer, sendTo[i].channel});
    if (it == peerRecvRecord.end())
      return fail(ncclInvalidUsage, "p2p: rank %d sends to rank %d on channel %d, but that rank does not receive from it", me, sendTo[i].peer, sendTo[i].channel);
    FifoSendEnd s;
    s.peerFifo = it->second;
    s.peerTail = reinterpret_cast<uint64_t*>(it->second + fifoBytes);
    s.localHead = reinterpret_cast<uint64_t*>(t->regionDev_ + headOffset[i]);
    s.slotBytes = options.slotBytes;
    s.nSlots = options.nSlots;
    s.ordered128 = ordered128[sendTo[i].peer];
    t->sendEnds_.push_back(s);
  }
  for (size_t i = 0; i < recvFrom.size(); ++i) {
    auto it = peerHead.find({recvFrom[i].peer, recvFrom[i].channel});
    if (it == peerHead.end())
      return fail(ncclInvalidUsage, "p2p: rank %d receives from rank %d on channel %d, but that rank does not send to it", me, recvFrom[i].peer, recvFrom[i].channel);
    FifoRecvEnd r;
    r.localFifo = t->regionDev_ + recvOffset[i];
    r.localTail = reinterpret_cast<uint64_t*>(t->regionDev_ + recvOffset[i] + fifoBytes);
    r.peerHead = reinterpret_cast<uint64_t*>(it->second);
    r.slotBytes = options.slotBytes;
    r.nSlots = options.nSlots;
    r.ordered128 = ordered128[recvFrom[i].peer];
    t->recvEnds_.push_back(r);
  }
  *out = std::move(t);
  return ncclSuccess;
}

bool P2pTransport::sendEnd(int channel, int peer, FifoSendEnd* out) const {
  for (size_t i = 0; i < sendTo_.size(); ++i) {
    if (sendTo_[i].channel == channel && sendTo_[i].peer == peer) {
      *out = sendEnds_[i];
      return true;
    }
  }
  return false;
}

bool P2pTransport::recvEnd(int channel, int peer, FifoRecvEnd* out) const {
  for (size_t i = 0; i < recvFrom_.size(); ++i) {
    if (recvFrom_[i].channel == channel && recvFrom_[i].peer == peer) {
      *out = recvEnds_[i];
      return true;
    }
  }
  return false;
}

ncclResult_t P2pTransport::releaseImported() {
  DeviceScope scope(cudaDev_);
  ncclResult_t result = ncclSuccess;
  for (void* p : imported_) {
    forgetShared(p);
    cudaError_t e = cudaIpcCloseMemHandle(p);
    if (e != cudaSuccess && result == ncclSuccess) result = cudaFail(rank_, "cudaIpcCloseMemHandle", e);
  }
  imported_.clear();
  for (const HostMapping& m : importedHost_) {
    ncclResult_t r = unmapShared("p2p", rank_, m.host, m.bytes);
    if (result == ncclSuccess) result = r;
  }
  importedHost_.clear();
  return result;
}

ncclResult_t P2pTransport::releaseLocal() {
  DeviceScope scope(cudaDev_);
  ncclResult_t result = releaseImported();
  auto keep = [&](ncclResult_t r) {
    if (result == ncclSuccess) result = r;
  };
  if (region_ != nullptr) {
    if (hostStaged_) {
      keep(unmapShared("p2p", rank_, region_, regionBytes_));
    } else {
      forgetShared(region_);
      if (cudaError_t e = cudaFree(region_); e != cudaSuccess) keep(cudaFail(rank_, "cudaFree of the FIFO region", e));
    }
    region_ = regionDev_ = nullptr;
  }
  if (!shmName_.empty()) {  // connect() failed before every peer had mapped it
    if (shm_unlink(shmName_.c_str()) != 0 && errno != ENOENT) keep(sysFail(rank_, "shm_unlink", shmName_.c_str(), errno));
    shmName_.clear();
  }
  return result;
}

ncclResult_t P2pTransport::close() {
  if (closed_) return ncclSuccess;
  closed_ = true;
  ncclResult_t result = releaseImported();
  // Nobody frees a region while a peer in another process still maps it. (Ranks of one
  // process import nothing, and one thread may destroy them one after another.)
  ncclResult_t b = crossProcess_ ? boot_->barrier() : ncclSuccess;
  if (b != ncclSuccess && result == ncclSuccess) result = b;
  ncclResult_t r = releaseLocal();
  return result != ncclSuccess ? result : r;
}

P2pTransport::~P2pTransport() {
  if (!closed_) (void)releaseLocal();
}

P2pPeerInfo p2pPeerInfo(const PeerInfo& p) {
  P2pPeerInfo info;
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

// Ranks of one host: pointers, CUDA IPC, or a region staged in pinned shared host memory.
class P2pDeviceTransport final : public DeviceTransport {
 public:
  const char* name() const override { return "P2P"; }
  bool canConnect(const PeerInfo& me, const PeerInfo& peer) const override { return me.hostHash == peer.hostHash; }
  bool carriesLL() const override { return true; }    // 8-byte words arrive whole, also in host memory
  bool carriesLL128() const override { return true; }  // where an end is ordered128 (p2p.h)
  ncclResult_t connect(const DeviceConnectContext& ctx, const std::vector<P2pLink>& sends,
                       const std::vector<P2pLink>& recvs, std::unique_ptr<DeviceLinks>* out) const override {
    std::vector<P2pPeerInfo> peers;
    for (const PeerInfo& p : *ctx.peers) peers.push_back(p2pPeerInfo(p));
    std::unique_ptr<P2pTransport> t;
    BRAID_CHECK(P2pTransport::connect(*ctx.boot, peers, {ctx.slotBytes, ctx.nSlots}, sends, recvs, &t));
    *out = std::move(t);
    return ncclSuccess;
  }
};

}  // namespace

const DeviceTransport& p2pDeviceTransport() {
  static const P2pDeviceTransport t;
  return t;
}

}  // namespace braid::transport
