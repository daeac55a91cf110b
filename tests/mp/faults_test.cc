// Fault tests: real rank processes (tests/mp/faults_rank.cc) through the launcher. An abort
// from another thread at each blocking point, a rank killed while the others run collectives
// (reaped and unreaped), hang reports, and every class of mismatched call.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <set>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/rank_env.h"
#include "tests/launcher/launcher.h"
#include "tests/mp/launch_ranks.h"

namespace {

using braid::test::RankResult;

std::vector<RankResult> run(int n, std::vector<std::string> args, double timeout = 120,
                            std::vector<std::pair<std::string, std::string>> env = {}) {
  return braid::mptest::launchRanks(FAULTS_RANK_PATH, n, args, timeout, std::move(env));
}
using braid::mptest::expectAllOk;

// The number after `key` on the first line that has it, or -1.
long long numberAfter(const std::string& text, const std::string& key) {
  size_t at = text.find(key);
  return at == std::string::npos ? -1 : std::atoll(text.c_str() + at + key.size());
}

// ---- abort from another thread ------------------------------------------------------------

class AbortPoint : public ::testing::TestWithParam<const char*> {};
TEST_P(AbortPoint, HundredRoundsAsProcesses) {
  auto results = run(2, {"abort-thread", GetParam(), "100"}, 300);
  expectAllOk(results);
  std::printf("%s", results[0].output.c_str());
}
INSTANTIATE_TEST_SUITE_P(Faults, AbortPoint, ::testing::Values("init", "connect", "collective", "group"));

TEST(FaultsAbort, HundredRoundsAsThreads) {
  auto results = run(1, {"abort-thread-local", "100"}, 300);
  expectAllOk(results);
  std::printf("%s", results[0].output.c_str());
}

// ---- a rank dies --------------------------------------------------------------------------

// Every survivor fails with ncclRemoteError naming the victim within 5 s of its death.
void expectDeathKnown(const std::vector<RankResult>& results, int victim, const char* what) {
  long long death = -1;
  for (const auto& r : results)
    if (long long t = numberAfter(r.output, "DEATH "); t > 0) death = t;
  ASSERT_GT(death, 0) << what << ": the victim did not die\n" << results[victim].output;
  double worst = 0;
  for (const auto& r : results) {
    if (r.rank == victim) continue;
    EXPECT_TRUE(braid::test::succeeded(r)) << what << " rank " << r.rank << " " << braid::test::describeEnd(r) << "\n"
                                           << r.output;
    long long learned = numberAfter(r.output, "LEARNED ");
    ASSERT_GT(learned, 0) << what << " rank " << r.rank << " never learned:\n" << r.output;
    double secs = (learned - death) / 1e9;
    worst = std::max(worst, secs);
    EXPECT_LT(secs, 5.0) << what << " rank " << r.rank << ":\n" << r.output;
    EXPECT_NE(r.output.find("rank " + std::to_string(victim)), std::string::npos)
        << what << " rank " << r.rank << " does not name the dead rank:\n" << r.output;
  }
  std::printf("%s: every survivor knew within %.3f s\n", what, worst);
}

TEST(FaultsDeath, RankKilledInEveryCollective) {
  const char* colls[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce",
                         "alltoall",  "gather",    "scatter",       "sendrecv"};
  std::mt19937 rng(7);
  int i = 0;
  for (const char* coll : colls) {
    int n = (i++ % 2) ? 8 : 4;
    int victim = static_cast<int>(rng() % n);
    int delayUs = static_cast<int>(rng() % 20000);
    std::string what = std::string(coll) + " " + std::to_string(n) + " ranks, rank " + std::to_string(victim) +
                       " dies after " + std::to_string(delayUs) + " us";
    expectDeathKnown(run(n, {"die", coll, std::to_string(victim), std::to_string(delayUs)}, 60), victim, what.c_str());
  }
}

TEST(FaultsDeath, UnreapedChildIsKnownDead) {
  for (int n : {4, 8}) {
    std::string what = std::to_string(n) + " ranks, rank 2 dies unreaped";
    expectDeathKnown(run(n, {"die", "allreduce", "2", "3000", "unreaped"}, 60), 2, what.c_str());
  }
}

// A rank that destroys its communicator one collective early: the others' last call can never
// complete. It fails with ncclRemoteError naming the rank that left, well within the hang
// report's 30 s (the ring's neighbours of the leaver wait for it; the others wait for them).
TEST(FaultsLeave, CallsTheLeaverNeverIssuedFail) {
  for (int n : {2, 4}) {
    auto results = run(n, {"leave", std::to_string(n - 1), "3"}, 60, {{"BRAID_HANG_TIMEOUT", "30"}});
    expectAllOk(results);
    for (int r = 0; r + 1 < n; ++r) {
      const std::string& out = results[r].output;
      EXPECT_NE(out.find("LEARNED"), std::string::npos) << "rank " << r << " of " << n << ":\n" << out;
      EXPECT_NE(out.find("| rank " + std::to_string(n - 1) + " (pid "), std::string::npos) << "rank " << r << ":\n" << out;
      EXPECT_NE(out.find("destroyed its communicator after its collective #2"), std::string::npos) << out;
      const size_t at = out.find("LEARNED ");
      if (at != std::string::npos) EXPECT_LT(std::atof(out.c_str() + at + 8), 5.0) << out;
    }
  }
}

TEST(FaultsDeath, DeathBeforeTheFirstCollective) {
  expectDeathKnown(run(4, {"die", "allreduce", "3", "0"}, 60), 3, "death before the first collective");
}

// ---- nothing left in /dev/shm -------------------------------------------------------------

using braid::mptest::braidShmNames;

// A rank killed at each step of connection setup (after making its segment, after offering it,
// after receiving the peer's offer): the survivor's call fails, and no name stays in /dev/shm.
class SetupDeath : public ::testing::TestWithParam<const char*> {};
TEST_P(SetupDeath, LeavesNothingInDevShm) {
  const std::set<std::string> before = braidShmNames();
  auto results = run(2, {"die-in-setup", "1", GetParam()}, 60, {{"BRAID_COLL_TIMEOUT", "20"}});
  EXPECT_TRUE(braid::test::succeeded(results[0])) << results[0].output;
  EXPECT_NE(results[0].output.find("RESULT rc=6"), std::string::npos) << results[0].output;
  EXPECT_EQ(results[1].signal, SIGKILL) << braid::test::describeEnd(results[1]) << "\n" << results[1].output;
  // Other tests beside this one make names that live for milliseconds (one of them for seconds on
  // end, so the folder is seldom free of them); a leak stays. So: the names new since `before`
  // that are here now must all go; names that come later are others'.
  std::set<std::string> suspects;
  for (const std::string& name : braidShmNames())
    if (!before.count(name)) suspects.insert(name);
  std::vector<std::string> left;
  for (int tries = 0; tries < 50; ++tries) {
    left.clear();
    const std::set<std::string> now = braidShmNames();
    for (const std::string& name : suspects)
      if (now.count(name)) left.push_back(name);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(left.empty()) << left.size() << " /dev/shm names left, first: " << left.front();
}
INSTANTIATE_TEST_SUITE_P(Faults, SetupDeath, ::testing::Values("host-offer-made", "host-offer-sent", "host-offer-received"));

// ---- hang reports -------------------------------------------------------------------------

TEST(FaultsHang, ReportNamesWhoWaitsAndWhereTheOthersAre) {
  // Rank 1 is 3.5 s late for #2 (a broadcast from rank 0): ranks 2 and 3 wait for its data.
  auto results = run(4, {"hang"}, 60, {{"BRAID_HANG_TIMEOUT", "1"}});
  expectAllOk(results);
  for (int r = 2; r < 4; ++r) {
    const std::string& out = results[r].output;
    // Its own stall, or the first stalled rank's news, starts its report: either says how long.
    EXPECT_NE(out.find("hang report (rank " + std::to_string(r) + ", no progress for"), std::string::npos) << out;
    EXPECT_NE(out.find("this rank waits in #2 ncclBroadcast count 1024 float root 0 (host memory) for rank(s) " +
                       std::to_string(r - 1)), std::string::npos) << out;
    EXPECT_NE(out.find("ranks 2-3 in #2 ncclBroadcast"), std::string::npos) << out;
    EXPECT_NE(out.find("rank 1 idle after #1 ncclAllReduce"), std::string::npos) << out;
  }
  // The late rank is told too, and says where it stands.
  EXPECT_NE(results[1].output.find("hang report (rank 1): this rank is idle after #1 ncclAllReduce"), std::string::npos)
      << results[1].output;
}

TEST(FaultsHang, ReportOnSigusr1) {
  auto results = run(3, {"report-signal"}, 60);
  expectAllOk(results);
  EXPECT_NE(results[0].output.find("hang report (rank 0): "), std::string::npos) << results[0].output;
  EXPECT_NE(results[0].output.find("asked by SIGUSR1"), std::string::npos) << results[0].output;
}

// ---- mismatched calls ---------------------------------------------------------------------

class Mismatch : public ::testing::TestWithParam<const char*> {};
TEST_P(Mismatch, EveryRankGetsInvalidUsageNamingBothSides) {
  for (int n : {2, 4}) {
    auto results = run(n, {"mismatch", GetParam()}, 60, {{"BRAID_COLL_TIMEOUT", "30"}});
    expectAllOk(results);
    bool p2p = std::string(GetParam()) == "p2p-count";
    for (const auto& r : results) {
      if (p2p && r.rank > 1) continue;
      EXPECT_NE(r.output.find("RESULT rc=5 "), std::string::npos) << n << " ranks, rank " << r.rank << ":\n" << r.output;
      EXPECT_NE(r.output.find("called"), std::string::npos) << r.output;
      // Both calls: from the check's messages, or from the header of the data slot that was refused.
      EXPECT_TRUE(r.output.find("while rank") != std::string::npos ||
                  r.output.find("bytes of a different call, ncclS") != std::string::npos ||
                  r.output.find("bytes of a different call, #") != std::string::npos)
          << r.output;
    }
  }
}
INSTANTIATE_TEST_SUITE_P(Faults, Mismatch,
                         ::testing::Values("bcast-root", "reduce-root", "coll", "count", "type", "op", "p2p-count"));

}  // namespace
