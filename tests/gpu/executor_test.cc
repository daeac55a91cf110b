// Correctness of the GPU executor: every algorithm, collective, type and op, in place and
// out of place, for 1, 2, 4 and 8 ranks as threads on the GPUs present (several ranks per
// GPU), against the float64 reference. Skipped without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "coll_case.h"

namespace braid::gputest {
namespace {

constexpr algo::Coll kColls[] = {algo::Coll::AllReduce, algo::Coll::AllGather, algo::Coll::ReduceScatter,
                                 algo::Coll::Broadcast, algo::Coll::Reduce,    algo::Coll::AlltoAll,
                                 algo::Coll::Gather,    algo::Coll::Scatter};

class ExecutorTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (gpuCount() == 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or returned 0)";
  }
};

TEST_P(ExecutorTest, EveryCollectiveTypeAndOp) {
  const int n = GetParam();
  GroupOptions o;
  o.nRanks = n;
  o.nChannels = 2;
  o.slotBytes = 16 * 1024;  // small slots: many slices, FIFO wrap-around, chunked plans
  o.nSlots = 4;
  o.nDevices = std::min(gpuCount(), n);
  auto group = RankGroup::create(o);
  ASSERT_NE(group, nullptr);
  CaseRunner runner(*group);
  int cases = 0, failed = 0;
  const auto start = std::chrono::steady_clock::now();
  auto check = [&](const CaseSpec& s) {
    CaseResult r = runner.run(s);
    ++cases;
    if (!r.ok) ++failed;
    EXPECT_TRUE(r.ok) << n << " ranks: " << s.name() << "\n" << r.message;
  };
  for (const algo::Algorithm* a : algo::algorithms()) {
    for (algo::Coll coll : kColls) {
      if (!a->supports(coll, n)) continue;
      const bool reduces = algo::collReduces(coll);
      for (int t = 0; t < kNumDataTypes; ++t) {
        for (TestOp op : kAllOps) {
          if (!reduces && op != TestOp::Sum) continue;
          for (bool inPlace : {false, true}) {
            if (inPlace && coll == algo::Coll::AlltoAll) continue;
            CaseSpec s{a, coll, ncclDataType_t(t), op, 1037, n - 1, inPlace};
            check(s);
          }
        }
      }
      // Edge and size cases: nothing, one element, fewer than the ranks, many slices.
      for (uint64_t count : {uint64_t(0), uint64_t(1), uint64_t(n > 1 ? n - 1 : 1), uint64_t(262147)}) {
        check(CaseSpec{a, coll, ncclFloat32, TestOp::Sum, count, 0, false});
        check(CaseSpec{a, coll, ncclBfloat16, reduces ? TestOp::Avg : TestOp::Sum, count, 0, coll != algo::Coll::AlltoAll});
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("SUMMARY correctness nRanks=%d cases=%d failed=%d seconds=%.1f fifoBytesPerRank=%zu\n", n, cases, failed,
              secs, group->fifoBytesPerRank());
}

// Large launches keep their uploaded work (kernels::WorkCache): a repeated call reuses it, a
// call on other buffers uploads its own and, with room for one, evicts the first; every
// output stays right (an evicted copy freed too early, or a stale copy reused, would not).
TEST(WorkCache, RepeatsReuseAndEvictionsStayCorrect) {
  if (gpuCount() == 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or returned 0)";
  GroupOptions o;
  o.nRanks = 2;
  o.nChannels = 32;  // 32 lanes: the work spills past the kernel parameters
  o.slotBytes = 16 * 1024;
  o.nSlots = 4;
  o.workCacheEntries = 1;
  auto group = RankGroup::create(o);
  ASSERT_NE(group, nullptr);
  CaseRunner a(*group), b(*group);  // two sets of buffers: different work bytes
  const CaseSpec spec{algo::findAlgorithm("ring"), algo::Coll::AllReduce, ncclFloat32, TestOp::Sum, 262147, 0, false};
  struct Want { CaseRunner* runner; uint64_t hits, misses, evictions; };
  const Want steps[] = {{&a, 0, 1, 0}, {&a, 1, 0, 0}, {&b, 0, 1, 1}, {&b, 1, 0, 0}, {&a, 0, 1, 1}};
  for (const Want& w : steps) {
    const kernels::WorkCache::Stats before = group->workCache(0)->stats();
    CaseResult r = w.runner->run(spec);
    ASSERT_TRUE(r.ok) << r.message;
    const kernels::WorkCache::Stats after = group->workCache(0)->stats();
    EXPECT_EQ(after.hits - before.hits, w.hits);
    EXPECT_EQ(after.misses - before.misses, w.misses);
    EXPECT_EQ(after.evictions - before.evictions, w.evictions);
    EXPECT_EQ(after.entries, 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ExecutorTest, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace braid::gputest
