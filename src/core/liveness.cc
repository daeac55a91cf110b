#include "core/liveness.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_set>
#include <utility>

#include "core/bootstrap_wire.h"
#include "core/comm.h"
#include "core/cuda_scope.h"
#include "core/env.h"
#include "core/hang_report.h"
#include "core/log.h"

namespace braid {
namespace {

constexpr uint32_t kHelloLive = 0x4c495645;   // "LIVE": a neighbour's persistent connection
constexpr uint32_t kHelloQuery = 0x51525959;  // "QRYY": a one-shot status query
constexpr uint32_t kNoticeMagic = 0x4e4f5443;  // "NOTC"

enum NoticeKind : uint32_t { kLost = 1, kMismatch = 2, kHang = 3 };
// Why a rank is gone, in a kLost notice (Liveness::kDestroyed, kAborted, kDied).
constexpr uint32_t kDestroyed = Liveness::kDestroyed, kAborted = Liveness::kAborted, kDied = Liveness::kDied;
// core/socket.cc reads the states: 1 left (a grace for its last bytes), 2 dead (at once).
static_assert(uint8_t(PeerState::Departed) == 1 && uint8_t(PeerState::Dead) == 2);

constexpr int kPollMs = 100;                 // the monitor's tick: hang checks, signals, deadlines
constexpr double kHelloSeconds = 0.5;        // a connection must say who it is this fast
constexpr size_t kMaxPending = 64;           // unidentified connections kept at once
constexpr double kQuerySeconds = 0.5;        // each status query of a hang report
// A neighbour whose connection to us never came, or whose connection from us closed, is dead
// if it does not say goodbye within this long (the goodbye travels on the other connection).
constexpr double kGoodbyeGraceSeconds = 1.0;

std::atomic<uint32_t> gReportSignals{0};
extern "C" void onReportSignal(int) { gReportSignals.fetch_add(1, std::memory_order_relaxed); }

// SIGUSR1 asks every communicator of the process for a report, unless the program handles
// SIGUSR1 itself or BRAID_REPORT_SIGNAL=0.
void installReportSignal() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (env::getInt("BRAID_REPORT_SIGNAL", 1) == 0) return;
    struct sigaction old {};
    if (sigaction(SIGUSR1, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return;
    struct sigaction sa {};
    sa.sa_handler = onReportSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGUSR1, &sa, nullptr) != 0)
      BRAID_WARN("liveness: cannot install the SIGUSR1 report handler: %s", std::strerror(errno));
  });
}

// Live monitors, for the goodbye at process exit.
std::mutex gMonitorsMutex;
std::unordered_set<Liveness*>& monitors() {
  static auto* set = new std::unordered_set<Liveness*>();  // never destroyed: used at exit
  return *set;
}
void sayGoodbyeAtExit() {
  std::lock_guard<std::mutex> lock(gMonitorsMutex);
  for (Liveness* l : monitors()) l->farewellAtExit();
}

bool setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// Across hosts a dead machine closes nothing: keepalive probes end the connection in ~4 s.
void keepAlive(int fd) {
  int one = 1, idle = 1, interval = 1, count = 3, userTimeoutMs = 4000;
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeoutMs, sizeof(userTimeoutMs));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// One connect, no retry: the peer's listener existed before the rendezvous, so a refusal
// means its process is gone. ncclRemoteError for a refusal, ncclInProgress at the deadline.
ncclResult_t connectOnce(const SocketAddress& addr, Deadline deadline, int* out) {
  int fd = socket(addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return fail(ncclSystemError, "liveness: socket() failed: %s", std::strerror(errno));
  int rc = connect(fd, &addr.sa, addr.length());
  if (rc != 0 && errno != EINPROGRESS) {
    int err = errno;
    close(fd);
    return err == ECONNREFUSED || err == ECONNRESET ? ncclRemoteError
                                                    : fail(ncclSystemError, "liveness: connect to %s failed: %s",
                                                           addr.toString().c_str(), std::strerror(err));
  }
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      close(fd);
      return ncclInProgress;
    }
    pollfd p{fd, POLLOUT, 0};
    int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
    if (n < 0 && errno != EINTR) {
      int err = errno;
      close(fd);
      return fail(ncclSystemError, "liveness: poll failed: %s", std::strerror(err));
    }
    if (n > 0) break;
  }
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    close(fd);
    return err == ECONNREFUSED || err == ECONNRESET ? ncclRemoteError
                                                    : fail(ncclSystemError, "liveness: connect to %s failed: %s",
                                                           addr.toString().c_str(), std::strerror(err));
  }
  keepAlive(fd);
  *out = fd;
  return ncclSuccess;
}

const char* reasonText(uint32_t reason) {
  switch (reason) {
    case kDestroyed: return "destroyed its communicator (or its process exited)";
    case kAborted: return "called ncclCommAbort";
    default: return "died";
  }
}

}  // namespace

std::vector<int> livenessNeighbours(int rank, int nRanks) {
  std::vector<int> out;
  for (long step = 1; step < nRanks; step *= 2)
    for (long s : {rank + step, rank - step}) {
      int peer = static_cast<int>(((s % nRanks) + nRanks) % nRanks);
      if (peer != rank && std::find(out.begin(), out.end(), peer) == out.end()) out.push_back(peer);
    }
  std::sort(out.begin(), out.end());
  return out;
}

ncclResult_t Liveness::open(SocketAddress* address, std::unique_ptr<Liveness>* out) {
  std::unique_ptr<Liveness> l(new Liveness());
  BRAID_CHECK(findBootstrapAddress(address, nullptr));
  if (address->sa.sa_family == AF_INET) address->sin.sin_port = 0;
  else address->sin6.sin6_port = 0;
  BRAID_CHECK(listenOn(address, &l->listenFd_));
  if (!setNonBlocking(l->listenFd_))
    return fail(ncclSystemError, "liveness: cannot make the listener non-blocking: %s", std::strerror(errno));
  if (pipe2(l->wake_, O_CLOEXEC | O_NONBLOCK) != 0)
    return fail(ncclSystemError, "liveness: pipe2 failed: %s", std::strerror(errno));
  *out = std::move(l);
  return ncclSuccess;
}

Liveness::~Liveness() {
  stop(true);
  closeFd(listenFd_);
  closeFd(wake_[0]);
  closeFd(wake_[1]);
}

ncclResult_t Liveness::start(ncclComm* comm) {
  comm_ = comm;
  rank_ = comm->rank;
  n_ = comm->nRanks;
  secret_ = comm->bootstrap->secret();
  hangTimeout_ = env::getDouble("BRAID_HANG_TIMEOUT", 30.0);
  state_.reset(new std::atomic<uint8_t>[n_]);
  for (int r = 0; r < n_; ++r) state_[r].store(0);
  reasons_.assign(n_, "");
  out_.assign(n_, -1);
  in_.assign(n_, -1);
  outClosedAt_.assign(n_, Clock::time_point{});
  seenEpoch_.assign(n_, 0);
  startedBy_.assign(n_, 0);
  neighbours_ = livenessNeighbours(rank_, n_);
  // Connect to every neighbour at once; each side connects, so each pair has two connections
  // and a death is seen from both.
  Deadline deadline = deadlineIn(std::min(10.0, env::initTimeoutSeconds()));
  int gone = -1;
  for (int peer : neighbours_) {
    wire::Hello hello{secret_, kHelloLive, rank_};
    int fd = -1;
    ncclResult_t rc = connectOnce(comm->peers[peer].monitor, deadline, &fd);
    if (rc == ncclSuccess) rc = sendAll(fd, &hello, sizeof(hello), deadline, &comm->abortFlag);
    if (rc == ncclSuccess) {
      out_[peer] = fd;
      continue;
    }
    if (fd >= 0) close(fd);
    if (rc == ncclRemoteError || rc == ncclInProgress) {
      peerLost(peer, kDied, rc == ncclRemoteError ? "died during init (its listener is closed)" : "did not answer during init",
               true);
      gone = peer;
      continue;
    }
    return rc;
  }
  if (gone >= 0)
    return fail(ncclRemoteError, "ncclCommInitRank (rank %d of %d): rank %d (pid %d) %s. Fix: check that rank's "
                "log; the communicator cannot be used.",
                rank_, n_, gone, comm->peers[gone].pid, lossReason(gone).c_str());
  lastMove_ = lastReport_ = Clock::now();
  installReportSignal();
  seenSignals_ = gReportSignals.load();
  {
    std::lock_guard<std::mutex> lock(gMonitorsMutex);
    static std::once_flag once;
    std::call_once(once, [] { std::atexit(sayGoodbyeAtExit); });
    monitors().insert(this);
  }
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::exception& e) {
    return fail(ncclSystemError, "rank %d: cannot start the liveness thread: %s", rank_, e.what());
  }
  return ncclSuccess;
}

void Liveness::stop(bool aborting) {
  if (std::exchange(stopped_, true)) return;  // teardown, then the destructor
  {
    std::lock_guard<std::mutex> lock(gMonitorsMutex);
    monitors().erase(this);
  }
  if (thread_.joinable()) {
    aborting_ = aborting;
    stopping_.store(true);  // the thread takes what has arrived (a death behind this abort) first
    char c = 's';
    (void)!write(wake_[1], &c, 1);
    thread_.join();
  } else if (!out_.empty()) {
    // start() failed part way (or never ran the thread): tell the neighbours reached so far.
    aborting_ = aborting;
    sendQueued();
    closeAll();
  }
  if (reporter_.joinable()) reporter_.join();
}

std::string Liveness::lossReason(int rank) const {
  std::lock_guard<std::mutex> lock(reasonMutex_);
  return rank >= 0 && rank < n_ ? reasons_[rank] : std::string();
}

void Liveness::queue(const Notice& n) {
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    queue_.push_back(n);
  }
  char c = 'q';
  (void)!write(wake_[1], &c, 1);  // a full pipe already wakes the thread
}

void Liveness::announceMismatch(const CallDesc& mine, int other, const CallDesc& theirs) {
  Notice n;
  n.magic = kNoticeMagic;
  n.kind = kMismatch;
  n.subject = other;
  n.origin = rank_;
  n.mine = mine;
  n.theirs = theirs;
  queue(n);
}

void Liveness::sendToAll(const Notice& n, int except) {
  std::lock_guard<std::mutex> lock(sendMutex_);
  for (int peer : neighbours_) {
    if (peer == except || out_[peer] < 0) continue;
    // A neighbour that cannot take 96 bytes in 100 ms is gone or stuck: its loss shows anyway.
    if (sendAll(out_[peer], &n, sizeof(n), deadlineIn(0.1), nullptr) != ncclSuccess) closeFd(out_[peer]);
  }
}

void Liveness::sendQueued() {
  std::vector<Notice> todo;
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    todo.swap(queue_);
  }
  for (const Notice& n : todo) {
    if (n.kind == kMismatch) {
      if (mismatchSeen_) continue;
      mismatchSeen_ = true;
    }
    sendToAll(n, -1);
  }
}

void Liveness::farewellAtExit() {
  Notice n;
  n.magic = kNoticeMagic;
  n.kind = kLost;
  n.subject = n.origin = rank_;
  n.reason = kDestroyed;
  n.epoch = comm_ ? comm_->calls.started() : 0;
  sendToAll(n, -1);
}

void Liveness::peerLost(int rank, uint32_t why, const std::string& reason, bool tell, uint64_t started) {
  PeerState how = why == kDestroyed ? PeerState::Departed : PeerState::Dead;
  if (state(rank) != PeerState::Alive) return;  // known already (only this thread changes it)
  {
    std::lock_guard<std::mutex> lock(reasonMutex_);
    reasons_[rank] = reason;
  }
  if (how == PeerState::Dead && comm_) {
    // The failure first: whoever sees the rank lost then sees why the communicator failed.
    char text[512];
    std::snprintf(text, sizeof(text), "rank %d (pid %d) %s. This communicator (rank %d of %d) cannot complete "
                  "collectives any more. Fix: abort it (ncclCommAbort), or drop the rank with ncclCommShrink.",
                  rank, comm_->peers[rank].pid, reason.c_str(), rank_, n_);
    BRAID_WARN("%s", text);
    // A peer's abort is usually a consequence (of a death it saw first, say).
    markCommFailed(comm_, ncclRemoteError, text, why == kDied);
  }
  state_[rank].store(static_cast<uint8_t>(how), std::memory_order_release);
  if (how == PeerState::Departed) {
    startedBy_[rank] = started;
    int none = -1;
    firstDeparted_.compare_exchange_strong(none, rank);
    BRAID_INFO(kInit, "rank %d: rank %d %s", rank_, rank, reason.c_str());
  }
  if (tell) {
    Notice n;
    n.magic = kNoticeMagic;
    n.kind = kLost;
    n.subject = rank;
    n.origin = rank_;
    n.reason = why;
    n.epoch = started;
    std::lock_guard<std::mutex> lock(queueMutex_);
    queue_.push_back(n);
  }
}

void Liveness::handleNotice(int from, const Notice& n) {
  if (n.magic != kNoticeMagic || n.subject < 0 || n.subject >= n_ || n.origin < 0 || n.origin >= n_) {
    BRAID_WARN("liveness (rank %d): dropped a malformed notice from rank %d", rank_, from);
    return;
  }
  switch (n.kind) {
    case kLost: {
      if (n.reason != kDestroyed && n.reason != kAborted && n.reason != kDied) break;
      std::string why = reasonText(n.reason);
      if (n.origin != n.subject) why += " (seen by rank " + std::to_string(n.origin) + ")";
      if (n.subject == rank_) break;  // news of ourselves: a peer's mistake
      peerLost(n.subject, n.reason, why, true, n.epoch);
      break;
    }
    case kMismatch: {
      if (mismatchSeen_) break;
      mismatchSeen_ = true;
      std::string text = "rank " + std::to_string(n.origin) + " called " + describeCall(n.mine) + " while rank " +
                         std::to_string(n.subject) + " called " + describeCall(n.theirs) +
                         ": the ranks issued mismatched collectives. Fix: call the same collectives with the same "
                         "count, type, op and root, in the same order, on every rank.";
      BRAID_WARN("rank %d: %s", rank_, text.c_str());
      comm_->mismatchSeq.store(std::max(n.mine.seq, n.theirs.seq));
      markCommFailed(comm_, ncclInvalidUsage, text.c_str());
      sendToAll(n, from);
      break;
    }
    case kHang: {
      if (n.epoch <= seenEpoch_[n.origin]) break;
      seenEpoch_[n.origin] = n.epoch;
      sendToAll(n, from);
      startReport("asked by a stalled rank");
      break;
    }
    default:
      BRAID_WARN("liveness (rank %d): dropped a notice of unknown kind %u from rank %d", rank_, n.kind, from);
  }
}

void Liveness::readNotice(int peer) {
  Notice n;
  errno = 0;
  ncclResult_t rc = recvAll(in_[peer], &n, sizeof(n), deadlineIn(1.0), nullptr);
  if (rc == ncclSuccess) {
    handleNotice(peer, n);
    return;
  }
  const int err = errno;
  closeFd(in_[peer]);
  // A closed connection is a death on this host; silence past the keepalive is a host or a
  // network that is down (the rank may still run, but cannot take part any more).
  if (state(peer) == PeerState::Alive)
    peerLost(peer, kDied,
             err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH
                 ? "stopped answering (TCP keepalive timed out: its host, or the network to it, is down)"
                 : "died (its connection closed)",
             true);
}

void Liveness::acceptPending() {
  for (;;) {
    int fd = accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: none left; other errors: retried at the next tick
    if (pending_.size() >= kMaxPending) {  // a flood: the oldest unidentified one goes
      close(pending_.front().fd);
      pending_.erase(pending_.begin());
    }
    pending_.push_back({fd, Clock::now() + std::chrono::milliseconds(int(kHelloSeconds * 1000))});
  }
}

void Liveness::servePending(size_t index) {
  int fd = pending_[index].fd;
  pending_.erase(pending_.begin() + index);
  wire::Hello hello{};
  if (recvAll(fd, &hello, sizeof(hello), deadlineIn(0.2), nullptr) != ncclSuccess || hello.secret != secret_ ||
      hello.rank < 0 || hello.rank >= n_) {
    close(fd);
    return;
  }
  if (hello.kind == kHelloQuery) {
    CallStatus s = comm_->calls.status(rank_);
    s.failed = comm_->state.load() == ncclComm::State::Failed;
    (void)sendAll(fd, &s, sizeof(s), deadlineIn(kQuerySeconds), nullptr);
    close(fd);
    return;
  }
  bool neighbour = std::find(neighbours_.begin(), neighbours_.end(), hello.rank) != neighbours_.end();
  if (hello.kind != kHelloLive || !neighbour || in_[hello.rank] >= 0) {
    close(fd);
    return;
  }
  keepAlive(fd);
  in_[hello.rank] = fd;
}

void Liveness::pollOnce(int timeoutMs) {
  std::vector<pollfd> fds;
  std::vector<int> who;  // -1 wake, -2 listener, -3-i pending i, r: in_[r], n_+r: out_[r]
  fds.push_back({wake_[0], POLLIN, 0});
  who.push_back(-1);
  fds.push_back({listenFd_, POLLIN, 0});
  who.push_back(-2);
  for (size_t i = 0; i < pending_.size(); ++i) {
    fds.push_back({pending_[i].fd, POLLIN, 0});
    who.push_back(-3 - int(i));
  }
  for (int peer : neighbours_) {
    if (in_[peer] >= 0) {
      fds.push_back({in_[peer], POLLIN, 0});
      who.push_back(peer);
    }
    if (out_[peer] >= 0) {  // nothing arrives on it: readable means closed
      fds.push_back({out_[peer], POLLIN, 0});
      who.push_back(n_ + peer);
    }
  }
  int n = poll(fds.data(), fds.size(), timeoutMs);
  if (n < 0) {
    if (errno != EINTR) BRAID_WARN("liveness (rank %d): poll failed: %s", rank_, std::strerror(errno));
    return;
  }
  // Neighbour connections first, then identified connections by descending index (serving one
  // erases it), then new ones (accepting may evict the oldest pending one).
  bool accept = false;
  std::vector<size_t> pendingReady;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!fds[i].revents) continue;
    int w = who[i];
    if (w == -1) {
      char buf[64];
      while (read(wake_[0], buf, sizeof(buf)) > 0) {
      }
    } else if (w == -2) {
      accept = true;
    } else if (w <= -3) {
      pendingReady.push_back(size_t(-3 - w));
    } else if (w < n_) {
      if (in_[w] >= 0) readNotice(w);
    } else {
      int peer = w - n_;
      closeFd(out_[peer]);
      outClosedAt_[peer] = Clock::now();
    }
  }
  std::sort(pendingReady.rbegin(), pendingReady.rend());
  for (size_t i : pendingReady) servePending(i);
  if (accept) acceptPending();
  // Unidentified connections past their deadline, and neighbours gone without a goodbye.
  auto now = Clock::now();
  for (size_t i = pending_.size(); i-- > 0;)
    if (pending_[i].deadline < now) {
      close(pending_[i].fd);
      pending_.erase(pending_.begin() + i);
    }
  for (int peer : neighbours_)
    if (out_[peer] < 0 && in_[peer] < 0 && state(peer) == PeerState::Alive &&
        outClosedAt_[peer] != Clock::time_point{} &&
        now - outClosedAt_[peer] > std::chrono::milliseconds(int(kGoodbyeGraceSeconds * 1000)))
      peerLost(peer, kDied, "died (its connection closed)", true);
}

void Liveness::run() {
  if (comm_->cudaDev >= 0) {
    // Event queries from this thread must not trip over a graph capture in the user's.
    cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&relaxed);
    (void)cudaGetLastError();
  }
  setLogDevice(comm_->cudaDev);
  try {
    while (!stopping_.load()) {
      pollOnce(kPollMs);
      sendQueued();
      checkHang();
      checkDeparted();
      uint32_t signals = gReportSignals.load(std::memory_order_relaxed);
      if (signals != seenSignals_) {
        seenSignals_ = signals;
        startReport("asked by SIGUSR1");
      }
    }
    // Stopping: news that has already arrived (a death that made this rank abort, say) is
    // passed on before the goodbye, so that the others learn the cause, not the consequence.
    for (int i = 0; i < 4; ++i) pollOnce(0);  // an accepted connection, its hello, its end
    sendQueued();
  } catch (const std::exception& e) {
    BRAID_WARN("liveness (rank %d): the monitor thread stopped: %s", rank_, e.what());
  }
  closeAll();
}

void Liveness::closeAll() {
  Notice bye;
  bye.magic = kNoticeMagic;
  bye.kind = kLost;
  bye.subject = bye.origin = rank_;
  bye.reason = aborting_ ? kAborted : kDestroyed;
  bye.epoch = comm_ ? comm_->calls.started() : 0;
  sendToAll(bye, -1);
  std::lock_guard<std::mutex> lock(sendMutex_);
  for (int& fd : out_) closeFd(fd);
  for (int& fd : in_) closeFd(fd);
  for (Pending& p : pending_) close(p.fd);
  pending_.clear();
}

void Liveness::checkDeparted() {
  if (departureFailed_ || firstDeparted_.load(std::memory_order_acquire) < 0) return;
  const CallStatus me = comm_->calls.status(rank_);
  const uint64_t waiting = me.current.seq;  // the oldest collective not known complete (0: send/recv)
  if (!me.inCall || waiting == 0 || waiting <= me.completed) return;
  for (int r = 0; r < n_; ++r) {
    if (state(r) != PeerState::Departed || startedBy_[r] >= waiting) continue;
    departureFailed_ = true;
    char text[512];
    std::snprintf(text, sizeof(text),
                  "rank %d (pid %d) destroyed its communicator after its collective #%llu, so this rank's %s can never "
                  "complete. This communicator (rank %d of %d) cannot complete collectives any more. Fix: every rank "
                  "must issue the same collectives before it destroys the communicator; abort this one (ncclCommAbort).",
                  r, comm_->peers[r].pid, static_cast<unsigned long long>(startedBy_[r]),
                  describeCall(me.current).c_str(), rank_, n_);
    BRAID_WARN("%s", text);
    markCommFailed(comm_, ncclRemoteError, text, /*cause=*/true);
    return;
  }
}

void Liveness::checkHang() {
  if (hangTimeout_ <= 0) return;
  auto now = Clock::now();
  uint64_t a = comm_->calls.activity();
  if (a != lastActivity_) {
    lastActivity_ = a;
    lastMove_ = now;
    return;
  }
  double stalled = std::chrono::duration<double>(now - lastMove_).count();
  if (stalled < hangTimeout_ || std::chrono::duration<double>(now - lastReport_).count() < hangTimeout_) return;
  if (!comm_->calls.status(rank_).inCall) return;
  lastReport_ = now;
  Notice n;
  n.magic = kNoticeMagic;
  n.kind = kHang;
  n.subject = n.origin = rank_;
  n.epoch = ++myEpoch_;
  seenEpoch_[rank_] = n.epoch;
  sendToAll(n, -1);
  startReport("stalled");
}

void Liveness::startReport(const char* why) {
  if (reporting_.exchange(true)) return;  // one at a time
  if (reporter_.joinable()) reporter_.join();
  // How long this rank's own call has stood still (also when another rank asked first).
  double stalled = 0;
  if (hangTimeout_ > 0 && comm_->calls.status(rank_).inCall)
    stalled = std::chrono::duration<double>(Clock::now() - lastMove_).count();
  if (stalled < 0.5) stalled = 0;
  std::vector<SocketAddress> addrs;
  for (const PeerInfo& p : comm_->peers) addrs.push_back(p.monitor);
  std::vector<PeerState> states(n_);
  for (int r = 0; r < n_; ++r) states[r] = state(r);
  try {
    reporter_ = std::thread([this, why, stalled, addrs, states] {
      std::vector<CallStatus> all(n_);
      for (int r = 0; r < n_; ++r) {
        if (r == rank_) {
          all[r] = comm_->calls.status(rank_);
          all[r].failed = comm_->state.load() == ncclComm::State::Failed;
          continue;
        }
        all[r].rank = states[r] == PeerState::Departed ? kRankLeft : -1;
        if (states[r] != PeerState::Alive) continue;
        int fd = -1;
        Deadline deadline = deadlineIn(kQuerySeconds);
        wire::Hello hello{secret_, kHelloQuery, rank_};
        CallStatus s;
        if (connectOnce(addrs[r], deadline, &fd) != ncclSuccess) continue;
        if (sendAll(fd, &hello, sizeof(hello), deadline, nullptr) == ncclSuccess &&
            recvAll(fd, &s, sizeof(s), deadline, nullptr) == ncclSuccess && s.rank == r)
          all[r] = s;
        close(fd);
      }
      logUrgent("%s (%s)", hangReport(rank_, all, stalled).c_str(), why);
      reporting_.store(false);
    });
  } catch (const std::exception& e) {
    reporting_.store(false);
    BRAID_WARN("liveness (rank %d): cannot start a hang report: %s", rank_, e.what());
  }
}

}  // namespace braid
