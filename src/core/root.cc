#include "core/root.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap_wire.h"
#include "core/env.h"
#include "core/log.h"
#include "core/root_roster.h"

namespace braid {
namespace {

// Connections waiting for their hello, at most. Real ranks present theirs within a round
// trip of connecting, so in a flood nearly every waiting connection is a stray; at the cap
// the oldest one goes, and a rank that has just connected is never the oldest.
constexpr size_t kMaxPending = 128;
// Connections accepted per wake-up, so that the hellos of accepted connections are read
// between batches even while a flood keeps the listener readable.
constexpr int kAcceptBatch = 32;
// Readiness events taken per wake-up.
constexpr int kEventBatch = 64;
// How long the root tries to deliver its answer to a rank.
constexpr double kReplySeconds = 10.0;
// Dropped connections logged one by one; the rest are counted in one line at the end.
constexpr int kDropsLogged = 3;

struct Connection {
  int fd = -1;
  std::string from;     // the peer's address, for the log
  Deadline helloBy{};
  size_t got = 0;
  unsigned char hello[wire::kRootHelloBytes];
  bool member = false;  // admitted to the roster as `rank`
  int rank = -1;        // the rank it claimed, once its hello was read whole
  // The answer (shared by all ranks) and how much of it has gone; null: nothing to send.
  std::shared_ptr<const std::vector<char>> reply;
  size_t sent = 0;
  Deadline replyBy{};
  uint32_t watched = 0;  // the epoll events registered for fd (0: not registered)

  bool pending() const { return fd >= 0 && rank < 0 && !reply; }
  bool answering() const { return fd >= 0 && reply; }
};

Deadline after(Deadline now, double seconds) {
  return now + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

std::shared_ptr<const std::vector<char>> errorReply(ncclResult_t status, const std::string& text) {
  wire::RootReply reply{};
  reply.status = status;
  std::snprintf(reply.error, sizeof(reply.error), "%s", text.c_str());
  auto bytes = std::make_shared<std::vector<char>>(sizeof(reply));
  std::memcpy(bytes->data(), &reply, sizeof(reply));
  return bytes;
}

std::string describeRank(const PeerInfo& info) {
  return "rank " + std::to_string(info.rank) + " (pid " + std::to_string(info.pid) + ", listening on " +
         info.listen.toString() + ")";
}

// One communicator's rendezvous: a single event loop over the listener and every open
// connection, so that no connection can hold up another. epoll rather than poll(): a wake-up
// costs the same with 128 strays waiting (or thousands of ranks) as with none.
class RootServer {
 public:
  // `lingerAfterFailure`: keep answering late ranks after a failure, until the rendezvous
  // deadline. Only for a root of its own id: a fixed NCCL_COMM_ID root must free its port
  // (and its secret, which is derived from the address) for the next init at once.
  RootServer(int listenFd, uint64_t secret, bool lingerAfterFailure) noexcept
      : listenFd_(listenFd), secret_(secret), linger_(lingerAfterFailure) {}
  ~RootServer() {
    for (auto& c : conns_) closeFd(c->fd);
    closeFd(listenFd_);
    closeFd(epollFd_);
  }
  RootServer(const RootServer&) = delete;
  RootServer& operator=(const RootServer&) = delete;

  void run();
  // After an exception in run(): tells every rank that has not started receiving an answer,
  // without allocating, and closes everything.
  void abandon(const char* what) noexcept;

 private:
  enum class Phase { kGathering, kReplying, kFailed };

  void acceptSome(Deadline now);
  void dispatch(Connection& c, Deadline now);
  bool watch(Connection& c, uint32_t events);
  void watchListener(Deadline now);
  void release(Connection& c);
  void closeListener();
  void readHello(Connection& c, Deadline now);
  void admit(Connection& c, const PeerInfo& info, Deadline now);
  void watchMember(Connection& c);
  void writeReply(Connection& c);
  void queueReply(Connection& c, std::shared_ptr<const std::vector<char>> bytes, Deadline now);
  void complete(Deadline now);
  void failAll(ncclResult_t status, const std::string& text, Deadline now);
  void drop(Connection& c, const std::string& why);
  void expire(Deadline now);
  bool finished(Deadline now) const;
  int pollTimeoutMs(Deadline now) const;

  int listenFd_;
  uint64_t secret_;
  bool linger_;
  int epollFd_ = -1;
  bool listenerWatched_ = false;
  Phase phase_ = Phase::kGathering;
  // In accept order; stable addresses (epoll carries them). Closed ones (fd < 0) are removed
  // at the top of the loop only, so that an event of this round never outlives its target.
  std::vector<std::unique_ptr<Connection>> conns_;
  Roster roster_;
  int drops_ = 0;
  double timeoutSeconds_ = 0;
  Deadline rendezvousBy_ = Deadline::max();  // set by the first rank: the id may wait long for it
  Deadline listenPausedUntil_{};
  std::shared_ptr<const std::vector<char>> failure_;  // the error answer, once failed
};

void RootServer::run() {
  int flags = fcntl(listenFd_, F_GETFL);
  if (flags < 0 || fcntl(listenFd_, F_SETFL, flags | O_NONBLOCK) != 0 ||
      (epollFd_ = epoll_create1(EPOLL_CLOEXEC)) < 0) {
    BRAID_WARN("bootstrap root: cannot set up the listener (fcntl or epoll_create1: %s); the root does not serve "
               "this id", std::strerror(errno));
    return;
  }
  epoll_event events[kEventBatch];
  for (;;) {
    Deadline now = Clock::now();
    expire(now);
    if (phase_ == Phase::kGathering && now >= rendezvousBy_) {
      char secs[32];
      std::snprintf(secs, sizeof(secs), "%.0f", timeoutSeconds_);
      failAll(ncclRemoteError,
              std::string("bootstrap root: timed out after ") + secs + " s waiting for " +
                  std::to_string(roster_.nRanks() - roster_.arrived()) + " of " + std::to_string(roster_.nRanks()) +
                  " ranks; missing rank(s): " + roster_.missing() +
                  ". Fix: check that every rank calls ncclCommInitRank with this id and that it did not die "
                  "(BRAID_INIT_TIMEOUT sets the limit).",
              now);
    }
    std::erase_if(conns_, [](const std::unique_ptr<Connection>& c) { return c->fd < 0; });
    if (finished(now)) break;
    watchListener(now);
    int n = epoll_wait(epollFd_, events, kEventBatch, pollTimeoutMs(now));
    if (n < 0) {
      if (errno == EINTR) continue;
      failAll(ncclSystemError, std::string("bootstrap root: epoll_wait failed: ") + std::strerror(errno), now);
      break;
    }
    now = Clock::now();
    uint32_t listener = 0;
    for (int i = 0; i < n; ++i) {
      auto* c = static_cast<Connection*>(events[i].data.ptr);
      if (!c) listener = events[i].events;
      else if (c->fd >= 0) dispatch(*c, now);  // closed earlier in this round: its fd may be reused
    }
    if (listener && listenFd_ >= 0) {
      if (listener & EPOLLERR) {
        failAll(ncclSystemError, "bootstrap root: the listening socket failed", now);
        closeListener();
      } else {
        acceptSome(now);
      }
    }
  }
  if (drops_ > kDropsLogged)
    BRAID_WARN("bootstrap root: dropped %d connections in all that did not present a valid hello for this "
               "unique id (only the first %d were logged)", drops_, kDropsLogged);
}

void RootServer::dispatch(Connection& c, Deadline now) {
  if (c.reply) writeReply(c);
  else if (c.pending()) readHello(c, now);
  else if (c.member && phase_ == Phase::kGathering) watchMember(c);
  else release(c);  // nothing left to say to it (every rank has an answer queued by now)
}

bool RootServer::watch(Connection& c, uint32_t events) {
  if (c.fd < 0 || c.watched == events) return true;
  epoll_event e{};
  e.events = events;
  e.data.ptr = &c;
  if (epoll_ctl(epollFd_, c.watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c.fd, &e) == 0) {
    c.watched = events;
    return true;
  }
  BRAID_WARN("bootstrap root: epoll_ctl for the connection from %s failed: %s", c.from.c_str(), std::strerror(errno));
  return false;
}

// The listener is watched unless it rests after running out of descriptors (level-triggered,
// it would wake the loop at once again).
void RootServer::watchListener(Deadline now) {
  bool want = listenFd_ >= 0 && now >= listenPausedUntil_;
  if (want == listenerWatched_) return;
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.ptr = nullptr;
  if (epoll_ctl(epollFd_, want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, listenFd_, &e) == 0) {
    listenerWatched_ = want;
    return;
  }
  failAll(ncclSystemError, std::string("bootstrap root: epoll_ctl for the listener failed: ") + std::strerror(errno),
          now);
  closeListener();
}

// Out of the epoll set before the close: a forked child may hold the same socket, and epoll
// forgets a socket only when its last descriptor closes (its events would name a freed entry).
void RootServer::release(Connection& c) {
  if (c.fd >= 0 && c.watched) epoll_ctl(epollFd_, EPOLL_CTL_DEL, c.fd, nullptr);
  c.watched = 0;
  closeFd(c.fd);
}

void RootServer::closeListener() {
  if (listenerWatched_) epoll_ctl(epollFd_, EPOLL_CTL_DEL, listenFd_, nullptr);
  listenerWatched_ = false;
  closeFd(listenFd_);
}

void RootServer::acceptSome(Deadline now) {
  for (int i = 0; i < kAcceptBatch && listenFd_ >= 0; ++i) {
    SocketAddress from{};
    socklen_t len = sizeof(sockaddr_in6);
    int fd = accept4(listenFd_, &from.sa, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        // Out of descriptors: a waiting stray makes room, or the listener rests a moment
        // (it would stay readable and spin the loop).
        auto oldest = std::find_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->pending(); });
        if (oldest != conns_.end()) {
          drop(**oldest, "closed to make room: the process ran out of file descriptors");
          continue;
        }
        BRAID_WARN("bootstrap root: accept failed: %s; pausing for 100 ms", std::strerror(err));
        listenPausedUntil_ = now + std::chrono::milliseconds(100);
        return;
      }
      failAll(ncclSystemError, std::string("bootstrap root: accept failed: ") + std::strerror(err), now);
      closeListener();
      return;
    }
    size_t pending = std::count_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->pending(); });
    if (pending >= kMaxPending) {
      // Accept order is conns_ order (appended, erased in place). Its hello may have come
      // since the last wake-up: read it before deciding.
      Connection& oldest = **std::find_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->pending(); });
      readHello(oldest, now);
      if (oldest.pending())
        drop(oldest, "evicted: " + std::to_string(kMaxPending) + " connections were waiting for their hello");
      if (listenFd_ < 0) {  // that hello completed the rendezvous
        close(fd);
        return;
      }
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->from = from.toString();
    c->helloBy = after(now, wire::kHelloSeconds);
    conns_.push_back(std::move(c));
    Connection& added = *conns_.back();
    if (watch(added, EPOLLIN)) readHello(added, now);  // a real rank's hello is usually there already
    else release(added);
  }
}

void RootServer::readHello(Connection& c, Deadline now) {
  while (c.got < sizeof(c.hello)) {
    ssize_t n = ::recv(c.fd, c.hello + c.got, sizeof(c.hello) - c.got, MSG_DONTWAIT);
    if (n > 0) {
      c.got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n == 0) drop(c, "closed after " + std::to_string(c.got) + " of the " + std::to_string(sizeof(c.hello)) +
                           " bytes of a hello");
    else drop(c, std::string("recv failed: ") + std::strerror(errno));
    return;
  }
  if (c.got < sizeof(wire::Hello)) return;
  wire::RootHello hello = wire::parseRootHello(c.hello, c.got, secret_);
  if (hello.fault == wire::HelloFault::kShort && hello.authenticated) return;  // the rest is on its way
  if (!hello.authenticated) {
    drop(c, hello.problem);
    return;
  }
  if (hello.fault != wire::HelloFault::kNone) {
    // It holds the secret, so it may be a rank of ours with a bug or a wrong nranks: tell it.
    std::string text = "bootstrap root: refused the hello from " + c.from + ": " + hello.problem +
                       ". Fix: run the same braid build on every rank, with 1 <= nranks <= " +
                       std::to_string(wire::kMaxRanks) + " and 0 <= rank < nranks.";
    BRAID_WARN("%s", text.c_str());
    queueReply(c, errorReply(ncclInvalidUsage, text), now);  // no longer pending: it waits for its answer
    return;
  }
  admit(c, hello.info, now);
}

void RootServer::admit(Connection& c, const PeerInfo& info, Deadline now) {
  c.rank = info.rank;
  if (phase_ == Phase::kFailed) {  // a late rank: it learns the rendezvous failed at once
    queueReply(c, failure_, now);
    return;
  }
  std::string problem;
  switch (roster_.admit(info, &problem)) {
    case Roster::Verdict::kAdmitted:
      c.member = true;
      if (roster_.arrived() == 1) {
        // The ranks' timeout, not the root process's: the root may live in a launcher.
        timeoutSeconds_ = info.initTimeoutMs > 0 ? info.initTimeoutMs / 1000.0 : env::initTimeoutSeconds();
        rendezvousBy_ = after(now, timeoutSeconds_);
      }
      BRAID_TRACE(kBootstrap, "bootstrap root: %s arrived (%d of %d)", describeRank(info).c_str(), roster_.arrived(),
                  roster_.nRanks());
      if (roster_.complete()) complete(now);
      return;
    case Roster::Verdict::kReplay:
      drop(c, "a replay of the hello of " + describeRank(info) + ", which has already arrived");
      return;
    case Roster::Verdict::kWrongRanks:
    case Roster::Verdict::kDuplicate:
      failAll(ncclInvalidUsage, problem, now);  // reaches c too: it has a rank and no answer yet
      return;
  }
}

// A rank that has reported sends nothing more until it has its answer: readable means it
// closed the connection (it died or gave up), or it broke the protocol.
void RootServer::watchMember(Connection& c) {
  char byte;
  ssize_t n = ::recv(c.fd, &byte, 1, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  const PeerInfo* info = roster_.find(c.rank);
  std::string name = info ? describeRank(*info) : "rank " + std::to_string(c.rank);
  Deadline now = Clock::now();
  release(c);
  c.member = false;
  if (n > 0) {
    failAll(ncclInternalError,
            "bootstrap root: " + name + " sent bytes after its hello, which no braid rank does. Fix: run the same "
            "braid build on every rank.",
            now);
    return;
  }
  failAll(ncclRemoteError,
          "bootstrap root: " + name + " closed its connection while waiting for the other ranks (" +
              std::to_string(roster_.arrived()) + " of " + std::to_string(roster_.nRanks()) +
              " had arrived): it died or aborted its init. Fix: look at rank " + std::to_string(c.rank) +
              "'s log for why it stopped.",
          now);
}

void RootServer::writeReply(Connection& c) {
  const std::vector<char>& bytes = *c.reply;
  while (c.sent < bytes.size()) {
    ssize_t n = ::send(c.fd, bytes.data() + c.sent, bytes.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    BRAID_WARN("bootstrap root: could not answer rank %d (%s): %s", c.rank, c.from.c_str(),
               n < 0 ? std::strerror(errno) : "send returned 0");
    break;
  }
  release(c);  // answered (or gone): the rank closes its side too
}

void RootServer::queueReply(Connection& c, std::shared_ptr<const std::vector<char>> bytes, Deadline now) {
  c.reply = std::move(bytes);
  c.sent = 0;
  c.replyBy = after(now, kReplySeconds);
  watch(c, EPOLLOUT);  // if this fails, the answer still goes as far as the socket takes it now
  writeReply(c);
}

void RootServer::complete(Deadline now) {
  std::vector<PeerInfo> table = roster_.table();
  wire::RootReply head{};
  head.status = ncclSuccess;
  head.nRanks = roster_.nRanks();
  auto bytes = std::make_shared<std::vector<char>>(sizeof(head) + table.size() * sizeof(PeerInfo));
  std::memcpy(bytes->data(), &head, sizeof(head));
  std::memcpy(bytes->data() + sizeof(head), table.data(), table.size() * sizeof(PeerInfo));
  phase_ = Phase::kReplying;
  closeListener();  // this id's rendezvous is over
  for (auto& c : conns_) {
    if (c->member) queueReply(*c, bytes, now);
    else if (c->pending()) drop(*c, "the rendezvous had completed");
  }
}

void RootServer::failAll(ncclResult_t status, const std::string& text, Deadline now) {
  if (phase_ != Phase::kGathering) return;
  BRAID_WARN("%s", text.c_str());
  phase_ = Phase::kFailed;
  failure_ = errorReply(status, text);
  if (!linger_) {  // closed before anyone hears of the failure, so that a new init finds the port free
    closeListener();
    for (auto& c : conns_)
      if (c->pending()) drop(*c, "the rendezvous had failed");
  }
  // Otherwise the listener stays until the rendezvous deadline: ranks still on their way hear why.
  for (auto& c : conns_)
    if (c->fd >= 0 && c->rank >= 0 && !c->reply) queueReply(*c, failure_, now);
}

void RootServer::drop(Connection& c, const std::string& why) {
  if (drops_++ < kDropsLogged)
    BRAID_WARN("bootstrap root: dropped a connection from %s: %s (a stray client, or a rank using another "
               "ncclUniqueId)", c.from.c_str(), why.c_str());
  release(c);
}

void RootServer::expire(Deadline now) {
  for (auto& p : conns_) {
    Connection& c = *p;
    if (c.pending() && now >= c.helloBy) {
      char text[96];
      std::snprintf(text, sizeof(text), "no complete hello within %.0f s (%zu bytes)", wire::kHelloSeconds, c.got);
      drop(c, text);
    } else if (c.answering() && now >= c.replyBy) {
      BRAID_WARN("bootstrap root: rank %d (%s) did not take its answer within %.0f s", c.rank, c.from.c_str(),
                 kReplySeconds);
      release(c);
    }
  }
}

bool RootServer::finished(Deadline now) const {
  bool answering = std::any_of(conns_.begin(), conns_.end(), [](const auto& c) { return c->answering(); });
  if (answering) return false;
  if (phase_ == Phase::kReplying) return true;
  if (phase_ == Phase::kFailed) return listenFd_ < 0 || now >= rendezvousBy_;
  return listenFd_ < 0;  // gathering without a listener: nobody can arrive any more
}

int RootServer::pollTimeoutMs(Deadline now) const {
  Deadline wake = Deadline::max();
  if (phase_ != Phase::kReplying) wake = rendezvousBy_;
  if (listenFd_ >= 0 && listenPausedUntil_ > now) wake = std::min(wake, listenPausedUntil_);
  for (const auto& c : conns_) {
    if (c->pending()) wake = std::min(wake, c->helloBy);
    if (c->answering()) wake = std::min(wake, c->replyBy);
  }
  if (wake == Deadline::max()) return -1;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 60000));
}

void RootServer::abandon(const char* what) noexcept {
  wire::RootReply reply{};
  reply.status = ncclInternalError;
  std::snprintf(reply.error, sizeof(reply.error),
                "bootstrap root: internal error (%s); the rendezvous was abandoned. Fix: report this as a braid bug.",
                what);
  Deadline by = deadlineIn(2.0);
  for (auto& c : conns_) {
    bool told = c->fd >= 0 && c->rank >= 0 && c->sent == 0;  // half an answer cannot be followed by another
    if (told) sendAll(c->fd, &reply, sizeof(reply), by, nullptr);  // best effort: the rank may be gone
    closeFd(c->fd);
  }
  try {
    BRAID_WARN("%s", reply.error);
  } catch (...) {
  }
}

// Serves one communicator's rendezvous, then exits. Nothing escapes: an exception fails the
// rendezvous for every rank instead of ending the process.
void rootThread(int listenFd, uint64_t secret, bool linger) noexcept {
  RootServer server(listenFd, secret, linger);
  try {
    server.run();
  } catch (const std::exception& e) {
    server.abandon(e.what());
  } catch (...) {
    server.abandon("unknown exception");
  }
}

}  // namespace

ncclResult_t startRoot(const SocketAddress* fixed, uint64_t secret, UniqueIdContent* content) {
  SocketAddress addr{};
  if (fixed) {
    addr = *fixed;
  } else {
    BRAID_CHECK(findBootstrapAddress(&addr, nullptr));
    if (addr.sa.sa_family == AF_INET) addr.sin.sin_port = 0;
    else addr.sin6.sin6_port = 0;
  }
  int fd = -1;
  BRAID_CHECK(listenOn(&addr, &fd));
  std::memset(content, 0, sizeof(*content));
  content->secret = secret;
  content->root = addr;
  try {
    std::thread(rootThread, fd, secret, fixed == nullptr).detach();
  } catch (const std::exception& e) {
    close(fd);
    return fail(ncclSystemError, "bootstrap: cannot start the root thread: %s", e.what());
  }
  BRAID_INFO(kBootstrap, "bootstrap root listening on %s", addr.toString().c_str());
  return ncclSuccess;
}

}  // namespace braid
