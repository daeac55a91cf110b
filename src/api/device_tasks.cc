// Device-memory tasks: each communicator's share of the group becomes one GPU executor
// launch on the caller's stream. Nothing here waits for the GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <thread>

#include "api/call_check.h"
#include "api/device_resources.h"
#include "api/launch_replay.h"
#include "api/plan.h"
#include "api/redop.h"
#include "api/task.h"
#include "api/tuning.h"
#include "core/comm.h"
#include "core/cuda_scope.h"
#include "core/log.h"
#include "core/numeric.h"
#include "kernels/copy.h"
#include "kernels/executor.h"
#include "kernels/pack.h"

namespace braid::api {
namespace {

// The executor's op codes mirror the host engine's (redOpFor converts by value).
static_assert(int(kernels::RedKind::Sum) == int(host::HostOpKind::Sum) && int(kernels::RedKind::Prod) == int(host::HostOpKind::Prod) &&
                  int(kernels::RedKind::Max) == int(host::HostOpKind::Max) && int(kernels::RedKind::Min) == int(host::HostOpKind::Min) &&
                  int(kernels::RedKind::PreMulSum) == int(host::HostOpKind::PreMulSum) &&
                  int(kernels::RedKind::SumPostDiv) == int(host::HostOpKind::SumPostDiv),
              "kernels::RedKind must equal host::HostOpKind, code for code");

ncclResult_t cudaFail(const Task& t, const char* what, cudaError_t e) {
  cudaGetLastError();
  return fail(ncclUnhandledCudaError, "%s (rank %d): %s failed: %s", t.caller, t.comm->rank, what, cudaGetErrorString(e));
}

ncclResult_t redOpFor(const Task& t, kernels::RedOp* out) {
  ncclComm* comm = t.comm;
  out->nRanks = comm->nRanks;
  if (static_cast<int>(t.op) >= ncclNumOps) {
    std::lock_guard<std::mutex> lock(comm->userOpsMutex);
    const BraidUserOp& user = comm->userOps[static_cast<size_t>(t.op) - ncclNumOps];
    if (user.residence == ncclScalarDevice) {
      out->kind = kernels::RedKind::PreMulSum;
      out->deviceScalar = user.devScalar;  // read by the kernel when it runs, as NCCL does
      return ncclSuccess;
    }
  }
  host::HostOp hop;
  BRAID_CHECK(hostOpFor(comm, t.op, t.type, t.caller, &hop));
  out->kind = static_cast<kernels::RedKind>(hop.kind);
  out->scalarBits = hop.scalar;
  return ncclSuccess;
}

struct CommLaunch {
  ncclComm* comm = nullptr;
  GpuResources* res = nullptr;
  std::vector<const Task*> tasks;
  std::deque<algo::Lane> p2pLanes;
  kernels::Launch launch;
  GpuResources::Links sends, recvs;  // sorted and unique once prepared
  bool connected = false;  // every link in sends/recvs exists, and launch has their ends
  std::vector<void*> scratch;  // stream-ordered copies for in-place AlltoAll and send/recv
  std::vector<CallDesc> calls;  // the tasks as numbered calls (hang reports, the call check)
  // The protocol and slices per step of the whole launch, the same on every rank (prepare).
  algo::Protocol protocol = algo::Protocol::Simple;
  int slicesPerStep = 0;
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  std::vector<Copy> selfCopies;  // send/recv pairs to oneself: copies before the launch
  // A served rank (served.h): the copies the leader makes before the kernels, and its scratch.
  std::vector<ServedCopy> servedCopies;
  std::vector<size_t> servedScratch;
  std::optional<LaunchReplay::Key> replayKey;  // set where the launch may be kept for replays
};

// The numbered calls of a launch end when its work on the stream does (tracked by an event;
// a served rank's by its `done` word, no operation in its stream), at once when it was captured
// into a graph (replays are not calls), or when it failed.
void trackCalls(CommLaunch& cl, bool launched) {
  if (const ServedMember* served = cl.res != nullptr ? cl.res->served() : nullptr; launched && served != nullptr) {
    cl.comm->calls.enqueued(served->doneWord(), served->lastPost());  // graph capture is refused there
    return;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (launched && cudaStreamIsCapturing(cl.launch.stream, &capture) != cudaSuccess) {
    (void)cudaGetLastError();
    capture = cudaStreamCaptureStatusActive;  // unknown: do not record an event into it
  }
  if (!launched || capture != cudaStreamCaptureStatusNone || !cl.comm->calls.enqueued(cl.launch.stream))
    cl.comm->calls.complete();
}

// A stream-ordered copy of an input that the call (or group) may overwrite before it has
// sent it: scratch freed after the launch, or, under capture, a buffer the graph holds (not a
// graph memory node: kernels/graph_work.h says why).
ncclResult_t stagedCopy(CommLaunch& cl, const Task& t, const void* src, size_t bytes, void** out) {
  if (cl.res->served()) {  // the leader copies into scratch of its own
    *out = scratchToken(cl.servedScratch.size());
    cl.servedScratch.push_back(bytes);
    cl.servedCopies.push_back({*out, src, bytes});
    return ncclSuccess;
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(t.stream, &status);
  if (e != cudaSuccess) return cudaFail(t, "cudaStreamIsCapturing", e);
  if (status != cudaStreamCaptureStatusNone) {
    unsigned char* held = nullptr;
    e = cl.res->graphWork()->hold(bytes, t.stream, &held);
    *out = held;
  } else {
    e = cl.res->scratch(bytes, t.stream, out);
    if (e == cudaSuccess) cl.scratch.push_back(*out);
  }
  if (e != cudaSuccess) return cudaFail(t, "allocating a copy of an input the call overwrites", e);
  e = cudaMemcpyAsync(*out, src, bytes, cudaMemcpyDeviceToDevice, t.stream);
  return e == cudaSuccess ? ncclSuccess : cudaFail(t, "cudaMemcpyAsync (a copy of an input the call overwrites)", e);
}

void noteLinks(CommLaunch& cl, const algo::Lane& lane) {
  for (const algo::Step& s : lane.steps) {
    if (s.sendPeer >= 0) cl.sends.push_back({lane.channel, s.sendPeer});
    if (s.recvPeer >= 0) cl.recvs.push_back({lane.channel, s.recvPeer});
  }
}

ncclResult_t planCollective(CommLaunch& cl, const Task& t) {
  ncclComm* comm = t.comm;
  kernels::OpWork op;
  op.type = t.type;
  op.reduces = algo::collReduces(t.coll);
  if (op.reduces) BRAID_CHECK(redOpFor(t, &op.red));
  void* in = const_cast<void*>(t.sendbuff);
  size_t es = sizeOfType(t.type);
  // In place, a block may arrive before this rank has sent its own block to that peer.
  if (t.coll == algo::Coll::AlltoAll && t.sendbuff == t.recvbuff)
    BRAID_CHECK(stagedCopy(cl, t, t.sendbuff, t.count * comm->nRanks * es, &in));
  op.buffers = {in, t.recvbuff};
  // Chosen for the protocol the launch runs (a group's later collectives run its first one's,
  // not their own best). From the communicator's cache: a 64-channel ring all-reduce takes
  // ~30 us to build.
  const algo::TunerChoice choice = comm->tuning->choose(t, cl.protocol).best;
  const kernels::FifoShape fifo = GpuResources::fifoShape(cl.protocol);
  const algo::RankPlan& plan = comm->devicePlans->get(
      collArgsFor(t, choice.channels, 16, kernels::slotDataBytes(cl.protocol, fifo.slotBytes) * fifo.nSlots),
      choice.algorithm);
  int opIndex = static_cast<int>(cl.launch.ops.size());
  cl.launch.ops.push_back(std::move(op));
  for (const algo::Lane& lane : plan.lanes) {
    cl.launch.lanes.push_back({opIndex, &lane});
    noteLinks(cl, lane);
  }
  return ncclSuccess;
}

// A group's sends to oneself and receives from oneself that carry bytes, the k-th send with the
// k-th receive (as buildP2p pairs them): {send, recv} indices into `p2p`. Each pair is a copy by
// the copy kernel (kernels::copyAsync, at copy speed) instead of a lane of the executor. None
// when they do not pair (another number of each, or other sizes): buildP2p and the launch then
// report the mismatch.
std::vector<std::pair<size_t, size_t>> selfPairs(std::span<const Task* const> p2p, int rank) {
  std::vector<size_t> sends, recvs;
  for (size_t i = 0; i < p2p.size(); ++i)
    if (p2p[i]->root == rank && p2p[i]->count > 0) (p2p[i]->isSend ? sends : recvs).push_back(i);
  std::vector<std::pair<size_t, size_t>> pairs;
  if (sends.size() != recvs.size()) return pairs;
  for (size_t k = 0; k < sends.size(); ++k) {
    const Task &s = *p2p[sends[k]], &r = *p2p[recvs[k]];
    if (s.count * sizeOfType(s.type) != r.count * sizeOfType(r.type)) return {};
    pairs.push_back({sends[k], recvs[k]});
  }
  return pairs;
}

// A copy onto itself is nothing to do (nccl-tests' in-place sendrecv at 1 rank: braid copied
// 64 MB twice, 71 us, where NCCL takes 1.7).
cudaError_t enqueueCopy(const CommLaunch::Copy& c, cudaStream_t stream) {
  return c.dst == c.src ? cudaSuccess : kernels::copyAsync(c.dst, c.src, c.bytes, stream);
}

// Copies without a launch of the executor (a 1-rank call): on the communicator's device (a
// legacy default stream is the current device's), on `first`'s stream. Keep it lean: this is
// the whole host path of such a call.
ncclResult_t enqueueCopies(const Task& first, std::span<const CommLaunch::Copy> copies, const char* what) {
  DeviceScope scope(first.comm->cudaDev);
  if (scope.error() != cudaSuccess) return cudaFail(first, "cudaSetDevice", scope.error());
  BRAID_CHECK(kernels::preloadKernels(first.comm->cudaDev));
  for (const CommLaunch::Copy& c : copies)
    if (cudaError_t e = enqueueCopy(c, first.stream); e != cudaSuccess) return cudaFail(first, what, e);
  return ncclSuccess;
}

ncclResult_t planP2p(CommLaunch& cl, const std::vector<const Task*>& p2p) {
  ncclComm* comm = cl.comm;
  std::vector<algo::P2pOp> ops;
  std::vector<void*> bufs(2 * p2p.size(), nullptr);
  for (size_t i = 0; i < p2p.size(); ++i) {
    const Task& t = *p2p[i];
    // The same parts on both ends; chosen for the launch's protocol (a collective's, when grouped with one).
    const algo::TunerChoice choice = comm->tuning->choose(t, cl.protocol).best;
    ops.push_back({t.isSend, t.root, t.count, static_cast<uint32_t>(choice.channels)});
    bufs[2 * i] = const_cast<void*>(t.sendbuff);
    bufs[2 * i + 1] = t.recvbuff;
  }
  const std::vector<std::pair<size_t, size_t>> pairs = selfPairs(p2p, comm->rank);
  // A send that a recv of the group may overwrite first reads a copy; not a send to oneself
  // into the very same bytes (enqueueCopy).
  std::vector<bool> inPlaceSelf(p2p.size(), false);
  for (auto [s, r] : pairs) inPlaceSelf[s] = p2p[s]->sendbuff == p2p[r]->recvbuff;
  for (size_t i = 0; i < p2p.size(); ++i) {
    const Task& t = *p2p[i];
    const size_t bytes = t.count * sizeOfType(t.type);
    if (t.isSend && bytes > 0 && !inPlaceSelf[i] && sendOverlapsARecv(t, p2p))
      BRAID_CHECK(stagedCopy(cl, t, t.sendbuff, bytes, &bufs[2 * i]));
  }
  for (auto [s, r] : pairs) {  // copies: buildP2p sees them as empty
    cl.selfCopies.push_back({bufs[2 * r + 1], bufs[2 * s], ops[s].count * sizeOfType(p2p[s]->type)});
    ops[s].count = ops[r].count = 0;
  }
  algo::RankPlan plan = algo::buildP2p(comm->rank, comm->nRanks, ops);
  // One op per P2P task (its type), all sharing the group's buffer table.
  int firstOp = static_cast<int>(cl.launch.ops.size());
  for (const Task* t : p2p) {
    kernels::OpWork op;
    op.type = t->type;
    op.reduces = false;
    op.buffers = bufs;
    cl.launch.ops.push_back(op);
  }
  for (algo::Lane lane : plan.lanes) {
    lane.channel += kP2pChannelBase;  // never shares a connection with collective lanes
    const algo::Step& s = lane.steps.front();
    uint16_t buf = s.src != algo::kNoBuf ? s.src : s.dst;
    algo::Lane& kept = cl.p2pLanes.emplace_back(std::move(lane));
    cl.launch.lanes.push_back({firstOp + buf / 2, &kept});
    noteLinks(cl, kept);
  }
  return ncclSuccess;
}

ncclResult_t prepare(CommLaunch& cl) {
  ncclComm* comm = cl.comm;
  if (!comm->device) {
    GpuResources* res = nullptr;
    BRAID_CHECK(GpuResources::create(comm, &res));
    setCommDevice(comm, res);
    if (!res->served()) BRAID_CHECK(kernels::preloadKernels(comm->cudaDev));  // a served rank runs none
  }
  cl.res = static_cast<GpuResources*>(comm->device.get());
  if (comm->served && comm->served->plan.any()) {
    const Task& first = *cl.tasks.front();
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaError_t e = cudaStreamIsCapturing(first.stream, &capture); e != cudaSuccess)
      return cudaFail(first, "cudaStreamIsCapturing", e);
    if (capture != cudaStreamCaptureStatusNone)
      return fail(ncclInvalidUsage,
                  "%s (rank %d): CUDA graph capture on a communicator whose GPU is shared by ranks of several processes "
                  "while MPS is off: one process runs the GPU work of the others (BRAID_SERVED), which a replay of this "
                  "rank's graph could not start. Fix: start MPS (nvidia-cuda-mps-control -d), or set BRAID_SERVED=0 "
                  "(each process then runs its own kernels, at time-slice speed)",
                  first.caller, comm->rank);
  }
  // One protocol and slicing for the launch, the same on every rank (CommTuning::launchProtocol
  // says why). The slicing, and every task's plan (planCollective, planP2p choose under
  // cl.protocol), follow the protocol that runs, not the one asked (a slicing taken from the
  // asked protocol once differed between the ends: wrong data and a hang across hosts with
  // NCCL_PROTO=LL128, where LL128 and LL both become Simple).
  cl.protocol = cl.res->usableProtocol(comm->tuning->launchProtocol(cl.tasks));
  cl.slicesPerStep = algo::slicesPerStepOf(cl.protocol);
  std::vector<const Task*> p2p;
  for (const Task* t : cl.tasks) {
    if (t->coll == algo::Coll::SendRecv) p2p.push_back(t);
    else BRAID_CHECK(planCollective(cl, *t));
  }
  if (!p2p.empty()) BRAID_CHECK(planP2p(cl, p2p));
  for (GpuResources::Links* links : {&cl.sends, &cl.recvs}) {
    std::sort(links->begin(), links->end());
    links->erase(std::unique(links->begin(), links->end()), links->end());
  }
  return ncclSuccess;
}

// The launch's last collective number and its send/recv ops with each peer (served.h's gate).
std::vector<ServedGate> gatesOf(const CommLaunch& cl) {
  std::vector<ServedGate> perRank(static_cast<size_t>(cl.comm->nRanks));
  uint64_t collSeq = 0;
  for (const CallDesc& d : cl.calls) collSeq = std::max(collSeq, d.seq);
  for (ServedGate& g : perRank) g.collSeq = collSeq;
  for (const Task* t : cl.tasks)
    if (t->coll == algo::Coll::SendRecv) ++(t->isSend ? perRank[size_t(t->root)].sends : perRank[size_t(t->root)].recvs);
  return perRank;
}

// The launch's one collective, when it holds one and nothing else (served.h).
SoleCollective soleCollectiveOf(const CommLaunch& cl) {
  if (cl.tasks.size() != 1 || cl.tasks[0]->coll == algo::Coll::SendRecv) return {};
  const Task& t = *cl.tasks[0];
  return SoleCollective{true, t.coll, t.count, t.type, t.root};
}

// The launch's first collective number, for the leader's gate (served.h); 0 when it has none, or
// has sends or receives.
uint64_t firstCollToGate(const CommLaunch& cl) {
  for (const Task* t : cl.tasks)
    if (t->coll == algo::Coll::SendRecv) return 0;
  uint64_t first = 0;
  for (const CallDesc& d : cl.calls)
    if (d.seq > 0 && (first == 0 || d.seq < first)) first = d.seq;
  return first;
}

ncclResult_t connectAndLaunch(CommLaunch& cl) {
  kernels::Launch& L = cl.launch;
  if (!cl.connected) {
    BRAID_CHECK(cl.res->ensureLinks(cl.protocol, cl.sends, cl.recvs));
    if (!cl.res->linkEnds(cl.protocol, cl.sends, cl.recvs, &L))
      return fail(ncclInternalError, "rank %d: a GPU connection is missing right after it was made", cl.comm->rank);
  }
  const Task& first = *cl.tasks.front();
  L.cudaDev = cl.comm->cudaDev;
  L.stream = first.stream;
  L.abortFlag = cl.res->abortWordDevice();
  L.errorOut = cl.res->errorWordDevice();
  L.workCache = cl.res->workCache();
  L.graphWork = cl.res->graphWork();
  if (cl.slicesPerStep > 0) L.slicesPerStep = cl.slicesPerStep;
  L.peersOnThisGpu = !cl.res->systemScope();
  for (const GpuResources::Links* links : {&cl.sends, &cl.recvs})
    for (auto& [channel, peer] : *links) L.peersOnThisGpu = L.peersOnThisGpu && cl.res->peerOnThisGpu(peer);
  // Work on other streams of the group: the launch stream waits for them, they wait for it.
  std::vector<cudaStream_t> others;
  for (const Task* t : cl.tasks)
    if (t->stream != first.stream && std::find(others.begin(), others.end(), t->stream) == others.end())
      others.push_back(t->stream);
  auto joinStreams = [&](cudaStream_t from, cudaStream_t to) -> cudaError_t {
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ev, from);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(to, ev, 0);
    cudaEventDestroy(ev);
    return e;
  };
  for (cudaStream_t s : others)
    if (cudaError_t e = joinStreams(s, L.stream); e != cudaSuccess) return cudaFail(first, "joining streams", e);
  ServedMember* served = cl.res->served();
  for (const CommLaunch::Copy& c : cl.selfCopies) {
    if (served) {
      if (c.dst != c.src) cl.servedCopies.push_back({c.dst, c.src, c.bytes});
    } else if (cudaError_t e = enqueueCopy(c, L.stream); e != cudaSuccess) {
      return cudaFail(first, "the copy kernel's launch (a send/recv to oneself)", e);
    }
  }
  unsigned widest = 0;
  cl.res->launched(kernels::channelsOf(L));  // before the kernel can start: the proxy is awake when its first slot is
  if (served) {
    const auto start = ncclComm::EnqueueTimes::Clock::now();
    BRAID_CHECK(served->post(L, soleCollectiveOf(cl), cl.servedCopies, cl.servedScratch, gatesOf(cl)));
    ncclComm::EnqueueTimes::add(cl.comm->enqueueTimes.launchNs, start);
  } else if (cl.comm->served && cl.comm->served->plan.any()) {
    const std::vector<ServedGate> gates = gatesOf(cl);
    const auto start = ncclComm::EnqueueTimes::Clock::now();
    kernels::PackedLaunch packed;
    BRAID_CHECK(kernels::packLaunch(L, &packed));
    bool fused = false;
    BRAID_CHECK(cl.comm->served->launchFused(L, packed, soleCollectiveOf(cl), firstCollToGate(cl), gates[0].collSeq,
                                             &widest, &fused));
    if (!fused) {
      BRAID_CHECK(cl.comm->served->gate(L.stream, firstCollToGate(cl)));
      std::lock_guard<std::mutex> lock(servedLaunchMutex(cl.comm->cudaDev));
      BRAID_CHECK(kernels::enqueuePacked(L, packed, &widest));
    }
    cl.comm->served->leaderLaunched(gates);  // a no-op unless this rank leads
    ncclComm::EnqueueTimes::add(cl.comm->enqueueTimes.launchNs, start);
  } else {
    // Kept for replays only when nothing but the key and the connections went into it.
    const bool keep = cl.replayKey && cl.scratch.empty() && cl.selfCopies.empty() && others.empty();
    kernels::PackedLaunch packed;
    const auto start = ncclComm::EnqueueTimes::Clock::now();
    BRAID_CHECK(kernels::launch(L, &widest, keep ? &packed : nullptr));
    ncclComm::EnqueueTimes::add(cl.comm->enqueueTimes.launchNs, start);
    if (keep) cl.res->replay().keep(std::move(*cl.replayKey), cl.tasks, L, std::move(packed));
  }
  cl.comm->tuning->noteBlocks(widest);
  for (void* p : cl.scratch)
    if (cudaError_t e = cudaFreeAsync(p, L.stream); e != cudaSuccess) return cudaFail(first, "cudaFreeAsync", e);
  for (cudaStream_t s : others)
    if (cudaError_t e = joinStreams(L.stream, s); e != cudaSuccess) return cudaFail(first, "joining streams", e);
  return ncclSuccess;
}

ncclResult_t connectLaunchAndTrack(CommLaunch& cl) {
  ncclResult_t rc = connectAndLaunch(cl);
  trackCalls(cl, rc == ncclSuccess);
  return rc;
}

// The kept launch that `cl` repeats (launch_replay.h), or null; sets cl.replayKey where `cl`
// may be kept. A launch of one communicator whose ranks run their own kernels (not served).
const LaunchReplay::Entry* replayOf(CommLaunch& cl) {
  if (!cl.comm->device || (cl.comm->served && cl.comm->served->plan.any())) return nullptr;
  cl.res = static_cast<GpuResources*>(cl.comm->device.get());
  if (cl.res->served()) return nullptr;
  cl.replayKey = LaunchReplay::keyOf(cl.tasks);
  return cl.replayKey ? cl.res->replay().find(*cl.replayKey, cl.tasks) : nullptr;
}

ncclResult_t replay(CommLaunch& cl, const LaunchReplay::Entry& kept) {
  DeviceScope scope(cl.comm->cudaDev);  // the call's completion event is made on its device
  if (scope.error() != cudaSuccess) {
    trackCalls(cl, false);
    return cudaFail(*cl.tasks.front(), "cudaSetDevice", scope.error());
  }
  RelaxedCapture relaxed;  // a large launch's work kept for a graph being captured is allocated
  cl.launch.stream = kept.settings.stream;
  cl.res->launched(kept.channels);  // before the kernel can start, as connectAndLaunch
  const auto start = ncclComm::EnqueueTimes::Clock::now();
  ncclResult_t rc = kernels::enqueuePacked(kept.settings, kept.packed);
  ncclComm::EnqueueTimes::add(cl.comm->enqueueTimes.replayLaunchNs, start);
  trackCalls(cl, rc == ncclSuccess);
  return rc;
}

// One rank: every collective with a built-in op is a copy (sum, prod, max, min and avg of
// one value are the value), and in place there is nothing to do.
bool copiesOnOneRank(const Task& t) {
  return t.comm->nRanks == 1 && t.coll != algo::Coll::SendRecv &&
         (!algo::collReduces(t.coll) || static_cast<int>(t.op) < ncclNumOps);
}

// A 1-rank collective: one copy (enqueueCopies).
ncclResult_t copyOnOneRank(const Task& t) {
  if (t.sendbuff == t.recvbuff) return ncclSuccess;
  const CommLaunch::Copy copy{t.recvbuff, t.sendbuff, t.count * sizeOfType(t.type)};
  return enqueueCopies(t, std::span(&copy, 1), "the copy kernel's launch");
}

// Adds the host time of one run to each of its communicators' EnqueueTimes, however it returns.
class RunClock {
 public:
  explicit RunClock(std::span<const Task* const> tasks) : tasks_(tasks) {}
  ~RunClock() {
    std::vector<ncclComm*> counted;  // the run's communicators, each once
    for (const Task* task : tasks_) {
      if (std::find(counted.begin(), counted.end(), task->comm) != counted.end()) continue;
      counted.push_back(task->comm);
      ncclComm::EnqueueTimes& t = task->comm->enqueueTimes;
      (replayed_ ? t.replays : t.runs).fetch_add(1, std::memory_order_relaxed);
      ncclComm::EnqueueTimes::add(replayed_ ? t.replayNs : t.runNs, start_);
    }
  }
  ncclComm::EnqueueTimes::Clock::time_point start() const { return start_; }
  void replayed() { replayed_ = true; }

 private:
  std::span<const Task* const> tasks_;
  ncclComm::EnqueueTimes::Clock::time_point start_ = ncclComm::EnqueueTimes::Clock::now();
  bool replayed_ = false;
};

// A 1-rank communicator's group of sends and receives to itself, on one stream, that pair up
// (selfPairs) with no send reading bytes that another pair's receive writes: `copies` gets the
// pairs' copies, and nothing needs planning (nccl-tests' 1-rank sendrecv paid ~2.7 us of host
// time for it, above NCCL's whole call). False, and `copies` untouched, otherwise.
bool selfCopiesOnOneRank(std::span<const Task* const> tasks, std::vector<CommLaunch::Copy>* copies) {
  const Task& first = *tasks.front();
  if (first.comm->nRanks != 1) return false;
  for (const Task* t : tasks)
    if (t->comm != first.comm || t->coll != algo::Coll::SendRecv || t->stream != first.stream) return false;
  const std::span<const Task* const> p2p = tasks;
  const std::vector<std::pair<size_t, size_t>> pairs = selfPairs(p2p, 0);
  if (2 * pairs.size() != p2p.size()) return false;
  for (auto [s, r] : pairs)
    if (p2p[s]->sendbuff != p2p[r]->recvbuff && sendOverlapsARecv(*p2p[s], p2p)) return false;
  for (auto [s, r] : pairs)
    copies->push_back({p2p[r]->recvbuff, p2p[s]->sendbuff, p2p[s]->count * sizeOfType(p2p[s]->type)});
  return true;
}


}  // namespace

ncclResult_t runDeviceTasks(std::span<const Task* const> tasks) {
  RunClock clock(tasks);
  if (std::vector<CommLaunch::Copy> copies; !tasks.empty() && selfCopiesOnOneRank(tasks, &copies))
    return enqueueCopies(*tasks.front(), copies, "the copy kernel's launch (a send/recv to oneself)");
  size_t kernelTasks = 0;
  for (const Task* t : tasks) {
    if (copiesOnOneRank(*t)) BRAID_CHECK(copyOnOneRank(*t));
    else ++kernelTasks;
  }
  if (kernelTasks == 0) return ncclSuccess;
  std::deque<CommLaunch> launches;
  std::map<ncclComm*, CommLaunch*> byComm;
  for (const Task* t : tasks) t->comm->devicePlans->startRun();  // before any plan of this run is taken
  for (const Task* t : tasks) {
    if (copiesOnOneRank(*t)) continue;
    auto it = byComm.find(t->comm);
    if (it == byComm.end()) {
      CommLaunch& cl = launches.emplace_back();
      cl.comm = t->comm;
      it = byComm.emplace(t->comm, &cl).first;
    }
    it->second->tasks.push_back(t);
  }
  // Every rank numbers its calls; with BRAID_CHECK_CALLS=1 the ranks compare them before any
  // kernel is enqueued (a mismatched kernel would wait for data that never comes).
  for (CommLaunch& cl : launches) {
    for (const Task* t : cl.tasks) cl.calls.push_back(callDescOf(*t));
    cl.comm->calls.begin(cl.calls.data(), cl.calls.size());
  }
  if (checkDeviceCalls()) {
    std::vector<host::LaneProgram> programs;
    CallCheck check;
    for (CommLaunch& cl : launches) check.add(cl.comm, cl.calls, &programs);
    ncclResult_t rc = programs.empty() ? ncclSuccess : host::runPrograms(programs);
    if (rc != ncclSuccess) {
      for (CommLaunch& cl : launches) cl.comm->calls.complete();
      return rc;
    }
  }
  if (launches.size() == 1)
    if (const LaunchReplay::Entry* kept = replayOf(launches.front())) {
      clock.replayed();
      return replay(launches.front(), *kept);
    }
  DeviceScope restore;      // the loops below switch devices
  RelaxedCapture relaxed;  // the first call may be captured, and it allocates the connections
  bool connecting = false;
  auto untrack = [&launches]() {
    for (CommLaunch& cl : launches) cl.comm->calls.complete();
  };
  for (CommLaunch& cl : launches) {
    ncclResult_t rc = ncclSuccess;
    if (cudaError_t e = cudaSetDevice(cl.comm->cudaDev); e != cudaSuccess) rc = cudaFail(*cl.tasks.front(), "cudaSetDevice", e);
    if (rc == ncclSuccess) rc = prepare(cl);
    if (rc != ncclSuccess) {
      untrack();
      return rc;
    }
    cl.connected = cl.res->linkEnds(cl.protocol, cl.sends, cl.recvs, &cl.launch);
    connecting = connecting || !cl.connected;
  }
  for (CommLaunch& cl : launches) ncclComm::EnqueueTimes::add(cl.comm->enqueueTimes.planNs, clock.start());
  if (launches.size() == 1 || !connecting) {
    ncclResult_t first = ncclSuccess;
    for (CommLaunch& cl : launches) {
      ncclResult_t rc = ncclSuccess;
      if (cudaError_t e = cudaSetDevice(cl.comm->cudaDev); e != cudaSuccess) rc = cudaFail(*cl.tasks.front(), "cudaSetDevice", e);
      if (rc == ncclSuccess) rc = connectLaunchAndTrack(cl);
      else trackCalls(cl, false);
      if (first == ncclSuccess) first = rc;
    }
    return first;
  }
  // Connection setup waits for peers that may be other ranks of this thread's group.
  std::vector<ncclResult_t> results(launches.size(), ncclSuccess);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < launches.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        RelaxedCapture relaxedHere;
        cudaError_t e = cudaSetDevice(launches[i].comm->cudaDev);
        if (e == cudaSuccess) {
          results[i] = connectLaunchAndTrack(launches[i]);
        } else {
          results[i] = cudaFail(*launches[i].tasks.front(), "cudaSetDevice", e);
          trackCalls(launches[i], false);
        }
      } catch (const std::exception& ex) {  // no exception may leave a thread
        results[i] = fail(ncclInternalError, "%s (rank %d): %s", launches[i].tasks.front()->caller,
                          launches[i].comm->rank, ex.what());
        trackCalls(launches[i], false);
      }
    });
  for (auto& th : threads) th.join();
  for (ncclResult_t r : results)
    if (r != ncclSuccess) return r;
  return ncclSuccess;
}

}  // namespace braid::api
