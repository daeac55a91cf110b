// The launcher with /bin/sh ranks: exit codes, per-rank output, environment, timeouts,
// crashes, exec failures and cancellation.
#include "tests/launcher/launcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace braid::test {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

LaunchSpec shellRanks(int nRanks, const std::string& script) {
  LaunchSpec spec;
  spec.nRanks = nRanks;
  spec.argv = {"sh", "-c", script};  // "sh" also exercises the PATH lookup
  return spec;
}

class LauncherRankCount : public ::testing::TestWithParam<int> {};

TEST_P(LauncherRankCount, CollectsEachRanksExitCodeAndOutput) {
  const int n = GetParam();
  LaunchSpec spec = shellRanks(n,
                               "echo \"out $BRAID_LAUNCH_RANK/$BRAID_LAUNCH_NRANKS\"; "
                               "echo \"err $BRAID_LAUNCH_RANK\" >&2; exit $((BRAID_LAUNCH_RANK + 3))");
  spec.timeoutSeconds = 60;
  std::vector<RankResult> results = runRanks(spec);
  ASSERT_EQ(results.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const RankResult& result = results[r];
    EXPECT_EQ(result.rank, r);
    EXPECT_EQ(result.exitCode, r + 3);
    EXPECT_EQ(result.signal, 0);
    EXPECT_FALSE(result.timedOut);
    EXPECT_FALSE(succeeded(result));
    // stdout and stderr both land in the rank's own output, and nothing of the others'.
    EXPECT_EQ(result.output, "out " + std::to_string(r) + "/" + std::to_string(n) + "\nerr " + std::to_string(r) + "\n");
  }
  EXPECT_FALSE(allSucceeded(results));
}

INSTANTIATE_TEST_SUITE_P(N, LauncherRankCount, ::testing::Values(1, 2, 3, 4, 8));

TEST(Launcher, AllSucceedWhenEveryRankExitsZero) {
  std::vector<RankResult> results = runRanks(shellRanks(4, "exit 0"));
  ASSERT_EQ(results.size(), 4u);
  EXPECT_TRUE(allSucceeded(results));
  EXPECT_EQ(describeEnd(results[2]), "exited with code 0");
}

TEST(Launcher, PassesUniqueIdAndEnvironmentOverridingInherited) {
  ASSERT_EQ(setenv("BRAID_TEST_INHERITED", "from-launcher", 1), 0);
  ASSERT_EQ(setenv("BRAID_TEST_KEPT", "kept", 1), 0);
  LaunchSpec spec = shellRanks(2, "echo \"$BRAID_UNIQUE_ID $BRAID_TEST_INHERITED $BRAID_TEST_KEPT $EXTRA\"");
  spec.uniqueIdHex = std::string(256, 'a');
  spec.env = {{"BRAID_TEST_INHERITED", "overridden"}, {"EXTRA", "x=y"}};
  std::vector<RankResult> results = runRanks(spec);
  for (const auto& result : results) {
    EXPECT_TRUE(succeeded(result)) << describeEnd(result);
    EXPECT_EQ(result.output, spec.uniqueIdHex + " overridden kept x=y\n");
  }
}

TEST(Launcher, LeavesUniqueIdUnsetWhenNoneGiven) {
  std::vector<RankResult> results = runRanks(shellRanks(1, "echo \"[${BRAID_UNIQUE_ID-unset}]\""));
  EXPECT_EQ(results[0].output, "[unset]\n");
}

TEST(Launcher, StreamsCompleteLinesToCallbackInOrder) {
  LaunchSpec spec = shellRanks(2, "echo one; echo two; printf 'tail-without-newline'");
  std::vector<std::vector<std::string>> lines(2);
  spec.onLine = [&](int rank, std::string_view line) { lines.at(rank).emplace_back(line); };
  runRanks(spec);
  for (const auto& rankLines : lines)
    EXPECT_EQ(rankLines, (std::vector<std::string>{"one", "two", "tail-without-newline"}));
}

TEST(Launcher, KillsHangingRankWithinTimeoutPlusGrace) {
  // Rank 0 finishes at once; rank 1 ignores SIGTERM, so only SIGKILL after the grace ends it.
  LaunchSpec spec = shellRanks(2,
                               "if [ $BRAID_LAUNCH_RANK = 0 ]; then exit 0; fi; "
                               "trap '' TERM; echo hanging; while :; do sleep 1; done");
  spec.timeoutSeconds = 1.0;
  spec.graceSeconds = 0.5;
  auto start = Clock::now();
  std::vector<RankResult> results = runRanks(spec);
  double elapsed = secondsSince(start);
  EXPECT_GE(elapsed, 1.5);
  EXPECT_LT(elapsed, 1.5 + 2.0);  // generous: CI has 2 busy cores
  EXPECT_TRUE(succeeded(results[0]));
  EXPECT_FALSE(results[0].timedOut);
  EXPECT_TRUE(results[1].timedOut);
  EXPECT_EQ(results[1].signal, SIGKILL);
  EXPECT_EQ(results[1].output, "hanging\n");
  EXPECT_NE(describeEnd(results[1]).find("timed out"), std::string::npos);
}

TEST(Launcher, HangingRankThatHonoursSigtermEndsWithIt) {
  LaunchSpec spec = shellRanks(3, "sleep 100");
  spec.timeoutSeconds = 0.5;
  spec.graceSeconds = 5;
  auto start = Clock::now();
  std::vector<RankResult> results = runRanks(spec);
  EXPECT_LT(secondsSince(start), 0.5 + 2.5);  // well before the grace period would end
  for (const auto& result : results) {
    EXPECT_TRUE(result.timedOut);
    EXPECT_EQ(result.signal, SIGTERM);  // the whole group got it, the shell and its sleep
  }
}

TEST(Launcher, ReportsCrashingRankWithItsSignal) {
  std::vector<RankResult> results =
      runRanks(shellRanks(3, "if [ $BRAID_LAUNCH_RANK = 1 ]; then kill -SEGV $$; fi; exit 0"));
  EXPECT_TRUE(succeeded(results[0]));
  EXPECT_EQ(results[1].signal, SIGSEGV);
  EXPECT_EQ(results[1].exitCode, -1);
  EXPECT_FALSE(results[1].timedOut);
  EXPECT_EQ(describeEnd(results[1]), "killed by signal 11 (SIGSEGV)");
  EXPECT_TRUE(succeeded(results[2]));
}

TEST(Launcher, DoesNotWaitForBackgroundChildrenOfAnExitedRank) {
  // The background sleep keeps the output pipe open; it is killed with its rank's group.
  LaunchSpec spec = shellRanks(2, "sleep 100 & echo done");
  auto start = Clock::now();
  std::vector<RankResult> results = runRanks(spec);
  EXPECT_LT(secondsSince(start), 5.0);
  for (const auto& result : results) {
    EXPECT_TRUE(succeeded(result)) << describeEnd(result);
    EXPECT_EQ(result.output, "done\n");
  }
}

TEST(Launcher, ReportsProgramThatCannotBeExecuted) {
  LaunchSpec spec;
  spec.nRanks = 2;
  spec.argv = {"/nonexistent/braid-test-program"};
  std::vector<RankResult> results = runRanks(spec);
  for (const auto& result : results) {
    EXPECT_EQ(result.exitCode, 127);
    EXPECT_NE(result.output.find("cannot execute '/nonexistent/braid-test-program'"), std::string::npos);
  }
}

TEST(Launcher, CancelFlagStopsAllRanksWithoutMarkingTimeout) {
  static volatile std::sig_atomic_t cancel = 0;
  cancel = 0;
  LaunchSpec spec = shellRanks(2, "echo ready; sleep 100");
  spec.cancel = &cancel;
  spec.onLine = [](int, std::string_view) { cancel = 1; };
  auto start = Clock::now();
  std::vector<RankResult> results = runRanks(spec);
  EXPECT_LT(secondsSince(start), 4.0);
  for (const auto& result : results) {
    EXPECT_FALSE(result.timedOut);
    EXPECT_EQ(result.signal, SIGTERM);
  }
}

TEST(Launcher, TruncatesCapturedOutputButStillStreamsIt) {
  LaunchSpec spec = shellRanks(1, "i=0; while [ $i -lt 50 ]; do echo 0123456789; i=$((i+1)); done");
  spec.maxCapturedBytes = 100;
  int streamed = 0;
  spec.onLine = [&](int, std::string_view) { ++streamed; };
  std::vector<RankResult> results = runRanks(spec);
  EXPECT_EQ(streamed, 50);
  std::string everything;
  for (int i = 0; i < 50; ++i) everything += "0123456789\n";
  EXPECT_EQ(results[0].output.substr(0, 100), everything.substr(0, 100));
  EXPECT_NE(results[0].output.find("output truncated after 100 bytes"), std::string::npos);
  EXPECT_LT(results[0].output.size(), 200u);
}

TEST(Launcher, RejectsBadSpecs) {
  LaunchSpec spec = shellRanks(0, "true");
  EXPECT_THROW(runRanks(spec), std::invalid_argument);
  spec = shellRanks(1, "true");
  spec.argv.clear();
  EXPECT_THROW(runRanks(spec), std::invalid_argument);
  spec = shellRanks(1, "true");
  spec.env = {{"BAD=NAME", "x"}};
  EXPECT_THROW(runRanks(spec), std::invalid_argument);
  spec = shellRanks(1, "true");
  spec.timeoutSeconds = -1;
  EXPECT_THROW(runRanks(spec), std::invalid_argument);
}

}  // namespace
}  // namespace braid::test
