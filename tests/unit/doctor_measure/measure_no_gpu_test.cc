// Without a GPU (CI), every measurement adds one Skip that names why and nothing else; on a GPU
// machine this test has nothing to say and skips itself.
#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include "tools/braid-doctor/measure.h"

namespace braid::doctor {
namespace {

TEST(DoctorMeasureNoGpu, EveryPartSkipsWithTheReason) {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) GTEST_SKIP() << "a GPU is present";
  MeasureOptions opt;
  opt.quick = true;
  opt.selfPath = "/proc/self/exe";
  for (auto* part : {measureCopies, measurePeers, measureIpc, measureCollectives, measureStorage}) {
    Report r;
    part(opt, &r);
    EXPECT_TRUE(r.figures.empty());
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_EQ(r.skipped[0].reason.rfind("no CUDA device: ", 0), 0u) << r.skipped[0].reason;
    EXPECT_GT(r.skipped[0].reason.size(), std::string("no CUDA device: ").size());
  }
}

TEST(DoctorMeasureNoGpu, SkipOptionComesFirst) {
  MeasureOptions opt;
  opt.skip = {"ipc"};
  Report r;
  measureIpc(opt, &r);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].reason, "skipped by --skip ipc");
}

TEST(DoctorMeasureNoGpu, ChildModeRejectsBadArguments) {
  char self[] = "braid-doctor", mode[] = "--ipc-child", key[] = "--socket", bad[] = "x";
  char* argv[] = {self, mode, key, bad, nullptr};
  EXPECT_EQ(ipcChildMain(4, argv), 2);
}

}  // namespace
}  // namespace braid::doctor
