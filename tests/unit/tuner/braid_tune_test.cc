// braid-tune run as a program (the real binary, through the shell) on every NCCL topology XML
// of tests/data/topologies: exit 0 and a table of one row per size; bad NCCL_ALGO/NCCL_PROTO
// and bad arguments exit non-zero with a message naming what is wrong.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct ToolRun {
  int exitCode = -1;
  std::string out;  // stdout and stderr together
};

// `env` goes before the program (VAR=value ...); the caller's NCCL_ALGO/NCCL_PROTO are dropped.
ToolRun braidTune(const std::string& args, const std::string& env = "") {
  const std::string command = "env -u NCCL_ALGO -u NCCL_PROTO -u NCCL_P2P_DISABLE -u NCCL_NVB_DISABLE " + env + " '" +
                              BRAID_TUNE + "' " + args + " 2>&1";
  ToolRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    ADD_FAILURE() << "popen failed: " << command;
    return run;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) run.out.append(buf, n);
  const int status = pclose(pipe);
  run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

struct Row {
  unsigned long long bytes = 0;
  std::string algorithm, protocol;
  int channels = 0, slices = 0;
  double us = 0;
  std::string runnerUp;
};

// The table's rows (lines after the column header), or a failure naming the bad line.
std::vector<Row> rowsOf(const std::string& out) {
  std::vector<Row> rows;
  std::istringstream lines(out);
  std::string line;
  bool table = false;
  while (std::getline(lines, line)) {
    if (!table) {
      table = line.find("bytes") != std::string::npos && line.find("runner-up") != std::string::npos && line[0] != '#';
      continue;
    }
    std::istringstream fields(line);
    Row r;
    fields >> r.bytes >> r.algorithm >> r.protocol >> r.channels >> r.slices >> r.us;
    std::getline(fields, r.runnerUp);
    EXPECT_FALSE(fields.bad()) << line;
    EXPECT_FALSE(r.algorithm.empty() || r.protocol.empty() || r.runnerUp.empty()) << line;
    rows.push_back(r);
  }
  EXPECT_TRUE(table) << out;
  return rows;
}

std::vector<std::string> topologyFiles() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(BRAID_TOPO_DATA) + "/nccl-xml"))
    if (e.path().extension() == ".xml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

void expectPowersOfTwo(const std::vector<Row>& rows, unsigned long long min, unsigned long long max, const std::string& what) {
  std::vector<unsigned long long> expected;
  for (unsigned long long b = min; b <= max; b *= 2) expected.push_back(b);
  ASSERT_EQ(rows.size(), expected.size()) << what;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].bytes, expected[i]) << what;
    EXPECT_GT(rows[i].us, 0) << what;
    EXPECT_GE(rows[i].channels, 1) << what;
  }
}

TEST(BraidTune, EveryTopologyFileGivesATable) {
  const auto files = topologyFiles();
  ASSERT_GE(files.size(), 16u);
  for (const std::string& f : files) {
    for (const char* ranks : {"", "--ranks 2 --ranks-per-gpu 2", "--ranks 3"}) {
      const ToolRun run = braidTune("--topo '" + f + "' --coll allreduce " + ranks + " --min 8 --max 1M");
      SCOPED_TRACE(f + " " + ranks);
      ASSERT_EQ(run.exitCode, 0) << run.out;
      EXPECT_NE(run.out.find("# braid-tune: AllReduce"), std::string::npos) << run.out;
      EXPECT_NE(run.out.find("# protocols: the choice over braid's defaults"), std::string::npos) << run.out;
      expectPowersOfTwo(rowsOf(run.out), 8, 1 << 20, f);
    }
  }
}

TEST(BraidTune, EveryCollective) {
  const std::string h200 = std::string(BRAID_TOPO_DATA) + "/nccl-xml/vastai-hgx-h200-8gpu.xml";
  for (const char* coll : {"allreduce", "AllGather", "reducescatter", "broadcast", "reduce", "alltoall", "gather", "scatter",
                           "sendrecv"}) {
    const ToolRun run = braidTune("--topo '" + h200 + "' --coll " + coll + " --ranks 8 --min 1 --max 4G");
    ASSERT_EQ(run.exitCode, 0) << coll << "\n" << run.out;
    expectPowersOfTwo(rowsOf(run.out), 1, 4ull << 30, coll);
  }
}

TEST(BraidTune, DefaultProtocolsAreTheLibrarys) {
  const std::string data = BRAID_TOPO_DATA;
  // Ranks on one GPU: LL for small calls, Simple for large ones.
  ToolRun run = braidTune("--topo '" + data + "/nccl-xml/h200-1gpu-vm-dump.xml' --ranks 4 --max 64M");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  ASSERT_FALSE(rowsOf(run.out).empty()) << run.out;
  EXPECT_EQ(rowsOf(run.out).front().protocol, "LL") << run.out;
  EXPECT_EQ(rowsOf(run.out).back().protocol, "Simple") << run.out;
  for (const Row& r : rowsOf(run.out)) EXPECT_NE(r.protocol, "LL128") << r.bytes;
  // Across GPUs nothing but Simple has been measured: Simple only, unless NCCL_PROTO says more.
  run = braidTune("--topo '" + data + "/nccl-xml/vastai-hgx-h200-8gpu.xml' --ranks 8 --max 64M");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  for (const Row& r : rowsOf(run.out)) EXPECT_EQ(r.protocol, "Simple") << r.bytes;
}

// A send/recv's row is what its launch runs: Simple, also where NCCL_PROTO allows LL beside it
// (the tuner alone would take LL for small sends there), and LL only when NCCL_PROTO leaves it
// alone for send/recv. No runner-up: there is one protocol to weigh.
TEST(BraidTune, SendRecvNamesTheProtocolItsLaunchRuns) {
  const std::string data = BRAID_TOPO_DATA;
  struct Case {
    std::string env, runs;
  };
  for (const char* topo : {"vastai-hgx-h200-8gpu.xml", "h200-1gpu-vm-dump.xml", "rtx4090-4gpu-pcie-epyc-nps4.xml"}) {
    for (const Case& c : {Case{"", "Simple"}, Case{"NCCL_PROTO=LL,Simple", "Simple"}, Case{"NCCL_PROTO=LL,LL128,Simple", "Simple"},
                          Case{"NCCL_PROTO=LL", "LL"}, Case{"NCCL_PROTO='sendrecv:LL;allreduce:Simple'", "LL"}}) {
      const ToolRun run = braidTune("--topo '" + data + "/nccl-xml/" + topo + "' --coll sendrecv --ranks 2 --max 64M", c.env);
      SCOPED_TRACE(std::string(topo) + " " + c.env);
      ASSERT_EQ(run.exitCode, 0) << run.out;
      EXPECT_NE(run.out.find("# send/recv: a launch of sends and receives alone asks " + c.runs + " on every rank"), std::string::npos)
          << run.out;
      const std::vector<Row> rows = rowsOf(run.out);
      ASSERT_FALSE(rows.empty()) << run.out;
      for (const Row& r : rows) {
        EXPECT_EQ(r.algorithm, "p2p") << r.bytes;
        EXPECT_EQ(r.protocol, c.runs) << r.bytes;
        EXPECT_EQ(r.runnerUp.substr(r.runnerUp.find_first_not_of(' ')), "-") << r.bytes;
      }
    }
  }
}

TEST(BraidTune, ProtocolRules) {
  const std::string data = BRAID_TOPO_DATA;
  const std::string all = "NCCL_PROTO=LL,LL128,Simple";  // the rules among every protocol
  // Small calls take LL, the largest Simple.
  ToolRun run = braidTune("--topo '" + data + "/nccl-xml/vastai-hgx-h200-8gpu.xml' --ranks 2 --max 64M", all);
  ASSERT_EQ(run.exitCode, 0) << run.out;
  ASSERT_FALSE(rowsOf(run.out).empty()) << run.out;
  EXPECT_EQ(rowsOf(run.out).front().protocol, "LL") << run.out;
  EXPECT_EQ(rowsOf(run.out).back().protocol, "Simple") << run.out;
  // All protocols over NVLink: LL somewhere, LL128 allowed.
  run = braidTune("--topo '" + data + "/nccl-xml/vastai-hgx-h200-8gpu.xml' --ranks 8 --max 64M", all);
  ASSERT_EQ(run.exitCode, 0) << run.out;
  bool ll = false;
  for (const Row& r : rowsOf(run.out)) ll = ll || r.protocol == "LL";
  EXPECT_TRUE(ll) << run.out;
  // A PCIe machine (4 RTX 4090s) and host staging: never LL128.
  for (const std::string& env : {all, all + " NCCL_P2P_DISABLE=1"}) {
    run = braidTune("--topo '" + data + "/nccl-xml/rtx4090-4gpu-pcie-epyc-nps4.xml' --max 1G", env);
    ASSERT_EQ(run.exitCode, 0) << run.out;
    for (const Row& r : rowsOf(run.out)) {
      EXPECT_NE(r.protocol, "LL128") << env << " " << r.bytes;
      EXPECT_EQ(r.runnerUp.find("LL128"), std::string::npos) << env << " " << r.bytes;
    }
  }
  run = braidTune("--topo '" + data + "/nccl-xml/vastai-hgx-h200-8gpu.xml' --max 1M", all + " NCCL_P2P_DISABLE=1");
  EXPECT_NE(run.out.find("host-staged"), std::string::npos) << run.out;
}

TEST(BraidTune, HonoursNcclAlgoAndNcclProto) {
  const std::string h200 = std::string(BRAID_TOPO_DATA) + "/nccl-xml/vastai-hgx-h200-8gpu.xml";
  ToolRun run = braidTune("--topo '" + h200 + "' --ranks 4 --max 1G", "NCCL_PROTO=LL128 NCCL_ALGO=allreduce:twoshot");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  for (const Row& r : rowsOf(run.out)) {
    EXPECT_EQ(r.protocol, "LL128") << r.bytes;
    EXPECT_EQ(r.algorithm, "twoshot") << r.bytes;
  }
  // Ignored NCCL names are noted; a constraint that leaves nothing is a warning, not a failure.
  run = braidTune("--topo '" + h200 + "' --ranks 4 --max 1K", "NCCL_ALGO=PAT");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  EXPECT_NE(run.out.find("# note: NCCL_ALGO: \"PAT\" accepted and ignored"), std::string::npos) << run.out;
  run = braidTune("--topo '" + h200 + "' --coll alltoall --ranks 4 --max 1K", "NCCL_ALGO=ring");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  EXPECT_NE(run.out.find("# warning: AlltoAll"), std::string::npos) << run.out;
  expectPowersOfTwo(rowsOf(run.out), 8, 1024, "alltoall");
}

TEST(BraidTune, BadValuesExitNonZeroAndSayWhy) {
  const std::string h200 = std::string(BRAID_TOPO_DATA) + "/nccl-xml/vastai-hgx-h200-8gpu.xml";
  struct Case {
    std::string env, args, says;
  };
  const Case cases[] = {
      {"NCCL_PROTO=LL,Bogus", "", "\"Bogus\""},
      {"NCCL_PROTO=LL,Bogus", "", "LL, LL128, Simple"},
      {"NCCL_PROTO='LL;;Simple'", "", "empty part"},
      {"NCCL_ALGO=allreduce:", "", "names no algorithms"},
      {"NCCL_ALGO=fancy", "", "\"fancy\""},
      {"", "--coll allsum", "unknown collective \"allsum\""},
      {"", "--ranks 9 --ranks-per-gpu 1", "need 9 GPUs; 8 are given"},
      {"", "--gpus 0,9", "no GPU 9"},
      {"", "--gpus 0,,1", "--gpus takes GPU numbers"},
      {"", "--min 1X", "--min takes a size"},
      {"", "--min 1M --max 1K", "--min is above --max"},
      {"", "--frobnicate", "unknown argument --frobnicate"},
  };
  for (const Case& c : cases) {
    const ToolRun run = braidTune("--topo '" + h200 + "' " + c.args, c.env);
    EXPECT_NE(run.exitCode, 0) << c.env << " " << c.args << "\n" << run.out;
    EXPECT_NE(run.out.find(c.says), std::string::npos) << c.env << " " << c.args << "\n" << run.out;
  }
  // Not topology files: a graph dump, a `nvidia-smi topo -m` text, a missing file.
  for (const std::string& f : {std::string(BRAID_TOPO_DATA) + "/nccl-graph/vastai-hgx-h200-8gpu.graph.xml",
                               std::string(BRAID_TOPO_DATA) + "/nvidia-smi-topo/hgx-h200-vastai.topo-m.txt",
                               std::string(BRAID_TOPO_DATA) + "/no-such-file.xml"}) {
    const ToolRun run = braidTune("--topo '" + f + "'");
    EXPECT_NE(run.exitCode, 0) << f << "\n" << run.out;
    EXPECT_NE(run.out.find("braid-tune: "), std::string::npos) << run.out;
  }
  EXPECT_NE(braidTune("").exitCode, 0);  // --topo is required
}

}  // namespace
