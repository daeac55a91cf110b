// CUDA graphs and abort through braid's NCCL API, on device memory (issue 4 item 3), with two
// ranks as two threads of this process on GPU 0 (ncclCommInitAll with devlist {0, 0}).
//
// graph: each rank warms up with one all-reduce, then captures one in-place fp32 sum
//        ncclAllReduce on its own stream (thread-local capture mode), instantiates it and
//        replays it 100 times. Each replay doubles the values, so the result after 1 and
//        after 100 replays is known exactly: (r0 + r1) * 2^(k-1).
// graph-first: the same, but the captured all-reduce is the communicator's very first call
//        (its connections are made during the capture) and the capture mode is global, as
//        PyTorch's default: no call of braid's may be one that a global capture forbids.
// alltoall-graph: an in-place ncclAlltoAll captured per rank (its input copy must be a buffer
//        the graph holds, not a graph memory node) and replayed 100 times, checked exactly.
// abort: rank 0 enqueues an all-reduce that rank 1 never joins, waits 0.5 s and calls
//        ncclCommAbort: it must return within 1 s, and the stream must drain within 5 s.
//        The program must then exit cleanly.
// Prints SUMMARY lines for tests/gpu/run.sh. Exit status 0: passed, 1: failed, 77: no GPU.
#include <cuda_runtime.h>

#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "api_check.h"
#include "gpu_present.h"
#include "nccl.h"

namespace {

using Clock = std::chrono::steady_clock;

// Waits for the stream up to `seconds`; never hangs. Returns the stream's final status.
cudaError_t drain(cudaStream_t s, double seconds, double* took) {
  auto t0 = Clock::now();
  cudaError_t q;
  while ((q = cudaStreamQuery(s)) == cudaErrorNotReady &&
         std::chrono::duration<double>(Clock::now() - t0).count() < seconds)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  *took = std::chrono::duration<double>(Clock::now() - t0).count();
  return q;
}

// drain(), or the process ends (a kernel may still spin: exit without waiting for it).
void drainOrExit(cudaStream_t s, double seconds, int rank, const char* what) {
  double took = 0;
  if (drain(s, seconds, &took) == cudaSuccess) return;
  std::printf("FAIL rank %d: %s did not finish in %.0f s\n", rank, what, seconds);
  std::fflush(stdout);
  std::_Exit(1);
}

// How many memory-allocation nodes a captured graph holds (braid's must hold none).
int memoryAllocNodes(cudaGraph_t graph) {
  size_t n = 0;
  CUDA_OK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) CUDA_OK(cudaGraphGetNodes(graph, nodes.data(), &n));
  int allocs = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    CUDA_OK(cudaGraphNodeGetType(node, &type));
    allocs += type == cudaGraphNodeTypeMemAlloc;
  }
  return allocs;
}

constexpr size_t kCount = (1 << 20) + 3;  // odd, so that the tail is not a whole vector

float initial(int rank, size_t i) { return float((rank + 1) * int(i % 5 + 1)); }

int graphTest(bool captureFirst) {
  ncclComm_t comms[2];
  int devs[2] = {0, 0};
  NCCL_OK(ncclCommInitAll(comms, 2, devs));
  std::barrier sync(2);
  int failures[2] = {0, 0};
  double replayUs[2] = {0, 0};
  auto rank = [&](int r) {
    CUDA_OK(cudaSetDevice(0));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    float *data = nullptr, *scratch = nullptr;
    CUDA_OK(cudaMalloc(&data, kCount * sizeof(float)));
    CUDA_OK(cudaMalloc(&scratch, 2 * kCount * sizeof(float)));
    std::vector<float> host(kCount);
    for (size_t i = 0; i < kCount; ++i) host[i] = initial(r, i);
    CUDA_OK(cudaMemcpy(data, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice));
    // Warm-up outside the capture (connections are set up on first use, as NCCL users expect).
    if (!captureFirst) NCCL_OK(ncclAllReduce(scratch, scratch + kCount, kCount, ncclFloat32, ncclSum, comms[r], stream));
    drainOrExit(stream, 20, r, "the warm-up all-reduce");
    sync.arrive_and_wait();
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(stream, captureFirst ? cudaStreamCaptureModeGlobal : cudaStreamCaptureModeThreadLocal));
    ncclResult_t rc = ncclAllReduce(data, data, kCount, ncclFloat32, ncclSum, comms[r], stream);
    cudaError_t endRc = cudaStreamEndCapture(stream, &graph);
    // Under a global-mode capture CUDA refuses cudaGraphInstantiate in every thread: wait
    // until both ranks have ended theirs.
    sync.arrive_and_wait();
    if (rc != ncclSuccess || endRc != cudaSuccess) {
      std::printf("FAIL rank %d: capture: ncclAllReduce %d (%s), cudaStreamEndCapture %s\n", r, rc,
                  ncclGetLastError(comms[r]), cudaGetErrorString(endRc));
      std::fflush(stdout);
      std::_Exit(1);
    }
    size_t nodes = 0;
    CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
    if (memoryAllocNodes(graph) != 0) {
      std::printf("rank %d: the captured all-reduce holds memory-allocation nodes\n", r);
      ++failures[r];
    }
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    if (r == 0) std::printf("captured graph: %zu node(s)\n", nodes);
    sync.arrive_and_wait();
    auto check = [&](int replays) {
      CUDA_OK(cudaMemcpy(host.data(), data, kCount * sizeof(float), cudaMemcpyDeviceToHost));
      size_t wrong = 0;
      for (size_t i = 0; i < kCount; ++i) {
        float expect = std::ldexp(float(3 * int(i % 5 + 1)), replays - 1);
        if (host[i] != expect && wrong++ == 0)
          std::printf("rank %d after %d replays: element %zu is %g, expected %g\n", r, replays, i, host[i], expect);
      }
      return wrong;
    };
    CUDA_OK(cudaGraphLaunch(exec, stream));
    drainOrExit(stream, 20, r, "the first replay");
    failures[r] += check(1) != 0;
    sync.arrive_and_wait();
    auto t0 = Clock::now();
    for (int k = 1; k < 100; ++k) CUDA_OK(cudaGraphLaunch(exec, stream));
    drainOrExit(stream, 30, r, "99 replays");
    replayUs[r] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 99;
    failures[r] += check(100) != 0;
    ncclResult_t async = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(comms[r], &async));
    if (async != ncclSuccess) {
      std::printf("rank %d: async error %d after the replays\n", r, async);
      ++failures[r];
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaFree(data));
    CUDA_OK(cudaFree(scratch));
    CUDA_OK(cudaStreamDestroy(stream));
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  for (ncclComm_t c : comms) NCCL_OK(ncclCommDestroy(c));
  bool ok = failures[0] == 0 && failures[1] == 0;
  const char* what = captureFirst ? "graph-first (first call captured, global mode)" : "graph";
  std::printf("%s: 1 all-reduce of %zu floats captured per rank, 100 replays, %s, %.1f us per replay (wall)\n", what,
              kCount, ok ? "exact" : "WRONG", replayUs[0]);
  std::printf("SUMMARY %s 100 replays %s (%.0f us/replay)\n", what, ok ? "ok" : "WRONG", replayUs[0]);
  return ok ? 0 : 1;
}

int abortTest() {
  ncclComm_t comms[2];
  int devs[2] = {0, 0};
  NCCL_OK(ncclCommInitAll(comms, 2, devs));
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *in = nullptr, *out = nullptr;
  CUDA_OK(cudaMalloc(&in, kCount * sizeof(float)));
  CUDA_OK(cudaMalloc(&out, kCount * sizeof(float)));
  CUDA_OK(cudaMemset(in, 0, kCount * sizeof(float)));
  // Both ranks run the same all-reduce once first (two threads): braid connects a peer on first
  // use, on the host and together with the peer, so only a warmed-up collective reaches the GPU.
  std::thread warm([&] {
    CUDA_OK(cudaSetDevice(0));
    cudaStream_t s1;
    float *a = nullptr, *b = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc(&a, kCount * sizeof(float)));
    CUDA_OK(cudaMalloc(&b, kCount * sizeof(float)));
    NCCL_OK(ncclAllReduce(a, b, kCount, ncclFloat32, ncclSum, comms[1], s1));
    double took = 0;
    if (drain(s1, 20, &took) != cudaSuccess) std::printf("FAIL rank 1 warm-up did not finish\n");
    CUDA_OK(cudaFree(a));
    CUDA_OK(cudaFree(b));
    CUDA_OK(cudaStreamDestroy(s1));
  });
  NCCL_OK(ncclAllReduce(in, out, kCount, ncclFloat32, ncclSum, comms[0], stream));
  warm.join();
  double warmSecs = 0;
  if (drain(stream, 20, &warmSecs) != cudaSuccess) {
    std::printf("FAIL rank 0 warm-up did not finish\n");
    std::fflush(stdout);
    std::_Exit(1);
  }
  // Rank 0 alone: rank 1 (comms[1]) never calls the collective.
  NCCL_OK(ncclAllReduce(in, out, kCount, ncclFloat32, ncclSum, comms[0], stream));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  bool busy = cudaStreamQuery(stream) == cudaErrorNotReady;
  std::printf("stream before abort: %s\n", busy ? "busy (waiting for rank 1)" : "idle: the collective did not wait?");
  auto t0 = Clock::now();
  ncclResult_t rc = ncclCommAbort(comms[0]);
  double abortSecs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("ncclCommAbort(rank 0) returned %d after %.3f s\n", rc, abortSecs);
  double drainSecs = 0;
  cudaError_t q = drain(stream, 5, &drainSecs);
  std::printf("stream after abort: %s after %.3f s\n",
              q == cudaErrorNotReady ? "STILL BUSY" : cudaGetErrorString(q), drainSecs);
  ncclResult_t rc1 = ncclCommAbort(comms[1]);
  std::printf("ncclCommAbort(rank 1) returned %d\n", rc1);
  bool ok = rc == ncclSuccess && abortSecs < 1.0 && q != cudaErrorNotReady && rc1 == ncclSuccess;
  if (q == cudaSuccess) {
    // The context must still work after the abort.
    CUDA_OK(cudaFree(in));
    CUDA_OK(cudaFree(out));
    CUDA_OK(cudaStreamDestroy(stream));
    CUDA_OK(cudaDeviceSynchronize());
  } else if (q != cudaErrorNotReady) {
    std::printf("note: the aborted stream ended with a CUDA error (%s): the context is unusable now\n",
                cudaGetErrorString(q));
  }
  std::printf("SUMMARY abort %.3fs (limit 1s) drain %.3fs %s\n", abortSecs, drainSecs, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

// An in-place all-to-all captured per rank (2 ranks as threads on GPU 0): braid copies the
// input first, and under capture that copy lives in a buffer the graph holds, never in a graph
// memory node (whose remapping at launch can wait for the other rank's spinning kernel). Each
// replay swaps the blocks, so odd replays give the transpose and even ones the original.
int alltoallGraphTest() {
  constexpr size_t kPer = (1 << 18) + 1;  // elements per peer
  ncclComm_t comms[2];
  int devs[2] = {0, 0};
  NCCL_OK(ncclCommInitAll(comms, 2, devs));
  std::barrier sync(2);
  int failures[2] = {0, 0};
  auto value = [](int owner, int block, size_t i) { return float(owner * 1000 + block * 10 + int(i % 7)); };
  auto rank = [&](int r) {
    CUDA_OK(cudaSetDevice(0));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    float* data = nullptr;
    CUDA_OK(cudaMalloc(&data, 2 * kPer * sizeof(float)));
    std::vector<float> host(2 * kPer);
    for (int b = 0; b < 2; ++b)
      for (size_t i = 0; i < kPer; ++i) host[b * kPer + i] = value(r, b, i);
    CUDA_OK(cudaMemcpy(data, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    NCCL_OK(ncclAllReduce(data, data, 1, ncclFloat32, ncclMax, comms[r], stream));  // connections first
    drainOrExit(stream, 20, r, "the warm-up");
    CUDA_OK(cudaMemcpy(data, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    sync.arrive_and_wait();
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    ncclResult_t rc = ncclAlltoAll(data, data, kPer, ncclFloat32, comms[r], stream);
    cudaError_t endRc = cudaStreamEndCapture(stream, &graph);
    if (rc != ncclSuccess || endRc != cudaSuccess) {
      std::printf("FAIL rank %d: capture: ncclAlltoAll %d (%s), cudaStreamEndCapture %s\n", r, rc,
                  ncclGetLastError(comms[r]), cudaGetErrorString(endRc));
      std::fflush(stdout);
      std::_Exit(1);
    }
    if (const int allocs = memoryAllocNodes(graph); allocs != 0) {
      std::printf("rank %d: the captured all-to-all holds %d memory-allocation node(s)\n", r, allocs);
      ++failures[r];
    }
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    sync.arrive_and_wait();
    auto check = [&](int replays) {
      CUDA_OK(cudaMemcpy(host.data(), data, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
      size_t wrong = 0;
      for (int b = 0; b < 2; ++b)
        for (size_t i = 0; i < kPer; ++i) {
          const float expect = replays % 2 ? value(b, r, i) : value(r, b, i);
          if (host[b * kPer + i] != expect && wrong++ == 0)
            std::printf("rank %d after %d replays: block %d element %zu is %g, expected %g\n", r, replays, b, i,
                        host[b * kPer + i], expect);
        }
      return wrong;
    };
    CUDA_OK(cudaGraphLaunch(exec, stream));
    drainOrExit(stream, 20, r, "the first replay");
    failures[r] += check(1) != 0;
    sync.arrive_and_wait();
    for (int k = 1; k < 100; ++k) CUDA_OK(cudaGraphLaunch(exec, stream));
    drainOrExit(stream, 30, r, "99 replays");
    failures[r] += check(100) != 0;
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaFree(data));
    CUDA_OK(cudaStreamDestroy(stream));
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  for (ncclComm_t c : comms) NCCL_OK(ncclCommDestroy(c));
  const bool ok = failures[0] == 0 && failures[1] == 0;
  std::printf("SUMMARY alltoall-in-place graph 100 replays %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (braid::gputest::skipWithoutGpu()) return braid::gputest::kSkipExit;
  std::string only = argc > 1 ? argv[1] : "";
  int rc = 0;
  if (only.empty() || only == "graph-first") rc |= graphTest(true);
  if (only.empty() || only == "graph") rc |= graphTest(false);
  if (only.empty() || only == "alltoall-graph") rc |= alltoallGraphTest();
  if (only.empty() || only == "abort") rc |= abortTest();
  std::printf("%s\n", rc ? "FAILED" : "OK");
  std::fflush(stdout);
  if (rc) std::_Exit(rc);  // a kernel may still spin: do not wait for it at exit
  return rc;
}
