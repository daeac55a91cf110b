#include "transport/host_transport.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <string>

#include "core/comm.h"
#include "core/fault_point.h"
#include "core/log.h"
#include "transport/host_fifo.h"
#include "transport/select.h"
#include "transport/ucx_net.h"

namespace braid {
namespace {

constexpr uint32_t kOfferTag = 0x48000000;  // | channel: receiver -> sender
constexpr uint32_t kAckTag = 0x49000000;    // | channel: sender -> receiver

struct Offer {
  uint64_t inProcessAddress;  // same process: the FIFO's address
  char shmName[64];           // same host: the segment's name
};

// The segment of connection (channel, sender -> receiver): a name both ends can compute, so that
// whichever survives a death during setup removes it. The hash keeps the secret out of /dev/shm.
std::string segmentPrefix(const ncclComm* comm) {
  uint64_t h = comm->bootstrap->secret() * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  char prefix[32];
  std::snprintf(prefix, sizeof(prefix), "braid-%016llx-", static_cast<unsigned long long>(h));
  return prefix;
}
std::string segmentName(const ncclComm* comm, int channel, int sender, int receiver) {
  return "/" + segmentPrefix(comm) + std::to_string(channel) + "-" + std::to_string(sender) + "-" +
         std::to_string(receiver);
}

// Removes the segments a dead rank made as a receiver of this communicator and had not yet
// offered (a survivor may never have started the setup that would have removed them).
void removeSegmentsOf(const ncclComm* comm, int dead) {
  const std::string prefix = segmentPrefix(comm), suffix = "-" + std::to_string(dead);
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) == 0 && name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      (void)shm_unlink(("/" + name).c_str());  // ENOENT: another survivor was first
  }
  closedir(d);
}

transport::Locality localityOf(const ncclComm* comm, int peer) {
  return transport::localityOf(comm->peers[comm->rank], comm->peers[peer]);
}
bool otherHost(const ncclComm* comm, int peer) { return localityOf(comm, peer) == transport::Locality::OtherHost; }

// A FIFO in this process's memory: for a peer of this process, and for each end of a
// connection to another host (its proxy moves the slots, transport/ucx_net.h).
void* newLocalFifo() { return ::operator new(FifoLayout::kBytes, std::align_val_t(4096), std::nothrow); }

bool sameProcess(const ncclComm* comm, int peer) { return localityOf(comm, peer) == transport::Locality::SameProcess; }

ncclResult_t mapSegment(const char* name, bool create, void** out) {
  int fd = shm_open(name, create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
  if (fd < 0 && !create && errno == ENOENT) return ncclRemoteError;  // the caller says why (the owner gave up)
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

ncclResult_t HostTransport::attachNetwork(const ConnKey& key, bool send) {
  auto [channel, peer] = key;
  if (!comm_->net) return fail(ncclInternalError, "rank %d: no network transport to rank %d", comm_->rank, peer);
  Segment seg;
  seg.base = newLocalFifo();
  if (!seg.base) return fail(ncclSystemError, "host transport: out of memory (%zu bytes)", FifoLayout::kBytes);
  seg.ownedHeap = true;
  new (seg.base) FifoControl();
  (send ? sendSegments_ : recvSegments_)[key] = seg;
  const transport::NetFifo fifo = transport::hostNetFifo(seg.base);
  BRAID_CHECK(send ? comm_->net->addSender(channel, peer, fifo) : comm_->net->addReceiver(channel, peer, fifo));
  (send ? sends_ : recvs_)[key].base = seg.base;
  return ncclSuccess;
}

ncclResult_t HostTransport::offerReceivers(const std::set<ConnKey>& recvs) {
  for (const ConnKey& key : recvs) {
    if (recvs_.count(key) || pendingRecvs_.count(key)) continue;
    auto [channel, peer] = key;
    Segment seg;
    if (otherHost(comm_, peer)) {  // no offer: each end has its own FIFO, the proxy joins them
      BRAID_CHECK(attachNetwork(key, /*send=*/false));
      continue;
    }
    Offer offer{};
    if (sameProcess(comm_, peer)) {
      seg.base = newLocalFifo();
      if (!seg.base) return fail(ncclSystemError, "host transport: out of memory (%zu bytes)", FifoLayout::kBytes);
      seg.ownedHeap = true;
      offer.inProcessAddress = reinterpret_cast<uint64_t>(seg.base);
    } else {
      std::snprintf(offer.shmName, sizeof(offer.shmName), "%s", segmentName(comm_, channel, peer, comm_->rank).c_str());
      BRAID_CHECK(mapSegment(offer.shmName, true, &seg.base));
      seg.shmName = offer.shmName;
    }
    new (seg.base) FifoControl();
    recvSegments_[key] = seg;
    pendingRecvs_.insert(key);
    faultPoint("host-offer-made");
    BRAID_CHECK(comm_->bootstrap->send(peer, kOfferTag | channel, &offer, sizeof(offer)));
    faultPoint("host-offer-sent");
  }
  return ncclSuccess;
}

ncclResult_t HostTransport::attachSenders(const std::set<ConnKey>& sends) {
  for (const ConnKey& key : sends) {
    if (sends_.count(key)) continue;
    auto [channel, peer] = key;
    if (otherHost(comm_, peer)) {
      BRAID_CHECK(attachNetwork(key, /*send=*/true));
      continue;
    }
    Offer offer{};
    BRAID_CHECK(comm_->bootstrap->recv(peer, kOfferTag | channel, &offer, sizeof(offer)));
    faultPoint("host-offer-received");
    Segment seg;
    if (offer.inProcessAddress) {
      seg.base = reinterpret_cast<void*>(offer.inProcessAddress);
    } else {
      if (std::memchr(offer.shmName, 0, sizeof(offer.shmName)) == nullptr)
        return fail(ncclInternalError, "host transport (rank %d): rank %d sent a malformed offer", comm_->rank, peer);
      ncclResult_t rc = mapSegment(offer.shmName, false, &seg.base);
      if (rc == ncclRemoteError)  // gone already: the receiver's call failed and it removed the name
        return fail(ncclRemoteError, "host transport (rank %d): rank %d gave up the connection before this rank "
                    "could map it (that rank's call failed; see its log).", comm_->rank, peer);
      BRAID_CHECK(rc);
      // Mapped: the name may go now (the receiver removes it too, after the ack), so that the
      // receiver's death from here on leaves nothing in /dev/shm.
      (void)shm_unlink(offer.shmName);
    }
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
    Segment& seg = recvSegments_[key];
    BRAID_CHECK(comm_->bootstrap->recv(key.second, kAckTag | key.first, &ack, 1));
    if (!seg.shmName.empty()) {
      (void)shm_unlink(seg.shmName.c_str());  // both sides mapped it (ENOENT: the sender was first)
      seg.shmName.clear();
    }
    recvs_[key].base = seg.base;
    pendingRecvs_.erase(key);
  }
  return ncclSuccess;
}

void HostTransport::abandonSetup(const std::set<ConnKey>& recvs, const std::set<ConnKey>& sends) {
  for (const ConnKey& key : recvs) {
    auto it = recvSegments_.find(key);
    if (it != recvSegments_.end() && !it->second.shmName.empty()) {
      (void)shm_unlink(it->second.shmName.c_str());  // ENOENT: the sender removed it after mapping
      it->second.shmName.clear();
    }
  }
  for (const ConnKey& key : sends)
    if (!sends_.count(key) && !sameProcess(comm_, key.second))
      (void)shm_unlink(segmentName(comm_, key.first, comm_->rank, key.second).c_str());  // ENOENT: never made
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
  if (comm_->liveness)
    for (int r = 0; r < comm_->nRanks; ++r)
      if (comm_->liveness->state(r) == PeerState::Dead && !otherHost(comm_, r))
        removeSegmentsOf(comm_, r);
  for (auto& [key, seg] : sendSegments_) {
    if (seg.ownedHeap) ::operator delete(seg.base, std::align_val_t(4096));  // a network sender's own FIFO
    else if (seg.base && !sameProcess(comm_, key.second)) munmap(seg.base, FifoLayout::kBytes);
  }
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
