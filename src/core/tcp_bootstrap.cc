#include "core/tcp_bootstrap.h"

#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include "core/bootstrap_wire.h"
#include "core/env.h"
#include "core/log.h"
#include "core/root.h"

namespace braid {
namespace {
constexpr uint32_t kAllGatherTag = 0x7fff0001;
}

TcpBootstrap::TcpBootstrap(int rank, std::vector<PeerInfo> peers, uint64_t secret, int listenFd)
    : rank_(rank), peers_(std::move(peers)), secret_(secret), listenFd_(listenFd),
      timeout_(env::initTimeoutSeconds()), sendFd_(peers_.size(), -1), recvFd_(peers_.size(), -1) {}

TcpBootstrap::~TcpBootstrap() {
  for (int& fd : sendFd_) closeFd(fd);
  for (int& fd : recvFd_) closeFd(fd);
  closeFd(listenFd_);
}

ncclResult_t TcpBootstrap::openListener(SocketAddress* addr, int* fd) {
  BRAID_CHECK(findBootstrapAddress(addr, nullptr));
  if (addr->sa.sa_family == AF_INET) addr->sin.sin_port = 0;
  else addr->sin6.sin6_port = 0;
  return listenOn(addr, fd);
}

std::unique_ptr<TcpBootstrap> TcpBootstrap::fromPeers(int rank, std::vector<PeerInfo> peers, uint64_t secret,
                                                      int listenFd) {
  return std::unique_ptr<TcpBootstrap>(new TcpBootstrap(rank, std::move(peers), secret, listenFd));
}

ncclResult_t TcpBootstrap::connectViaRoot(const UniqueIdContent& id, PeerInfo self, double timeoutSeconds,
                                          const std::atomic<bool>* abortFlag, std::unique_ptr<TcpBootstrap>* out,
                                          std::vector<PeerInfo>* peers) {
  int listenFd = -1;
  BRAID_CHECK(openListener(&self.listen, &listenFd));
  // The root's own deadline starts at the first rank; allow ours a little more so that we
  // receive its explanation (which ranks are missing) rather than time out first.
  Deadline deadline = deadlineIn(timeoutSeconds + 5.0);
  wire::Hello hello{id.secret, wire::kHelloRoot, self.rank};
  wire::RootReply reply{};
  int fd = -1;
  ncclResult_t rc = ncclSuccess;
  // A root flooded by strays drops the oldest connections it has no hello from yet (root.cc),
  // always before answering, so a close before the answer sends the hello again. A retry
  // connects for 1 s at most: a root that is gone must not cost the whole timeout.
  constexpr int kRootAttempts = 20;
  for (int attempt = 0; attempt < kRootAttempts; ++attempt) {
    closeFd(fd);
    rc = connectTo(id.root, attempt ? std::min(deadline, deadlineIn(1.0)) : deadline, abortFlag, &fd);
    if (rc != ncclSuccess && attempt == 0) {
      close(listenFd);
      return fail(rc == ncclInProgress ? ncclRemoteError : rc,
                  "ncclCommInitRank (rank %d of %d): cannot reach the bootstrap root at %s within %.0f s. Fix: "
                  "make sure the process that called ncclGetUniqueId is alive and reachable (NCCL_SOCKET_IFNAME).",
                  self.rank, self.nRanks, id.root.toString().c_str(), timeoutSeconds);
    }
    if (rc != ncclSuccess) {
      rc = ncclRemoteError;  // reported as the close that made us retry
      break;
    }
    rc = sendAll(fd, &hello, sizeof(hello), deadline, abortFlag);
    if (rc == ncclSuccess) rc = sendAll(fd, &self, sizeof(self), deadline, abortFlag);
    if (rc == ncclSuccess) rc = recvAll(fd, &reply, sizeof(reply), deadline, abortFlag);
    if (rc != ncclRemoteError || Clock::now() >= deadline) break;
    BRAID_INFO(kBootstrap, "ncclCommInitRank (rank %d): the bootstrap root closed our connection before answering; "
               "sending the hello again", self.rank);
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * (attempt + 1)));
  }
  // Nothing the root sent sizes or indexes anything before it is checked.
  std::string bad = rc == ncclSuccess ? wire::rootReplyProblem(reply, self.nRanks) : "";
  if (rc == ncclSuccess && bad.empty() && reply.status == ncclSuccess) {
    peers->resize(self.nRanks);
    rc = recvAll(fd, peers->data(), peers->size() * sizeof(PeerInfo), deadline, abortFlag);
    if (rc == ncclSuccess) bad = wire::peerTableProblem(*peers, self.nRanks);
  }
  closeFd(fd);
  if (!bad.empty()) {
    close(listenFd);
    return fail(ncclRemoteError,
                "ncclCommInitRank (rank %d of %d): the bootstrap root at %s sent a malformed answer (%s). Fix: check "
                "that every rank and the process that called ncclGetUniqueId run the same braid build.",
                self.rank, self.nRanks, id.root.toString().c_str(), bad.c_str());
  }
  if (rc != ncclSuccess || reply.status != ncclSuccess) {
    close(listenFd);
    if (rc == ncclSuccess)
      return fail(static_cast<ncclResult_t>(reply.status), "ncclCommInitRank (rank %d of %d): %s", self.rank,
                  self.nRanks, reply.error);
    return fail(ncclRemoteError,
                "ncclCommInitRank (rank %d of %d): the bootstrap root at %s %s. Fix: check that every rank uses "
                "the same ncclUniqueId and that the root process is alive.",
                self.rank, self.nRanks, id.root.toString().c_str(),
                rc == ncclInProgress ? "did not answer in time" : "closed the connection (it rejected us or died)");
  }
  out->reset(new TcpBootstrap(self.rank, *peers, id.secret, listenFd));
  (*out)->timeout_ = timeoutSeconds;
  return ncclSuccess;
}

ncclResult_t TcpBootstrap::explain(ncclResult_t rc, const char* what, int peer) {
  if (rc == ncclSuccess) return rc;
  if (abort_->load()) return fail(ncclInvalidUsage, "bootstrap (rank %d): %s rank %d interrupted by abort", rank_, what, peer);
  if (rc == ncclRemoteError && lost_ && lost_[peer].load() != 0)
    return fail(ncclRemoteError, "bootstrap (rank %d): %s rank %d failed: rank %d is gone (the liveness monitor saw it "
                "die or leave).", rank_, what, peer, peer);
  if (rc == ncclInProgress)
    return fail(ncclRemoteError,
                "bootstrap (rank %d): timed out after %.0f s on %s rank %d. Rank %d may have died or be stuck "
                "in another call. Fix: check that rank's log; BRAID_INIT_TIMEOUT sets the limit.",
                rank_, timeout_, what, peer, peer);
  if (rc == ncclRemoteError)
    return fail(ncclRemoteError, "bootstrap (rank %d): connection with rank %d closed while %s it: rank %d died or aborted.",
                rank_, peer, what, peer);
  return rc;
}

ncclResult_t TcpBootstrap::sendLocked(int peer, uint32_t tag, const void* data, size_t size) {
  Deadline deadline = deadlineIn(timeout_);
  if (sendFd_[peer] < 0) {
    int fd = -1;
    ncclResult_t rc = connectTo(peers_[peer].listen, deadline, abort_, &fd, lostFlag(peer));
    if (rc != ncclSuccess) return explain(rc, "connecting to", peer);
    wire::Hello hello{secret_, wire::kHelloPeer, rank_};
    rc = sendAll(fd, &hello, sizeof(hello), deadline, abort_, lostFlag(peer));
    if (rc != ncclSuccess) { close(fd); return explain(rc, "greeting", peer); }
    sendFd_[peer] = fd;
  }
  wire::MessageHeader header{tag, 0, size};
  ncclResult_t rc = sendAll(sendFd_[peer], &header, sizeof(header), deadline, abort_, lostFlag(peer));
  if (rc == ncclSuccess && size) rc = sendAll(sendFd_[peer], data, size, deadline, abort_, lostFlag(peer));
  return explain(rc, "sending to", peer);
}

// Accepts one incoming peer connection; drops (and logs) one with a wrong secret.
ncclResult_t TcpBootstrap::acceptOne(Deadline deadline, int waitingFor) {
  int fd = -1;
  ncclResult_t rc = acceptBefore(listenFd_, deadline, abort_, &fd, lostFlag(waitingFor));
  if (rc != ncclSuccess) return explain(rc, "waiting for a connection from", waitingFor);
  wire::Hello hello{};
  rc = recvAll(fd, &hello, sizeof(hello), std::min(deadline, deadlineIn(wire::kHelloSeconds)), abort_,
               lostFlag(waitingFor));
  if (rc != ncclSuccess || hello.secret != secret_ || hello.kind != wire::kHelloPeer || hello.rank < 0 ||
      hello.rank >= nRanks() || recvFd_[hello.rank] >= 0) {
    BRAID_WARN("bootstrap (rank %d): dropped an incoming connection that did not present this communicator's "
               "secret (claimed rank %d)", rank_, rc == ncclSuccess ? hello.rank : -1);
    close(fd);
    return ncclSuccess;
  }
  recvFd_[hello.rank] = fd;
  return ncclSuccess;
}

ncclResult_t TcpBootstrap::recvLocked(int peer, uint32_t tag, void* data, size_t size) {
  auto key = std::make_pair(peer, tag);
  auto it = unexpected_.find(key);
  if (it != unexpected_.end() && !it->second.empty()) {
    std::vector<char> msg = std::move(it->second.front());
    it->second.pop_front();
    if (msg.size() != size)
      return fail(ncclInternalError, "bootstrap (rank %d): message from rank %d tag %u has %zu bytes, expected %zu",
                  rank_, peer, tag, msg.size(), size);
    if (size) std::memcpy(data, msg.data(), size);
    return ncclSuccess;
  }
  Deadline deadline = deadlineIn(timeout_);
  while (recvFd_[peer] < 0) BRAID_CHECK(acceptOne(deadline, peer));
  for (;;) {
    wire::MessageHeader header{};
    ncclResult_t rc = recvAll(recvFd_[peer], &header, sizeof(header), deadline, abort_, lostFlag(peer));
    if (rc != ncclSuccess) return explain(rc, "receiving from", peer);
    if (header.tag == tag) {
      if (header.size != size)
        return fail(ncclInvalidUsage,
                    "bootstrap (rank %d): rank %d sent %llu bytes for tag %u, expected %zu: the ranks disagree on "
                    "the sequence of setup calls.",
                    rank_, peer, static_cast<unsigned long long>(header.size), tag, size);
      return explain(size ? recvAll(recvFd_[peer], data, size, deadline, abort_, lostFlag(peer)) : ncclSuccess,
                     "receiving from",
                     peer);
    }
    if (header.size > wire::kMaxBufferedMessageBytes)
      return fail(ncclRemoteError,
                  "bootstrap (rank %d): rank %d announced a %llu-byte message for tag %u, more than the %llu bytes a "
                  "setup message may have: it runs another braid build, or something else reached its socket.",
                  rank_, peer, static_cast<unsigned long long>(header.size), header.tag,
                  static_cast<unsigned long long>(wire::kMaxBufferedMessageBytes));
    std::vector<char> msg(header.size);
    rc = recvAll(recvFd_[peer], msg.data(), msg.size(), deadline, abort_, lostFlag(peer));
    if (rc != ncclSuccess) return explain(rc, "receiving from", peer);
    unexpected_[{peer, header.tag}].push_back(std::move(msg));
  }
}

ncclResult_t TcpBootstrap::send(int peer, uint32_t tag, const void* data, size_t size) {
  if (peer < 0 || peer >= nRanks()) return fail(ncclInternalError, "bootstrap send to invalid rank %d", peer);
  std::lock_guard<std::mutex> lock(mutex_);
  return sendLocked(peer, tag, data, size);
}

ncclResult_t TcpBootstrap::recv(int peer, uint32_t tag, void* data, size_t size) {
  if (peer < 0 || peer >= nRanks()) return fail(ncclInternalError, "bootstrap recv from invalid rank %d", peer);
  std::lock_guard<std::mutex> lock(mutex_);
  return recvLocked(peer, tag, data, size);
}

ncclResult_t TcpBootstrap::allGatherAmong(const std::vector<int>& members, void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  int n = static_cast<int>(members.size());
  int me = -1;
  for (int i = 0; i < n; ++i)
    if (members[i] == rank_) me = i;
  if (me < 0) return fail(ncclInternalError, "bootstrap: rank %d is not among the all-gather members", rank_);
  char* base = static_cast<char*>(data);
  int next = members[(me + 1) % n], prev = members[(me + n - 1) % n];
  // Step s: pass on the block that arrived in step s-1 (our own first).
  for (int s = 0; s < n - 1; ++s) {
    int sendBlock = members[(me - s + n) % n];
    int recvBlock = members[(me - s - 1 + 2 * n) % n];
    BRAID_CHECK(sendLocked(next, kAllGatherTag, base + sendBlock * bytes, bytes));
    BRAID_CHECK(recvLocked(prev, kAllGatherTag, base + recvBlock * bytes, bytes));
  }
  return ncclSuccess;
}

ncclResult_t TcpBootstrap::allGather(void* data, size_t bytesPerRank) {
  std::vector<int> all(nRanks());
  for (int r = 0; r < nRanks(); ++r) all[r] = r;
  return allGatherAmong(all, data, bytesPerRank);
}

ncclResult_t TcpBootstrap::barrier() {
  std::vector<char> bytes(nRanks());
  return allGather(bytes.data(), 1);
}

}  // namespace braid
