#include "api/served_leader.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "core/cuda_scope.h"
#include "core/env.h"
#include "core/log.h"
#include "kernels/local_collective.h"
#include "kernels/pack.h"
#include "kernels/stream_pool.h"
#include "transport/cuda_driver.h"

namespace braid::api {
namespace {
using namespace served_wire;
constexpr double kByeWaitSeconds = 10;   // a leader's destroy waits this long for its served ranks
constexpr double kDrainSeconds = 2;      // and this long for its stream of an aborted one
// How long a leader rank's call waits for its served ranks' side (BRAID_SERVED_WAIT).
double servedWaitSeconds() {
  static const double limit = env::getDouble("BRAID_SERVED_WAIT", 5.0);
  return limit;
}
}  // namespace

ncclResult_t ServedLeader::start(ncclComm* comm, const std::string& name, std::unique_ptr<ServedLeader>* out) {
  std::unique_ptr<ServedLeader> s(new ServedLeader(comm));
  BRAID_CHECK(kernels::preloadKernels(comm->cudaDev));
  {
    DeviceScope scope(comm->cudaDev);
    if (cudaError_t e = kernels::makeIsolatedPool(comm->cudaDev, 0, &s->pool_); e != cudaSuccess) {
      (void)cudaGetLastError();
      return fail(ncclUnhandledCudaError, "served: rank %d: a memory pool for the served ranks' scratch: %s", comm->rank,
                  cudaGetErrorString(e));
    }
  }
  s->imports_ = std::make_unique<transport::IpcImports>(comm->peers[comm->rank].pid, comm->peers[comm->rank].hostHash,
                                                        comm->cudaDev);
  s->workCache_ = std::make_unique<kernels::WorkCache>();
  BRAID_CHECK(transport::listenServed(comm->rank, name, &s->listenFd_));
  s->thread_ = std::thread([p = s.get()] { p->serve(); });
  *out = std::move(s);
  return ncclSuccess;
}

void ServedLeader::serve() {
  if (cudaSetDevice(cudaDev_) != cudaSuccess) (void)cudaGetLastError();  // every enqueue checks again
  std::vector<pollfd> fds;
  std::vector<unsigned char> frame;
  while (!stop_.load()) {
    fds.assign({pollfd{listenFd_, POLLIN, 0}});
    size_t nMembers = 0;
    {
      std::lock_guard<std::mutex> lock(stateMutex_);
      nMembers = members_.size();
      for (auto& m : members_) fds.push_back(pollfd{m->open ? m->fd : -1, POLLIN, 0});
    }
    const int r = poll(fds.data(), fds.size(), 50);
    if (r == 0) closeRetiredWhenIdle();
    if (r <= 0) continue;
    if (fds[0].revents & POLLIN) accept();
    for (size_t i = 1; i <= nMembers; ++i) {
      if (fds[i].revents == 0) continue;
      Member* m = nullptr;
      {
        std::lock_guard<std::mutex> lock(stateMutex_);
        m = members_[i - 1].get();  // members are only added (here) and removed after this thread ends
      }
      std::string why;
      const bool got = transport::recvFrame(m->fd, &frame, deadlineIn(kByeWaitSeconds), &why);
      std::lock_guard<std::mutex> lock(stateMutex_);
      uint32_t head[2] = {0, 0};
      if (got && frame.size() >= sizeof(head)) std::memcpy(head, frame.data(), sizeof(head));
      if (!got) gone(*m, why);
      else if (head[0] != kMagic) gone(*m, "a frame that is not braid's");
      else if (head[1] == kPost) {
        PostHeader h{};
        Member::Waiting w;
        if (frame.size() >= sizeof(h)) std::memcpy(&h, frame.data(), sizeof(h));
        w.gate.collSeq = h.collSeq;
        w.gate.counts.resize(size_t(comm_->nRanks));
        if (h.nPeers == uint32_t(comm_->nRanks) && frame.size() >= sizeof(h) + w.gate.counts.size() * sizeof(PeerCounts))
          std::memcpy(w.gate.counts.data(), frame.data() + sizeof(h), w.gate.counts.size() * sizeof(PeerCounts));
        w.frame = std::move(frame);
        m->waiting.push_back(std::move(w));
        postArrived_.notify_all();
      } else if (head[1] == kBye) {
        m->open = false;
        open_.fetch_sub(1);
        openGates(m->rank);
      } else gone(*m, "an unknown frame");
      launchReady();     // a post arrived, or a rank left: others' waiting posts may run now
      releaseTickets();  // and the leader's launches may be covered
    }
  }
}

void ServedLeader::accept() {
  int fd = accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  auto m = std::make_unique<Member>();
  m->fd = fd;
  std::vector<unsigned char> frame;
  std::string why;
  if (!transport::recvFrame(fd, &frame, deadlineIn(kByeWaitSeconds), &why) || !hello(*m, frame, &why)) {
    BRAID_WARN("served: rank %d: a connection to its served-ranks socket was refused: %s", rank_, why.c_str());
    (void)::close(fd);
    return;
  }
  m->open = true;
  open_.fetch_add(1);
  std::lock_guard<std::mutex> lock(stateMutex_);
  members_.push_back(std::move(m));
}

bool ServedLeader::hello(Member& m, const std::vector<unsigned char>& frame, std::string* why) {
  HelloFrame h{};
  if (frame.size() != sizeof(h)) return *why = "a malformed hello", false;
  std::memcpy(&h, frame.data(), sizeof(h));
  const ServedPlan& plan = comm_->served->plan;
  if (h.magic != kMagic || h.kind != kHello || h.rank < 0 || h.rank >= comm_->nRanks || plan.leaderOf[size_t(h.rank)] != rank_ ||
      h.pid != comm_->peers[size_t(h.rank)].pid || std::memchr(h.page, 0, sizeof(h.page)) == nullptr)
    return *why = "a hello from a process that is no rank this one serves", false;
  for (auto& other : members_)
    if (other->rank == h.rank && other->open) return *why = "rank " + std::to_string(h.rank) + " connected twice", false;
  m.rank = h.rank;
  m.enqueued.counts.assign(size_t(comm_->nRanks), PeerCounts{0, 0});
  DeviceScope scope(cudaDev_);
  if (transport::ServedPage::open(rank_, h.page, &m.page) != ncclSuccess) return *why = lastError(), false;
  if (cudaError_t e = cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking); e != cudaSuccess) {
    (void)cudaGetLastError();
    return *why = std::string("cudaStreamCreate: ") + cudaGetErrorString(e), false;
  }
  const std::vector<unsigned char> ack(1, 1);
  if (!transport::sendFrame(m.fd, ack, deadlineIn(kByeWaitSeconds), why)) return false;
  addGate(m.rank, m.page.get());
  BRAID_INFO(kInit | kP2p, "served: rank %d runs the GPU work of rank %d (pid %lld)", rank_, h.rank,
             static_cast<long long>(h.pid));
  return true;
}

void ServedLeader::addGate(int rank, transport::ServedPage* page) {
  std::lock_guard<std::mutex> lock(gateMutex_);
  gates_.push_back(GateWord{rank, page, true});
}

// Opens the waits of the leader's streams on `rank`'s word (every rank's for -1), now and for
// good: that rank's side will not come (it left, died, or the communicator aborts).
void ServedLeader::openGates(int rank) {
  std::lock_guard<std::mutex> lock(gateMutex_);
  for (GateWord& g : gates_) {
    if (rank >= 0 && g.rank != rank) continue;
    g.open = false;
    g.page->host()->readyColl = uint32_t(gatedColl_);
  }
}

// Without it, the leader's kernel of a collective may start before a served rank's stream has
// issued its side (its `ready` write, in that rank's own context) and spin for data that the
// served kernels, which wait for that write, cannot send yet; the GPU then switches to the
// served context only when the leader's time slice ends (~1-2 ms). A stream that waits
// instead lets the switch happen at once. Only the first collective of the launch is waited
// for: a served rank that issued it may still wait for this launch before issuing the next.
ncclResult_t ServedLeader::gate(cudaStream_t stream, uint64_t firstColl) {
  static const bool on = env::getInt("BRAID_SERVED_GATE", 1) != 0;
  if (!on || firstColl == 0) return ncclSuccess;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(ncclUnhandledCudaError, "served: rank %d: cudaStreamIsCapturing: %s", rank_, cudaGetErrorString(e));
  }
  if (capture != cudaStreamCaptureStatusNone) return ncclSuccess;  // a replay would find the words passed
  return waitForServed(stream, firstColl);
}

// `stream` waits until every connected served rank's stream has issued collective `coll`
// (readyColl); openGates releases such waits from the host.
ncclResult_t ServedLeader::waitForServed(cudaStream_t stream, uint64_t coll) {
  std::lock_guard<std::mutex> lock(gateMutex_);
  gatedColl_ = std::max(gatedColl_, coll);
  for (const GateWord& g : gates_) {
    if (!g.open) continue;
    if (cudaError_t e = transport::streamWaitAtLeast(stream, &g.page->device()->readyColl, uint32_t(coll));
        e != cudaSuccess) {
      (void)cudaGetLastError();
      return fail(ncclUnhandledCudaError, "served: rank %d: waiting in the stream for rank %d's side of call #%llu "
                  "(cuStreamWaitValue32): %s", rank_, g.rank, (unsigned long long)coll, cudaGetErrorString(e));
    }
  }
  return ncclSuccess;
}

void ServedLeader::releaseLeader() {
  openGates(-1);
  std::lock_guard<std::mutex> lock(ticketsMutex_);
  coveredUpTo_ = lastTicket_;
  tickets_.clear();
  ticketsCovered_.notify_all();
}

void ServedLeader::leaderLaunched(const std::vector<ServedGate>& perRank) {
  const bool waitedOut = std::exchange(waitedOut_, false);
  const uint64_t collSeq = perRank.empty() ? 0 : perRank[0].collSeq;
  Ticket t;
  t.collSeq = collSeq;
  for (size_t r = 0; r < perRank.size() && r < sentTo_.size(); ++r) {
    t.sentTo.push_back(sentTo_[r].fetch_add(perRank[r].sends) + perRank[r].sends);
    t.recvdFrom.push_back(recvdFrom_[r].fetch_add(perRank[r].recvs) + perRank[r].recvs);
  }
  uint64_t seen = leaderColl_.load();
  while (collSeq > seen && !leaderColl_.compare_exchange_weak(seen, collSeq)) {
  }
  bool withServed = collSeq > 0;  // every rank takes part in a collective
  for (size_t r = 0; r < perRank.size(); ++r)
    withServed = withServed || (comm_->served->plan.leaderOf[r] == rank_ && int(r) != rank_ &&
                                (perRank[r].sends > 0 || perRank[r].recvs > 0));
  if (!withServed) return;  // nothing of it runs here, and nothing here waits for it
  uint32_t id = 0;
  {
    std::lock_guard<std::mutex> lock(ticketsMutex_);
    id = t.id = ++lastTicket_;
    tickets_.push_back(std::move(t));
  }
  // The served ranks' posts for it that have arrived run now, from this thread: handing them to
  // the server thread and back cost two thread wake-ups per call (~2-4x a small call's time on the
  // H200); posts still to come are run by the server thread as they arrive.
  {
    std::lock_guard<std::mutex> lock(stateMutex_);
    launchReady();
    releaseTickets();
  }
  // Wait here, in the leader rank's call, until the server has enqueued the served ranks' side.
  // Then a call that waits for the device, which this thread may make next (cudaFree, a
  // synchronous copy, a lazily loaded module), cannot fall between the server's launches of
  // kernels that wait for each other: it would wait for the first, and hold up the launch of the
  // others (cudaFree between a collective's launches is NCCL's known deadlock, hence PyTorch's
  // cuda_free_mutex; a 4-process PyTorch run hung so here). Bounded, as a collective call must
  // return without its peers: after BRAID_SERVED_WAIT seconds (default 5) it returns anyway.
  const double limit = servedWaitSeconds();
  const Deadline deadline = waitedOut ? Clock::now() : deadlineIn(limit);
  const auto waitStart = ncclComm::EnqueueTimes::Clock::now();
  std::unique_lock<std::mutex> lock(ticketsMutex_);
  while (int32_t(coveredUpTo_ - id) < 0 && !comm_->abortFlag.load() && comm_->state.load() != ncclComm::State::Failed) {
    if (Clock::now() > deadline) {
      if (!saidSlow_.exchange(true))
        BRAID_INFO(kColl | kP2p, "served: rank %d: a call's served ranks did not issue their side within %.1f s "
                   "(BRAID_SERVED_WAIT); it returns without waiting for them", rank_, limit);
      break;
    }
    ticketsCovered_.wait_for(lock, std::chrono::milliseconds(1));
  }
  ncclComm::EnqueueTimes::add(comm_->enqueueTimes.servedWaitNs, waitStart);
}

// The front post of every served rank, when each is exactly its side of the leader rank's launch
// of collectives firstColl..lastColl and may run with it in one kernel; else empty. Under stateMutex_.
std::vector<ServedLeader::Member*> ServedLeader::fusablePosts(uint64_t firstColl, uint64_t lastColl, bool* wait) {
  *wait = false;
  std::vector<Member*> out;
  const ServedPlan& plan = comm_->served->plan;
  for (size_t r = 0; r < plan.leaderOf.size(); ++r) {
    if (int(r) == rank_ || plan.leaderOf[r] != rank_) continue;
    Member* m = member(int(r));
    if (m != nullptr && !m->open) return {};  // its abort follows: today's path
    if (m == nullptr || m->waiting.empty()) {  // not connected yet, or its post is still to come
      *wait = true;
      return {};
    }
    const PostGate& front = m->waiting.front().gate;
    // Its oldest post holds these collectives and nothing else (no send/recv since the last).
    if (front.collSeq != lastColl || m->enqueued.collSeq >= firstColl || front.counts != m->enqueued.counts) return {};
    out.push_back(m);
  }
  return out;
}

ncclResult_t ServedLeader::launchFused(const kernels::Launch& L, const kernels::PackedLaunch& own,
                                       const SoleCollective& sole, uint64_t firstColl, uint64_t lastColl,
                                       unsigned* widest, bool* fused) {
  *fused = false;
  static const bool on = env::getInt("BRAID_SERVED_FUSE", 1) != 0;
  static const bool localOn = env::getInt("BRAID_SERVED_LOCAL", 1) != 0;
  if (!on || firstColl == 0 || own.kernels.size() != 1) return ncclSuccess;
  // Wait for the served ranks' posts of the same collectives (bounded: BRAID_SERVED_WAIT); the
  // server enqueues none of them meanwhile (the leader rank has not issued them: leaderColl_).
  const Deadline deadline = deadlineIn(servedWaitSeconds());
  std::vector<Member*> members;
  const auto waitStart = ncclComm::EnqueueTimes::Clock::now();
  {
    std::unique_lock<std::mutex> lock(stateMutex_);
    for (bool wait = true; wait;) {
      members = fusablePosts(firstColl, lastColl, &wait);
      if (!wait || comm_->abortFlag.load() || comm_->state.load() == ncclComm::State::Failed) break;
      if (Clock::now() > deadline) {
        waitedOut_ = true;  // leaderLaunched, next in this call, need not wait again
        break;
      }
      postArrived_.wait_for(lock, std::chrono::milliseconds(1));
    }
  }
  ncclComm::EnqueueTimes::add(comm_->enqueueTimes.postsWaitNs, waitStart);
  if (members.empty()) return ncclSuccess;
  // Launches take servedLaunchMutex before stateMutex_ (closeRetiredWhenIdle); the server took
  // none of the posts meanwhile, but a rank may have gone: look again.
  std::lock_guard<std::mutex> launchLock(servedLaunchMutex(cudaDev_));
  std::lock_guard<std::mutex> lock(stateMutex_);
  bool wait = false;
  if (fusablePosts(firstColl, lastColl, &wait) != members) return ncclSuccess;
  // One pass: a collective whose every rank is here (so no connection leaves this GPU, and the
  // ranks' connections, left untouched, stay alike on both ends), the same on every rank.
  bool local = localOn && sole.any && sole.count > 0 && members.size() + 1 == size_t(comm_->nRanks);
  bool sameShape = true;
  std::vector<ParsedPost> posts(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    std::string why;
    if (parse(members[i]->waiting.front().frame, &posts[i], &why) != ncclSuccess) return ncclSuccess;  // post() says why
    const PostHeader& h = posts[i].h;
    const kernels::PackedLaunch& p = posts[i].packed;
    if (h.nCopies != 0 || h.nScratch != 0 || p.kernels.size() != 1 || p.kernels[0].type != own.kernels[0].type)
      return ncclSuccess;
    local = local && h.soleColl == uint32_t(sole.coll) + 1 && h.soleCount == sole.count &&
            h.soleType == uint32_t(sole.type) && h.soleRoot == sole.root;
    sameShape = sameShape && p.protocol == own.protocol && p.slotBytes == own.slotBytes && p.nSlots == own.nSlots &&
                h.slicesPerStep == L.slicesPerStep && h.threadsPerBlock == L.threadsPerBlock;
  }
  kernels::LocalCollective pass;
  if (local) {
    std::vector<const kernels::PackedKernel*> byRank(members.size() + 1, &own.kernels[0]);
    for (size_t i = 0; i < members.size(); ++i) byRank[size_t(members[i]->rank)] = &posts[i].packed.kernels[0];
    local = kernels::localCollectiveOf(sole.coll, sole.count, sole.type, sole.root, byRank, &pass) == ncclSuccess;
  }
  if (!local && !sameShape) return ncclSuccess;
  DeviceScope scope(cudaDev_);
  auto cudaFail = [&](const char* what, cudaError_t e) {
    (void)cudaGetLastError();
    return fail(ncclUnhandledCudaError, "served: rank %d: %s, for the kernel of its GPU's ranks: %s", rank_, what,
                cudaGetErrorString(e));
  };
  const auto streamStart = ncclComm::EnqueueTimes::Clock::now();
  for (Member* m : members)
    if (cudaError_t e = followLast(*m, L.stream); e != cudaSuccess) return cudaFail("cuStreamWaitValue32 (done)", e);
  kernels::Launch context = kernels::settingsOf(L);
  kernels::PackedLaunch merged;
  if (!local) {
    std::vector<kernels::MergePart> parts{{&own.kernels[0], {}}};
    for (size_t i = 0; i < members.size(); ++i) {
      transport::ServedWords* words = members[i]->page->device();
      parts.push_back({&posts[i].packed.kernels[0], {&words->abort, &words->error}});
      context.peersOnThisGpu = context.peersOnThisGpu && posts[i].h.peersOnThisGpu != 0;
    }
    merged.protocol = own.protocol;
    merged.slotBytes = own.slotBytes;
    merged.nSlots = own.nSlots;
    BRAID_CHECK(kernels::mergeKernels(parts, &merged.kernels.emplace_back()));
  }
  // The stream waits until every served rank's inputs are ready: its post is its last of these
  // collectives, so its readyColl reaches lastColl with that post's `ready`.
  BRAID_CHECK(waitForServed(L.stream, lastColl));
  if (local) {
    if (cudaError_t e = kernels::localCollectiveAsync(pass, L.stream); e != cudaSuccess)
      return cudaFail("the one-pass collective's launch", e);
  } else {
    BRAID_CHECK(kernels::enqueuePacked(context, merged, widest));
  }
  *fused = true;
  for (size_t i = 0; i < members.size(); ++i) {
    Member& m = *members[i];
    m.lastSeq = posts[i].h.seq;
    m.enqueued = std::move(m.waiting.front().gate);
    m.saidHeld = false;
    m.waiting.pop_front();
    if (cudaError_t e = transport::streamWrite(L.stream, &m.page->device()->done, m.lastSeq); e != cudaSuccess) {
      m.page->host()->done = m.lastSeq;  // never leave its stream waiting; the call fails here
      return cudaFail("cuStreamWriteValue32 (done)", e);
    }
  }
  ncclComm::EnqueueTimes::add(comm_->enqueueTimes.servedStreamNs, streamStart);
  if (local && !saidLocal_.exchange(true))
    BRAID_INFO(kInit | kColl, "served: rank %d runs a collective of its GPU's %zu ranks (%s) as one pass over their "
               "buffers (BRAID_SERVED_LOCAL=0: as their kernels merged)", rank_, members.size() + 1,
               algo::collName(sole.coll));
  if (!local && !saidFused_.exchange(true))
    BRAID_INFO(kInit | kColl, "served: rank %d runs a collective of its GPU's %zu ranks as one kernel (BRAID_SERVED_FUSE=0: "
               "one kernel per rank)", rank_, members.size() + 1);
  return ncclSuccess;
}

// Whether every served rank's side of the leader's launch `t` is enqueued: for a collective, each
// rank's post of that number; for sends and receives, as many between the two. A rank that is
// gone counts as done (its abort follows).
ServedLeader::Member* ServedLeader::member(int rank) const {
  Member* found = nullptr;
  for (const auto& x : members_)
    if (x->rank == rank && (found == nullptr || x->open)) found = x.get();
  return found;
}

bool ServedLeader::covered(const Ticket& t) const {
  const ServedPlan& plan = comm_->served->plan;
  for (size_t r = 0; r < plan.leaderOf.size(); ++r) {
    if (int(r) == rank_ || plan.leaderOf[r] != rank_) continue;
    const bool p2p = r < t.sentTo.size() && (t.sentTo[r] > 0 || t.recvdFrom[r] > 0);
    if (t.collSeq == 0 && !p2p) continue;
    const Member* m = member(int(r));
    if (m == nullptr) return false;  // not connected yet: its first device call is still to come
    if (!m->open) continue;
    if (m->enqueued.collSeq < t.collSeq) return false;
    const PeerCounts& c = m->enqueued.counts[size_t(rank_)];
    if (p2p && (c.recvsFrom < t.sentTo[r] || c.sendsTo < t.recvdFrom[r])) return false;
  }
  return true;
}

void ServedLeader::releaseTickets() {  // under stateMutex_ (covered reads the members)
  std::lock_guard<std::mutex> lock(ticketsMutex_);
  bool any = false;
  while (!tickets_.empty() && covered(tickets_.front())) {
    coveredUpTo_ = tickets_.front().id;
    tickets_.pop_front();
    any = true;
  }
  if (any) ticketsCovered_.notify_all();
}

// Enqueues the served ranks' waiting posts that may run now, together (served_schedule.h says
// which and why), until none is left that may.
void ServedLeader::launchReady() {
  for (;;) {
    LeaderIssued leader;
    leader.rank = rank_;
    leader.collSeq = leaderColl_.load();
    for (size_t r = 0; r < sentTo_.size(); ++r) {
      leader.sentTo.push_back(sentTo_[r].load());
      leader.recvdFrom.push_back(recvdFrom_[r].load());
    }
    std::vector<ServedQueueView> queues(members_.size());
    for (size_t i = 0; i < members_.size(); ++i) {
      const Member& m = *members_[i];
      queues[i].rank = m.rank;
      queues[i].open = m.open;
      queues[i].enqueued = &m.enqueued;
      for (const Member::Waiting& w : m.waiting) queues[i].waiting.push_back(&w.gate);
    }
    const std::vector<size_t> take = runnablePosts(queues, leader, comm_->served->plan.leaderOf);
    bool any = false;
    for (size_t i = 0; i < members_.size(); ++i) {
      Member& m = *members_[i];
      for (size_t k = 0; k < take[i]; ++k) {
        post(m, m.waiting.front().frame);
        m.enqueued = std::move(m.waiting.front().gate);
        m.saidHeld = false;
        m.waiting.pop_front();
        any = true;
      }
      if (m.open && !m.waiting.empty() && !m.saidHeld) {
        BRAID_INFO(kP2p, "served: rank %d: rank %d's post for call #%llu waits for its peers' side (this rank issued "
                   "call #%llu)", rank_, m.rank, (unsigned long long)m.waiting.front().gate.collSeq,
                   (unsigned long long)leader.collSeq);
        m.saidHeld = true;
      }
    }
    if (!any) return;
  }
}

void ServedLeader::post(Member& m, const std::vector<unsigned char>& frame) {
  ParsedPost post;
  std::string why;
  ncclResult_t rc = parse(frame, &post, &why);
  if (rc == ncclSuccess) rc = enqueue(m, post, &why);
  if (rc == ncclSuccess) return;
  // The served rank's stream waits for `done`: never leave it waiting. Its next call sees the error.
  const uint32_t seq = post.h.seq;
  BRAID_WARN("served: rank %d: the work rank %d posted (call %u) cannot run: %s", rank_, m.rank, seq, why.c_str());
  m.page->host()->error = kernels::kDeviceBadWork;
  if (seq != 0) {
    m.lastSeq = seq;
    if (transport::streamWrite(m.stream, &m.page->device()->done, seq) != cudaSuccess) {
      (void)cudaGetLastError();
      m.page->host()->done = seq;
    }
  }
}

// Reads a post and maps every pointer in it (scratch buffers stay tokens until enqueue).
ncclResult_t ServedLeader::parse(const std::vector<unsigned char>& frame, ParsedPost* out, std::string* why) {
  Reader in(frame);
  PostHeader& h = out->h;
  std::vector<PeerCounts> counts(size_t(comm_->nRanks));
  if (!in.get(&h) || h.nPeers != counts.size() || !in.bytes(counts.data(), counts.size() * sizeof(PeerCounts)))
    return *why = "a truncated post", ncclInternalError;
  if (h.magic != kMagic || h.seq == 0 || h.nScratch > kMostScratch || h.protocol >= algo::kNumProtocols)
    return *why = "a malformed post", ncclInternalError;
  out->scratchBytes.resize(h.nScratch);
  for (uint64_t& b : out->scratchBytes)
    if (!in.get(&b)) return *why = "a truncated post", ncclInternalError;
  auto resolve = [&](const WireRef& r, void** p) -> ncclResult_t {
    if (r.scratch != 0) {
      if (r.scratch > h.nScratch) return *why = "a scratch buffer that was not asked for", ncclInternalError;
      *p = scratchToken(r.scratch - 1);  // replaced once allocated (enqueue)
      return ncclSuccess;
    }
    return imports_->resolve(r.ipc, p, why);
  };
  out->copies.resize(h.nCopies);
  out->copyPtrs.resize(h.nCopies);
  for (uint32_t i = 0; i < h.nCopies; ++i) {
    if (!in.get(&out->copies[i])) return *why = "a truncated post", ncclInternalError;
    void *d = nullptr, *s = nullptr;
    BRAID_CHECK(resolve(out->copies[i].dst, &d));
    BRAID_CHECK(resolve(out->copies[i].src, &s));
    out->copyPtrs[i] = {d, s};
  }
  kernels::PackedLaunch& packed = out->packed;
  packed.protocol = algo::Protocol(h.protocol);
  packed.slotBytes = h.slotBytes;
  packed.nSlots = h.nSlots;
  out->scratchAt.resize(h.nKernels);
  for (uint32_t k = 0; k < h.nKernels; ++k) {
    KernelHeader kh{};
    if (!in.get(&kh) || kh.type >= uint32_t(kernels::kNumElemTypes)) return *why = "a truncated post", ncclInternalError;
    kernels::PackedKernel& pk = packed.kernels.emplace_back();
    pk.type = kernels::ElemType(kh.type);
    pk.nBlocks = kh.nBlocks;
    pk.index = kh.index;
    pk.blob.resize(kh.blobBytes);
    if (!in.bytes(pk.blob.data(), kh.blobBytes)) return *why = "a truncated post", ncclInternalError;
    for (uint32_t i = 0; i < kh.nPointers; ++i) {
      WirePointer wp{};
      if (!in.get(&wp) || size_t(wp.offset) + sizeof(void*) > pk.blob.size()) return *why = "a bad pointer offset", ncclInternalError;
      void* p = nullptr;
      BRAID_CHECK(resolve(wp.ref, &p));
      if (wp.ref.scratch != 0) out->scratchAt[k].push_back({wp.offset, wp.ref.scratch - 1});
      std::memcpy(pk.blob.data() + wp.offset, &p, sizeof(p));
    }
  }
  if (!in.done()) return *why = "a post longer than it says", ncclInternalError;
  return ncclSuccess;
}

// A stream that runs a served rank's work after work of it that ran on another stream (its own,
// or a leader rank's launch) waits for that work's `done` first: the kernels of a connection
// must run in order (their steps are kept in device memory between kernels).
cudaError_t ServedLeader::followLast(Member& m, cudaStream_t stream) {
  const cudaStream_t last = m.lastOn;
  m.lastOn = stream;
  if (last == nullptr || last == stream || int32_t(m.page->host()->done - m.lastSeq) >= 0) return cudaSuccess;
  return transport::streamWaitAtLeast(stream, &m.page->device()->done, m.lastSeq);
}

ncclResult_t ServedLeader::enqueue(Member& m, ParsedPost& post, std::string* why) {
  const PostHeader& h = post.h;
  DeviceScope scope(cudaDev_);
  auto cudaWhy = [&](const char* what, cudaError_t e) {
    (void)cudaGetLastError();
    *why = std::string(what) + ": " + cudaGetErrorString(e);
    return ncclUnhandledCudaError;
  };
  transport::ServedWords* words = m.page->device();
  if (cudaError_t e = followLast(m, m.stream); e != cudaSuccess) return cudaWhy("cuStreamWaitValue32 (done)", e);
  m.lastSeq = h.seq;
  if (cudaError_t e = transport::streamWaitAtLeast(m.stream, &words->ready, h.seq); e != cudaSuccess)
    return cudaWhy("cuStreamWaitValue32 (ready)", e);
  std::vector<void*> scratch(h.nScratch, nullptr);
  for (size_t i = 0; i < scratch.size(); ++i)
    if (cudaError_t e = cudaMallocFromPoolAsync(&scratch[i], post.scratchBytes[i], pool_, m.stream); e != cudaSuccess)
      return cudaWhy("scratch for a staged input", e);
  auto real = [&](void* p) {
    const uintptr_t v = reinterpret_cast<uintptr_t>(p);
    return v >= kScratchTokenBase && v < kScratchTokenBase + 16 * scratch.size() ? scratch[(v - kScratchTokenBase) / 16] : p;
  };
  ncclResult_t rc = ncclSuccess;
  for (uint32_t i = 0; i < h.nCopies && rc == ncclSuccess; ++i)
    if (cudaError_t e = cudaMemcpyAsync(real(post.copyPtrs[i].first), real(const_cast<void*>(post.copyPtrs[i].second)),
                                        post.copies[i].bytes, cudaMemcpyDeviceToDevice, m.stream);
        e != cudaSuccess)
      rc = cudaWhy("cudaMemcpyAsync", e);
  for (uint32_t k = 0; k < h.nKernels && rc == ncclSuccess; ++k)
    for (auto [offset, index] : post.scratchAt[k])
      std::memcpy(post.packed.kernels[k].blob.data() + offset, &scratch[index], sizeof(void*));
  if (rc == ncclSuccess) {
    kernels::Launch context;
    context.cudaDev = cudaDev_;
    context.stream = m.stream;
    context.abortFlag = &words->abort;
    context.errorOut = &words->error;
    context.threadsPerBlock = h.threadsPerBlock;
    context.peersOnThisGpu = h.peersOnThisGpu != 0;
    context.slicesPerStep = h.slicesPerStep;
    context.workCache = workCache_.get();
    if (kernels::enqueuePacked(context, post.packed) != ncclSuccess) {
      *why = lastError();
      rc = ncclInternalError;
    }
  }
  for (void* p : scratch)
    if (p != nullptr && cudaFreeAsync(p, m.stream) != cudaSuccess) (void)cudaGetLastError();
  if (rc != ncclSuccess) return rc;
  if (cudaError_t e = transport::streamWrite(m.stream, &words->done, h.seq); e != cudaSuccess)
    return cudaWhy("cuStreamWriteValue32 (done)", e);
  return ncclSuccess;
}

// Mappings of buffers the served ranks freed are closed only while no kernel of this
// communicator runs in this context and none can be launched meanwhile (servedLaunchMutex).
void ServedLeader::closeRetiredWhenIdle() {
  std::lock_guard<std::mutex> lock(servedLaunchMutex(cudaDev_));
  std::lock_guard<std::mutex> state(stateMutex_);
  if (!imports_->anyRetired()) return;
  DeviceScope scope(cudaDev_);
  for (auto& m : members_) {
    if (m->stream == nullptr) continue;
    cudaError_t e = cudaStreamQuery(m->stream);
    if (e == cudaErrorNotReady) return;
    if (e != cudaSuccess) (void)cudaGetLastError();
  }
  if (!comm_->calls.idle()) return;
  imports_->closeRetired();
}

// Lets the stream of an aborted or vanished served rank run out: its kernels return at the abort
// word, its wait for `ready` is released from here (the served rank's stream may still write an
// older value, so the write repeats). False when it did not drain in time.
bool ServedLeader::drain(Member& m) {
  if (m.stream == nullptr) return true;
  DeviceScope scope(cudaDev_);
  const Deadline deadline = deadlineIn(kDrainSeconds);
  for (;;) {
    cudaError_t e = cudaStreamQuery(m.stream);
    if (e != cudaErrorNotReady) {
      if (e != cudaSuccess) (void)cudaGetLastError();
      m.page->host()->done = m.page->host()->posted;  // the last word on `done`: stream writes are over
      return true;
    }
    if (Clock::now() > deadline) return false;
    m.page->host()->abort = 1;
    m.page->host()->ready = m.lastSeq;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void ServedLeader::gone(Member& m, const std::string& why) {
  if (!m.open) return;
  releaseLeader();  // the leader's launches (and streams: gate) need not wait for any served side any more
  BRAID_WARN("served: rank %d: lost the connection of rank %d, whose GPU work it runs (%s); that work is aborted", rank_,
             m.rank, why.c_str());
  m.open = false;
  open_.fetch_sub(1);
  m.page->host()->abort = 1;
  m.page->host()->ready = m.lastSeq;
}

void ServedLeader::stop(bool abort) {
  if (stopped_) return;
  stopped_ = true;
  if (!abort) {
    const Deadline deadline = deadlineIn(kByeWaitSeconds);
    while (open_.load() > 0 && Clock::now() < deadline && !comm_->abortFlag.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (open_.load() > 0)
      BRAID_WARN("served: rank %d: %d rank(s) whose GPU work this process runs did not destroy their communicator within "
                 "%.0f s of this one; their work is aborted",
                 rank_, open_.load(), kByeWaitSeconds);
  }
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  releaseLeader();
  std::lock_guard<std::mutex> lock(stateMutex_);  // a leader rank's call may be launching (leaderLaunched)
  DeviceScope scope(cudaDev_);
  bool leak = false;
  for (auto& m : members_) {
    if (m->open || abort) m->page->host()->abort = 1;
    if (!drain(*m)) {
      BRAID_WARN("served: rank %d: the stream that runs rank %d's GPU work did not stop within %.0f s; it is left as is",
                 rank_, m->rank, kDrainSeconds);
      leak = true;
      continue;
    }
    if (cudaStreamDestroy(m->stream) != cudaSuccess) (void)cudaGetLastError();
    if (m->fd >= 0) (void)::close(m->fd);
  }
  if (leak) {  // kernels may still read the mappings: keep them (and the pages) rather than fault
    (void)imports_.release();
    for (auto& m : members_) (void)m->page.release();
  } else {
    {
      std::lock_guard<std::mutex> gates(gateMutex_);
      gates_.clear();  // their pages go with the members
    }
    members_.clear();
    imports_.reset();
    workCache_.reset();
    if (pool_ != nullptr) (void)cudaMemPoolDestroy(pool_);
    pool_ = nullptr;
  }
  if (listenFd_ >= 0) (void)::close(listenFd_);
  listenFd_ = -1;
}

}  // namespace braid::api
