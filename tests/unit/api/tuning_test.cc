// The tuner through the real library, on host-only communicators (so it runs anywhere):
// NCCL_ALGO / NCCL_PROTO are read at each communicator's init, a bad value fails it with
// ncclInvalidUsage naming the token; ncclGroupSimulateEnd reports the tuner's estimate; and
// NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING logs each distinct choice once per communicator.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "algo/tuner.h"
#include "nccl.h"

namespace {

// The log settings are read once per process, at the first log call: set them before main.
struct LogToFile {
  std::string path = "/tmp/braid_tuning_test_" + std::to_string(getpid()) + ".log";
  LogToFile() {
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "TUNING", 1);
    setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
    unsetenv("NCCL_ALGO");
    unsetenv("NCCL_PROTO");
  }
  ~LogToFile() { std::remove(path.c_str()); }
  std::string text() const {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
} gLog;

std::string lastError() { return ncclGetLastError(nullptr); }

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(Tuning, BadNcclAlgoOrProtoFailsInitNamingTheToken) {
  struct Case {
    const char* var;
    const char* value;
    const char* says;
  };
  for (Case c : {Case{"NCCL_PROTO", "LL,Bogus", "\"Bogus\""}, Case{"NCCL_PROTO", "^", "excludes nothing"},
                 Case{"NCCL_ALGO", "allreduce:", "names no algorithms"}, Case{"NCCL_ALGO", "Ring;Tree", "two lists"},
                 Case{"NCCL_ALGO", "allsum:ring", "unknown collective \"allsum\""}}) {
    ScopedEnv env(c.var, c.value);
    ncclComm_t comms[2] = {};
    EXPECT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclInvalidUsage) << c.var << "=" << c.value;
    const std::string error = lastError();
    for (const char* word : {c.var, c.says, "valid names", "Fix"}) {
      if (std::string(word) == "valid names" && std::string(c.says).find("two lists") != std::string::npos) continue;
      if (std::string(word) == "valid names" && std::string(c.says).find("collective") != std::string::npos) continue;
      EXPECT_NE(error.find(word), std::string::npos) << "\"" << word << "\" not in: " << error;
    }
    EXPECT_EQ(comms[0], nullptr);
    EXPECT_EQ(comms[1], nullptr);
  }
}

TEST(Tuning, EachCommunicatorReadsTheVariablesAtItsInit) {
  ncclComm_t comms[2] = {};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << lastError();
  {
    // Set after the parent's init: the parent runs on; a split child reads the bad value.
    ScopedEnv env("NCCL_PROTO", "LL128,Nope");
    float x[4] = {1, 2, 3, 4}, y[4] = {};
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (ncclComm_t c : comms) ASSERT_EQ(ncclAllReduce(x, y, 4, ncclFloat, ncclSum, c, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << lastError();
    EXPECT_EQ(y[3], 8.0f);
    ncclComm_t children[2] = {};
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; ++r) ncclCommSplit(comms[r], 0, r, &children[r], nullptr);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
    EXPECT_NE(lastError().find("\"Nope\""), std::string::npos) << lastError();
    for (ncclComm_t c : children)
      if (c) ncclCommDestroy(c);
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

TEST(Tuning, GoodValuesAreAccepted) {
  for (const char* algo : {"PAT", "Tree", "^NVLS", "allreduce:ring;allgather:direct", "RING,twoshot"})
    for (const char* proto : {"LL,Simple", "^LL128", "allreduce:^LL;sendrecv:Simple"}) {
      ScopedEnv a("NCCL_ALGO", algo), p("NCCL_PROTO", proto);
      ncclComm_t comms[2] = {};
      ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << algo << " " << proto << ": " << lastError();
      for (ncclComm_t c : comms) ncclCommDestroy(c);
    }
  EXPECT_NE(gLog.text().find("\"PAT\" accepted and ignored"), std::string::npos);
}

TEST(Tuning, SimulateReportsTheTunersEstimateAndLogsEachChoiceOnce) {
  ncclComm_t comms[2] = {};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << lastError();
  const size_t logStart = gLog.text().size();
  static float x[1 << 16], y[1 << 16];
  auto simulate = [&](auto enqueue) {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    enqueue();
    EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess) << lastError();
    return sim.estimatedTime;
  };
  // What the tuner says for host memory on 2 ranks (the CPU engine's model).
  auto expected = [](braid::algo::Coll coll, uint64_t bytes) {
    braid::algo::TunerInput in;
    in.coll = coll;
    in.bytes = bytes;
    in.elemSize = 4;
    in.nRanks = 2;
    in.hostMemory = true;
    return braid::algo::tune(in).best.microseconds;
  };
  for (size_t count : {size_t(1), size_t(1000), size_t(1) << 16}) {
    const float us = simulate([&] { ncclAllReduce(x, y, count, ncclFloat, ncclSum, comms[0], nullptr); });
    EXPECT_NEAR(us, expected(braid::algo::Coll::AllReduce, count * 4), 1e-3 * us) << count;
  }
  // A group sums its tasks; a zero count costs nothing.
  const float two = simulate([&] {
    ncclAllReduce(x, y, 1000, ncclFloat, ncclSum, comms[0], nullptr);
    ncclAllGather(x, y, 1000, ncclFloat, comms[0], nullptr);
    ncclAllReduce(x, y, 0, ncclFloat, ncclSum, comms[0], nullptr);
  });
  EXPECT_NEAR(two, expected(braid::algo::Coll::AllReduce, 4000) + expected(braid::algo::Coll::AllGather, 8000), 1e-3 * two);
  // Three sizes of all-reduce made one choice (ring/Simple on the CPU engine's one lane): one line.
  const std::string log = gLog.text().substr(logStart);
  EXPECT_EQ(count(log, "rank 0: AllReduce of"), 1u) << log;
  EXPECT_EQ(count(log, "rank 0: AllGather of"), 1u) << log;
  EXPECT_NE(log.find("on host memory: ring/Simple, 1 channel, 2 slices per step"), std::string::npos) << log;
  EXPECT_NE(log.find("us estimated"), std::string::npos) << log;
  EXPECT_EQ(log.find("NCCL WARN"), std::string::npos) << log;
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

// NCCL_ALGO reaches host-memory calls (the CPU engine asks the tuner too): the tree (a chain on
// one host) and twoshot run, give the right sums, and the TUNING log names them.
TEST(Tuning, NcclAlgoReachesHostMemoryCalls) {
  for (const char* algo : {"tree", "twoshot"}) {
    const std::string value = std::string("allreduce:") + algo;
    ScopedEnv a("NCCL_ALGO", value.c_str());
    constexpr int kRanks = 3, kCount = 4097;
    ncclComm_t comms[kRanks] = {};
    ASSERT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess) << lastError();
    const size_t logStart = gLog.text().size();
    std::vector<std::vector<int>> in(kRanks, std::vector<int>(kCount)), out(kRanks, std::vector<int>(kCount, -1));
    for (int r = 0; r < kRanks; ++r)
      for (int i = 0; i < kCount; ++i) in[r][i] = (r + 1) * 1000 + i;
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < kRanks; ++r)
      ASSERT_EQ(ncclAllReduce(in[r].data(), out[r].data(), kCount, ncclInt32, ncclSum, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << lastError();
    for (int r = 0; r < kRanks; ++r)
      for (int i = 0; i < kCount; ++i) ASSERT_EQ(out[r][i], 6000 + 3 * i) << algo << " rank " << r << " element " << i;
    const std::string log = gLog.text().substr(logStart);
    EXPECT_NE(log.find(std::string("on host memory: ") + algo + "/Simple"), std::string::npos) << log;
    for (ncclComm_t c : comms) ncclCommDestroy(c);
  }
}

}  // namespace
