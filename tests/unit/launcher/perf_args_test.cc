// braid-perf's command line, size steps, call shapes and launch-mode detection.
#include "perf/perf_args.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "perf/perf_launch_mode.h"
#include "perf/perf_shape.h"

namespace braid::perf {
namespace {

using check::Collective;
using check::ReduceOp;

PerfOptions parseOk(const std::vector<std::string>& args) {
  ParseResult result = parseArgs(args);
  EXPECT_TRUE(result.ok) << result.error;
  return result.options;
}

std::string parseError(const std::vector<std::string>& args) {
  ParseResult result = parseArgs(args);
  EXPECT_FALSE(result.ok);
  return result.error;
}

TEST(PerfArgs, DefaultsAreAllReduce8BTo64MFactor2WithCheck) {
  PerfOptions o = parseOk({});
  EXPECT_EQ(o.coll, Collective::AllReduce);
  EXPECT_EQ(o.minBytes, 8u);
  EXPECT_EQ(o.maxBytes, 64u << 20);
  EXPECT_EQ(o.stepFactor, 2u);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmupIters, 5);
  EXPECT_EQ(o.checkIters, 1);
  EXPECT_EQ(o.launchRanks, 0);
  EXPECT_EQ(o.memory, MemoryKind::Auto);
  EXPECT_EQ(o.types, std::vector<ncclDataType_t>{ncclFloat32});
  EXPECT_EQ(o.ops, std::vector<ReduceOp>{ReduceOp::Sum});
  std::vector<size_t> sizes = sizeSteps(o);
  ASSERT_EQ(sizes.size(), 24u);  // 8 B .. 64 MB
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes.back(), 64u << 20);
}

TEST(PerfArgs, ParsesNcclTestsFlagsInEveryForm) {
  PerfOptions o = parseOk({"-b", "1K", "-e64M", "--stepfactor=4", "-n", "7", "--warmup_iters", "0", "-c", "0", "-o",
                           "prod", "-d", "bf16", "-r", "3", "-z", "1", "-G", "2", "-a", "2", "-T", "30", "-C", "1",
                           "-m", "3", "-y", "0", "-t", "1", "-g", "1", "-p", "1"});
  EXPECT_EQ(o.minBytes, 1024u);
  EXPECT_EQ(o.maxBytes, 64u << 20);
  EXPECT_EQ(o.stepFactor, 4u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmupIters, 0);
  EXPECT_EQ(o.checkIters, 0);
  EXPECT_EQ(o.ops, std::vector<ReduceOp>{ReduceOp::Prod});
  EXPECT_EQ(o.types, std::vector<ncclDataType_t>{ncclBfloat16});
  EXPECT_EQ(o.root, 3);
  EXPECT_EQ(o.blocking, 1);
  EXPECT_EQ(o.graphLaunches, 2);
  EXPECT_EQ(o.average, 2);
  EXPECT_EQ(o.timeoutSeconds, 30);
  EXPECT_TRUE(o.reportCpuTime);
  EXPECT_EQ(o.aggIters, 3);
}

TEST(PerfArgs, BraidFlags) {
  PerfOptions o = parseOk({"--coll", "reducescatter", "-np", "8", "--memory", "host", "--json", "out.json"});
  EXPECT_EQ(o.coll, Collective::ReduceScatter);
  EXPECT_EQ(o.launchRanks, 8);
  EXPECT_EQ(o.memory, MemoryKind::Host);
  EXPECT_EQ(o.jsonPath, "out.json");
  // The ranks get everything but -np.
  EXPECT_EQ(o.rankArgs, (std::vector<std::string>{"--coll", "reducescatter", "--memory", "host", "--json", "out.json"}));
  EXPECT_EQ(parseOk({"--memory=device"}).memory, MemoryKind::Device);
  EXPECT_TRUE(parseOk({"-h"}).help);
}

TEST(PerfArgs, AllExpandsOpsAndTypes) {
  PerfOptions o = parseOk({"-o", "all", "-d", "all"});
  EXPECT_EQ(o.ops.size(), 6u);
  EXPECT_EQ(o.types.size(), 12u);
  EXPECT_EQ(parseOk({"-o", "premulsum"}).ops, std::vector<ReduceOp>{ReduceOp::PreMulSum});
  EXPECT_EQ(parseOk({"-o", "mulsum"}).ops, std::vector<ReduceOp>{ReduceOp::PreMulSum});
  EXPECT_EQ(parseOk({"-d", "half"}).types, std::vector<ncclDataType_t>{ncclFloat16});
  EXPECT_EQ(parseOk({"-d", "f8e5m2"}).types, std::vector<ncclDataType_t>{ncclFloat8e5m2});
}

TEST(PerfArgs, StepBytesAloneMeansAdditiveSteps) {
  PerfOptions o = parseOk({"-b", "1M", "-e", "4M", "-i", "1M"});
  EXPECT_EQ(o.stepFactor, 1u);
  EXPECT_EQ(sizeSteps(o), (std::vector<size_t>{1u << 20, 2u << 20, 3u << 20, 4u << 20}));
  // With -f too, the factor wins (as in nccl-tests).
  EXPECT_EQ(sizeSteps(parseOk({"-b", "1M", "-e", "4M", "-i", "1M", "-f", "2"})).size(), 3u);
  // 0 bytes is a valid start.
  EXPECT_EQ(sizeSteps(parseOk({"-b", "0", "-e", "4", "-f", "2"})), (std::vector<size_t>{0, 1, 2, 4}));
}

TEST(PerfArgs, RejectsBadInput) {
  EXPECT_NE(parseError({"-b", "2M", "-e", "1M"}).find("minbytes"), std::string::npos);
  EXPECT_NE(parseError({"-d", "float128"}).find("unknown datatype"), std::string::npos);
  EXPECT_NE(parseError({"-o", "xor"}).find("unknown op"), std::string::npos);
  EXPECT_NE(parseError({"-o", "none"}).find("unknown op"), std::string::npos);
  EXPECT_NE(parseError({"--coll", "allreducex"}).find("unknown collective"), std::string::npos);
  EXPECT_NE(parseError({"-n", "0"}).find("-n"), std::string::npos);
  EXPECT_NE(parseError({"-n", "abc"}).find("-n"), std::string::npos);
  EXPECT_NE(parseError({"-z", "2"}).find("-z"), std::string::npos);
  EXPECT_NE(parseError({"-g", "2"}).find("one rank per process or thread"), std::string::npos);
  EXPECT_NE(parseError({"-np", "0"}).find("-np"), std::string::npos);
  EXPECT_NE(parseError({"-b"}).find("needs a value"), std::string::npos);
  EXPECT_NE(parseError({"--memory", "gpu"}).find("--memory"), std::string::npos);
  EXPECT_NE(parseError({"--memory", "host", "-G", "1"}).find("device memory"), std::string::npos);
  EXPECT_NE(parseError({"-b", "1M", "-e", "2M", "-i", "0"}).find("never"), std::string::npos);
  EXPECT_NE(parseError({"--bogus"}).find("unknown argument"), std::string::npos);
  EXPECT_NE(parseError({"stray"}).find("unknown argument"), std::string::npos);
}

TEST(PerfArgs, ParseSizeUsesPowersOf1024) {
  size_t bytes = 0;
  EXPECT_TRUE(parseSize("8", &bytes) && bytes == 8);
  EXPECT_TRUE(parseSize("2k", &bytes) && bytes == 2048);
  EXPECT_TRUE(parseSize("1.5M", &bytes) && bytes == 1536u * 1024);
  EXPECT_TRUE(parseSize("1G", &bytes) && bytes == 1u << 30);
  EXPECT_FALSE(parseSize("", &bytes));
  EXPECT_FALSE(parseSize("12Q", &bytes));
  EXPECT_FALSE(parseSize("-1", &bytes));
  EXPECT_FALSE(parseSize("M", &bytes));
}

TEST(PerfShape, SizeColumnCountAndBuffersFollowNcclTests) {
  // all-gather of 1000 B of float over 3 ranks: 250 elements, 83 per rank, 996 B received.
  CallShape ag = callShape(Collective::AllGather, ncclFloat32, 1000, 3);
  EXPECT_EQ(ag.count, 83u);
  EXPECT_EQ(ag.sendElems, 83u);
  EXPECT_EQ(ag.recvElems, 249u);
  EXPECT_EQ(ag.bytes, 996u);
  CallShape rs = callShape(Collective::ReduceScatter, ncclFloat32, 1024, 4);
  EXPECT_EQ(rs.count, 64u);
  EXPECT_EQ(rs.sendElems, 256u);
  EXPECT_EQ(rs.bytes, 1024u);
  CallShape ar = callShape(Collective::AllReduce, ncclFloat16, 10, 8);
  EXPECT_EQ(ar.count, 5u);
  EXPECT_EQ(ar.bytes, 10u);
  CallShape a2a = callShape(Collective::AlltoAll, ncclInt8, 8, 4);
  EXPECT_EQ(a2a.count, 2u);
  EXPECT_EQ(a2a.bytes, 8u);
  EXPECT_EQ(callShape(Collective::AllGather, ncclFloat32, 8, 4).bytes, 0u);  // 2 elements over 4 ranks
}

TEST(PerfShape, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::AllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::ReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::AlltoAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::Gather, 2), 0.5);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::Broadcast, 8), 1);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::Reduce, 8), 1);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::SendRecv, 8), 1);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::AllReduce, 1), 0);
}

EnvLookup fakeEnv(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(PerfLaunchMode, TellsParentLauncherAndMpiApart) {
  LaunchContext c;
  std::string error;
  ASSERT_TRUE(detectLaunch(fakeEnv({}), &c, &error));
  EXPECT_EQ(c.mode, LaunchMode::Parent);

  ASSERT_TRUE(detectLaunch(fakeEnv({{"BRAID_LAUNCH_RANK", "2"}, {"BRAID_LAUNCH_NRANKS", "4"}}), &c, &error));
  EXPECT_EQ(c.mode, LaunchMode::Launched);
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.nRanks, 4);
  EXPECT_EQ(c.localRank, 2);

  ASSERT_TRUE(detectLaunch(fakeEnv({{"OMPI_COMM_WORLD_RANK", "5"},
                                    {"OMPI_COMM_WORLD_SIZE", "8"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}),
                           &c, &error));
  EXPECT_EQ(c.mode, LaunchMode::Mpi);
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.localRank, 1);
  EXPECT_EQ(c.source, "OMPI_COMM_WORLD_RANK");

  ASSERT_TRUE(detectLaunch(fakeEnv({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}}), &c, &error));
  EXPECT_EQ(c.mode, LaunchMode::Mpi);
  EXPECT_EQ(c.localRank, 3);  // no local-rank variable: the global rank
}

TEST(PerfLaunchMode, RejectsInconsistentVariables) {
  LaunchContext c;
  std::string error;
  EXPECT_FALSE(detectLaunch(fakeEnv({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}), &c, &error));
  EXPECT_NE(error.find("OMPI_COMM_WORLD_RANK"), std::string::npos);
  EXPECT_FALSE(detectLaunch(fakeEnv({{"BRAID_LAUNCH_RANK", "0"}}), &c, &error));
  EXPECT_FALSE(detectLaunch(fakeEnv({{"PMI_RANK", "x"}, {"PMI_SIZE", "2"}}), &c, &error));
}

}  // namespace
}  // namespace braid::perf
