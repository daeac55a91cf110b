// braid-perf's rank layout (threads or processes), the MPS check and warning, the exit status
// of a run, the new flags, reading a --json report back, and the --plot panels.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "perf/perf_args.h"
#include "perf/perf_errors.h"
#include "perf/perf_json.h"
#include "perf/perf_json_read.h"
#include "perf/perf_plot.h"
#include "perf/perf_rank_layout.h"

namespace braid::perf {
namespace {

TEST(PerfRankLayout, ThreadsWhenDeviceRanksOutnumberGpus) {
  // The README's first command on one H200: 4 ranks, 1 GPU, memory auto -> device -> threads.
  RankLayout l = chooseRankLayout(0, RanksAs::Auto, MemoryKind::Auto, 1);
  EXPECT_EQ(l.nRanks, 4);
  EXPECT_TRUE(l.threads) << l.why;
  EXPECT_TRUE(chooseRankLayout(0, RanksAs::Auto, MemoryKind::Device, 2).threads);
  EXPECT_TRUE(chooseRankLayout(3, RanksAs::Auto, MemoryKind::Auto, 2).threads);
  // A GPU per rank, or more: processes, as before.
  EXPECT_FALSE(chooseRankLayout(0, RanksAs::Auto, MemoryKind::Auto, 4).threads);
  EXPECT_FALSE(chooseRankLayout(0, RanksAs::Auto, MemoryKind::Device, 8).threads);
  EXPECT_FALSE(chooseRankLayout(2, RanksAs::Auto, MemoryKind::Auto, 2).threads);
  EXPECT_FALSE(chooseRankLayout(1, RanksAs::Auto, MemoryKind::Auto, 1).threads) << "one rank, one GPU";
  EXPECT_EQ(chooseRankLayout(8, RanksAs::Auto, MemoryKind::Auto, 8).nRanks, 8);
}

TEST(PerfRankLayout, ProcessesOnHostMemoryOrWithoutGpus) {
  for (int gpus : {0, 1, 8}) {
    RankLayout l = chooseRankLayout(0, RanksAs::Auto, MemoryKind::Host, gpus);
    EXPECT_FALSE(l.threads) << gpus;
    EXPECT_EQ(l.why, "host memory");
  }
  RankLayout none = chooseRankLayout(0, RanksAs::Auto, MemoryKind::Auto, 0);  // CI: auto is host
  EXPECT_FALSE(none.threads);
  EXPECT_EQ(none.why, "host memory");
  RankLayout deviceNoGpu = chooseRankLayout(0, RanksAs::Auto, MemoryKind::Device, 0);
  EXPECT_FALSE(deviceNoGpu.threads);  // the ranks report the missing GPU, as before
  EXPECT_EQ(deviceNoGpu.why, "no GPU visible");
  EXPECT_FALSE(chooseRankLayout(0, RanksAs::Auto, MemoryKind::Device, -1).threads) << "a failed count";
}

TEST(PerfRankLayout, RanksFlagOverridesEveryCase) {
  for (MemoryKind m : {MemoryKind::Auto, MemoryKind::Host, MemoryKind::Device})
    for (int gpus : {0, 1, 4})
      for (int np : {0, 1, 3, 8}) {
        RankLayout t = chooseRankLayout(np, RanksAs::Threads, m, gpus);
        RankLayout p = chooseRankLayout(np, RanksAs::Processes, m, gpus);
        EXPECT_TRUE(t.threads);
        EXPECT_FALSE(p.threads);
        EXPECT_EQ(t.nRanks, np > 0 ? np : 4);
        EXPECT_EQ(p.nRanks, np > 0 ? np : 4);
        EXPECT_EQ(t.why, "--ranks threads");
        EXPECT_EQ(p.why, "--ranks processes");
      }
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/braid-perf-layout-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  EnvLookup envWith(const std::string& pipeDir) {
    pipeDir_ = pipeDir;
    return [this](const char* name) -> const char* {
      return std::string(name) == "CUDA_MPS_PIPE_DIRECTORY" ? pipeDir_.c_str() : nullptr;
    };
  }
  std::string dir_, pipeDir_;
};

TEST_F(TempDir, MpsControlPipeIsAFifoInThePipeDirectory) {
  EXPECT_FALSE(mpsControlPipePresent(envWith(dir_))) << "empty directory";
  EXPECT_FALSE(mpsControlPipePresent(envWith(dir_ + "/missing")));
  { std::ofstream(dir_ + "/control") << "not a pipe"; }
  EXPECT_FALSE(mpsControlPipePresent(envWith(dir_))) << "a regular file is not the daemon's pipe";
  ASSERT_EQ(unlink((dir_ + "/control").c_str()), 0);
  ASSERT_EQ(mkfifo((dir_ + "/control").c_str(), 0600), 0);
  EXPECT_TRUE(mpsControlPipePresent(envWith(dir_)));
  // Without the variable the default is /tmp/nvidia-mps: whatever this machine has, the
  // answer is the same as looking there directly.
  struct stat st {};
  const bool there = stat("/tmp/nvidia-mps/control", &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
  EXPECT_EQ(mpsControlPipePresent([](const char*) -> const char* { return nullptr; }), there);
  EXPECT_EQ(mpsControlPipePresent(envWith("")), there) << "an empty variable means the default";
}

RankInfo rank(int r, int pid, const std::string& host, int device, const std::string& bus) {
  RankInfo i;
  i.rank = r;
  i.pid = pid;
  i.host = host;
  i.device = device;
  i.busId = bus;
  i.deviceName = device >= 0 ? "NVIDIA H200" : "host memory";
  return i;
}

TEST(PerfMpsWarning, OnlyForSeparateProcessesSharingAGpuWithoutMps) {
  const std::vector<RankInfo> shared = {rank(0, 100, "a", 0, "0000:1b:00"), rank(1, 101, "a", 0, "0000:1b:00")};
  auto w = sharedGpuWithoutMpsWarning(shared, "a", false);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->rfind("# ", 0), 0u) << "a comment line: nccl-tests parsers skip it";
  EXPECT_NE(w->find("0000:1b:00"), std::string::npos);
  EXPECT_NE(w->find("2.3 ms"), std::string::npos);
  EXPECT_NE(w->find("nvidia-cuda-mps-control -d"), std::string::npos);
  EXPECT_NE(w->find("--ranks threads"), std::string::npos);
  EXPECT_FALSE(sharedGpuWithoutMpsWarning(shared, "a", true)) << "MPS running";
  EXPECT_FALSE(sharedGpuWithoutMpsWarning(
      {rank(0, 100, "a", 0, "0000:1b:00"), rank(1, 100, "a", 0, "0000:1b:00")}, "a", false))
      << "threads of one process";
  EXPECT_FALSE(sharedGpuWithoutMpsWarning(
      {rank(0, 100, "a", 0, "0000:1b:00"), rank(1, 101, "a", 1, "0000:2c:00")}, "a", false))
      << "a GPU each";
  EXPECT_FALSE(sharedGpuWithoutMpsWarning({rank(0, 100, "a", -1, "host"), rank(1, 101, "a", -1, "host")}, "a", false))
      << "host memory";
  EXPECT_FALSE(sharedGpuWithoutMpsWarning(
      {rank(0, 100, "a", 0, "0000:1b:00"), rank(1, 100, "b", 0, "0000:1b:00")}, "a", false))
      << "the same bus id on another host is another GPU";
  EXPECT_FALSE(sharedGpuWithoutMpsWarning({}, "a", false));
}

TEST(PerfRanksLine, SaysThreadsOrProcessesAndTheGpus) {
  EXPECT_EQ(ranksLine({rank(0, 1, "a", 0, "x"), rank(1, 1, "a", 0, "x"), rank(2, 1, "a", 0, "x"), rank(3, 1, "a", 0, "x")},
                      true),
            "# ranks: 4 threads of one process on 1 GPU");
  EXPECT_EQ(ranksLine({rank(0, 1, "a", 0, "x"), rank(1, 2, "a", 1, "y")}, false), "# ranks: 2 processes on 2 GPUs");
  EXPECT_EQ(ranksLine({rank(0, 1, "a", -1, "host"), rank(1, 1, "a", -1, "host"), rank(2, 1, "a", -1, "host")}, true),
            "# ranks: 3 threads of one process, host memory");
  EXPECT_EQ(ranksLine({rank(0, 1, "a", 0, "x"), rank(1, 2, "b", 0, "x")}, false),
            "# ranks: 2 processes on 2 hosts on 2 GPUs");
  EXPECT_EQ(ranksLine({rank(0, 1, "a", -1, "host")}, false), "# ranks: 1 process, host memory");
}

TEST(PerfExitStatus, CombinedAsBefore) {
  EXPECT_EQ(combineRankExits({0, 0, 0}), 0);
  EXPECT_EQ(combineRankExits({}), 0);
  EXPECT_EQ(combineRankExits({0, kExitWrongResults, kExitWrongResults}), kExitWrongResults);
  EXPECT_EQ(combineRankExits({kExitUsage, kExitUsage}), kExitUsage);
  EXPECT_EQ(combineRankExits({0, kExitWrongResults, kExitFailure}), kExitFailure);
  EXPECT_EQ(combineRankExits({kExitUsage, kExitFailure}), kExitFailure);
  EXPECT_EQ(combineRankExits({kExitUsage, kExitWrongResults}), kExitFailure);
  EXPECT_EQ(combineRankExits({127}), kExitFailure) << "exec failure";
}

TEST(PerfArgs, RanksAndPlotFlags) {
  ParseResult r = parseArgs({"--ranks", "threads", "-np", "3", "--plot", "out.png", "--plot-compare", "nccl.json"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.options.ranksAs, RanksAs::Threads);
  EXPECT_EQ(r.options.launchRanks, 3);
  EXPECT_EQ(r.options.plotPath, "out.png");
  EXPECT_EQ(r.options.plotComparePath, "nccl.json");
  // Rank processes get the plot flags (rank 0 draws) but not -np or --ranks.
  EXPECT_EQ(r.options.rankArgs, (std::vector<std::string>{"--plot", "out.png", "--plot-compare", "nccl.json"}));
  EXPECT_EQ(parseArgs({"--ranks=processes"}).options.ranksAs, RanksAs::Processes);
  EXPECT_EQ(parseArgs({}).options.ranksAs, RanksAs::Auto);
  EXPECT_STREQ(ranksAsName(RanksAs::Threads), "threads");

  ParseResult bad = parseArgs({"--ranks", "fibers"});
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("--ranks wants threads or processes, got 'fibers'"), std::string::npos) << bad.error;
  bad = parseArgs({"--ranks"});
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("needs a value"), std::string::npos) << bad.error;
  bad = parseArgs({"--plot="});
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("--plot wants a file name"), std::string::npos) << bad.error;
  bad = parseArgs({"--plot-compare", "nccl.json"});
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("needs --plot"), std::string::npos) << bad.error;
}

PerfReport sampleReport() {
  PerfReport r;
  r.nRanks = 4;
  r.ranksAs = "threads";
  r.library = "braid";
  r.memory = "device";
  r.ncclVersion = 22809;
  for (size_t bytes : {8u, 1024u, 1u << 20}) {
    for (const char* op : {"sum", "max"}) {
      ResultRow row;
      row.bytes = bytes;
      row.count = bytes / 4;
      row.type = "float";
      row.op = op;
      row.checked = true;
      row.outOfPlace.timeUs = 10.0 + bytes / 1e4;
      row.outOfPlace.busBw = bytes / row.outOfPlace.timeUs / 1e3;
      row.inPlace = row.outOfPlace;
      r.rows.push_back(row);
    }
  }
  return r;
}

TEST(PerfJsonRead, ReadsItsOwnReportBack) {
  const PerfReport report = sampleReport();
  const std::string json = reportJson(report);
  EXPECT_NE(json.find("\"ranks_as\": \"threads\""), std::string::npos);
  EXPECT_NE(json.find("\"library\": \"braid\""), std::string::npos);
  ReportSeries back;
  std::string error;
  ASSERT_TRUE(reportSeriesFromJson(json, &back, &error)) << error;
  EXPECT_EQ(back.library, "braid");
  EXPECT_EQ(back.collective, "allreduce");
  EXPECT_EQ(back.nRanks, 4);
  ASSERT_EQ(back.rows.size(), report.rows.size());
  for (size_t i = 0; i < back.rows.size(); ++i) {
    EXPECT_EQ(back.rows[i].bytes, report.rows[i].bytes);
    EXPECT_EQ(back.rows[i].op, report.rows[i].op);
    EXPECT_NEAR(back.rows[i].outOfPlace.timeUs, report.rows[i].outOfPlace.timeUs, 1e-6);
    EXPECT_NEAR(back.rows[i].outOfPlace.busBw, report.rows[i].outOfPlace.busBw, 1e-6);
  }
}

TEST(PerfJsonRead, RejectsWhatIsNotAReport) {
  ReportSeries out;
  std::string error;
  EXPECT_FALSE(reportSeriesFromJson("{\"results\": [", &out, &error));
  EXPECT_NE(error.find("offset"), std::string::npos) << error;
  EXPECT_FALSE(reportSeriesFromJson("{\"a\": 1}", &out, &error));
  EXPECT_NE(error.find("not a braid-perf --json report"), std::string::npos) << error;
  EXPECT_FALSE(reportSeriesFromJson("[1, 2] x", &out, &error));
  EXPECT_FALSE(reportSeriesFromJson(std::string(1000, '['), &out, &error)) << "deep nesting is bounded";
  EXPECT_FALSE(loadReportSeries("/nonexistent/braid.json", &out, &error));
  EXPECT_NE(error.find("cannot open /nonexistent/braid.json: No such file"), std::string::npos) << error;
  // A report without "library" (older braid-perf) is labelled by its version.
  ASSERT_TRUE(reportSeriesFromJson("{\"nccl_version\": 22809, \"results\": []}", &out, &error)) << error;
  EXPECT_EQ(out.library, "NCCL API 2.28.9");
  json::Value v;
  ASSERT_TRUE(json::parse("{\"s\": \"a\\\"b\\u0041\", \"t\": true, \"f\": false, \"n\": null, \"x\": -1.5e3}", &v, &error))
      << error;
  EXPECT_EQ(v.find("s")->text, "a\"bA");
  EXPECT_TRUE(v.find("t")->boolean);
  EXPECT_FALSE(v.find("f")->boolean);
  EXPECT_EQ(v.find("n")->type, json::Value::Null);
  EXPECT_DOUBLE_EQ(v.find("x")->number, -1500);
}

TEST(PerfJsonRead, LibraryLabels) {
  EXPECT_EQ(libraryLabel("libbraid.so", 22809), "braid");
  EXPECT_EQ(libraryLabel("libnccl.so.2.28.9", 22809), "NCCL 2.28.9");
  EXPECT_EQ(libraryLabel("libfake_nccl_one_rank.so", 22809), "libfake_nccl_one_rank.so");
  EXPECT_EQ(libraryLabel("", 22304), "NCCL API 2.23.4");
}

TEST(PerfPlot, TwoPanelsASeriesPerTypeAndOpWithComparisonsAdjacent) {
  ReportSeries mine;
  ASSERT_TRUE([&] {
    std::string error;
    return reportSeriesFromJson(reportJson(sampleReport()), &mine, &error);
  }());
  auto panels = perfPlotPanels(mine, nullptr);
  ASSERT_EQ(panels.size(), 2u);
  EXPECT_EQ(panels[0].xLabel, "bytes");
  EXPECT_EQ(panels[0].yLabel, "time (us)");
  EXPECT_EQ(panels[1].yLabel, "bus bandwidth (GB/s)");
  EXPECT_NE(panels[0].title.find("allreduce, 4 ranks"), std::string::npos) << panels[0].title;
  ASSERT_EQ(panels[0].series.size(), 2u);
  EXPECT_EQ(panels[0].series[0].label, "float sum");
  EXPECT_EQ(panels[0].series[1].label, "float max");
  EXPECT_EQ(panels[0].series[0].x, (std::vector<double>{8, 1024, 1 << 20}));
  EXPECT_DOUBLE_EQ(panels[0].series[0].y[1], 10.0 + 1024 / 1e4);

  ReportSeries nccl = mine;
  nccl.library = "NCCL 2.28.9";
  nccl.rows.erase(nccl.rows.begin() + 1);  // drop one max row: the series still pairs up
  ResultRow extra = nccl.rows[0];
  extra.type = "half";
  nccl.rows.push_back(extra);  // a series only the other run has
  panels = perfPlotPanels(mine, &nccl);
  std::vector<std::string> labels;
  for (const auto& s : panels[1].series) labels.push_back(s.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"float sum braid", "float sum NCCL 2.28.9", "float max braid",
                                              "float max NCCL 2.28.9", "half sum NCCL 2.28.9"}));
  EXPECT_EQ(panels[1].series[3].x.size(), 2u);

  ReportSeries again = mine;  // one library twice: told apart by the other's file
  again.source = "processes.json";
  panels = perfPlotPanels(mine, &again);
  EXPECT_EQ(panels[0].series[0].label, "float sum braid (this run)");
  EXPECT_EQ(panels[0].series[1].label, "float sum braid (processes.json)");
}

}  // namespace
}  // namespace braid::perf
