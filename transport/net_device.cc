#include "transport/net_device.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/cuda_scope.h"
#include "core/log.h"
#include "transport/net_fifo.h"
#include "transport/select.h"
#include "transport/ucx_net.h"

namespace braid::transport {
namespace {

constexpr size_t kCounterBytes = 128;  // a counter and the kernel's own step beside it (p2p_fifo.h)
// The sender's per-slot byte counts (FifoSendEnd::slotSizes) take a line of their own.
static_assert(kMaxNetSlots * sizeof(uint32_t) <= kCounterBytes);
constexpr size_t kRecordAlign = 4096;

size_t roundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

// One end's record in the shared memory: the slots (unless they are in device memory), then
// the tail's line, the head's line and the slot sizes' line.
struct Record {
  size_t slots, tail, head, sizes;
};

}  // namespace

SharedMemory cudaPinnedMemory(int rank, int cudaDev) {
  SharedMemory m;
  m.alloc = [rank, cudaDev](size_t bytes, void** host, void** dev) -> ncclResult_t {
    DeviceScope scope(cudaDev);
    void* h = nullptr;
    cudaError_t e = cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return fail(ncclUnhandledCudaError,
                  "rank %d: cudaHostAlloc of %zu bytes for the FIFOs to ranks on other hosts failed: %s (pinned memory "
                  "exhausted? lower the channels, NCCL_MAX_NCHANNELS)",
                  rank, bytes, cudaGetErrorString(e));
    }
    std::memset(h, 0, bytes);
    void* d = nullptr;
    e = cudaHostGetDevicePointer(&d, h, 0);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaFreeHost(h);
      return fail(ncclUnhandledCudaError, "rank %d: cudaHostGetDevicePointer of the network FIFOs failed: %s", rank,
                  cudaGetErrorString(e));
    }
    *host = h;
    *dev = d;
    return ncclSuccess;
  };
  m.free = [cudaDev](void* host) {
    DeviceScope scope(cudaDev);
    if (cudaFreeHost(host) != cudaSuccess) (void)cudaGetLastError();  // at teardown: nothing left to tell
  };
  return m;
}

DeviceMemory cudaDeviceMemory(int rank, int cudaDev) {
  DeviceMemory m;
  m.alloc = [rank, cudaDev](size_t bytes, void** dev) -> ncclResult_t {
    DeviceScope scope(cudaDev);
    if (cudaError_t e = cudaMalloc(dev, bytes); e != cudaSuccess) {
      (void)cudaGetLastError();
      return fail(ncclUnhandledCudaError,
                  "rank %d: cudaMalloc of %zu bytes for the FIFOs to ranks on other hosts (GPUDirect) failed: %s (GPU "
                  "memory exhausted? lower the channels, NCCL_MAX_NCHANNELS, or stage through host memory, "
                  "BRAID_GPUDIRECT=0)",
                  rank, bytes, cudaGetErrorString(e));
    }
    return ncclSuccess;
  };
  m.free = [cudaDev](void* dev) {
    DeviceScope scope(cudaDev);
    if (cudaFree(dev) != cudaSuccess) (void)cudaGetLastError();  // at teardown: nothing left to tell
  };
  return m;
}

SharedMemory plainHostMemory() {
  SharedMemory m;
  m.alloc = [](size_t bytes, void** host, void** dev) -> ncclResult_t {
    void* p = ::operator new(bytes, std::align_val_t(kRecordAlign), std::nothrow);
    if (p == nullptr) return fail(ncclSystemError, "network FIFOs: out of memory (%zu bytes)", bytes);
    std::memset(p, 0, bytes);
    *host = *dev = p;
    return ncclSuccess;
  };
  m.free = [](void* host) { ::operator delete(host, std::align_val_t(kRecordAlign)); };
  return m;
}

ncclResult_t NetDeviceLinks::connect(UcxNet& net, int rank, const SharedMemory& memory, const DeviceMemory* slotMemory,
                                     uint32_t slotBytes, uint32_t nSlots, const std::vector<P2pLink>& sendTo,
                                     const std::vector<P2pLink>& recvFrom, std::unique_ptr<NetDeviceLinks>* out) {
  if (slotBytes == 0 || slotBytes % 16 != 0 || nSlots == 0 || nSlots > kMaxNetSlots)
    return fail(ncclInvalidArgument, "rank %d: network FIFO of %u slots of %u bytes; need 1..%u slots of a multiple of 16 bytes",
                rank, nSlots, slotBytes, kMaxNetSlots);
  std::unique_ptr<NetDeviceLinks> t(new NetDeviceLinks());
  t->sendTo_ = sendTo;
  t->recvFrom_ = recvFrom;
  const size_t fifoBytes = size_t(slotBytes) * nSlots;
  const size_t slotsInRecord = slotMemory ? 0 : fifoBytes;  // device slots live apart, one region each
  const size_t recordBytes = roundUp(slotsInRecord + 3 * kCounterBytes, slotMemory ? kCounterBytes : kRecordAlign);
  const size_t n = sendTo.size() + recvFrom.size();
  if (n == 0) {
    *out = std::move(t);
    return ncclSuccess;
  }
  const size_t sharedBytes = n * recordBytes, deviceBytes = slotMemory ? n * fifoBytes : 0;
  t->bytes_ = sharedBytes + deviceBytes;
  t->hostBytes_ = sharedBytes;
  void *host = nullptr, *dev = nullptr, *slots = nullptr;
  BRAID_CHECK(memory.alloc(sharedBytes, &host, &dev));
  // The UcxNet frees it once its proxy has stopped; from here on, also when this fails.
  std::function<void(void*)> release = memory.free;
  net.keep(std::shared_ptr<void>(host, [release](void* p) { release(p); }));
  if (slotMemory) {
    BRAID_CHECK(slotMemory->alloc(deviceBytes, &slots));
    std::function<void(void*)> releaseSlots = slotMemory->free;
    net.keep(std::shared_ptr<void>(slots, [releaseSlots](void* p) { releaseSlots(p); }));
  }
  char* const h = static_cast<char*>(host);
  char* const d = static_cast<char*>(dev);
  auto record = [&](size_t i) {
    const size_t base = i * recordBytes;
    const size_t counters = base + slotsInRecord;
    return Record{base, counters, counters + kCounterBytes, counters + 2 * kCounterBytes};
  };
  // Where end i's slots are, for the proxy (hostSide) and for the kernels.
  auto slotsOf = [&](size_t i, const Record& r, bool hostSide) {
    if (slotMemory) return static_cast<char*>(slots) + i * fifoBytes;
    return (hostSide ? h : d) + r.slots;
  };
  auto netFifo = [&](size_t i, const Record& r) {
    NetFifo f;
    f.slots = slotsOf(i, r, true);
    f.cudaSlots = slotMemory != nullptr;
    f.slotBytes = slotBytes;
    f.nSlots = nSlots;
    f.tail = counterWord(reinterpret_cast<uint64_t*>(h + r.tail));
    f.head = counterWord(reinterpret_cast<uint64_t*>(h + r.head));
    f.slotSizes = reinterpret_cast<const uint32_t*>(h + r.sizes);
    f.polled = true;
    f.space = kSpaceDevice;
    return f;
  };
  for (size_t i = 0; i < sendTo.size(); ++i) {
    const Record r = record(i);
    FifoSendEnd s;
    s.peerFifo = slotsOf(i, r, false);
    s.peerTail = reinterpret_cast<uint64_t*>(d + r.tail);
    s.localHead = reinterpret_cast<uint64_t*>(d + r.head);
    s.slotSizes = reinterpret_cast<uint32_t*>(d + r.sizes);
    s.slotBytes = slotBytes;
    s.nSlots = nSlots;
    s.ordered128 = false;
    t->sendEnds_.push_back(s);
    BRAID_CHECK(net.addSender(sendTo[i].channel, sendTo[i].peer, netFifo(i, r)));
  }
  for (size_t i = 0; i < recvFrom.size(); ++i) {
    const size_t k = sendTo.size() + i;
    const Record r = record(k);
    FifoRecvEnd e;
    e.localFifo = slotsOf(k, r, false);
    e.localTail = reinterpret_cast<uint64_t*>(d + r.tail);
    e.peerHead = reinterpret_cast<uint64_t*>(d + r.head);
    e.slotBytes = slotBytes;
    e.nSlots = nSlots;
    e.ordered128 = false;
    t->recvEnds_.push_back(e);
    BRAID_CHECK(net.addReceiver(recvFrom[i].channel, recvFrom[i].peer, netFifo(k, r)));
  }
  if (slotMemory)
    BRAID_INFO(kInit | kAlloc | kNet, "rank %d: %zu bytes of device memory (slots, handed to UCX as CUDA memory: GPUDirect) "
               "and %zu of pinned host memory (counters) for %zu send and %zu receive GPU connections to other hosts "
               "(%u x %u B slots, moved by the UCX proxy)", rank, deviceBytes, sharedBytes, sendTo.size(),
               recvFrom.size(), nSlots, slotBytes);
  else
    BRAID_INFO(kInit | kAlloc | kNet, "rank %d: %zu bytes of pinned host memory for %zu send and %zu receive GPU "
               "connections to other hosts (%u x %u B slots, moved by the UCX proxy)", rank, t->bytes_, sendTo.size(),
               recvFrom.size(), nSlots, slotBytes);
  *out = std::move(t);
  return ncclSuccess;
}

bool NetDeviceLinks::sendEnd(int channel, int peer, FifoSendEnd* out) const {
  for (size_t i = 0; i < sendTo_.size(); ++i)
    if (sendTo_[i].channel == channel && sendTo_[i].peer == peer) {
      *out = sendEnds_[i];
      return true;
    }
  return false;
}

bool NetDeviceLinks::recvEnd(int channel, int peer, FifoRecvEnd* out) const {
  for (size_t i = 0; i < recvFrom_.size(); ++i)
    if (recvFrom_[i].channel == channel && recvFrom_[i].peer == peer) {
      *out = recvEnds_[i];
      return true;
    }
  return false;
}

namespace {

// Ranks on other hosts: Simple FIFOs at each end, moved by the communicator's UCX proxy.
class NetDeviceTransport final : public DeviceTransport {
 public:
  const char* name() const override { return "UCX"; }
  bool canConnect(const PeerInfo& me, const PeerInfo& peer) const override { return me.hostHash != peer.hostHash; }
  bool carriesLL() const override { return false; }     // select.h says why
  bool carriesLL128() const override { return false; }
  ncclResult_t connect(const DeviceConnectContext& ctx, const std::vector<P2pLink>& sends,
                       const std::vector<P2pLink>& recvs, std::unique_ptr<DeviceLinks>* out) const override {
    const int peer = !sends.empty() ? sends.front().peer : recvs.empty() ? -1 : recvs.front().peer;
    if (ctx.net == nullptr)
      return fail(ncclInternalError, "rank %d: rank %d is on another host, and this communicator has no UCX transport",
                  ctx.rank, peer);
    const DeviceMemory slots = cudaDeviceMemory(ctx.rank, ctx.cudaDev);
    const bool gpuDirect = netSlotsInDeviceMemory(ctx.net->cudaMemory());
    std::unique_ptr<NetDeviceLinks> t;
    BRAID_CHECK(NetDeviceLinks::connect(*ctx.net, ctx.rank, cudaPinnedMemory(ctx.rank, ctx.cudaDev),
                                        gpuDirect ? &slots : nullptr, ctx.slotBytes, ctx.nSlots, sends, recvs, &t));
    *out = std::move(t);
    return ncclSuccess;
  }
};

}  // namespace

const DeviceTransport& netDeviceTransport() {
  static const NetDeviceTransport t;
  return t;
}

}  // namespace braid::transport
