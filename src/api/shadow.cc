#include "api/shadow.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/fallback_route.h"
#include "core/comm.h"
#include "core/cuda_scope.h"
#include "core/log.h"
#include "core/numeric.h"
#include "fallback/shadow_settings.h"
#include "kernels/shadow_launch.h"

namespace braid::api {

// One communicator's shadow: its numbering of device collectives, a memory pool for scratch
// (cached between calls; never the user's default pool), and result slots with their events.
class Shadow {
 public:
  static constexpr int kSlots = 64;

  struct Pending {
    int slot;
    uint64_t seq;
    const char* coll;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    bool reduces;
    unsigned long long elements;
  };

  ~Shadow() {
    DeviceScope device(dev);
    for (cudaEvent_t e : events) {
      cudaEventSynchronize(e);  // bounded: braid's and the real NCCL's kernels have stopped
      cudaEventDestroy(e);
    }
    if (devSlots) cudaFree(devSlots);
    if (hostSlots) cudaFreeHost(hostSlots);
    if (pool) cudaMemPoolDestroy(pool);
    cudaGetLastError();
  }

  std::mutex mutex;
  int dev = -1;
  uint64_t seq = 0;  // device collectives seen (1-based once counted)
  cudaMemPool_t pool = nullptr;
  kernels::ShadowResult* devSlots = nullptr;
  kernels::ShadowResult* hostSlots = nullptr;
  std::vector<cudaEvent_t> events;
  std::vector<int> freeSlots;
  std::deque<Pending> pending;
  bool off = false;            // refused (the reason said once)
  bool saidCapture = false, saidUserOp = false, saidRealRefuses = false, saidStart = false;
  std::string strictText;      // a mismatch STRICT turns into the next call's error
};

namespace {

using fallback::shadowSettings;

const char* cudaText(cudaError_t e) { return cudaGetErrorString(e); }

// The communicator's shadow, made on first use (on its device).
ncclResult_t shadowOf(ncclComm* comm, Shadow** out) {
  std::lock_guard<std::mutex> lock(comm->realMutex);
  if (!comm->shadow) {
    comm->shadow = std::make_shared<Shadow>();
    comm->shadow->dev = comm->cudaDev;
  }
  *out = comm->shadow.get();
  return ncclSuccess;
}

// The shadow's pool, result slots and events, made before its first check (not at its first
// call: that one may be under CUDA graph capture, where cudaMalloc is not permitted). Under
// sh->mutex.
ncclResult_t readyForChecks(ncclComm* comm, Shadow* sh) {
  if (sh->pool != nullptr) return ncclSuccess;
  DeviceScope device(comm->cudaDev);  // one thread may drive ranks on several GPUs
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = comm->cudaDev;
  cudaError_t e = cudaMemPoolCreate(&sh->pool, &props);
  if (e == cudaSuccess) {
    uint64_t keep = UINT64_MAX;  // keep freed scratch for the next check instead of returning it
    e = cudaMemPoolSetAttribute(sh->pool, cudaMemPoolAttrReleaseThreshold, &keep);
  }
  if (e == cudaSuccess) e = cudaMalloc(&sh->devSlots, sizeof(kernels::ShadowResult) * Shadow::kSlots);
  if (e == cudaSuccess) e = cudaHostAlloc(&sh->hostSlots, sizeof(kernels::ShadowResult) * Shadow::kSlots, cudaHostAllocDefault);
  for (int i = 0; e == cudaSuccess && i < Shadow::kSlots; ++i) {
    cudaEvent_t ev = nullptr;
    e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess) {
      sh->events.push_back(ev);
      sh->freeSlots.push_back(Shadow::kSlots - 1 - i);
    }
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    sh->off = true;
    return fail(ncclUnhandledCudaError, "BRAID_SHADOW (rank %d): setting up the shadow's pool, result slots and "
                "events on device %d failed: %s", comm->rank, comm->cudaDev, cudaText(e));
  }
  return ncclSuccess;
}

// Reads one finished check (its event has completed); a mismatch is logged, and kept for
// STRICT's next-call error. Under sh->mutex.
void finish(ncclComm* comm, Shadow* sh, const Shadow::Pending& p) {
  const kernels::ShadowResult& r = sh->hostSlots[p.slot];
  if (r.mismatches > 0) {
    std::string text = fallback::mismatchText(p.seq, p.coll, p.count, p.type, p.op, p.reduces, comm->rank, r.mismatches,
                                              p.elements, r.firstIndex, r.mineBits, r.refBits);
    BRAID_WARN("BRAID_SHADOW: %s", text.c_str());
    if (shadowSettings().strict && sh->strictText.empty()) sh->strictText = text;
  } else {
    BRAID_TRACE(kColl, "BRAID_SHADOW: check #%llu %s rank %d: %llu elements agree", static_cast<unsigned long long>(p.seq),
                p.coll, comm->rank, p.elements);
  }
  sh->freeSlots.push_back(p.slot);
}

// Reads the finished checks (all of them, waiting, when `wait`). Under sh->mutex.
void collect(ncclComm* comm, Shadow* sh, bool wait) {
  for (auto it = sh->pending.begin(); it != sh->pending.end();) {
    cudaEvent_t ev = sh->events[it->slot];
    cudaError_t e = wait ? cudaEventSynchronize(ev) : cudaEventQuery(ev);
    if (e == cudaErrorNotReady) {
      ++it;
      continue;
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      BRAID_WARN("BRAID_SHADOW (rank %d): check #%llu of %s could not be read: %s", comm->rank,
                 static_cast<unsigned long long>(it->seq), it->coll, cudaText(e));
      sh->freeSlots.push_back(it->slot);
    } else {
      finish(comm, sh, *it);
    }
    it = sh->pending.erase(it);
  }
}

ncclResult_t strictResult(ncclComm* comm, Shadow* sh, const char* caller) {
  if (sh->strictText.empty()) return ncclSuccess;
  std::string text = std::move(sh->strictText);
  sh->strictText.clear();
  return fail(ncclInternalError, "%s (rank %d): BRAID_SHADOW_STRICT=1: an earlier call's output differs from the "
              "real NCCL's: %s", caller, comm->rank, text.c_str());
}

// What a collective reads and writes, in elements, on this rank.
struct Extent {
  size_t in = 0, out = 0;
  bool compare = true;  // this rank has an output (the root of reduce and gather only)
  bool reduces = false;
};

Extent extentOf(const Task& t) {
  const size_t c = t.count, n = static_cast<size_t>(t.comm->nRanks);
  const bool root = t.comm->rank == t.root;
  switch (t.coll) {
    case algo::Coll::AllReduce: return {c, c, true, true};
    case algo::Coll::Reduce: return {c, c, root, true};
    case algo::Coll::Broadcast: return {root ? c : 0, c, true, false};
    case algo::Coll::AllGather: return {c, c * n, true, false};
    case algo::Coll::ReduceScatter: return {c * n, c, true, true};
    case algo::Coll::AlltoAll: return {c * n, c * n, true, false};
    case algo::Coll::Gather: return {c, c * n, root, false};
    case algo::Coll::Scatter: return {root ? c * n : 0, c, true, false};
    case algo::Coll::SendRecv: break;
  }
  return {};
}

// The call on the real communicator, from scratch into scratch.
ncclResult_t realCall(const Task& t, ncclComm_t real, const fallback::RealComm& rc, const void* in, void* out) {
  const ncclDataType_t ty = t.type;
  switch (t.coll) {
    case algo::Coll::AllReduce:
      return rc.fn<decltype(&pncclAllReduce)>("pncclAllReduce")(in, out, t.count, ty, t.op, real, t.stream);
    case algo::Coll::Reduce:
      return rc.fn<decltype(&pncclReduce)>("pncclReduce")(in, out, t.count, ty, t.op, t.root, real, t.stream);
    case algo::Coll::Broadcast:
      return rc.fn<decltype(&pncclBroadcast)>("pncclBroadcast")(in, out, t.count, ty, t.root, real, t.stream);
    case algo::Coll::AllGather:
      return rc.fn<decltype(&pncclAllGather)>("pncclAllGather")(in, out, t.count, ty, real, t.stream);
    case algo::Coll::ReduceScatter:
      return rc.fn<decltype(&pncclReduceScatter)>("pncclReduceScatter")(in, out, t.count, ty, t.op, real, t.stream);
    case algo::Coll::AlltoAll:
      return rc.fn<decltype(&pncclAlltoAll)>("pncclAlltoAll")(in, out, t.count, ty, real, t.stream);
    case algo::Coll::Gather:
      return rc.fn<decltype(&pncclGather)>("pncclGather")(in, out, t.count, ty, t.root, real, t.stream);
    case algo::Coll::Scatter:
      return rc.fn<decltype(&pncclScatter)>("pncclScatter")(in, out, t.count, ty, t.root, real, t.stream);
    case algo::Coll::SendRecv: break;
  }
  return ncclInternalError;
}

}  // namespace

struct ShadowGroup::Items {
  struct Item {
    const Task* task;
    Shadow* sh;
    uint64_t seq;
    Extent extent;
    void* in = nullptr;
    void* out = nullptr;
    bool taken = false;  // after() queued its free
  };
  std::span<const Task* const> tasks;
  std::vector<Item> list;
};

ShadowGroup::ShadowGroup(std::span<const Task* const> tasks) {
  if (shadowSettings().every == 0) return;
  items_ = std::make_unique<Items>();
  items_->tasks = tasks;
}

ShadowGroup::~ShadowGroup() {
  if (!items_) return;
  for (auto& item : items_->list) {
    if (item.taken) continue;
    DeviceScope device(item.task->comm->cudaDev);
    if (item.in) cudaFreeAsync(item.in, item.task->stream);
    if (item.out) cudaFreeAsync(item.out, item.task->stream);
  }
  cudaGetLastError();
}

ncclResult_t ShadowGroup::before() {
  if (!items_) return ncclSuccess;
  const auto& settings = shadowSettings();
  static const bool saidSettings = [&settings] {
    if (!settings.error.empty()) BRAID_WARN("BRAID_SHADOW is off: %s", settings.error.c_str());
    return true;
  }();
  (void)saidSettings;
  const bool strict = settings.strict;
  // 1. Which tasks are checked (numbered per communicator), and why the others are not.
  std::vector<ncclComm*> needReal;
  for (const Task* t : items_->tasks) {
    if (t->coll == algo::Coll::SendRecv) continue;  // point-to-point: not shadowed (docs/fallback.md)
    ncclComm* comm = t->comm;
    Shadow* sh = nullptr;
    BRAID_CHECK(shadowOf(comm, &sh));
    std::lock_guard<std::mutex> lock(sh->mutex);
    uint64_t seq = ++sh->seq;
    if (sh->off || !fallback::shadowThisCall(settings, seq)) continue;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(t->stream, &capture) != cudaSuccess) cudaGetLastError();
    if (capture != cudaStreamCaptureStatusNone) {
      if (!sh->saidCapture)
        BRAID_WARN("BRAID_SHADOW (rank %d): %s #%llu is being captured into a CUDA graph: refused, not checked (the "
                   "shadow's scratch, real call and check are not captured); said once per communicator", comm->rank,
                   t->caller, static_cast<unsigned long long>(seq));
      sh->saidCapture = true;
      continue;
    }
    if (static_cast<int>(t->op) >= ncclNumOps) {
      if (!sh->saidUserOp)
        BRAID_INFO(kColl, "BRAID_SHADOW (rank %d): %s with a PreMulSum op is not checked (the op is braid's, the real "
                   "communicator has none); said once per communicator", comm->rank, t->caller);
      sh->saidUserOp = true;
      continue;
    }
    if (t->op == ncclAvg && (t->type == ncclFloat8e4m3 || t->type == ncclFloat8e5m2)) {
      // NCCL 2.28.9 returns ncclInvalidArgument for these (seen on the H200: tests/gpu/fallback_auto).
      if (!sh->saidRealRefuses)
        BRAID_INFO(kColl, "BRAID_SHADOW (rank %d): %s with ncclAvg on an fp8 type is not checked (the real NCCL refuses "
                   "that op on fp8); said once per communicator", comm->rank, t->caller);
      sh->saidRealRefuses = true;
      continue;
    }
    std::string refusal = fallback::realCommRefusal(comm->peers);
    if (!refusal.empty()) {
      sh->off = true;
      BRAID_WARN("BRAID_SHADOW (rank %d): this communicator is not checked: %s", comm->rank, refusal.c_str());
      if (strict)
        return fail(ncclInvalidUsage, "%s (rank %d): BRAID_SHADOW_STRICT=1, but this communicator cannot be checked: %s",
                    t->caller, comm->rank, refusal.c_str());
      continue;
    }
    BRAID_CHECK(readyForChecks(comm, sh));
    if (!sh->saidStart)
      BRAID_INFO(kColl, "BRAID_SHADOW (rank %d): checking every %llu-th device collective against the real NCCL%s%s",
                 comm->rank, static_cast<unsigned long long>(settings.every), strict ? " (strict)" : "",
                 settings.perturbIndex >= 0 ? "; BRAID_SHADOW_TEST_PERTURB is set: a planted mismatch (test only)" : "");
    sh->saidStart = true;
    items_->list.push_back({t, sh, seq, extentOf(*t)});
    bool known = false;
    {
      std::lock_guard<std::mutex> realLock(comm->realMutex);
      known = comm->real != nullptr;
    }
    if (!known && std::find(needReal.begin(), needReal.end(), comm) == needReal.end()) needReal.push_back(comm);
  }
  // 2. The real communicators not made yet: together, one thread each, since one thread may
  // drive several ranks of them (a group over ranks of this process).
  std::vector<ncclResult_t> made(needReal.size(), ncclSuccess);
  std::vector<std::string> why(needReal.size());
  auto make = [&](size_t i) {
    fallback::RealComm* real = nullptr;
    made[i] = realCommOf(needReal[i], "BRAID_SHADOW", &real);
    if (made[i] != ncclSuccess) why[i] = braid::lastError();
  };
  if (needReal.size() == 1) {
    make(0);
  } else if (needReal.size() > 1) {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < needReal.size(); ++i) threads.emplace_back(make, i);
    for (auto& th : threads) th.join();
  }
  for (size_t i = 0; i < needReal.size(); ++i) {
    if (made[i] == ncclSuccess) continue;
    ncclComm* comm = needReal[i];
    Shadow* sh = nullptr;
    BRAID_CHECK(shadowOf(comm, &sh));
    {
      std::lock_guard<std::mutex> lock(sh->mutex);
      sh->off = true;
    }
    BRAID_WARN("BRAID_SHADOW (rank %d): this communicator is not checked: its real NCCL communicator could not be "
               "made: %s", comm->rank, why[i].c_str());
    std::erase_if(items_->list, [comm](const Items::Item& it) { return it.task->comm == comm; });
    if (strict) return fail(made[i], "BRAID_SHADOW_STRICT=1 (rank %d): %s", comm->rank, why[i].c_str());
  }
  // 3. Scratch from the communicator's pool, on the call's stream; the inputs copied before
  // braid's launch can overwrite them (in-place calls).
  for (auto& item : items_->list) {
    const Task& t = *item.task;
    const size_t es = sizeOfType(t.type);
    DeviceScope device(t.comm->cudaDev);
    cudaError_t e = cudaSuccess;
    if (item.extent.in > 0) e = cudaMallocFromPoolAsync(&item.in, item.extent.in * es, item.sh->pool, t.stream);
    if (e == cudaSuccess && item.extent.out > 0)
      e = cudaMallocFromPoolAsync(&item.out, item.extent.out * es, item.sh->pool, t.stream);
    if (e == cudaSuccess && item.extent.in > 0)
      e = cudaMemcpyAsync(item.in, t.sendbuff, item.extent.in * es, cudaMemcpyDeviceToDevice, t.stream);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return fail(ncclUnhandledCudaError, "%s (rank %d): BRAID_SHADOW's scratch (%zu + %zu bytes) on the call's stream "
                  "failed: %s", t.caller, t.comm->rank, item.extent.in * es, item.extent.out * es, cudaText(e));
    }
  }
  return ncclSuccess;
}

ncclResult_t ShadowGroup::after() {
  if (!items_ || items_->list.empty()) return ncclSuccess;
  // 1. The real calls, as one real group (several ranks may be driven by this thread).
  const fallback::RealNccl* lib = fallback::realNccl();
  if (lib == nullptr) return ncclSuccess;  // not reached: the real communicators exist
  using GroupFn = ncclResult_t (*)();
  auto start = reinterpret_cast<GroupFn>(lib->symbol("pncclGroupStart"));
  auto end = reinterpret_cast<GroupFn>(lib->symbol("pncclGroupEnd"));
  ncclResult_t rc = start ? start() : ncclInvalidUsage;
  const Task* failedTask = nullptr;
  for (auto& item : items_->list) {
    if (rc != ncclSuccess) break;
    const Task& t = *item.task;
    fallback::RealComm* real = nullptr;
    {
      std::lock_guard<std::mutex> lock(t.comm->realMutex);
      real = t.comm->real.get();
    }
    rc = real ? realCall(t, real->handle(), *real, item.in, item.out) : ncclInternalError;
    if (rc != ncclSuccess) failedTask = &t;
  }
  ncclResult_t rcEnd = end ? end() : ncclInvalidUsage;
  if (rc == ncclSuccess) rc = rcEnd;
  if (rc != ncclSuccess) {
    const Task& t = failedTask ? *failedTask : *items_->list.front().task;
    std::string text = fallback::realLastError(*lib, nullptr);
    BRAID_WARN("BRAID_SHADOW (rank %d): %s #%llu on the real NCCL (%s) returned %d: %s; not checked", t.comm->rank,
               t.caller, static_cast<unsigned long long>(items_->list.front().seq), fallback::describe(*lib).c_str(),
               static_cast<int>(rc), text.c_str());
    if (shadowSettings().strict)
      return fail(ncclInternalError, "%s (rank %d): BRAID_SHADOW_STRICT=1: the real NCCL's %s failed (%d): %s", t.caller,
                  t.comm->rank, t.caller, static_cast<int>(rc), text.c_str());
    return ncclSuccess;
  }
  // 2. The checks, behind both libraries' work on each call's stream.
  const auto& settings = shadowSettings();
  for (auto& item : items_->list) {
    const Task& t = *item.task;
    Shadow* sh = item.sh;
    DeviceScope device(t.comm->cudaDev);
    cudaError_t e = cudaSuccess;
    if (item.extent.compare) {
      std::lock_guard<std::mutex> lock(sh->mutex);
      if (sh->freeSlots.empty()) {  // 64 checks in flight: wait for the oldest
        cudaEventSynchronize(sh->events[sh->pending.front().slot]);
        collect(t.comm, sh, /*wait=*/false);
      }
      int slot = sh->freeSlots.back();
      sh->freeSlots.pop_back();
      const kernels::CompareSpec spec = kernels::compareSpecFor(t.type, t.op, item.extent.reduces, t.comm->nRanks,
                                                                static_cast<int>(sizeOfType(t.type)));
      const size_t n = item.extent.out;
      if (settings.perturbIndex >= 0 && static_cast<size_t>(settings.perturbIndex) < n)
        e = kernels::launchShadowPerturb(item.out, static_cast<size_t>(settings.perturbIndex), spec.elemBytes,
                                         kernels::perturbMask(spec), t.stream);
      if (e == cudaSuccess) e = kernels::launchShadowCompare(t.recvbuff, item.out, n, spec, sh->devSlots + slot, t.stream);
      if (e == cudaSuccess)
        e = cudaMemcpyAsync(sh->hostSlots + slot, sh->devSlots + slot, sizeof(kernels::ShadowResult),
                            cudaMemcpyDeviceToHost, t.stream);
      if (e == cudaSuccess) e = cudaEventRecord(sh->events[slot], t.stream);
      if (e == cudaSuccess) {
        sh->pending.push_back({slot, item.seq, t.caller, t.count, t.type, t.op, item.extent.reduces, n});
      } else {
        sh->freeSlots.push_back(slot);
      }
    }
    if (e == cudaSuccess && item.in) e = cudaFreeAsync(item.in, t.stream);
    if (e == cudaSuccess && item.out) e = cudaFreeAsync(item.out, t.stream);
    item.taken = e == cudaSuccess;
    if (e != cudaSuccess) {
      cudaGetLastError();
      return fail(ncclUnhandledCudaError, "%s (rank %d): BRAID_SHADOW's check on the call's stream failed: %s",
                  t.caller, t.comm->rank, cudaText(e));
    }
  }
  return ncclSuccess;
}

namespace {
// The communicator's shadow if it has one (a reference kept, so that it outlives the lock).
std::shared_ptr<Shadow> existingShadow(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(comm->realMutex);
  return comm->shadow;
}
}  // namespace

ncclResult_t pollShadow(ncclComm* comm, const char* caller) {
  if (shadowSettings().every == 0) return ncclSuccess;
  std::shared_ptr<Shadow> sh = existingShadow(comm);
  if (!sh) return ncclSuccess;
  std::lock_guard<std::mutex> lock(sh->mutex);
  collect(comm, sh.get(), /*wait=*/false);
  return strictResult(comm, sh.get(), caller);
}

ncclResult_t drainShadow(ncclComm* comm, const char* caller) {
  if (shadowSettings().every == 0) return ncclSuccess;
  std::shared_ptr<Shadow> sh = existingShadow(comm);
  if (!sh) return ncclSuccess;
  std::lock_guard<std::mutex> lock(sh->mutex);
  DeviceScope device(sh->dev);
  collect(comm, sh.get(), /*wait=*/true);
  return strictResult(comm, sh.get(), caller);
}

void releaseShadow(ncclComm* comm) {
  std::shared_ptr<Shadow> sh;
  {
    std::lock_guard<std::mutex> lock(comm->realMutex);
    sh = std::move(comm->shadow);
  }
  sh.reset();  // ~Shadow: waits for its events (bounded: the kernels have stopped), frees
}

}  // namespace braid::api
