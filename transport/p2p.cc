// P2P transport: region layout, export/import of the FIFO regions, teardown.
#include "transport/p2p.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/log.h"

namespace braid::transport {
namespace {

constexpr size_t kRegionAlign = size_t(2) << 20;  // share whole 2 MiB pages only
constexpr size_t kCounterBytes = 128;             // one counter per cache line
constexpr size_t kRecordAlign = 4096;
constexpr uint32_t kTagHeader = 0x50325000;       // "P2P" + 0: header; +1: entries
constexpr uint32_t kMagic = 0xb2a1d002;

enum EntryKind : int32_t { kRecvRecord = 0, kHeadCounter = 1 };

// What a rank tells one peer: where, inside its region, the records for that peer are.
struct Header {
  uint32_t magic;
  uint32_t nEntries;
  int64_t pid;
  uint64_t hostHash;
  uint64_t base;  // the region's address in the sender's process (same-process peers use it)
  int32_t hostStaged;
  int32_t pad;
  cudaIpcMemHandle_t handle;
};
struct Entry {
  int32_t channel;
  int32_t kind;
  uint64_t offset;
};

size_t roundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

bool sameProcess(const P2pPeerInfo& a, const P2pPeerInfo& b) { return a.hostHash == b.hostHash && a.pid == b.pid; }

ncclResult_t cudaFail(const char* what, cudaError_t e) {
  return fail(ncclUnhandledCudaError, "p2p: %s: %s", what, cudaGetErrorString(e));
}

class DeviceScope {
 public:
  explicit DeviceScope(int dev) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != dev) switched_ = cudaSetDevice(dev) == cudaSuccess;
  }
  ~DeviceScope() {
    if (switched_) (void)cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
  bool switched_ = false;
};

// Can `from`'s device load and store `to`'s device memory directly?
bool peerAccessible(int fromDev, int toDev) {
  if (fromDev == toDev) return true;
  int can = 0;
  return cudaDeviceCanAccessPeer(&can, fromDev, toDev) == cudaSuccess && can != 0;
}

}  // namespace

ncclResult_t P2pTransport::connect(Bootstrap& boot, const std::vector<P2pPeerInfo>& peers, const P2pOptions& options,
                                   const std::vector<P2pLink>& sendTo, const std::vector<P2pLink>& recvFrom,
                                   std::unique_ptr<P2pTransport>* out) {
  const int me = boot.rank();
  if (me < 0 || size_t(me) >= peers.size()) return fail(ncclInternalError, "p2p: rank %d has no peer info (%zu given)", me, peers.size());
  if (options.slotBytes == 0 || options.slotBytes % 16 != 0 || options.nSlots == 0)
    return fail(ncclInvalidArgument, "p2p: FIFO of %u slots of %u bytes; need at least one slot, a multiple of 16 bytes", options.nSlots, options.slotBytes);
  const P2pPeerInfo& self = peers[me];
  std::set<int> linked;
  for (const auto* links : {&sendTo, &recvFrom}) {
    for (const P2pLink& l : *links) {
      if (l.peer < 0 || size_t(l.peer) >= peers.size()) return fail(ncclInvalidArgument, "p2p: link to rank %d of %zu", l.peer, peers.size());
      linked.insert(l.peer);
    }
  }

  // Host staging: only between ranks of one process whose GPUs cannot reach each other.
  bool stage = false;
  for (int p : linked) {
    const P2pPeerInfo& peer = peers[p];
    if (peer.cudaDev == self.cudaDev && (sameProcess(peer, self) || peer.busId == self.busId)) continue;
    bool direct = sameProcess(peer, self) ? peerAccessible(self.cudaDev, peer.cudaDev) && peerAccessible(peer.cudaDev, self.cudaDev)
                                          : true;  // across processes, checked on import below
    if (!direct) stage = true;
  }

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
    e = cudaHostAlloc(reinterpret_cast<void**>(&t->region_), t->regionBytes_, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) return cudaFail("cudaHostAlloc of the staged FIFO region", e);
    std::memset(t->region_, 0, t->regionBytes_);
    t->hostStaged_ = true;
  } else {
    e = cudaMalloc(reinterpret_cast<void**>(&t->region_), t->regionBytes_);
    if (e != cudaSuccess) return cudaFail("cudaMalloc of the FIFO region", e);
    cudaStream_t s;
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e == cudaSuccess) {
      e = cudaMemsetAsync(t->region_, 0, t->regionBytes_, s);
      cudaError_t f = cudaStreamSynchronize(s);
      if (e == cudaSuccess) e = f;
      (void)cudaStreamDestroy(s);
    }
    if (e != cudaSuccess) return cudaFail("clearing the FIFO region", e);
  }
  BRAID_INFO(kInit | kAlloc | kP2p, "p2p: rank %d dev %d: %zu FIFO bytes (%zu in, %zu out links, %u x %u B slots)%s", me,
             self.cudaDev, t->regionBytes_, recvFrom.size(), sendTo.size(), options.nSlots, options.slotBytes,
             stage ? " in pinned host memory" : "");

  // Tell each linked peer where its records are.
  Header header{};
  header.magic = kMagic;
  header.pid = self.pid;
  header.hostHash = self.hostHash;
  header.base = reinterpret_cast<uint64_t>(t->region_);
  header.hostStaged = stage ? 1 : 0;
  if (!stage) {
    e = cudaIpcGetMemHandle(&header.handle, t->region_);
    if (e != cudaSuccess) return cudaFail("cudaIpcGetMemHandle", e);
  }
  for (int p : linked) {
    std::vector<Entry> entries;
    for (size_t i = 0; i < recvFrom.size(); ++i)
      if (recvFrom[i].peer == p) entries.push_back(Entry{recvFrom[i].channel, kRecvRecord, recvOffset[i]});
    for (size_t i = 0; i < sendTo.size(); ++i)
      if (sendTo[i].peer == p) entries.push_back(Entry{sendTo[i].channel, kHeadCounter, headOffset[i]});
    header.nEntries = uint32_t(entries.size());
    BRAID_CHECK(boot.send(p, kTagHeader, &header, sizeof(header)));
    BRAID_CHECK(boot.send(p, kTagHeader + 1, entries.data(), entries.size() * sizeof(Entry)));
  }

  // Map each peer's region and find the records of our links in it.
  std::map<std::pair<int, int>, char*> peerRecvRecord, peerHead;  // (peer, channel) -> address
  for (int p : linked) {
    Header h{};
    BRAID_CHECK(boot.recv(p, kTagHeader, &h, sizeof(h)));
    if (h.magic != kMagic) return fail(ncclInternalError, "p2p: rank %d sent a malformed connection header", p);
    std::vector<Entry> entries(h.nEntries);
    BRAID_CHECK(boot.recv(p, kTagHeader + 1, entries.data(), entries.size() * sizeof(Entry)));
    char* base = nullptr;
    if (h.pid == self.pid && h.hostHash == self.hostHash) {
      base = reinterpret_cast<char*>(h.base);
      const int peerDev = peers[p].cudaDev;
      if (!h.hostStaged && peerDev != self.cudaDev) {
        e = cudaDeviceEnablePeerAccess(peerDev, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
        else if (e != cudaSuccess) return cudaFail("cudaDeviceEnablePeerAccess", e);
      }
    } else {
      t->crossProcess_ = true;
      if (h.hostStaged) return fail(ncclSystemError, "p2p: rank %d stages through host memory, which is not shared across processes", p);
      if (peers[p].busId != self.busId && !peerAccessible(self.cudaDev, peers[p].cudaDev))
        return fail(ncclSystemError, "p2p: rank %d (bus %lx) is in another process on a GPU that this GPU (bus %lx) cannot access; host staging across processes is not implemented",
                    p, long(peers[p].busId), long(self.busId));
      void* mapped = nullptr;
      e = cudaIpcOpenMemHandle(&mapped, h.handle, cudaIpcMemLazyEnablePeerAccess);
      if (e != cudaSuccess) return cudaFail("cudaIpcOpenMemHandle", e);
      t->imported_.push_back(mapped);
      base = static_cast<char*>(mapped);
    }
    for (const Entry& en : entries) {
      auto& table = en.kind == kRecvRecord ? peerRecvRecord : peerHead;
      table[{p, en.channel}] = base + en.offset;
    }
  }

  for (size_t i = 0; i < sendTo.size(); ++i) {
    auto it = peerRecvRecord.find({sendTo[i].peer, sendTo[i].channel});
    if (it == peerRecvRecord.end())
      return fail(ncclInvalidUsage, "p2p: rank %d sends to rank %d on channel %d, but that rank does not receive from it", me, sendTo[i].peer, sendTo[i].channel);
    FifoSendEnd s;
    s.peerFifo = it->second;
    s.peerTail = reinterpret_cast<uint64_t*>(it->second + fifoBytes);
    s.localHead = reinterpret_cast<uint64_t*>(t->region_ + headOffset[i]);
    s.slotBytes = options.slotBytes;
    s.nSlots = options.nSlots;
    t->sendEnds_.push_back(s);
  }
  for (size_t i = 0; i < recvFrom.size(); ++i) {
    auto it = peerHead.find({recvFrom[i].peer, recvFrom[i].channel});
    if (it == peerHead.end())
      return fail(ncclInvalidUsage, "p2p: rank %d receives from rank %d on channel %d, but that rank does not send to it", me, recvFrom[i].peer, recvFrom[i].channel);
    FifoRecvEnd r;
    r.localFifo = t->region_ + recvOffset[i];
    r.localTail = reinterpret_cast<uint64_t*>(t->region_ + recvOffset[i] + fifoBytes);
    r.peerHead = reinterpret_cast<uint64_t*>(it->second);
    r.slotBytes = options.slotBytes;
    r.nSlots = options.nSlots;
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

void P2pTransport::releaseLocal() {
  DeviceScope scope(cudaDev_);
  for (void* p : imported_) (void)cudaIpcCloseMemHandle(p);
  imported_.clear();
  if (region_ != nullptr) {
    if (hostStaged_) (void)cudaFreeHost(region_);
    else (void)cudaFree(region_);
    region_ = nullptr;
  }
}

ncclResult_t P2pTransport::close() {
  if (closed_) return ncclSuccess;
  closed_ = true;
  DeviceScope scope(cudaDev_);
  ncclResult_t result = ncclSuccess;
  for (void* p : imported_) {
    cudaError_t e = cudaIpcCloseMemHandle(p);
    if (e != cudaSuccess && result == ncclSuccess) result = cudaFail("cudaIpcCloseMemHandle", e);
  }
  imported_.clear();
  // Nobody frees a region while a peer in another process still maps it. (Ranks of one
  // process import nothing, and one thread may destroy them one after another.)
  ncclResult_t b = crossProcess_ ? boot_->barrier() : ncclSuccess;
  if (b != ncclSuccess) {
    if (result == ncclSuccess) result = b;
  }
  releaseLocal();
  return result;
}

P2pTransport::~P2pTransport() {
  if (!closed_) releaseLocal();
}

}  // namespace braid::transport
