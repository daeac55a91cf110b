// A communicator braid cannot connect: two ranks, each its own emulated host (BRAID_HOSTID, set
// by real_served_rank.cc), UCX made unavailable (BRAID_UCX_LIBRARY names no file), the
// stand-in NCCL (fake_nccl.c) as the real one. Under BRAID_BACKEND=auto the real NCCL serves
// every call (the ranks check each against the stand-in's journal and its results) and init
// says why at INFO; under BRAID_BACKEND=braid init fails with the UCX reason; with no real NCCL
// either, init fails with both reasons; with UCX working, braid serves it and the stand-in
// sees nothing.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "nccl.h"
#include "tests/common/rank_env.h"
#include "tests/launcher/launcher.h"

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

std::vector<braid::test::RankResult> launch(const std::string& mode, Env env) {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  braid::test::LaunchSpec spec;
  spec.nRanks = 2;
  spec.argv = {REAL_SERVED_RANK_PATH, mode};
  env.emplace_back("NCCL_SOCKET_IFNAME", "lo");  // the bootstrap between the "hosts": loopback
  env.emplace_back("NCCL_DEBUG", "INFO");
  env.emplace_back("NCCL_DEBUG_SUBSYS", "INIT,NET");
  spec.env = std::move(env);
  spec.uniqueIdHex = braid::test::uniqueIdToHex(id);
  spec.timeoutSeconds = 90;
  return braid::test::runRanks(spec);
}

const Env kNoUcx = {{"BRAID_UCX_LIBRARY", "/nonexistent/braid-test/libucp.so.0"},
                    {"BRAID_NCCL_LIBRARY", FAKE_NCCL_PATH}};

Env with(Env env, const std::string& name, const std::string& value) {
  env.emplace_back(name, value);
  return env;
}

void expectOk(const braid::test::RankResult& r) {
  EXPECT_TRUE(braid::test::succeeded(r)) << "rank " << r.rank << " " << braid::test::describeEnd(r) << "\n" << r.output;
  EXPECT_NE(r.output.find("OK"), std::string::npos) << r.output;
}

TEST(RealServed, AutoHandsTheCommunicatorToTheRealNcclAndRoutesEveryCall) {
  auto results = launch("auto", with(kNoUcx, "BRAID_BACKEND", "auto"));
  for (const auto& r : results) {
    expectOk(r);
    const int peer = 1 - r.rank;
    const std::string line = "rank " + std::to_string(r.rank) + ": braid cannot connect rank " + std::to_string(peer) +
                             " on host real-served-host-" + std::to_string(peer) + ": ";
    ASSERT_NE(r.output.find(line), std::string::npos) << r.output;
    std::string rest = r.output.substr(r.output.find(line));
    rest = rest.substr(0, rest.find('\n'));
    EXPECT_NE(rest.find("UCX is not installed"), std::string::npos) << rest;
    EXPECT_NE(rest.find("/nonexistent/braid-test/libucp.so.0"), std::string::npos) << rest;
    EXPECT_NE(rest.find("; the real NCCL serves this communicator"), std::string::npos) << rest;
    // Once per communicator: the split and shrink children say their own line.
    size_t n = 0;
    for (size_t at = r.output.find("; the real NCCL serves this communicator"); at != std::string::npos;
         at = r.output.find("; the real NCCL serves this communicator", at + 1))
      ++n;
    EXPECT_EQ(n, 1u) << r.output;
  }
}

TEST(RealServed, BraidBackendFailsInitNamingTheRankWithoutUcx) {
  auto results = launch("refused", with(kNoUcx, "BRAID_BACKEND", "braid"));
  for (const auto& r : results) {
    expectOk(r);
    EXPECT_NE(r.output.find("which need UCX, and rank 0 cannot use it: UCX is not installed"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("the real NCCL serves"), std::string::npos) << r.output;
  }
}

TEST(RealServed, AutoWithoutARealNcclFailsInitWithBothReasons) {
  Env env = {{"BRAID_UCX_LIBRARY", "/nonexistent/braid-test/libucp.so.0"},
             {"BRAID_NCCL_LIBRARY", "/nonexistent/braid-test/libnccl.so.2"},
             {"BRAID_BACKEND", "auto"}};
  auto results = launch("refused", env);
  for (const auto& r : results) {
    expectOk(r);
    std::string failure = r.output.substr(r.output.find("init failed"));
    failure = failure.substr(0, failure.find('\n'));
    EXPECT_NE(failure.find("braid cannot connect rank"), std::string::npos) << failure;
    EXPECT_NE(failure.find("UCX is not installed"), std::string::npos) << failure;  // braid's reason
    EXPECT_NE(failure.find("the real NCCL cannot serve this communicator instead"), std::string::npos) << failure;
    EXPECT_NE(failure.find("/nonexistent/braid-test/libnccl.so.2"), std::string::npos) << failure;  // the loader's
  }
}

TEST(RealServed, AutoWithWorkingUcxStaysBraids) {
  Env env = {{"BRAID_NCCL_LIBRARY", FAKE_NCCL_PATH}, {"BRAID_BACKEND", "auto"}, {"UCX_TLS", "tcp"},
             {"UCX_NET_DEVICES", "lo"}};
  auto results = launch("braid", env);
  bool skipped = false;
  for (const auto& r : results) {
    if (r.exitCode == 77) {
      skipped = true;
      continue;
    }
    expectOk(r);
    EXPECT_EQ(r.output.find("the real NCCL serves"), std::string::npos) << r.output;
  }
  if (skipped) GTEST_SKIP() << "UCX does not work here: " << results[0].output;
}

}  // namespace
