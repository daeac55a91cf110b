// The UCX transport (ucx_net.h): its worker, endpoints and proxy thread. Kept as one file (about
// 800 lines) because start, the proxy's loop, the engine's progress() and shutdown are one
// class's members working on one worker's state under one lock; what a connection is and what
// its messages carry (tags, byte counts, memory types, credits) is apart, in ucx_conn.h, and
// what braid sets in UCX's configuration in ucx_settings.h.
#include "transport/ucx_net.h"

#include <cuda_runtime_api.h>

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap.h"
#include "core/comm.h"
#include "core/env.h"
#include "core/log.h"
#include "core/socket.h"
#include "transport/host_fifo.h"
#include "transport/select.h"
#include "transport/ucx_address.h"
#include "transport/ucx_api.h"
#include "transport/ucx_proxies.h"
#if BRAID_HAVE_UCX
#include "transport/ucx_conn.h"
#include "transport/ucx_settings.h"
#endif

namespace braid::transport {

#if !BRAID_HAVE_UCX

ncclResult_t UcxNet::create(ncclComm* comm, std::shared_ptr<UcxNet>* out) {
  out->reset();
  std::string why;
  ucx::api(&why);
  return fail(ncclSystemError, "rank %d: its communicator has ranks on other hosts, which need UCX, but %s", comm->rank,
              why.c_str());
}

#else

namespace {

using namespace ucxconn;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

class UcxNetImpl;

struct PeerLink {
  UcxNetImpl* net = nullptr;
  int peer = -1;
  ucp_ep_h ep = nullptr;
  std::atomic<bool> failed{false};
};

class UcxNetImpl final : public UcxNet {
 public:
  UcxNetImpl(ncclComm* comm, const ucx::Api* api) : comm_(comm), api_(api), links_(comm->nRanks) {}
  ~UcxNetImpl() override { close(true); }

  ncclResult_t start();
  ncclResult_t addSender(int channel, int peer, const NetFifo& fifo) override { return add(channel, peer, fifo, true); }
  ncclResult_t addReceiver(int channel, int peer, const NetFifo& fifo) override { return add(channel, peer, fifo, false); }
  void keep(std::shared_ptr<void> memory) override {
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.push_back(std::move(memory));
  }
  void kick(int channels) override;
  bool cudaMemory() const override { return cudaMemory_; }
  bool progress(bool flush) override;
  void close(bool abort) override;
  void onEndpointError(int peer, ucs_status_t status);

 private:
  ncclResult_t add(int channel, int peer, const NetFifo& fifo, bool send);
  // Polled connections (NetFifo::polled) may move now: the proxy does not sleep.
  bool polling(Clock::time_point now) const;
  void run();
  // One pass over the worker and every connection (workerMutex_ held). True when something moved.
  bool round();
  bool sendsInFlight() const;
  bool sendsLeft() const;  // posted by the engine and not yet completed
  // The proxy's wait: until its wake fd is written (close, an engine that left sends behind),
  // `network` and the worker's event fd fires (an arrival, a completion), or `timeout` passes.
  void waitForEvents(bool network, std::chrono::microseconds timeout);
  void wakeProxy();
  bool progressSend(SendConn& c);
  bool progressRecv(RecvConn& c);
  bool sendsDrained() const;
  // Done (status in *status) or still running; frees a finished request.
  bool finished(Pending& p, ucs_status_t* status, ucp_tag_recv_info_t* info = nullptr);
  void failConn(int peer, const char* what, ucs_status_t status);
  // The slots of a CUDA FIFO mapped for UCX (ucp_mem_map; nullptr where UCX could not, which
  // it then registers itself as each transfer needs), and every such mapping released.
  ncclResult_t mapSlots(const NetFifo& fifo, int peer, ucp_mem_h* memh);
  void unmapSlots();
  void discardUnexpected();
  void shutdown();

  ncclComm* comm_;
  const ucx::Api* api_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<PeerLink> links_;
  int eventFd_ = -1;  // the worker's (UCP_FEATURE_WAKEUP); -1: none, the proxy sleeps on timeouts
  int wakeFd_ = -1;   // an eventfd: close() and the engine wake the proxy through it
  bool pollFailed_ = false;  // the proxy's: ppoll failed once, it sleeps on timeouts
  std::atomic<bool> engineInCall_{false};   // between the engine's progress() and its flush
  std::atomic<uint64_t> engineRounds_{0};   // progress() calls: the proxy sees the engine at work
  // Guards the worker and every connection's state: the proxy thread and the engine's
  // progress() take turns.
  std::mutex workerMutex_;
  std::mutex mutex_;  // guards the adds below, from the engine's thread
  std::atomic<bool> fresh_{false};  // adds not yet adopted
  uint64_t creditsAlone_ = 0, creditsCarried_ = 0;  // credit messages sent, and credits that rode on data
  std::vector<SendConn*> newSends_;
  std::vector<RecvConn*> newRecvs_;
  std::list<SendConn> sends_;  // owned; touched by the proxy thread only once adopted
  std::list<RecvConn> recvs_;
  std::vector<SendConn*> activeSends_;
  std::vector<RecvConn*> activeRecvs_;
  std::thread proxy_;
  std::atomic<bool> stop_{false}, abort_{false}, closed_{false};
  bool cudaMemory_ = false;
  bool anyPolled_ = false;  // the proxy's: some active connection is polled
  std::atomic<int64_t> pollUntil_{0};  // steady-clock ns: polled connections are watched until then
  std::vector<std::shared_ptr<void>> kept_;  // released after the proxy stopped (keep())
};

void errorCallback(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* link = static_cast<PeerLink*>(arg);
  link->net->onEndpointError(link->peer, status);
}

ncclResult_t checkUcs(const ucx::Api* api, int rank, const char* what, ucs_status_t s) {
  if (s == UCS_OK) return ncclSuccess;
  return fail(ncclSystemError, "rank %d: UCX %s failed: %s", rank, what, api->statusString(s));
}

// A peer's endpoint fails when that peer closes it (its destroy) as well as when it dies: not
// a failure by itself. What it sent before is still received; the engine decides whether the
// rank is missed, from the liveness mesh (departed or dead, named in its error).
void UcxNetImpl::onEndpointError(int peer, ucs_status_t status) {
  links_[peer].failed.store(true);
  BRAID_INFO(kNet, "rank %d: UCX connection with rank %d ended: %s", comm_->rank, peer, api_->statusString(status));
}

void UcxNetImpl::failConn(int peer, const char* what, ucs_status_t status) {
  if (links_[peer].failed.load() || status == UCS_ERR_CANCELED) return;  // the peer is gone: see onEndpointError
  char text[512];
  std::snprintf(text, sizeof text,
                "rank %d: %s with rank %d (another host, over UCX) failed: %s. The peer's process or its host may "
                "have died, or the network between them is down.",
                comm_->rank, what, peer, api_->statusString(status));
  markCommFailed(comm_, ncclRemoteError, text, /*cause=*/false);
  BRAID_WARN("%s", text);
}

ncclResult_t UcxNetImpl::start() {
  const int n = comm_->nRanks, me = comm_->rank;
  std::string failure;  // why this rank cannot use UCX: sent instead of an address
  ucp_address_t* address = nullptr;
  size_t addressBytes = 0;
  {
    ucp_config_t* config = nullptr;
    std::string ifName;
    ucs_status_t s = ucx::readConfig(*api_, &config, &ifName);  // braid's settings: ucx_settings.h
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    if (s == UCS_OK) s = api_->initVersion(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &context_);
    if (config) api_->configRelease(config);
    // CUDA memory handed to UCX directly (GPUDirect RDMA) needs a UCX built with CUDA support.
    ucp_context_attr_t attr{};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (s == UCS_OK && api_->contextQuery(context_, &attr) == UCS_OK)
      cudaMemory_ = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // made here, then used by the proxy thread alone
    if (s == UCS_OK) s = api_->workerCreate(context_, &wp, &worker_);
    if (s == UCS_OK) s = api_->workerGetAddress(worker_, &address, &addressBytes);
    // No event fd (a transport without wake-up): the proxy then sleeps on short timeouts.
    if (s == UCS_OK && api_->workerGetEfd(worker_, &eventFd_) != UCS_OK) {
      eventFd_ = -1;
      BRAID_INFO(kNet, "rank %d: UCX worker has no event fd; its proxy polls on timeouts", me);
    }
    if (s != UCS_OK) failure = std::string("UCX could not start: ") + api_->statusString(s);
    BRAID_INFO(kNet | kInit, "rank %d: UCX %s%s%s (net device %s)", me, api_->versionString(), failure.empty() ? "" : ": ",
               failure.c_str(), ifName.empty() ? "as UCX chooses" : ifName.c_str());
  }
  AddressExchange ex;
  ncclResult_t rc = exchangeAddresses(comm_, failure, address, addressBytes, &ex);
  if (address) api_->workerReleaseAddress(worker_, address);
  BRAID_CHECK(rc);
  for (int r = 0; r < n; ++r) {
    if (localityOf(comm_->peers[me], comm_->peers[r]) != Locality::OtherHost) continue;
    PeerLink& link = links_[r];
    link.net = this;
    link.peer = r;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(ex.address(r));
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = errorCallback;
    ep.err_handler.arg = &link;
    BRAID_CHECK(checkUcs(api_, me, "endpoint creation", api_->epCreate(worker_, &ep, &link.ep)));
  }
  wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ < 0)
    return fail(ncclSystemError, "rank %d: eventfd for the UCX proxy failed: %s (out of file descriptors? raise ulimit -n)",
                me, std::strerror(errno));
  proxy_ = std::thread([this] { run(); });
  return ncclSuccess;
}

ncclResult_t UcxNetImpl::add(int channel, int peer, const NetFifo& fifo, bool send) {
  if (channel < 0 || channel >= kMaxChannels || peer < 0 || peer >= comm_->nRanks || links_[peer].ep == nullptr)
    return fail(ncclInternalError, "rank %d: no UCX connection for channel %d to rank %d", comm_->rank, channel, peer);
  if (fifo.slots == nullptr || fifo.tail == nullptr || fifo.head == nullptr || fifo.nSlots == 0 ||
      fifo.nSlots > kMaxNetSlots || fifo.slotBytes == 0 || fifo.space > 1)
    return fail(ncclInternalError, "rank %d: a UCX FIFO to rank %d (channel %d) of %u slots of %zu bytes; need 1..%u slots",
                comm_->rank, peer, channel, fifo.nSlots, fifo.slotBytes, kMaxNetSlots);
  ucp_mem_h memh = nullptr;
  if (fifo.cudaSlots) BRAID_CHECK(mapSlots(fifo, peer, &memh));
  std::lock_guard<std::mutex> lock(mutex_);
  auto fill = [&](auto& conns, auto& fresh) {
    auto& c = conns.emplace_back();
    c.channel = channel;
    c.peer = peer;
    c.fifo = fifo;
    c.memh = memh;
    fresh.push_back(&c);
  };
  if (send) fill(sends_, newSends_);
  else fill(recvs_, newRecvs_);
  fresh_.store(true, std::memory_order_release);
  return ncclSuccess;
}

ncclResult_t UcxNetImpl::mapSlots(const NetFifo& fifo, int peer, ucp_mem_h* memh) {
  if (!cudaMemory_)
    return fail(ncclInternalError, "rank %d: FIFO slots in CUDA memory for rank %d, but this UCX has no CUDA memory support",
                comm_->rank, peer);
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  mp.address = fifo.slots;
  mp.length = fifo.slotBytes * fifo.nSlots;
  mp.memory_type = UCS_MEMORY_TYPE_CUDA;
  std::lock_guard<std::mutex> lock(workerMutex_);  // the context's registration cache is the proxy's too
  const ucs_status_t s = api_->memMap(context_, &mp, memh);
  if (s != UCS_OK) {
    // Not fatal: the transfers still name the memory type, and UCX registers what it must itself.
    *memh = nullptr;
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      BRAID_INFO(kNet, "rank %d: UCX could not map %zu bytes of GPU memory for the FIFO to rank %d (ucp_mem_map: %s); "
                 "its slots go to UCX as CUDA memory without a mapping", comm_->rank, size_t(mp.length), peer,
                 api_->statusString(s));
  }
  return ncclSuccess;
}

// After the worker's last request: before the context goes, and before keep()'s memory is freed.
void UcxNetImpl::unmapSlots() {
  std::lock_guard<std::mutex> lock(mutex_);
  auto unmap = [&](auto& conns) {
    for (auto& c : conns)
      if (c.memh != nullptr) {
        (void)api_->memUnmap(context_, c.memh);  // at teardown: nothing left to tell
        c.memh = nullptr;
      }
  };
  unmap(sends_);
  unmap(recvs_);
}

bool UcxNetImpl::finished(Pending& p, ucs_status_t* status, ucp_tag_recv_info_t* info) {
  if (p.request == nullptr) {
    *status = UCS_OK;
    return true;
  }
  ucs_status_t s = info ? api_->tagRecvRequestTest(p.request, info) : api_->requestCheckStatus(p.request);
  if (s == UCS_INPROGRESS) return false;
  api_->requestFree(p.request);
  p.request = nullptr;
  *status = s;
  return true;
}

bool UcxNetImpl::progressSend(SendConn& c) {
  if (c.failed || links_[c.peer].failed.load()) return false;
  const NetFifo& f = c.fifo;
  bool moved = false;
  ucs_status_t s = UCS_OK;
  // Credits: the receiver's head, in order.
  if (c.creditRecv.posted && finished(c.creditRecv, &s, &c.creditInfo)) {
    c.creditRecv.posted = false;
    if (s != UCS_OK) {
      failConn(c.peer, "receiving credits", s);
      c.failed = true;
      return true;
    }
    c.remoteHead = std::max(c.remoteHead, c.credit);
    moved = true;
  }
  if (!c.creditRecv.posted) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO;
    p.recv_info.tag_info = &c.creditInfo;
    hostMemory(&p);
    if (!posted(api_->tagRecvNbx(worker_, &c.credit, sizeof c.credit, tagOf(kCredit, f.space, c.channel, c.peer, 0), kFullMask, &p),
                &c.creditRecv, &s)) {
      failConn(c.peer, "posting a credit receive", s);
      c.failed = true;
      return true;
    }
  }
  // Slots the engine posted, as far as the receiver has room.
  // The GPU's slots carry no header: the bytes its slice wrote go (the kernel's word beside the
  // tail; a whole slot without one), one contiguous message, in host or CUDA memory.
  const uint64_t tail = f.tail->load(std::memory_order_acquire);
  while (c.sent < tail && c.sent < c.remoteHead + f.nSlots) {
    const int i = static_cast<int>(c.sent % f.nSlots);
    ucp_request_param_t p{};
    ucs_status_ptr_t r;
    const ucp_tag_t tag = tagOf(kData, f.space, c.channel, comm_->rank, c.sent);
    if (f.headers != nullptr) {
      creditsCarried_ += carryCredit(c, i);
      c.iov[i][0] = {&f.headers[i], sizeof(SlotHeader)};
      c.iov[i][1] = {f.slot(c.sent), static_cast<size_t>(std::min<uint64_t>(f.headers[i].bytes, f.slotBytes))};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
      p.datatype = ucp_dt_make_iov();
      describeMemory(f, c.memh, &p);
      r = api_->tagSendNbx(links_[c.peer].ep, c.iov[i], 2, tag, &p);
    } else {
      describeMemory(f, c.memh, &p);
      r = api_->tagSendNbx(links_[c.peer].ep, f.slot(c.sent), messageBytes(f, i), tag, &p);
    }
    if (!posted(r, &c.sends[i], &s) && !lateCheck(f, i)) {  // a late check's receiver may be gone: nothing lost
      failConn(c.peer, "sending", s);
      c.failed = true;
      return true;
    }
    ++c.sent;
    moved = true;
  }
  // Completed sends free their slots, in order.
  while (c.completed < c.sent) {
    Pending& p = c.sends[c.completed % f.nSlots];
    if (!finished(p, &s)) break;
    p.posted = false;
    if (s != UCS_OK && !lateCheck(f, int(c.completed % f.nSlots))) {
      failConn(c.peer, "a send", s);
      c.failed = true;
      return true;
    }
    ++c.completed;
    f.head->store(c.completed, std::memory_order_release);
    moved = true;
  }
  return moved;
}

bool UcxNetImpl::progressRecv(RecvConn& c) {
  if (c.failed) return false;
  const bool linkUp = !links_[c.peer].failed.load();
  const NetFifo& f = c.fifo;
  bool moved = false;
  ucs_status_t s = UCS_OK;
  const uint64_t head = f.head->load(std::memory_order_acquire);
  // Free slots get a receive each, for exactly the message that fills them.
  while (c.posted < head + f.nSlots) {
    const int i = static_cast<int>(c.posted % f.nSlots);
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO;
    p.recv_info.tag_info = &c.info[i];  // required by ucp_tag_recv_request_test; not read
    const ucp_tag_t tag = tagOf(kData, f.space, c.channel, c.peer, c.posted);
    ucs_status_ptr_t r;
    if (f.headers != nullptr) {
      c.iov[i][0] = {&f.headers[i], sizeof(SlotHeader)};
      c.iov[i][1] = {f.slot(c.posted), f.slotBytes};
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
      p.datatype = ucp_dt_make_iov();
      describeMemory(f, c.memh, &p);
      r = api_->tagRecvNbx(worker_, c.iov[i], 2, tag, kFullMask, &p);
    } else {
      describeMemory(f, c.memh, &p);
      r = api_->tagRecvNbx(worker_, f.slot(c.posted), f.slotBytes, tag, kFullMask, &p);
    }
    if (!posted(r, &c.recvs[i], &s)) {
      failConn(c.peer, "posting a receive", s);
      c.failed = true;
      return true;
    }
    ++c.posted;
    moved = true;
  }
  while (c.done < c.posted) {
    const int i = static_cast<int>(c.done % f.nSlots);
    Pending& p = c.recvs[i];
    if (!finished(p, &s, &c.info[i])) break;
    p.posted = false;
    // UCX reports a message longer than the slot as truncated; a shorter one is the engine's
    // to judge (the header's byte count and signature against the call it runs).
    if (s != UCS_OK) {
      failConn(c.peer, "a receive", s);
      c.failed = true;
      return true;
    }
    takeCarriedCredit(c, i);
    ++c.done;
    f.tail->store(c.done, std::memory_order_release);
    moved = true;
  }
  // What the engine consumed goes back as credit, one message in flight at a time.
  if (c.creditSend.posted && finished(c.creditSend, &s)) {
    c.creditSend.posted = false;
    if (s != UCS_OK && !links_[c.peer].failed.load()) {  // a gone peer needs no credit; its data still counts
      failConn(c.peer, "sending credits", s);
      c.failed = true;
      return true;
    }
  }
  if (head != c.headSeen) {
    c.headSeen = head;
    c.headSince = Clock::now();
  }
  const bool due =
      head >= c.creditSent + creditBatch(f) || (head > c.creditSent && Clock::now() - c.headSince > kCreditHold);
  if (linkUp && !c.creditSend.posted && due) {
    c.creditOut = head;
    ucp_request_param_t p{};
    hostMemory(&p);
    if (!posted(api_->tagSendNbx(links_[c.peer].ep, &c.creditOut, sizeof c.creditOut,
                                 tagOf(kCredit, f.space, c.channel, comm_->rank, 0), &p),
                &c.creditSend, &s)) {
      failConn(c.peer, "sending credits", s);
      c.failed = true;
      return true;
    }
    c.creditSent = head;
    ++creditsAlone_;
    moved = true;
  }
  return moved;
}

// What the engine posted and the proxy has not yet sent or seen completed: a send step ends
// when its slot is written, so a rank may destroy its communicator before its last slots left.
bool UcxNetImpl::sendsDrained() const {
  for (const SendConn* c : activeSends_)
    if (!c->failed && !links_[c->peer].failed.load() &&
        (c->completed < c->sent || c->sent < c->fifo.tail->load(std::memory_order_acquire)))
      return false;
  return true;
}

bool UcxNetImpl::sendsInFlight() const {
  for (const SendConn* c : activeSends_)
    if (c->completed < c->sent) return true;
  return false;
}

bool UcxNetImpl::round() {
  if (fresh_.exchange(false, std::memory_order_acq_rel)) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (SendConn* c : newSends_) anyPolled_ |= c->fifo.polled;
    for (RecvConn* c : newRecvs_) anyPolled_ |= c->fifo.polled;
    activeSends_.insert(activeSends_.end(), newSends_.begin(), newSends_.end());
    activeRecvs_.insert(activeRecvs_.end(), newRecvs_.begin(), newRecvs_.end());
    newSends_.clear();
    newRecvs_.clear();
    pairCredits(activeSends_, activeRecvs_);
  }
  // Sends first: a slot the engine just posted leaves before the worker reads what came in
  // (the peer is often ahead, its data already waiting).
  bool moved = false, polledMoved = false;
  for (SendConn* c : activeSends_) {
    const bool m = progressSend(*c);
    moved |= m;
    polledMoved |= m && c->fifo.polled;
  }
  bool arrived = false;
  for (int k = 0; k < 16 && api_->workerProgress(worker_) != 0; ++k) arrived = true;
  for (RecvConn* c : activeRecvs_) {
    const bool m = progressRecv(*c);
    moved |= m;
    polledMoved |= m && c->fifo.polled;
  }
  if (arrived)  // credits and completions that came in: more sends may go now
    for (SendConn* c : activeSends_) polledMoved |= progressSend(*c) && c->fifo.polled;
  // A GPU connection that moved is likely to move again soon (the rest of its call).
  if (polledMoved) pollUntil_.store(nowNs() + int64_t(kPollWindowMs) * 1000000, std::memory_order_relaxed);
  return moved || arrived;
}

bool UcxNetImpl::polling(Clock::time_point now) const {
  return anyPolled_ && std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count() <
                           pollUntil_.load(std::memory_order_relaxed);
}

void UcxNetImpl::kick(int /*channels: all of this proxy's*/) {
  const int64_t now = nowNs();
  const int64_t until = pollUntil_.exchange(now + int64_t(kPollWindowMs) * 1000000, std::memory_order_relaxed);
  if (until <= now) wakeProxy();  // it may sleep (up to a millisecond); already polling: no syscall
}

bool UcxNetImpl::sendsLeft() const {
  for (const SendConn* c : activeSends_)
    if (!c->failed && (c->completed < c->sent || c->sent < c->fifo.tail->load(std::memory_order_acquire)))
      return true;
  return false;
}

bool UcxNetImpl::progress(bool flush) {
  if (!flush) {
    engineInCall_.store(true, std::memory_order_relaxed);
    engineRounds_.fetch_add(1, std::memory_order_relaxed);
  }
  std::unique_lock<std::mutex> lock(workerMutex_, std::defer_lock);
  if (flush) lock.lock();
  else if (!lock.try_lock()) return false;  // the proxy is at it
  if (stop_.load(std::memory_order_acquire)) return false;
  const bool moved = round();
  if (flush) {
    engineInCall_.store(false, std::memory_order_relaxed);
    if (sendsLeft()) wakeProxy();  // slots waiting for credits, or large sends still going: the proxy's now
  }
  return moved;
}

void UcxNetImpl::wakeProxy() {
  const uint64_t one = 1;
  if (wakeFd_ >= 0 && write(wakeFd_, &one, sizeof one) < 0 && errno != EAGAIN)  // EAGAIN: a wake is pending
    BRAID_INFO(kNet, "rank %d: UCX proxy: cannot signal its wake fd: %s", comm_->rank, std::strerror(errno));
}

void UcxNetImpl::waitForEvents(bool network, std::chrono::microseconds timeout) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000) * 1000;
  if (!pollFailed_) {
    pollfd fds[2] = {{wakeFd_, POLLIN, 0}, {eventFd_, POLLIN, 0}};
    const nfds_t n = network && eventFd_ >= 0 ? 2 : 1;
    if (ppoll(fds, n, &ts, nullptr) >= 0 || errno == EINTR) {
      uint64_t count = 0;
      if ((fds[0].revents & POLLIN) && read(wakeFd_, &count, sizeof count) < 0 && errno != EAGAIN)
        BRAID_INFO(kNet, "rank %d: UCX proxy: reading its wake fd failed: %s", comm_->rank, std::strerror(errno));
      return;
    }
    BRAID_WARN("rank %d: UCX proxy: ppoll failed: %s; it sleeps on timeouts from now on", comm_->rank, std::strerror(errno));
    pollFailed_ = true;
  }
  (void)nanosleep(&ts, nullptr);  // EINTR: an early look, harmless
}

// The proxy: what the engine's thread does not do itself (transport/ucx_net.h progress): the
// traffic between calls (arrivals for the next call, credits, sends that waited for them) and
// destroy's drain. While the engine runs a call (its progress() calls keep coming) the proxy
// keeps off the worker, waking only on a timeout: a proxy that woke on every arrival took the
// worker's lock from under the engine and a core from the ranks (8 B all-reduce, 2 nodes x 1:
// 180 us against 34 us). Otherwise it sleeps in the kernel on the worker's event fd, each wake
// an arrival or a completion; the timeout only bounds a missed wake.
void UcxNetImpl::run() {
  // The short waits below would otherwise each last the default 50 us of timer slack.
  if (prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL) != 0)
    BRAID_INFO(kNet, "rank %d: UCX proxy: PR_SET_TIMERSLACK failed: %s", comm_->rank, std::strerror(errno));
  // UCX's CUDA transports copy GPUDirect slots (net_device.h) on this thread, in its current context.
  if (cudaMemory_ && comm_->cudaDev >= 0) {
    if (cudaError_t e = cudaSetDevice(comm_->cudaDev); e != cudaSuccess) {
      (void)cudaGetLastError();
      BRAID_INFO(kNet, "rank %d: UCX proxy: cudaSetDevice(%d) failed: %s", comm_->rank, comm_->cudaDev,
                 cudaGetErrorString(e));
    }
  }
  Clock::time_point drainEnd{};
  uint64_t engineSeen = engineRounds_.load();
  std::unique_lock<std::mutex> lock(workerMutex_, std::defer_lock);
  for (;;) {
    // The engine is in a call when it has called progress() since the last look (a call that
    // failed without its flush stops counting, so the proxy takes over within one timeout).
    const bool stopping = stop_.load(std::memory_order_acquire);
    const uint64_t engineNow = engineRounds_.load(std::memory_order_relaxed);
    const bool engineBusy = !stopping && engineInCall_.load(std::memory_order_relaxed) && engineNow != engineSeen;
    engineSeen = engineNow;
    if (engineBusy) {  // off the worker: not even its lock
      waitForEvents(/*network=*/false, std::chrono::microseconds(1000));
      continue;
    }
    lock.lock();
    if (stopping) {
      // Destroy: what the engine posted still goes out (bounded: the receiver may be gone).
      if (abort_.load() || sendsDrained()) break;
      if (drainEnd == Clock::time_point{}) drainEnd = Clock::now() + std::chrono::seconds(5);
      if (Clock::now() > drainEnd) {
        BRAID_WARN("rank %d: UCX: slots still unsent 5 s after close began; dropped", comm_->rank);
        break;
      }
    }
    if (round()) {
      lock.unlock();
      continue;
    }
    // GPU counters tell nobody when they move: while a GPU connection may be busy, look again
    // at once (a yield, so that the ranks' own threads get the core when they need it).
    if (!stopping && polling(Clock::now())) {
      lock.unlock();
      sched_yield();
      continue;
    }
    // Sends in flight (large ones, rendezvous) may finish without an event on the fd: look again soon.
    const auto timeout = std::chrono::microseconds(sendsInFlight() ? 20 : 1000);
    const ucs_status_t armed = eventFd_ >= 0 ? api_->workerArm(worker_) : UCS_OK;
    if (armed != UCS_OK && armed != UCS_ERR_BUSY) {
      BRAID_INFO(kNet, "rank %d: UCX proxy: ucp_worker_arm failed: %s; polling on timeouts", comm_->rank,
                 api_->statusString(armed));
      eventFd_ = -1;
    }
    lock.unlock();
    if (armed == UCS_ERR_BUSY) continue;  // events not yet taken: progress first
    waitForEvents(/*network=*/true, timeout);
  }
  // Left with the worker's lock held.
  shutdown();
}

// Every request ended (cancelled receives, flushed or dropped sends), the endpoints closed,
// the worker and context released; each wait bounded.
void UcxNetImpl::shutdown() {
  const bool abort = abort_.load();
  if (creditsCarried_ > 0)
    BRAID_INFO(kNet, "rank %d: UCX credits rode on data going back %llu times; %llu went as messages of their own",
               comm_->rank, static_cast<unsigned long long>(creditsCarried_), static_cast<unsigned long long>(creditsAlone_));
  else if (creditsAlone_ > 0)
    BRAID_INFO(kNet, "rank %d: UCX credits: %llu messages of their own, none rode on data", comm_->rank,
               static_cast<unsigned long long>(creditsAlone_));
  auto until = [&](double seconds, const auto& done) {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (!done() && Clock::now() < end) api_->workerProgress(worker_);
    return done();
  };
  std::vector<Pending*> all;
  for (SendConn* c : activeSends_) {
    for (Pending& p : c->sends) all.push_back(&p);
    all.push_back(&c->creditRecv);
    if (c->creditRecv.request) api_->requestCancel(worker_, c->creditRecv.request);
  }
  for (RecvConn* c : activeRecvs_) {
    for (Pending& p : c->recvs) {
      all.push_back(&p);
      if (p.request) api_->requestCancel(worker_, p.request);
    }
    all.push_back(&c->creditSend);
  }
  auto allDone = [&] {
    ucs_status_t s;
    bool done = true;
    for (Pending* p : all)
      if (p->request && !finished(*p, &s)) done = false;
    return done;
  };
  if (!until(abort ? 0.2 : 5.0, allDone))
    BRAID_WARN("rank %d: UCX requests still running at close; they are dropped", comm_->rank);
  for (Pending* p : all)  // still running: cancelled and released unfinished
    if (p->request) {
      api_->requestCancel(worker_, p->request);
      api_->requestFree(p->request);
      p->request = nullptr;
    }
  std::vector<void*> closing;
  for (PeerLink& link : links_) {
    if (link.ep == nullptr) continue;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = abort || link.failed.load() ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = api_->epCloseNbx(link.ep, &p);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) closing.push_back(r);
    link.ep = nullptr;
  }
  auto closed = [&] {
    for (void*& r : closing)
      if (r && api_->requestCheckStatus(r) != UCS_INPROGRESS) {
        api_->requestFree(r);
        r = nullptr;
      }
    return std::all_of(closing.begin(), closing.end(), [](void* r) { return r == nullptr; });
  };
  if (!until(abort ? 0.2 : 2.0, closed)) {
    BRAID_WARN("rank %d: UCX endpoints still closing at close; released", comm_->rank);
    for (void* r : closing)
      if (r) api_->requestFree(r);
  }
  discardUnexpected();
  api_->workerDestroy(worker_);
  worker_ = nullptr;
  unmapSlots();
  api_->cleanup(context_);
  context_ = nullptr;
}

// Messages that arrived after their receive was cancelled (a peer's last credits, sent while
// this rank closes) stay unexpected, and UCX warns of each as the worker goes: taken here.
// Bounded: at most 4096 messages, each waited for 100 ms at most.
void UcxNetImpl::discardUnexpected() {
  std::vector<char> sink(64);
  for (int k = 0; k < 4096; ++k) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h msg = api_->tagProbeNb(worker_, 0, 0, /*remove=*/1, &info);
    if (msg == nullptr) return;
    if (info.length > sink.size()) sink.resize(info.length);
    ucp_request_param_t p{};
    ucs_status_ptr_t r = api_->tagMsgRecvNbx(worker_, sink.data(), info.length, msg, &p);
    if (UCS_PTR_IS_ERR(r)) return;
    if (r == nullptr) continue;
    const auto end = Clock::now() + std::chrono::milliseconds(100);
    while (api_->requestCheckStatus(r) == UCS_INPROGRESS && Clock::now() < end) api_->workerProgress(worker_);
    if (api_->requestCheckStatus(r) == UCS_INPROGRESS) api_->requestCancel(worker_, r);
    api_->requestFree(r);
  }
}

void UcxNetImpl::close(bool abort) {
  if (closed_.exchange(true)) return;
  abort_.store(abort);
  {
    std::lock_guard<std::mutex> lock(workerMutex_);
    stop_.store(true, std::memory_order_release);
  }
  wakeProxy();  // failing: the wait's timeout
  if (proxy_.joinable()) {
    proxy_.join();
  } else if (worker_ != nullptr || context_ != nullptr) {  // start() failed before the proxy began
    for (PeerLink& link : links_)
      if (link.ep) {
        ucp_request_param_t p{};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_EP_CLOSE_FLAG_FORCE;
        ucs_status_ptr_t r = api_->epCloseNbx(link.ep, &p);
        if (r != nullptr && !UCS_PTR_IS_ERR(r)) api_->requestFree(r);
        link.ep = nullptr;
      }
    if (worker_) api_->workerDestroy(worker_);
    if (context_) api_->cleanup(context_);
    worker_ = nullptr;
    context_ = nullptr;
  }
  if (wakeFd_ >= 0) (void)::close(wakeFd_);  // the proxy has stopped: nothing waits on it
  wakeFd_ = -1;
  std::lock_guard<std::mutex> lock(mutex_);
  kept_.clear();  // nothing touches that memory any more
}

}  // namespace

ncclResult_t UcxNet::create(ncclComm* comm, std::shared_ptr<UcxNet>* out) {
  out->reset();
  std::string why;
  const ucx::Api* api = ucx::api(&why);
  if (comm->nRanks > kMaxRanks)
    return fail(ncclInvalidUsage, "rank %d: UCX connections carry at most %d ranks; this communicator has %d", comm->rank,
                kMaxRanks, comm->nRanks);
  int count = 1;
  BRAID_CHECK(agreeNetProxies(comm, api == nullptr ? 1 : wantedNetProxies(comm), &count));
  if (api == nullptr) {  // still joins the exchange, which fails on every rank, naming this one
    AddressExchange ex;
    return exchangeAddresses(comm, why, nullptr, 0, &ex);
  }
  return startProxies(comm, count, [&](std::shared_ptr<UcxNet>* one) {
    auto net = std::make_shared<UcxNetImpl>(comm, api);
    *one = net;
    return net->start();
  }, out);
}

#endif

}  // namespace braid::transport
