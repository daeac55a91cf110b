#include "core/call_state.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "core/cuda_scope.h"
#include "core/numeric.h"

namespace braid {
namespace {

// Device calls tracked one event each; beyond this many in flight the newest entry absorbs
// the next calls (its event is recorded again, later on the stream).
constexpr size_t kMaxPendingDeviceCalls = 256;

bool rooted(CallKind k) {
  return k == CallKind::Broadcast || k == CallKind::Reduce || k == CallKind::Gather || k == CallKind::Scatter;
}
bool reduces(CallKind k) {
  return k == CallKind::AllReduce || k == CallKind::Reduce || k == CallKind::ReduceScatter;
}

}  // namespace

const char* callName(CallKind kind) {
  static const char* const kNames[] = {"ncclAllReduce", "ncclBroadcast",    "ncclReduce",   "ncclAllGather",
                                       "ncclReduceScatter", "ncclAlltoAll", "ncclGather", "ncclScatter",
                                       "ncclSend", "ncclRecv"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == size_t(CallKind::Count));
  return kind < CallKind::Count ? kNames[static_cast<int>(kind)] : "an unknown call";
}

bool sameCall(const CallDesc& a, const CallDesc& b) {
  // User-made PreMulSum ops are numbered per communicator and rank: only "some PreMulSum"
  // must agree.
  auto opClass = [](int op) { return op >= ncclNumOps ? ncclNumOps : op; };
  return a.seq == b.seq && a.kind == b.kind && a.count == b.count && a.type == b.type && a.root == b.root &&
         opClass(a.op) == opClass(b.op) && a.onDevice == b.onDevice;
}

std::string describeCall(const CallDesc& d) {
  CallKind kind = static_cast<CallKind>(d.kind);
  if (kind >= CallKind::Count) return "a call this rank could not see (only its signature differed)";
  char buf[160];
  int n = 0;
  if (kind == CallKind::Send || kind == CallKind::Recv) {
    n = std::snprintf(buf, sizeof(buf), "%s count %llu %s %s rank %d", callName(kind),
                      static_cast<unsigned long long>(d.count), typeName(static_cast<ncclDataType_t>(d.type)),
                      kind == CallKind::Send ? "to" : "from", d.root);
  } else {
    n = std::snprintf(buf, sizeof(buf), "#%llu %s count %llu %s", static_cast<unsigned long long>(d.seq),
                      callName(kind), static_cast<unsigned long long>(d.count),
                      typeName(static_cast<ncclDataType_t>(d.type)));
    if (n > 0 && reduces(kind)) n += std::snprintf(buf + n, sizeof(buf) - n, " %s", opName(static_cast<ncclRedOp_t>(d.op)));
    if (n > 0 && rooted(kind)) n += std::snprintf(buf + n, sizeof(buf) - n, " root %d", d.root);
  }
  if (n > 0 && size_t(n) < sizeof(buf)) std::snprintf(buf + n, sizeof(buf) - n, " (%s memory)", d.onDevice ? "device" : "host");
  return buf;
}

CallState::CallState() { std::fill(std::begin(waitingFor_), std::end(waitingFor_), -1); }

CallState::~CallState() {
  for (Pending& p : pending_) {
    if (p.event == nullptr) continue;
    DeviceScope scope(p.device);
    (void)cudaEventDestroy(p.event);
  }
  for (cudaEvent_t e : spareEvents_) (void)cudaEventDestroy(e);
  (void)cudaGetLastError();
}

uint64_t CallState::begin(CallDesc* descs, size_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < n; ++i) {
    CallKind k = static_cast<CallKind>(descs[i].kind);
    descs[i].seq = (k == CallKind::Send || k == CallKind::Recv) ? 0 : nextSeq_++;
  }
  started_ = nextSeq_ - 1;
  current_ = n ? descs[0] : CallDesc{};
  inHostCall_ = true;
  std::fill(std::begin(waitingFor_), std::end(waitingFor_), -1);
  moves_.fetch_add(1, std::memory_order_relaxed);
  return started_;
}

void CallState::complete() {
  std::lock_guard<std::mutex> lock(mutex_);
  inHostCall_ = false;
  last_ = current_;
  if (pending_.empty()) completed_ = started_;
  moves_.fetch_add(1, std::memory_order_relaxed);
}

bool CallState::enqueued(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  inHostCall_ = false;
  moves_.fetch_add(1, std::memory_order_relaxed);
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (pending_.size() >= kMaxPendingDeviceCalls && pending_.back().event != nullptr) {
    Pending& newest = pending_.back();
    newest.lastSeq = started_;
    if (cudaEventRecord(newest.event, stream) == cudaSuccess) return true;
    (void)cudaGetLastError();
    return false;
  }
  cudaEvent_t ev = nullptr;
  if (!spareEvents_.empty()) {
    ev = spareEvents_.back();
    spareEvents_.pop_back();
  } else if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (cudaEventRecord(ev, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    spareEvents_.push_back(ev);
    return false;
  }
  Pending p;
  p.lastSeq = started_;
  p.first = current_;
  p.event = ev;
  p.device = device;
  pending_.push_back(std::move(p));
  return true;
}

void CallState::enqueued(std::shared_ptr<const volatile uint32_t> doneWord, uint32_t doneValue) {
  std::lock_guard<std::mutex> lock(mutex_);
  inHostCall_ = false;
  moves_.fetch_add(1, std::memory_order_relaxed);
  if (pending_.size() >= kMaxPendingDeviceCalls && pending_.back().doneWord == doneWord) {
    pending_.back().lastSeq = started_;
    pending_.back().doneValue = doneValue;
    return;
  }
  Pending p;
  p.lastSeq = started_;
  p.first = current_;
  p.doneWord = std::move(doneWord);
  p.doneValue = doneValue;
  pending_.push_back(std::move(p));
}

void CallState::setWaitingFor(const int* ranks, int n) {
  std::lock_guard<std::mutex> lock(mutex_);
  int k = 0;
  for (; k < n && k < CallStatus::kMaxWaitingFor; ++k) waitingFor_[k] = ranks[k];
  for (; k < CallStatus::kMaxWaitingFor; ++k) waitingFor_[k] = -1;
}

void CallState::pollEventsLocked() {
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    if (p.doneWord != nullptr) {
      if (int32_t(*p.doneWord - p.doneValue) < 0) break;
    } else {
      DeviceScope scope(p.device);
      cudaError_t e = cudaEventQuery(p.event);
      if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        break;
      }
      (void)cudaGetLastError();  // an error: the call will not complete either; stop tracking it
      spareEvents_.push_back(p.event);
    }
    last_ = p.first;
    uint64_t done = p.lastSeq;
    pending_.erase(pending_.begin());
    completed_ = std::max(completed_, done);
    if (pending_.empty() && !inHostCall_) completed_ = started_;
    moves_.fetch_add(1, std::memory_order_relaxed);
  }
}

CallStatus CallState::status(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  pollEventsLocked();
  CallStatus s;
  s.rank = rank;
  s.inCall = inHostCall_ || !pending_.empty();
  s.started = started_;
  s.completed = completed_;
  s.current = !pending_.empty() ? pending_.front().first : inHostCall_ ? current_ : last_;
  std::copy(std::begin(waitingFor_), std::end(waitingFor_), s.waitingFor);
  return s;
}

uint64_t CallState::started() {
  std::lock_guard<std::mutex> lock(mutex_);
  return started_;
}

uint64_t CallState::activity() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pollEventsLocked();
  }
  return moves_.load(std::memory_order_relaxed) + progress_.load(std::memory_order_relaxed);
}

bool CallState::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  pollEventsLocked();
  return !inHostCall_ && pending_.empty();
}

}  // namespace braid
