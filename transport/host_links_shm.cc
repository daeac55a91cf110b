// Host connections between processes of one host: a POSIX shared-memory segment made by the
// receiver, offered by name, and unlinked as soon as the sender has mapped it, so that nothing
// is left in /dev/shm when a process dies (transport.h).
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/comm.h"
#include "core/log.h"
#include "transport/host_fifo.h"
#include "transport/select.h"

namespace braid::transport {
namespace {

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

void unlinkName(HostSegment* seg) {
  if (seg->shmName.empty()) return;
  (void)shm_unlink(seg->shmName.c_str());  // ENOENT: the other end removed it first
  seg->shmName.clear();
}

class ShmHostTransport final : public HostLinkTransport {
 public:
  const char* name() const override { return "shared memory"; }
  bool canConnect(const PeerInfo& me, const PeerInfo& peer) const override {
    return localityOf(me, peer) == Locality::SameHost;
  }
  bool offers() const override { return true; }

  ncclResult_t makeReceiver(ncclComm* comm, const ConnKey& key, HostSegment* seg, HostOffer* offer) const override {
    std::snprintf(offer->shmName, sizeof(offer->shmName), "%s",
                  segmentName(comm, key.first, key.second, comm->rank).c_str());
    BRAID_CHECK(mapSegment(offer->shmName, true, &seg->base));
    seg->shmName = offer->shmName;
    new (seg->base) FifoControl();
    return ncclSuccess;
  }

  ncclResult_t attachSender(ncclComm* comm, const ConnKey& key, const HostOffer& offer, HostSegment* seg) const override {
    if (std::memchr(offer.shmName, 0, sizeof(offer.shmName)) == nullptr || offer.shmName[0] != '/')
      return fail(ncclInternalError, "host transport (rank %d): rank %d sent a malformed offer", comm->rank, key.second);
    ncclResult_t rc = mapSegment(offer.shmName, false, &seg->base);
    if (rc == ncclRemoteError)  // gone already: the receiver's call failed and it removed the name
      return fail(ncclRemoteError, "host transport (rank %d): rank %d gave up the connection before this rank "
                  "could map it (that rank's call failed; see its log).", comm->rank, key.second);
    BRAID_CHECK(rc);
    // Mapped: the name may go now (the receiver removes it too, after the ack), so that the
    // receiver's death from here on leaves nothing in /dev/shm.
    (void)shm_unlink(offer.shmName);
    return ncclSuccess;
  }

  void acknowledged(HostSegment* seg) const override { unlinkName(seg); }  // both sides mapped it

  void abandon(ncclComm* comm, const ConnKey& key, bool send, HostSegment* seg) const override {
    if (seg) unlinkName(seg);
    else if (send) (void)shm_unlink(segmentName(comm, key.first, comm->rank, key.second).c_str());  // ENOENT: never made
  }

  void peerDied(ncclComm* comm, int dead) const override {
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

  void release(ncclComm*, const ConnKey&, bool, HostSegment* seg) const override {
    unlinkName(seg);
    if (seg->base) munmap(seg->base, FifoLayout::kBytes);
    seg->base = nullptr;
  }
};

}  // namespace

const HostLinkTransport& shmHostTransport() {
  static const ShmHostTransport t;
  return t;
}

}  // namespace braid::transport
