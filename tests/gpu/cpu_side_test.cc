// The CPU-side parts of the GPU executor and its test harness, runnable without a GPU:
// launch validation (which fails before any CUDA call), the reference, the thread bootstrap.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "kernels/executor.h"
#include "reference.h"
#include "thread_bootstrap.h"

namespace braid::gputest {
namespace {

kernels::Launch oneLaneLaunch(const algo::Lane& lane, void* in, void* out) {
  kernels::Launch l;
  kernels::OpWork op;
  op.buffers = {in, out};
  l.ops.push_back(op);
  l.lanes.push_back({0, &lane});
  return l;
}

TEST(ExecutorValidation, RejectsMalformedLaunches) {
  char a[64], b[64];
  algo::Lane lane;
  lane.steps.push_back(algo::Step{.recvPeer = 1, .src = algo::kInput, .dst = algo::kOutput, .count = 4});
  // A recv with no connection for it.
  EXPECT_EQ(kernels::launch(oneLaneLaunch(lane, a, b)), ncclInvalidArgument);
  // A buffer the op does not provide.
  algo::Lane copy;
  copy.steps.push_back(algo::Step{.src = 5, .dst = algo::kOutput, .count = 4});
  EXPECT_EQ(kernels::launch(oneLaneLaunch(copy, a, b)), ncclInvalidArgument);
  // A reduce step without a recv.
  algo::Lane red;
  red.steps.push_back(algo::Step{.src = algo::kInput, .dst = algo::kOutput, .flags = algo::kReduce, .count = 4});
  EXPECT_EQ(kernels::launch(oneLaneLaunch(red, a, b)), ncclInvalidArgument);
  // Connections with different FIFO shapes, and bad thread counts.
  uint64_t counters[4] = {};
  auto l = oneLaneLaunch(lane, a, b);
  l.recvs.push_back({0, 1, {a, &counters[0], &counters[1], 16, 4}});
  l.sends.push_back({0, 2, {b, &counters[2], &counters[3], 32, 4}});
  EXPECT_EQ(kernels::launch(l), ncclInvalidArgument);
  auto t = oneLaneLaunch(copy, a, b);
  t.threadsPerBlock = 100;
  EXPECT_EQ(kernels::launch(t), ncclInvalidArgument);
  // A lane naming a missing op.
  auto m = oneLaneLaunch(copy, a, b);
  m.lanes[0].op = 3;
  EXPECT_EQ(kernels::launch(m), ncclInvalidArgument);
  // No slices per step.
  auto sl = oneLaneLaunch(lane, a, b);
  sl.recvs.push_back({0, 1, {a, &counters[0], &counters[1], 16, 4}});
  sl.slicesPerStep = 0;
  EXPECT_EQ(kernels::launch(sl), ncclInvalidArgument);
}

// The deadlock-freedom invariant behind the slicing: every step of at most half a FIFO
// (CollArgs::maxStepElems), cut as the kernel cuts it with the slices per step that launch()
// runs, takes at most half the FIFO's slots; slices are whole 16-byte packs. 8 slices in 8
// slots broke this and deadlocked a 2-rank all-reduce.
TEST(ExecutorSlicing, AStepNeverTakesMoreThanHalfTheSlots) {
  for (uint32_t elemSize : {1u, 2u, 4u, 8u})
    for (uint32_t slotBytes : {16u, 4096u, 32768u, 262144u, 524288u})
      for (uint32_t nSlots : {2u, 4u, 8u, 16u})
        for (uint32_t asked : {0u, 1u, 2u, 4u, 8u, 64u}) {
          const uint32_t slices = kernels::effectiveSlicesPerStep(asked, nSlots);
          const uint64_t maxStep = uint64_t(slotBytes) * nSlots / 2 / elemSize;
          for (uint64_t count : {uint64_t(1), uint64_t(7), maxStep / 3 + 1, maxStep / 2, maxStep - 1, maxStep}) {
            if (count == 0 || count > maxStep) continue;
            const uint64_t per = kernels::sliceElemsFor(count, elemSize, slotBytes, slices);
            ASSERT_GT(per, 0u);
            EXPECT_EQ(per * elemSize % 16, 0u);
            EXPECT_LE(per * elemSize, slotBytes);
            EXPECT_LE((count + per - 1) / per, std::max<uint64_t>(1, nSlots / 2))
                << "elem " << elemSize << " slot " << slotBytes << " x " << nSlots << " slices " << slices << " count "
                << count;
          }
        }
}

TEST(Reference, IntegersWrapAndAverageTruncates) {
  // int8: 100 + 100 wraps to -56.
  EXPECT_EQ(reduceReference(ncclInt8, TestOp::Sum, {100, 100}, 2).value, -56);
  // SumPostDiv: (-3 + -4) / 2 = -3 (toward zero).
  EXPECT_EQ(reduceReference(ncclInt32, TestOp::Avg, {-3, -4}, 2).value, -3);
  // PreMulSum with the host scalar 3 on integers.
  EXPECT_EQ(reduceReference(ncclUint32, TestOp::PreMulHost, {1, 2}, 2).value, 9);
  // Floats get a tolerance that scales with the terms; fp8 e4m3 keeps 3 mantissa bits.
  Expected e = reduceReference(ncclFloat8e4m3, TestOp::Sum, {4, 4, 4, 4, 4}, 5);
  EXPECT_EQ(e.value, 20);
  EXPECT_GT(e.tolerance, 0);
  unsigned char bits[8];
  storeValue(ncclFloat8e5m2, 3.0, bits);
  EXPECT_EQ(loadValue(ncclFloat8e5m2, bits), 3.0);
  storeValue(ncclBfloat16, -0.5, bits);
  EXPECT_EQ(loadValue(ncclBfloat16, bits), -0.5);
}

TEST(ThreadBootstrap, SendRecvAllGatherBarrier) {
  const int n = 4;
  ThreadBootstrapHub hub(n);
  std::vector<std::thread> threads;
  std::vector<int> ok(n, 0);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ThreadBootstrap b(hub, r);
      int all[n] = {};
      all[r] = r * 10;
      b.allGather(all, sizeof(int));
      int next = (r + 1) % n, prev = (r + n - 1) % n, got = -1;
      b.send(next, 7, &r, sizeof r);
      b.recv(prev, 7, &got, sizeof got);
      b.barrier();
      ok[r] = got == prev && all[0] == 0 && all[3] == 30;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(ok[r]) << r;
}

}  // namespace
}  // namespace braid::gputest
