// CUDA-graph capture and replay, abort, and grouped launches of the GPU executor.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "rank_group.h"
#include "reference.h"

namespace braid::gputest {
namespace {

using Clock = std::chrono::steady_clock;

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpuCount() == 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or returned 0)";
  }
};

// Float inputs per rank, generation `gen`: small integers, so float sums are exact.
std::vector<float> inputsFor(int rank, int gen, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = float((i * 5 + rank * 3 + gen) % 11) - 5.0f;
  return v;
}

struct RankBuffers {
  std::vector<float*> in, out;
  RankGroup& g;
  RankBuffers(RankGroup& group, size_t count) : g(group) {
    for (int r = 0; r < g.nRanks(); ++r) {
      float *a = nullptr, *b = nullptr;
      (void)cudaSetDevice(g.device(r));
      EXPECT_TRUE(GPU_OK(cudaMalloc(&a, count * sizeof(float))));
      EXPECT_TRUE(GPU_OK(cudaMalloc(&b, count * sizeof(float))));
      in.push_back(a);
      out.push_back(b);
    }
  }
  ~RankBuffers() {
    for (size_t r = 0; r < in.size(); ++r) {
      (void)cudaFree(in[r]);
      (void)cudaFree(out[r]);
    }
  }
  void fill(int gen, size_t count) {
    for (int r = 0; r < g.nRanks(); ++r) {
      auto v = inputsFor(r, gen, count);
      EXPECT_TRUE(GPU_OK(cudaMemcpy(in[r], v.data(), count * sizeof(float), cudaMemcpyHostToDevice)));
    }
    EXPECT_TRUE(g.settle());
  }
  // Number of wrong elements over all ranks' outputs for an all-reduce (sum) of generation gen.
  size_t wrongSums(int gen, size_t count) {
    std::vector<float> expect(count, 0.0f), got(count);
    for (int r = 0; r < g.nRanks(); ++r) {
      auto v = inputsFor(r, gen, count);
      for (size_t i = 0; i < count; ++i) expect[i] += v[i];
    }
    size_t wrong = 0;
    for (int r = 0; r < g.nRanks(); ++r) {
      EXPECT_TRUE(GPU_OK(cudaMemcpy(got.data(), out[r], count * sizeof(float), cudaMemcpyDeviceToHost)));
      for (size_t i = 0; i < count; ++i) wrong += got[i] != expect[i];
    }
    return wrong;
  }
};

CollCall allReduceCall(float* in, float* out, size_t count, int nChannels) {
  CollCall c;
  c.algorithm = algo::findAlgorithm("ring");
  c.args.coll = algo::Coll::AllReduce;
  c.args.count = count;
  c.args.nChannels = nChannels;
  c.args.alignElems = 4;
  c.type = ncclFloat32;
  c.red.kind = kernels::RedKind::Sum;
  c.input = in;
  c.output = out;
  return c;
}

// How many memory-allocation nodes a graph holds.
size_t memoryNodes(cudaGraph_t graph) {
  size_t n = 0;
  if (!GPU_OK(cudaGraphGetNodes(graph, nullptr, &n))) return ~size_t(0);
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0 && !GPU_OK(cudaGraphGetNodes(graph, nodes.data(), &n))) return ~size_t(0);
  size_t allocs = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    if (GPU_OK(cudaGraphNodeGetType(node, &type)) && type == cudaGraphNodeTypeMemAlloc) ++allocs;
  }
  return allocs;
}

// The tests below that run once per protocol.
class GpuProtocolTest : public ::testing::TestWithParam<algo::Protocol> {
 protected:
  void SetUp() override {
    if (gpuCount() == 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or returned 0)";
  }
};

// One all-reduce per rank captured in a graph (LL's and Simple's plans are large enough to
// travel through the upload kernel into GraphWork buffers), replayed 100 times; the inputs
// change halfway.
// Every replay continues each connection's steps (they live in memory, not in the graph), so
// LL and LL128 flags keep growing from replay to replay.
TEST_P(GpuProtocolTest, GraphCaptureReplay100) {
  const algo::Protocol proto = GetParam();
  GroupOptions o;
  o.nRanks = 4;
  o.nChannels = 2;
  o.slotBytes = 16 * 1024;
  o.nSlots = 4;
  o.protocols = {proto};
  auto g = RankGroup::create(o);
  ASSERT_NE(g, nullptr);
  const size_t count = 1 << 20;
  RankBuffers buf(*g, count);
  buf.fill(0, count);
  // Rank r's all-reduce captured into a graph (nullptr when the capture failed).
  auto capture = [&](int r) -> cudaGraph_t {
    cudaGraph_t graph = nullptr;
    if (!GPU_OK(cudaSetDevice(g->device(r))) || !GPU_OK(cudaStreamBeginCapture(g->stream(r), cudaStreamCaptureModeThreadLocal)))
      return nullptr;
    const ncclResult_t e = g->enqueue(r, {allReduceCall(buf.in[r], buf.out[r], count, o.nChannels)}, proto);
    if (!GPU_OK(cudaStreamEndCapture(g->stream(r), &graph)) || e != ncclSuccess) return nullptr;
    return graph;
  };
  std::vector<cudaGraphExec_t> execs(g->nRanks());
  for (int r = 0; r < g->nRanks(); ++r) {
    cudaGraph_t graph = capture(r);
    ASSERT_NE(graph, nullptr) << "rank " << r;
    EXPECT_EQ(memoryNodes(graph), 0u) << "rank " << r << ": captured work must not use graph memory nodes (graph_work.h)";
    ASSERT_TRUE(GPU_OK(cudaGraphInstantiate(&execs[r], graph, 0)));
    (void)cudaGraphDestroy(graph);
  }
  auto t0 = Clock::now();
  for (int iter = 0; iter < 100; ++iter) {
    if (iter == 50) {
      ASSERT_TRUE(g->synchronize());
      EXPECT_EQ(buf.wrongSums(0, count), 0u) << "after 50 replays";
      buf.fill(1, count);
    }
    for (int r = 0; r < g->nRanks(); ++r) ASSERT_TRUE(GPU_OK(cudaGraphLaunch(execs[r], g->stream(r))));
  }
  ASSERT_TRUE(g->synchronize());
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(buf.wrongSums(1, count), 0u) << "after 100 replays";
  for (int r = 0; r < g->nRanks(); ++r) EXPECT_EQ(g->deviceError(r), 0u);
  for (auto e : execs) (void)cudaGraphExecDestroy(e);
  // Work too large for the kernel parameters (LL's and Simple's here; LL128's plan has fewer
  // steps and fits) lives in GraphWork buffers; destroying the graphs hands them back, and the
  // next capture of the same call reuses them instead of allocating.
  std::vector<kernels::GraphWork::Stats> made(g->nRanks());
  for (int r = 0; r < g->nRanks(); ++r) made[r] = g->graphWork(r)->stats();
  if (proto != algo::Protocol::LL128) {
    for (int r = 0; r < g->nRanks(); ++r) EXPECT_GE(made[r].buffers, 1u) << "rank " << r << ": the work was expected to spill";
  }
  auto released = [&] {  // user objects' destructors run on CUDA's own thread, soon after
    for (int r = 0; r < g->nRanks(); ++r)
      if (g->graphWork(r)->stats().idle != made[r].buffers) return false;
    return true;
  };
  for (auto t = Clock::now(); !released() && Clock::now() - t < std::chrono::seconds(5);)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(released()) << "destroyed graphs did not hand their work buffers back within 5 s";
  for (int r = 0; r < g->nRanks(); ++r) {
    cudaGraph_t graph = capture(r);
    ASSERT_NE(graph, nullptr) << "rank " << r;
    (void)cudaGraphDestroy(graph);
    const kernels::GraphWork::Stats now = g->graphWork(r)->stats();
    EXPECT_EQ(now.buffers, made[r].buffers) << "rank " << r << ": a second capture allocated again";
    if (made[r].buffers > 0) {
      EXPECT_GT(now.reused, made[r].reused) << "rank " << r;
    }
  }
  std::printf("SUMMARY graph %s replays=100 ranks=4 count=%zu avg_replay_us=%.1f work_buffers=%zu reused=%zu\n",
              algo::protocolName(proto), count, secs / 100 * 1e6, made[0].buffers, g->graphWork(0)->stats().reused);
}

// Rank 0 never runs its part; the others wait until the host raises the abort flag, then
// return within a second and report kDeviceAborted (LL: every thread polls its own lines;
// LL128: every warp; Simple: thread 0 polls a counter).
TEST_P(GpuProtocolTest, AbortWhenAPeerNeverArrives) {
  const algo::Protocol proto = GetParam();
  GroupOptions o;
  o.nRanks = 4;
  o.nChannels = 2;
  o.protocols = {proto};
  auto g = RankGroup::create(o);
  ASSERT_NE(g, nullptr);
  const size_t count = 1 << 20;
  RankBuffers buf(*g, count);
  buf.fill(0, count);
  for (int r = 1; r < g->nRanks(); ++r)
    ASSERT_EQ(g->enqueue(r, {allReduceCall(buf.in[r], buf.out[r], count, o.nChannels)}, proto), ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int r = 1; r < g->nRanks(); ++r) EXPECT_EQ(cudaStreamQuery(g->stream(r)), cudaErrorNotReady) << "rank " << r << " should still wait";
  auto t0 = Clock::now();
  *g->abortFlag() = 1;
  bool done = false;
  while (!done && Clock::now() - t0 < std::chrono::seconds(5)) {
    done = true;
    for (int r = 1; r < g->nRanks(); ++r) done = done && cudaStreamQuery(g->stream(r)) != cudaErrorNotReady;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_TRUE(done);
  EXPECT_LT(secs, 1.0);
  ASSERT_TRUE(g->synchronize());
  for (int r = 1; r < g->nRanks(); ++r) EXPECT_EQ(g->deviceError(r), uint32_t(kernels::kDeviceAborted)) << "rank " << r;
  std::printf("SUMMARY abort %s ranks=4 seconds_to_return=%.4f\n", algo::protocolName(proto), secs);
}

// A group: two float all-reduces on the same channels (they must not share a kernel), and a
// bf16 all-reduce (another kernel), in one launch per rank.
TEST_P(GpuProtocolTest, GroupOfCollectives) {
  const algo::Protocol proto = GetParam();
  GroupOptions o;
  o.nRanks = 4;
  o.nChannels = 2;
  o.protocols = {proto};
  auto g = RankGroup::create(o);
  ASSERT_NE(g, nullptr);
  const size_t count = 100003;
  RankBuffers a(*g, count), b(*g, count);
  a.fill(0, count);
  b.fill(1, count);
  std::vector<uint16_t*> h(g->nRanks());
  for (int r = 0; r < g->nRanks(); ++r) {
    ASSERT_TRUE(GPU_OK(cudaMalloc(&h[r], count * 2)));
    std::vector<uint16_t> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = floatToBf16Bits(float(r + 1));
    ASSERT_TRUE(GPU_OK(cudaMemcpy(h[r], v.data(), count * 2, cudaMemcpyHostToDevice)));
  }
  ASSERT_TRUE(g->settle());
  for (int r = 0; r < g->nRanks(); ++r) {
    CollCall third = allReduceCall(nullptr, nullptr, count, o.nChannels);
    third.type = ncclBfloat16;
    third.input = third.output = h[r];
    ASSERT_EQ(g->enqueue(r, {allReduceCall(a.in[r], a.out[r], count, o.nChannels),
                             allReduceCall(b.in[r], b.out[r], count, o.nChannels), third}, proto),
              ncclSuccess);
  }
  ASSERT_TRUE(g->waitOrAbort(10)) << "the group hung (counters above)";
  EXPECT_EQ(a.wrongSums(0, count), 0u);
  EXPECT_EQ(b.wrongSums(1, count), 0u);
  for (int r = 0; r < g->nRanks(); ++r) {
    std::vector<uint16_t> v(count);
    ASSERT_TRUE(GPU_OK(cudaMemcpy(v.data(), h[r], count * 2, cudaMemcpyDeviceToHost)));
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += bf16BitsToFloat(v[i]) != 10.0f;
    EXPECT_EQ(wrong, 0u) << "bf16 in-place all-reduce, rank " << r;
    (void)cudaFree(h[r]);
  }
}

INSTANTIATE_TEST_SUITE_P(Protocols, GpuProtocolTest,
                         ::testing::Values(algo::Protocol::LL, algo::Protocol::LL128, algo::Protocol::Simple),
                         [](const auto& info) { return std::string(algo::protocolName(info.param)); });

// Several all-reduces per rank in flight at once (no synchronisation between them): each
// rank's stream holds several kernels, which must not wait on each other across ranks. They
// take turns in the three protocols over the same (channel, peer) pairs, so each protocol's
// FIFOs and steps carry on where its last call left them while the others run in between.
TEST_F(GpuTest, BackToBackAllReducesInTurnsOfProtocol) {
  GroupOptions o;
  o.nRanks = 8;
  o.nChannels = 2;
  o.protocols = {algo::Protocol::LL, algo::Protocol::LL128, algo::Protocol::Simple};
  auto g = RankGroup::create(o);
  ASSERT_NE(g, nullptr);
  const size_t count = 300007;
  RankBuffers buf(*g, count);
  buf.fill(2, count);
  for (int iter = 0; iter < 12; ++iter)
    for (int r = 0; r < g->nRanks(); ++r)
      ASSERT_EQ(g->enqueue(r, {allReduceCall(buf.in[r], buf.out[r], count, o.nChannels)}, o.protocols[iter % 3]),
                ncclSuccess);
  ASSERT_TRUE(g->waitOrAbort(20)) << "back-to-back all-reduces hung (counters above)";
  EXPECT_EQ(buf.wrongSums(2, count), 0u);
}

}  // namespace
}  // namespace braid::gputest
