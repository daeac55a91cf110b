// Micro-benchmark of the GPU executor on one GPU, ranks as threads: a 1-rank copy and 2/4/8-
// rank all-reduce from 64 MB to 1 GB (plus an 8-byte all-reduce latency), next to a
// device-to-device cudaMemcpy measured in the same run. "HBM GB/s" counts every byte the
// data path reads and writes, FIFO traffic included, taken from the ranks' plans.
//   gpu_bench_executor [--quick]
#include <chrono>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <string>

#include "rank_group.h"

namespace braid::gputest {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes that one rank's plan reads and writes in HBM.
uint64_t planTraffic(const algo::RankPlan& plan, size_t elemSize) {
  uint64_t bytes = 0;
  for (const algo::Lane& lane : plan.lanes)
    for (const algo::Step& s : lane.steps) {
      const bool recv = s.recvPeer != algo::kNoPeer;
      const bool src = s.src != algo::kNoBuf && (!recv || (s.flags & algo::kReduce));
      const bool selfCopy = !recv && s.sendPeer == algo::kNoPeer && s.src == s.dst && s.srcOff == s.dstOff;
      if (selfCopy) continue;
      uint64_t accesses = recv + src + (s.dst != algo::kNoBuf) + (s.sendPeer != algo::kNoPeer);
      bytes += accesses * s.count * elemSize;
    }
  return bytes;
}

double memcpyRate(size_t bytes, int iters) {
  void *a = nullptr, *b = nullptr;
  if (!GPU_OK(cudaMalloc(&a, bytes)) || !GPU_OK(cudaMalloc(&b, bytes))) return 0;
  (void)cudaMemset(a, 1, bytes);
  (void)cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  (void)cudaDeviceSynchronize();
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) (void)cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, nullptr);
  (void)cudaDeviceSynchronize();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  (void)cudaFree(a);
  (void)cudaFree(b);
  return 2.0 * bytes / secs / 1e9;  // read + write
}

struct Row {
  int ranks;
  size_t bytes;
  double us;
  double hbmGBs;
};

// Times `iters` all-reduces of `bytes` per rank (float sum) on a fresh group.
bool benchAllReduce(int n, int channels, size_t bytes, int iters, uint32_t slotBytes, Row* row) {
  GroupOptions o;
  o.nRanks = n;
  o.nChannels = channels;
  o.slotBytes = slotBytes;
  o.nSlots = 8;
  auto g = RankGroup::create(o);
  if (g == nullptr) return false;
  const size_t count = bytes / sizeof(float);
  std::vector<float*> in(n), out(n);
  for (int r = 0; r < n; ++r) {
    if (!GPU_OK(cudaMalloc(&in[r], bytes)) || !GPU_OK(cudaMalloc(&out[r], bytes))) return false;
    (void)cudaMemset(in[r], 0, bytes);
  }
  if (!g->settle()) return false;
  std::vector<CollCall> calls(n);
  uint64_t traffic = 0;
  for (int r = 0; r < n; ++r) {
    CollCall& c = calls[r];
    c.algorithm = algo::findAlgorithm("ring");
    c.args.coll = algo::Coll::AllReduce;
    c.args.count = count;
    c.args.nChannels = channels;
    c.args.alignElems = 4;
    c.args.nRanks = n;
    c.args.rank = r;
    c.args.maxStepElems = g->maxStepElems(ncclFloat32);
    c.type = ncclFloat32;
    c.input = in[r];
    c.output = out[r];
    traffic += planTraffic(c.algorithm->build(c.args), sizeof(float));
  }
  // Each rank enqueues from its own thread, as ranks of separate processes would. GPU time
  // from events on the ranks' streams: the earliest start to the latest end.
  std::vector<cudaEvent_t> begin(n), end(n);
  for (int r = 0; r < n; ++r)
    if (!GPU_OK(cudaEventCreate(&begin[r])) || !GPU_OK(cudaEventCreate(&end[r]))) return false;
  auto run = [&](int times) {
    std::vector<int> ok(n, 1);
    g->onEachRank([&](int r) {
      ok[r] = cudaEventRecord(begin[r], g->stream(r)) == cudaSuccess;
      for (int i = 0; i < times && ok[r]; ++i) ok[r] = g->enqueue(r, {calls[r]}) == ncclSuccess;
      ok[r] = ok[r] && cudaEventRecord(end[r], g->stream(r)) == cudaSuccess;
    });
    for (int r = 0; r < n; ++r)
      if (!ok[r]) return false;
    return g->waitOrAbort(60);
  };
  if (!run(1)) return false;  // warm-up
  if (!run(iters)) return false;
  float first = 0, last = 0;
  for (int r = 0; r < n; ++r) {
    float startMs = 0, endMs = 0;
    (void)cudaEventElapsedTime(&startMs, begin[0], begin[r]);
    (void)cudaEventElapsedTime(&endMs, begin[0], end[r]);
    first = std::min(first, startMs);
    last = std::max(last, endMs);
  }
  for (int r = 0; r < n; ++r) {
    (void)cudaEventDestroy(begin[r]);
    (void)cudaEventDestroy(end[r]);
  }
  const double secs = (last - first) / 1e3 / iters;
  for (int r = 0; r < n; ++r) {
    if (g->deviceError(r) != 0) std::fprintf(stderr, "rank %d: device error %u\n", r, g->deviceError(r));
    (void)cudaFree(in[r]);
    (void)cudaFree(out[r]);
  }
  *row = Row{n, bytes, secs * 1e6, traffic / secs / 1e9};
  return true;
}

}  // namespace
}  // namespace braid::gputest

int main(int argc, char** argv) {
  using namespace braid::gputest;
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (gpuCount() == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  const int iters = quick ? 3 : 5;
  int sms = 0;
  if (!GPU_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0))) return 1;
  std::vector<size_t> sizes = {size_t(64) << 20, size_t(256) << 20, size_t(1) << 30};
  if (quick) sizes = {size_t(64) << 20, size_t(256) << 20};
  std::printf("%-8s %6s %12s %12s %12s %10s\n", "what", "ranks", "bytes", "time_us", "HBM_GB/s", "of_memcpy");
  for (size_t bytes : sizes) {
    const double copy = memcpyRate(bytes, iters);
    std::printf("%-8s %6d %12zu %12.1f %12.1f %10.2f\n", "memcpy", 1, bytes, 2.0 * bytes / copy / 1e3, copy, 1.0);
    for (int n : {1, 2, 4, 8}) {
      const int channels = n == 1 ? sms : std::max(1, 128 / n);
      Row row{};
      if (!benchAllReduce(n, channels, bytes, iters, 512 * 1024, &row)) {
        std::printf("%-8s %6d %12zu FAILED\n", n == 1 ? "copy" : "allreduce", n, bytes);
        continue;
      }
      std::printf("%-8s %6d %12zu %12.1f %12.1f %10.2f\n", n == 1 ? "copy" : "allreduce", n, bytes, row.us, row.hbmGBs,
                  row.hbmGBs / copy);
    }
  }
  // Latency: 8-byte all-reduce across 2 ranks, 1 channel, 1000 back-to-back calls.
  Row lat{};
  if (benchAllReduce(2, 1, 8, quick ? 200 : 1000, 512 * 1024, &lat))
    std::printf("%-8s %6d %12d %12.2f %12s %10s\n", "latency", 2, 8, lat.us, "-", "-");
  return 0;
}
