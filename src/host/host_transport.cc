#include "host/host_transport.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <string>

#include "core/comm.h"
#include "core/log.h"
#include "host/fifo.h"

namespace braid {
namespace {

constexpr uint32_t kOfferTag = 0x48000000;  // | channel: receiver -> sender
constexpr uint32_t kAckTag = 0x49000000;    // | channel: sender -> receiver

struct Offer {
  uint64_t inProcessAddress;  // same process: the FIFO's address
  char shmName[64];           // same host: the segment's name
};

bool sameProcess(const ncclComm* comm, int peer) {
  return comm->peers[peer].processHash == comm->peers[comm->rank].processHash;
}

ncclResult_t mapSegment(const char* name, bool create, void** out) {
  int fd = shm_open(name, create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
  if (fd < 0) return fail(ncclSystemError, "host transport: shm_open(%s) failed: %s", name, std::strerror(errno));
  if (create && ftruncate(fd, FifoLayout::kBytes) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name);
    return fail(ncclSystemError, "host transport: cannot size shared memory %s to %zu bytes: %s (is /dev/shm full?)",
                name, FifoLayout::kBytes, std::strerror(err));
  }
  void* p = mmap(nullptr, FifoLayout::kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name);
    return fail(ncclSystemError, "host transport: mmap of %s failed: %s", name, std::strerror(err));
  }
  *out = p;
  return ncclSuccess;
}

}  // namespace

HostTransport::~HostTransport() { close(true); }

ncclResult_t HostTransport::offerReceivers(const std::set<ConnKey>& recvs) {
  for (const ConnKey& key : recvs) {
    if (recvs_.count(key) || pendingRecvs_.count(key)) continue;
    auto [channel, peer] = key;
    if (comm_->peers[peer].hostHash != comm_->peers[comm_->rank].hostHash)
      return fail(ncclInvalidUsage,
                  "rank %d: host-memory collectives with rank %d, which runs on another host, are not supported. "
                  "Fix: use device buffers, or keep host-memory communicators within one host.",
                  comm_->rank, peer);
    Segment seg;
    Offer offer{};
    if (sameProcess(comm_, peer)) {
      seg.base = ::operator new(FifoLayout::kBytes, std::align_val_t(4096), std::nothrow);
      if (!seg.base) return fail(ncclSystemError, "host transport: out of memory (%zu bytes)", FifoLayout::kBytes);
      seg.ownedHeap = true;
      offer.inProcessAddress = reinterpret_cast<uint64_t>(seg.base);
    } else {
      static std::atomic<uint64_t> counter{0};
      std::snprintf(offer.shmName, sizeof(offer.shmName), "/braid-%d-%llx-%d-%d-%llu", getpid(),
                    static_cast<unsigned long long>(comm_->bootstrap->secret() & 0xffffffff), channel, peer,
                    static_cast<unsigned long long>(counter++));
      BRAID_CHECK(mapSegment(offer.shmName, true, &seg.base));
      seg.shmName = offer.shmName;
    }
    new (seg.base) FifoControl();
    recvSegments_[key] = seg;
    pendingRecvs_.insert(key);
    BRAID_CHECK(comm_->bootstrap->send(peer, kOfferTag | channel, &offer, sizeof(offer)));
  }
  return ncclSuccess;
}

ncclResult_t HostTransport::attachSenders(const std::set<ConnKey>& sends) {
  for (const ConnKey& key : sends) {
    if (sends_.count(key)) continue;
    auto [channel, peer] = key;
    Offer offer{};
    BRAID_CHECK(comm_->bootstrap->recv(peer, kOfferTag | channel, &offer, sizeof(offer)));
    Segment seg;
    if (offer.inProcessAddress) seg.base = reinterpret_cast<void*>(offer.inProcessAddress);
    else BRAID_CHECK(mapSegment(offer.shmName, false, &seg.base));
    sendSegments_[key] = seg;
    sends_[key].base = seg.base;
    char ack = 1;
    BRAID_CHECK(comm_->bootstrap->send(peer, kAckTag | channel, &ack, 1));
  }
  return ncclSuccess;
}

ncclResult_t HostTransport::finishReceivers(const std::set<ConnKey>& recvs) {
  for (const ConnKey& key : recvs) {
    if (!pendingRecvs_.count(key)) continue;
    char ack = 0;
    BRAID_CHECK(comm_->bootstrap->recv(key.second, kAckTag | key.first, &ack, 1));
    Segment& seg = recvSegments_[key];
    if (!seg.shmName.empty()) {
      shm_unlink(seg.shmName.c_str());  // both sides mapped it: a crash now leaks nothing
      seg.shmName.clear();
    }
    recvs_[key].base = seg.base;
    pendingRecvs_.erase(key);
  }
  return ncclSuccess;
}

HostConnection* HostTransport::sendConn(int channel, int peer) {
  auto it = sends_.find({channel, peer});
  return it == sends_.end() ? nullptr : &it->second;
}

HostConnection* HostTransport::recvConn(int channel, int peer) {
  auto it = recvs_.find({channel, peer});
  return it == recvs_.end() ? nullptr : &it->second;
}

void HostTransport::close(bool /*abort*/) {
  for (auto& [key, seg] : sendSegments_)
    if (!seg.ownedHeap && seg.base && !sameProcess(comm_, key.second)) munmap(seg.base, FifoLayout::kBytes);
  for (auto& [key, seg] : recvSegments_) {
    if (!seg.shmName.empty()) shm_unlink(seg.shmName.c_str());
    if (seg.ownedHeap) {
      // A same-process sender may still hold the pointer until its own communicator closes;
      // the communicators of one process are destroyed together in practice, and the memory
      // is only released here, by its owner.
      ::operator delete(seg.base, std::align_val_t(4096));
    } else if (seg.base) {
      munmap(seg.base, FifoLayout::kBytes);
    }
  }
  sendSegments_.clear();
  recvSegments_.clear();
  sends_.clear();
  recvs_.clear();
  pendingRecvs_.clear();
}

}  // namespace braid
