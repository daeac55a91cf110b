// Correctness of the GPU executor: every protocol (LL, LL128, Simple) x algorithm x
// collective x type x op, in place and out of place, for 1, 2, 4 and 8 ranks as threads on
// the GPUs present (several ranks per GPU), against the float64 reference. Counts: 1037 for
// the full matrix; 0, 1, 7 and 4097 for every type of a reduction (each its own kernel) and
// one type per element size for byte moves; 1000003 for a few cases of every collective.
// Small FIFOs (4 slots of 16 KiB Simple, 2 KiB LL, 4 KiB LL128) make steps of many slices
// and wrap the FIFOs around. Skipped without a GPU.
//
// Each (protocol, ranks) pair is one test, named like Ranks/ExecutorTest.Matrix/LL128_4ranks
// (tests/gpu/run.sh runs one protocol per section), and prints one SUMMARY line.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "coll_case.h"

namespace braid::gputest {
namespace {

constexpr algo::Coll kColls[] = {algo::Coll::AllReduce, algo::Coll::AllGather, algo::Coll::ReduceScatter,
                                 algo::Coll::Broadcast, algo::Coll::Reduce,    algo::Coll::AlltoAll,
                                 algo::Coll::Gather,    algo::Coll::Scatter};
constexpr algo::Protocol kProtocols[] = {algo::Protocol::LL, algo::Protocol::LL128, algo::Protocol::Simple};
// Edge counts of reductions: both sizes of every element kind (integer, narrow and wide float).
constexpr ncclDataType_t kEdgeReduceTypes[] = {ncclInt8,    ncclFloat8e4m3, ncclFloat16, ncclBfloat16,
                                               ncclInt32,   ncclFloat32,    ncclUint64,  ncclFloat64};
// Byte moves run in one kernel for every type (counts in bytes): one type per element size.
constexpr ncclDataType_t kEdgeMoveTypes[] = {ncclInt8, ncclFloat16, ncclFloat32, ncclFloat64};
constexpr uint64_t kEdgeCounts[] = {0, 1, 7, 4097};
constexpr uint64_t kBigCount = 1000003;

GroupOptions matrixOptions(int n, algo::Protocol p) {
  GroupOptions o;
  o.nRanks = n;
  o.nChannels = 2;
  o.slotBytes = 16 * 1024;    // Simple: small slots, many slices, chunked plans
  o.llSlotBytes = 2 * 1024;   // LL: 128 lines, 1 KiB of data a slot
  o.ll128SlotBytes = 4 * 1024;  // LL128: 32 lines, 3840 bytes of data a slot
  o.nSlots = 4;
  o.nDevices = std::min(gpuCount(), n);
  o.protocols = {p};
  if (p == algo::Protocol::LL128) o.protocols.push_back(algo::Protocol::Simple);  // for a fallback (several GPUs)
  return o;
}

class ExecutorTest : public ::testing::TestWithParam<std::tuple<algo::Protocol, int>> {
 protected:
  void SetUp() override {
    if (gpuCount() == 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or returned 0)";
  }
};

TEST_P(ExecutorTest, Matrix) {
  const algo::Protocol proto = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());
  auto group = RankGroup::create(matrixOptions(n, proto));
  ASSERT_NE(group, nullptr);
  CaseRunner runner(*group);
  int cases = 0, failed = 0, fellBack = 0;
  const auto start = std::chrono::steady_clock::now();
  auto check = [&](const algo::Algorithm* a, algo::Coll coll, ncclDataType_t type, TestOp op, uint64_t count, bool inPlace) {
    if (inPlace && coll == algo::Coll::AlltoAll) return;  // NCCL has no in-place all-to-all
    const CaseSpec s{a, coll, type, op, count, n - 1, inPlace, proto};
    CaseResult r = runner.run(s);
    ++cases;
    if (!r.ok) ++failed;
    if (r.ran != proto) ++fellBack;
    EXPECT_TRUE(r.ok) << n << " ranks: " << s.name() << (r.ran != proto ? " (ran as Simple)" : "") << "\n" << r.message;
  };
  for (const algo::Algorithm* a : algo::algorithms()) {
    for (algo::Coll coll : kColls) {
      if (!a->supports(coll, n)) continue;
      const bool reduces = algo::collReduces(coll);
      for (int t = 0; t < kNumDataTypes; ++t)
        for (TestOp op : kAllOps) {
          if (!reduces && op != TestOp::Sum) continue;
          for (bool inPlace : {false, true}) check(a, coll, ncclDataType_t(t), op, 1037, inPlace);
        }
      // Nothing, one element, a partial line, and a count that fills no line or slot evenly.
      for (uint64_t count : kEdgeCounts) {
        if (reduces) {
          for (ncclDataType_t t : kEdgeReduceTypes)
            for (bool inPlace : {false, true}) check(a, coll, t, TestOp::Sum, count, inPlace);
          check(a, coll, ncclBfloat16, TestOp::Avg, count, true);
          check(a, coll, ncclInt32, TestOp::Avg, count, false);
        } else {
          for (ncclDataType_t t : kEdgeMoveTypes)
            for (bool inPlace : {false, true}) check(a, coll, t, TestOp::Sum, count, inPlace);
        }
      }
    }
  }
  // Long runs through the FIFOs (every slot reused thousands of times), default algorithms.
  for (algo::Coll coll : kColls) {
    const algo::Algorithm* a = algo::defaultAlgorithm(coll, n);
    if (a == nullptr || !a->supports(coll, n)) continue;
    check(a, coll, ncclFloat32, TestOp::Sum, kBigCount, false);
    if (algo::collReduces(coll)) check(a, coll, ncclBfloat16, TestOp::Avg, kBigCount, true);
    else check(a, coll, ncclInt8, TestOp::Sum, kBigCount, true);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("SUMMARY correctness %s nRanks=%d cases=%d failed=%d fellBack=%d seconds=%.1f fifoBytesPerRank=%zu\n",
              algo::protocolName(proto), n, cases, failed, fellBack, secs, group->fifoBytesPerRank());
  // On one GPU every connection qualifies for LL128: nothing may fall back.
  if (group->options().nDevices == 1) {
    EXPECT_EQ(fellBack, 0) << algo::protocolName(proto) << " fell back on one GPU";
  }
}

std::string matrixName(const ::testing::TestParamInfo<std::tuple<algo::Protocol, int>>& info) {
  return std::string(algo::protocolName(std::get<0>(info.param))) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
}
INSTANTIATE_TEST_SUITE_P(Ranks, ExecutorTest, ::testing::Combine(::testing::ValuesIn(kProtocols), ::testing::Values(1, 2, 4, 8)),
                         matrixName);

// FIFOs staged in host memory (NCCL_P2P_DISABLE=1): LL runs there (8-byte words reach host
// memory whole); LL128 is refused -- a launch asking for it over such ends fails -- and a
// call that asks for it runs with Simple instead.
TEST(ExecutorStaged, LLRunsAndLL128FallsBack) {
  if (gpuCount() == 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or returned 0)";
  ASSERT_EQ(setenv("NCCL_P2P_DISABLE", "1", 1), 0);
  GroupOptions o = matrixOptions(2, algo::Protocol::Simple);
  o.protocols = {algo::Protocol::LL, algo::Protocol::LL128, algo::Protocol::Simple};
  auto group = RankGroup::create(o);
  ASSERT_EQ(unsetenv("NCCL_P2P_DISABLE"), 0);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->usableProtocol(algo::Protocol::LL128), algo::Protocol::Simple);
  EXPECT_EQ(group->usableProtocol(algo::Protocol::LL), algo::Protocol::LL);
  // Forced past usableProtocol, the launch itself refuses LL128 on staged ends (before any CUDA call).
  std::vector<char> dummy(64);
  CollCall call;
  call.algorithm = algo::findAlgorithm("ring");
  call.args.coll = algo::Coll::AllReduce;
  call.args.count = 4;
  call.args.nChannels = 1;
  call.input = call.output = dummy.data();
  EXPECT_EQ(group->enqueue(0, {call}, algo::Protocol::LL128), ncclInvalidArgument);
  CaseRunner runner(*group);
  for (algo::Protocol p : {algo::Protocol::LL, algo::Protocol::LL128})
    for (algo::Coll coll : {algo::Coll::AllReduce, algo::Coll::AllGather, algo::Coll::ReduceScatter})
      for (uint64_t count : {uint64_t(7), uint64_t(4097)}) {
        const CaseSpec s{algo::defaultAlgorithm(coll, 2), coll, ncclFloat32, TestOp::Sum, count, 0, false, p};
        CaseResult r = runner.run(s);
        EXPECT_TRUE(r.ok) << "staged, 2 ranks: " << s.name() << "\n" << r.message;
        EXPECT_EQ(r.ran, p == algo::Protocol::LL128 ? algo::Protocol::Simple : p) << s.name();
      }
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

}  // namespace
}  // namespace braid::gputest
