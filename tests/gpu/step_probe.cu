// What one ring step of braid's interpreter costs between blocks of one GPU, beside the bare
// hop of hop_probe.cu (issue 13). The same token ring -- N blocks, each a rank, LAPS laps --
// but every hop is a step run by the executor's own lane loop (kernels/executor_kernel.cuh
// runLane, with its protocol: the code every launch runs), on connection ends laid out as the
// transport lays them (transport/p2p_fifo.h), 8 bytes of float per step. Two patterns:
//   token  block 0 sends, then receives; every other block receives and sends on in one step
//          (recv-copy-send): one step's latency from data in to data out, plus the hop
//   phase  every block runs the same steps at once, as the ranks of a ring all-reduce do: a
//          send, LAPS recv-copy-sends, a receive. A step then costs the hop or the work between
//          two steps, whichever is longer, plus the step's own latency.
//   phase-reg  phase, each step made in registers rather than loaded from the work
//   traced     the phase pattern's LL step written out, thread 0 timing its parts (printed first)
//
//   gpu_step_probe [LAPS]      (default 2000; exit 77 without a GPU)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/executor_kernel.cuh"
#include "kernels/proto_ll.cuh"
#include "kernels/proto_ll128.cuh"
#include "kernels/proto_simple.cuh"

#define PROBE_CHECK(call)                                                                             \
  do {                                                                                                \
    cudaError_t e_ = (call);                                                                          \
    if (e_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "step_probe: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, \
                   __LINE__);                                                                         \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

namespace {

using namespace braid::kernels;
using namespace braid::kernels::device;

constexpr size_t kCounterWords = 16;  // 128 bytes per counter (+ own step, + last seen)

struct Ring {
  DevSendEnd* sends;  // [b]: block b's send end (to b+1)
  DevRecvEnd* recvs;  // [b]: block b's recv end (from b-1)
  void** buffers;     // [2b]: block b's input, [2b+1]: its output
  DevStep* steps;     // [b * stepsPerBlock ...]
  uint32_t stepsPerBlock;
};

// Block b's lane: float sum over the ring's tables, two buffers (its input and output).
__device__ inline LaneContext laneOf(const KernelParams& p, const Ring& r, int b) {
  LaneContext c;
  c.params = &p;
  c.sends = r.sends;
  c.recvs = r.recvs;
  c.buffers = r.buffers + 2 * b;
  c.op = DevOp{};
  c.op.kind = uint8_t(RedKind::Sum);
  c.op.reduces = 1;
  c.op.nRanks = int32_t(gridDim.x);
  c.op.nBuffers = 2;
  return c;
}

__host__ __device__ inline DevStep makeStep(uint16_t src, uint16_t dst, int16_t recvConn, int16_t sendConn) {
  DevStep s{};
  s.count = 2;  // 8 bytes of float
  s.src = src;
  s.dst = dst;
  s.recvConn = recvConn;
  s.sendConn = sendConn;
  return s;
}

// The phase pattern with each step made in registers instead of loaded from the work: the
// lane loop of runLane, less the load of each step.
template <class P>
__global__ void __launch_bounds__(kMaxThreads, 1) phaseInRegisters(const __grid_constant__ KernelParams p, const Ring r,
                                                                   int laps) {
  __shared__ BlockShared sh;
  setLaneWords({nullptr, nullptr});  // the launch's abort and error words
  const int b = blockIdx.x;
  LaneContext c = laneOf(p, r, b);
  Combiner<Elem<ElemType::Float32>, OpSum> combine{};
  combine.nRanks = c.op.nRanks;
  ConnCache cache{kNoConn, kNoConn, 0, 0, 0};
  const int16_t conn = int16_t(b);
  bool ok = true;
  for (int lap = 0; lap < laps && ok; ++lap) {
    const DevStep s = lap == 0          ? makeStep(0, kNoBufIndex, kNoConn, conn)
                      : lap == laps - 1 ? makeStep(kNoBufIndex, 1, conn, kNoConn)
                                        : makeStep(kNoBufIndex, 1, conn, conn);
    ok = runStep<P>(c, s, combine, sh, cache);
  }
  if (threadIdx.x == 0) {
    flushSend(cache, c.sends);
    flushRecv(cache, c.recvs);
    if (!ok) reportError(p, kDeviceBadWork);
  }
}

// The phase pattern's LL step written out (runConnectedStep's sequence for a one-slice step on
// held connections), thread 0 reading the SM clock between its parts; the sums of each part
// over all steps go to `parts` (block 0's, in clock cycles), with the clock rate beside.
constexpr int kParts = 6;  // room wait, first barrier, move (its poll included), closing barrier, post, rest
__global__ void __launch_bounds__(kMaxThreads, 1) phaseTracedLL(const __grid_constant__ KernelParams p, const Ring r,
                                                                int laps, unsigned long long* parts) {
  setLaneWords({nullptr, nullptr});
  const int b = blockIdx.x;
  const DevSendEnd out = r.sends[b];
  const DevRecvEnd in = r.recvs[b];
  float* dst = static_cast<float*>(r.buffers[2 * b + 1]);
  Combiner<Elem<ElemType::Float32>, OpSum> combine{};
  uint64_t sendStep = 0, recvStep = 0, seenHead = 0;
  unsigned long long sum[kParts] = {};
  const unsigned long long g0 = clock64();
  uint64_t ns0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns0));
  long long t = clock64();
  for (int lap = 0; lap < laps; ++lap) {
    const bool hasRecv = lap > 0, hasSend = lap < laps - 1;
    long long u;
    if (threadIdx.x == 0 && hasSend) {
      if (!waitRoom(p, out.head, sendStep, seenHead)) atomicExch(reinterpret_cast<unsigned*>(p.errorOut), 2u);
    }
    u = clock64(); sum[0] += u - t; t = u;
    __syncthreads();
    u = clock64(); sum[1] += u - t; t = u;
    SliceArgs a{};
    a.n = 2;
    a.dst = hasRecv ? dst : nullptr;
    a.src = hasRecv ? nullptr : r.buffers[2 * b];
    a.recv = hasRecv ? slotOf(in.fifo, recvStep, p) : nullptr;
    a.send = hasSend ? const_cast<char*>(slotOf(out.fifo, sendStep, p)) : nullptr;
    LineFlags f;
    f.recv = recvStep + 1;
    f.send = sendStep + 1;
    const bool moved = ProtoLL::move<Elem<ElemType::Float32>, OpSum>(a, f, combine, p);
    u = clock64(); sum[2] += u - t; t = u;
    if (__syncthreads_or(!moved)) break;
    u = clock64(); sum[3] += u - t; t = u;
    if (hasSend) ++sendStep;
    if (hasRecv) ++recvStep;
    if (threadIdx.x == 0) ProtoLL::post(p, hasSend ? &out : nullptr, hasRecv ? &in : nullptr, sendStep, recvStep);
    u = clock64(); sum[4] += u - t; t = u;
  }
  uint64_t ns1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns1));
  if (b == 0 && threadIdx.x == 0) {
    for (int i = 0; i < kParts - 1; ++i) parts[i] = sum[i];
    parts[kParts - 1] = clock64() - g0;  // all cycles
    parts[kParts] = ns1 - ns0;           // all nanoseconds
  }
}

template <class P>
__global__ void __launch_bounds__(kMaxThreads, 1) ringKernel(const __grid_constant__ KernelParams p, const Ring r) {
  __shared__ BlockShared sh;
  setLaneWords({nullptr, nullptr});
  const int b = blockIdx.x;
  LaneContext c = laneOf(p, r, b);
  if (!runLane<P, Elem<ElemType::Float32>, OpSum>(c, r.steps + size_t(b) * r.stepsPerBlock, r.stepsPerBlock, sh) &&
      threadIdx.x == 0)
    reportError(p, kDeviceBadWork);
}

DevStep step(uint16_t src, uint16_t dst, int16_t recvConn, int16_t sendConn) {
  return makeStep(src, dst, recvConn, sendConn);
}

enum Pattern { kToken, kPhase, kPhaseInRegisters, kPhaseTraced };

template <class P>
float runOnce(int n, int laps, int threads, Pattern pattern) {
  const bool phase = pattern != kToken;
  const FifoShape shape = defaultFifo(P::kId);  // the API's FIFO for this protocol
  const size_t kSlotBytes = shape.slotBytes, kSlots = shape.nSlots;
  // Each block's FIFO (receiving side) and counters: tail beside the FIFO's owner, head beside
  // the sender's, as the transport allocates them.
  char* fifos;
  uint64_t* counters;  // [b][0]: b's tail (recv side), [b][1]: b's head (send side)
  float* data;
  PROBE_CHECK(cudaMalloc(&fifos, size_t(n) * kSlots * kSlotBytes));
  PROBE_CHECK(cudaMalloc(&counters, size_t(n) * 2 * kCounterWords * sizeof(uint64_t)));
  PROBE_CHECK(cudaMalloc(&data, size_t(n) * 2 * 64));
  PROBE_CHECK(cudaMemset(fifos, 0, size_t(n) * kSlots * kSlotBytes));
  PROBE_CHECK(cudaMemset(counters, 0, size_t(n) * 2 * kCounterWords * sizeof(uint64_t)));
  PROBE_CHECK(cudaMemset(data, 0, size_t(n) * 2 * 64));
  auto tail = [&](int b) { return counters + (size_t(b) * 2) * kCounterWords; };
  auto head = [&](int b) { return counters + (size_t(b) * 2 + 1) * kCounterWords; };
  std::vector<DevSendEnd> sends(n);
  std::vector<DevRecvEnd> recvs(n);
  std::vector<void*> buffers(2 * n);
  for (int b = 0; b < n; ++b) {
    const int next = (b + 1) % n, prev = (b + n - 1) % n;
    sends[b] = {fifos + size_t(next) * kSlots * kSlotBytes, tail(next), head(b)};
    recvs[b] = {fifos + size_t(b) * kSlots * kSlotBytes, tail(b), head(prev)};
    buffers[2 * b] = data + size_t(2 * b) * 16;
    buffers[2 * b + 1] = data + size_t(2 * b + 1) * 16;
  }
  // token: block 0 runs a send step and a receive step per lap; the others one recv-copy-send
  // per lap, padded with empty steps (count 0, which the lane loop skips) to the same length.
  // phase: every block a send, recv-copy-sends, a receive: LAPS steps, no padding.
  const uint32_t perBlock = phase ? uint32_t(laps) : 2 * uint32_t(laps);
  std::vector<DevStep> steps(size_t(n) * perBlock);
  for (int b = 0; b < n; ++b) {
    DevStep* s = &steps[size_t(b) * perBlock];
    const int16_t conn = int16_t(b);
    for (int lap = 0; lap < laps; ++lap) {
      if (phase) {
        s[lap] = lap == 0           ? step(0, kNoBufIndex, kNoConn, conn)
                 : lap == laps - 1  ? step(kNoBufIndex, 1, conn, kNoConn)
                                    : step(kNoBufIndex, 1, conn, conn);
      } else if (b == 0) {
        s[2 * lap] = step(0, kNoBufIndex, kNoConn, conn);
        s[2 * lap + 1] = step(kNoBufIndex, 1, conn, kNoConn);
      } else {
        s[2 * lap] = step(kNoBufIndex, 1, conn, conn);
        s[2 * lap + 1] = DevStep{};
      }
    }
  }
  Ring r{};
  r.stepsPerBlock = perBlock;
  PROBE_CHECK(cudaMalloc(&r.sends, sizeof(DevSendEnd) * n));
  PROBE_CHECK(cudaMalloc(&r.recvs, sizeof(DevRecvEnd) * n));
  PROBE_CHECK(cudaMalloc(&r.buffers, sizeof(void*) * 2 * n));
  PROBE_CHECK(cudaMalloc(&r.steps, sizeof(DevStep) * steps.size()));
  PROBE_CHECK(cudaMemcpy(r.sends, sends.data(), sizeof(DevSendEnd) * n, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(r.recvs, recvs.data(), sizeof(DevRecvEnd) * n, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(r.buffers, buffers.data(), sizeof(void*) * 2 * n, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(r.steps, steps.data(), sizeof(DevStep) * steps.size(), cudaMemcpyHostToDevice));
  uint32_t* error;
  PROBE_CHECK(cudaMalloc(&error, sizeof(uint32_t)));
  PROBE_CHECK(cudaMemset(error, 0, sizeof(uint32_t)));

  KernelParams p{};
  p.errorOut = error;
  p.slotBytes = shape.slotBytes;
  p.nSlots = shape.nSlots;
  p.flags = kPeersOnThisGpu;
  p.slicesPerStep = 1;
  cudaEvent_t start, stop;
  PROBE_CHECK(cudaEventCreate(&start));
  PROBE_CHECK(cudaEventCreate(&stop));
  PROBE_CHECK(cudaEventRecord(start));
  unsigned long long* parts = nullptr;
  if (pattern == kPhaseTraced) {
    PROBE_CHECK(cudaMalloc(&parts, sizeof(unsigned long long) * (kParts + 1)));
    PROBE_CHECK(cudaMemset(parts, 0, sizeof(unsigned long long) * (kParts + 1)));
  }
  if (pattern == kPhaseInRegisters) phaseInRegisters<P><<<n, threads>>>(p, r, laps);
  else if (pattern == kPhaseTraced) phaseTracedLL<<<n, threads>>>(p, r, laps, parts);
  else ringKernel<P><<<n, threads>>>(p, r);
  PROBE_CHECK(cudaGetLastError());
  PROBE_CHECK(cudaEventRecord(stop));
  PROBE_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  PROBE_CHECK(cudaEventElapsedTime(&ms, start, stop));
  uint32_t err = 0;
  PROBE_CHECK(cudaMemcpy(&err, error, sizeof err, cudaMemcpyDeviceToHost));
  if (parts != nullptr) {
    unsigned long long h[kParts + 1];
    PROBE_CHECK(cudaMemcpy(h, parts, sizeof h, cudaMemcpyDeviceToHost));
    PROBE_CHECK(cudaFree(parts));
    const double nsPerCycle = double(h[kParts]) / double(h[kParts - 1]);
    static const char* names[kParts - 1] = {"room", "barrier1", "move", "barrier2", "post"};
    std::printf("#   traced LL phase, %d ranks, %d threads: %.3f us/step;", n, threads, h[kParts] / 1000.0 / laps);
    for (int i = 0; i < kParts - 1; ++i) std::printf(" %s %.3f", names[i], h[i] * nsPerCycle / 1000.0 / laps);
    std::printf(" (us/step, block 0; %.2f GHz)\n", 1.0 / nsPerCycle);
  }
  if (err != kDeviceOk) {
    std::fprintf(stderr, "step_probe: the kernel reported error %u\n", err);
    std::exit(1);
  }
  for (void* q : {static_cast<void*>(fifos), static_cast<void*>(counters), static_cast<void*>(data),
                  static_cast<void*>(r.sends), static_cast<void*>(r.recvs), static_cast<void*>(r.buffers),
                  static_cast<void*>(r.steps), static_cast<void*>(error)})
    PROBE_CHECK(cudaFree(q));
  PROBE_CHECK(cudaEventDestroy(start));
  PROBE_CHECK(cudaEventDestroy(stop));
  return ms;
}

template <class P>
void row(const char* name, int laps, int threads, Pattern pattern) {
  const bool phase = pattern != kToken;
  std::printf("%-8s %-9s %7d", name, pattern == kToken ? "token" : pattern == kPhase ? "phase" : "phase-reg", threads);
  for (int n : {2, 4, 8}) {
    float t[3];
    for (float& x : t) x = runOnce<P>(n, laps, threads, pattern);
    std::sort(t, t + 3);
    // token: LAPS x N hops; phase: LAPS steps on every block at once
    std::printf("  %10.3f", double(t[1]) * 1000.0 / (double(laps) * (phase ? 1 : n)));
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const int laps = argc > 1 ? std::atoi(argv[1]) : 2000;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop;
  PROBE_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# step_probe on %s, %d laps: us per ring step of the interpreter (8 B, median of 3)\n", prop.name,
              laps);
  std::printf("%-8s %-9s %7s  %10s  %10s  %10s\n", "proto", "ring", "threads", "2-rank", "4-rank", "8-rank");
  for (int threads : {32, 512})
    for (int n : {2, 4, 8}) (void)runOnce<ProtoLL>(n, laps, threads, kPhaseTraced);
  for (Pattern pattern : {kToken, kPhase, kPhaseInRegisters})
    for (int threads : {32, 512}) {
      row<ProtoLL>("LL", laps, threads, pattern);
      row<ProtoLL128>("LL128", laps, threads, pattern);
      row<ProtoSimple>("Simple", laps, threads, pattern);
    }
  return 0;
}
