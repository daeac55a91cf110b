// The parts of braid-doctor's measurements that need no GPU, run for real: braid-perf's own JSON
// writer feeding the doctor's reader, processes started and killed at deadlines, a descriptor
// passed over a socket pair, and the expectations' tables.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "perf/perf_json.h"
#include "tools/braid-doctor/measure_child.h"
#include "tools/braid-doctor/measure_ipc_protocol.h"
#include "tools/json/json.h"
#include "tools/braid-doctor/measure_util.h"

namespace braid::doctor::measure {
namespace {

TEST(DoctorMeasureJson, ReadsBraidPerfsReport) {
  perf::PerfReport r;
  r.args = {"braid-perf", "-np", "2"};
  r.ncclVersion = 22809;
  r.nRanks = 2;
  r.memory = "device";
  r.startTime = r.endTime = "2026-01-01 00:00:00";
  r.ranks.push_back({0, 123, "host \"a\"\n", 0, "0000:17:00", "NVIDIA H200"});
  for (size_t bytes : {size_t{8}, size_t{1024}, size_t{1} << 20}) {
    perf::ResultRow row;
    row.bytes = bytes;
    row.count = bytes / 4;
    row.type = "float";
    row.op = "sum";
    row.outOfPlace.timeUs = 10.5 + static_cast<double>(bytes) / 1e6;
    row.outOfPlace.busBw = static_cast<double>(bytes) / 1e4;
    row.outOfPlace.algBw = static_cast<double>(bytes) / 2e4;
    r.rows.push_back(row);
  }
  json::Value doc;
  std::string why;
  ASSERT_TRUE(json::parse(perf::reportJson(r), &doc, &why)) << why;
  ASSERT_NE(doc.find("nccl_version"), nullptr);
  EXPECT_EQ(doc.find("nccl_version")->numberOr(0), 22809);
  EXPECT_EQ(doc.find("devices")->items.at(0).find("hostname")->text, "host \"a\"\n");
  const json::Value* results = doc.find("results");
  ASSERT_NE(results, nullptr);
  ASSERT_EQ(results->items.size(), 3u);
  const json::Value& last = results->items[2];
  EXPECT_EQ(last.find("size")->numberOr(0), 1048576);
  EXPECT_DOUBLE_EQ(last.find("out_of_place")->find("bus_bw")->numberOr(0), 1048576 / 1e4);
  EXPECT_NEAR(last.find("out_of_place")->find("time")->numberOr(0), 10.5 + 1.048576, 1e-6);
  EXPECT_EQ(last.find("out_of_place")->find("nwrong")->type, json::Value::Null);  // unchecked
}

TEST(DoctorMeasureJson, EscapesAndErrors) {
  json::Value v;
  std::string why;
  ASSERT_TRUE(json::parse(R"({"a": "\u00e9\ud83d\ude00\t", "b": [1, -2.5e3, true, null], "c": {}})", &v, &why)) << why;
  EXPECT_EQ(v.find("a")->text, "\xc3\xa9\xf0\x9f\x98\x80\t");
  EXPECT_EQ(v.find("b")->items.size(), 4u);
  EXPECT_DOUBLE_EQ(v.find("b")->items[1].number, -2500);
  EXPECT_EQ(v.find("missing"), nullptr);
  for (const char* bad : {"", "{", "[1,]x", "{\"a\" 1}", "\"\x01\"", "[1] 2", "{\"a\":tru}"})
    EXPECT_FALSE(json::parse(bad, &v, &why)) << bad;
  std::string deep(100, '[');
  EXPECT_FALSE(json::parse(deep + std::string(100, ']'), &v, &why));
  EXPECT_NE(why.find("deep"), std::string::npos) << why;
}

TEST(DoctorMeasureChild, ExitCodeEnvironmentAndOutput) {
  TempDir dir;
  std::string why;
  ASSERT_TRUE(dir.create(&why)) << why;
  SpawnRequest req;
  req.argv = {"/bin/sh", "-c", "echo \"value=$BRAID_DOCTOR_TEST\"; exit 3"};
  req.setEnv = {"BRAID_DOCTOR_TEST=seen"};
  req.outputPath = dir.path() + "/out.log";
  pid_t pid = spawnChild(req, &why);
  ASSERT_GT(pid, 0) << why;
  ChildEnd end = waitChild(pid, nowSeconds() + 10);
  EXPECT_TRUE(end.exited);
  EXPECT_EQ(end.exitCode, 3);
  EXPECT_EQ(fileTail(req.outputPath, 100), "value=seen ");
  req.argv = {"/nonexistent/program"};
  EXPECT_LT(spawnChild(req, &why), 0);
  EXPECT_NE(why.find("/nonexistent/program"), std::string::npos) << why;
}

TEST(DoctorMeasureChild, DeadlineKillsTheWholeGroup) {
  TempDir dir;
  std::string why;
  ASSERT_TRUE(dir.create(&why)) << why;
  const std::string pidFile = dir.path() + "/grandchild";
  SpawnRequest req;
  // The child starts a grandchild and waits: the deadline must end both.
  req.argv = {"/bin/sh", "-c", "sleep 30 & echo $! > " + pidFile + "; wait"};
  pid_t pid = spawnChild(req, &why);
  ASSERT_GT(pid, 0) << why;
  double t0 = nowSeconds();
  pid_t grandchild = 0;
  for (int i = 0; i < 500 && grandchild == 0; ++i) {  // up to 5 s for the pid file
    std::ifstream(pidFile) >> grandchild;
    if (grandchild == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(grandchild, 0);
  ChildEnd end = waitChild(pid, t0 + 0.3);
  EXPECT_TRUE(end.killed);
  EXPECT_LT(nowSeconds() - t0, 5.0);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {  // init reaps the orphan: up to 2 s
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string pidText, comm, state;
    gone = !(stat >> pidText >> comm >> state) || state == "Z";
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "grandchild " << grandchild << " survived its group's kill";
}

TEST(DoctorMeasureChild, InheritsOnlyTheKeptDescriptor) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  SpawnRequest req;
  req.argv = {"/bin/sh", "-c", "printf hello >&" + std::to_string(sv[1]) + " && ! printf x >&" + std::to_string(sv[0]) + " 2>/dev/null"};
  req.keepFd = sv[1];
  std::string why;
  pid_t pid = spawnChild(req, &why);
  ASSERT_GT(pid, 0) << why;
  EXPECT_EQ(fcntl(sv[1], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);  // restored in the parent
  ChildEnd end = waitChild(pid, nowSeconds() + 10);
  EXPECT_EQ(end.exitCode, 0) << end.text;
  close(sv[1]);
  char buf[16] = {};
  EXPECT_EQ(read(sv[0], buf, sizeof buf), 5);
  EXPECT_STREQ(buf, "hello");
  close(sv[0]);
}

TEST(DoctorMeasureIpc, MessageWithDescriptorAndTimeouts) {
  int sv[2], pipeFds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_EQ(pipe(pipeFds), 0);
  IpcRequest sent;
  sent.kind = IpcKind::CuMem;
  sent.bytes = 2 << 20;
  sent.pattern = 0x61;
  std::string why;
  ASSERT_TRUE(sendMessage(sv[0], &sent, sizeof sent, pipeFds[1], &why)) << why;
  close(pipeFds[1]);
  IpcRequest got;
  int fd = -1;
  ASSERT_TRUE(receiveMessage(sv[1], &got, sizeof got, &fd, nowSeconds() + 5, &why)) << why;
  EXPECT_EQ(got.kind, IpcKind::CuMem);
  EXPECT_EQ(got.bytes, sent.bytes);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  ASSERT_EQ(write(fd, "x", 1), 1);  // the received descriptor is the pipe's write end
  close(fd);
  char c = 0;
  EXPECT_EQ(read(pipeFds[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  close(pipeFds[0]);

  double t0 = nowSeconds();
  EXPECT_FALSE(receiveMessage(sv[1], &got, sizeof got, &fd, nowSeconds() + 0.1, &why));
  EXPECT_NE(why.find("deadline"), std::string::npos) << why;
  EXPECT_LT(nowSeconds() - t0, 2.0);
  IpcReply wrongSize;
  ASSERT_TRUE(sendMessage(sv[0], &wrongSize, sizeof wrongSize, -1, &why)) << why;
  EXPECT_FALSE(receiveMessage(sv[1], &got, sizeof got, &fd, nowSeconds() + 5, &why));
  close(sv[0]);
  EXPECT_FALSE(receiveMessage(sv[1], &got, sizeof got, &fd, nowSeconds() + 5, &why));
  EXPECT_NE(why.find("closed"), std::string::npos) << why;
  close(sv[1]);
}

TEST(DoctorMeasureUtil, SizesAndExpectations) {
  auto quick = sweepSizes(true), full = sweepSizes(false);
  EXPECT_EQ(quick, (std::vector<size_t>{64 << 10, 64 << 20}));
  ASSERT_EQ(full.size(), 9u);  // 4 KB, 16 KB, ..., 256 MB
  EXPECT_EQ(full.front(), 4u << 10);
  EXPECT_EQ(full.back(), 256u << 20);
  EXPECT_EQ(pcieGeneration(32.0), 5);
  EXPECT_EQ(pcieGeneration(2.5), 1);
  EXPECT_EQ(pcieGeneration(0), 0);
  EXPECT_DOUBLE_EQ(pciePracticalGbps(32, 16), 55);
  EXPECT_DOUBLE_EQ(pciePracticalGbps(16, 16), 26);
  EXPECT_DOUBLE_EQ(pciePracticalGbps(16, 8), 13);
  EXPECT_EQ(pciePracticalGbps(0, 16), 0);
  PcieLink link;
  link.currentGts = 16;
  link.currentWidth = 8;
  link.maxGts = 32;
  link.maxWidth = 16;
  EXPECT_EQ(link.text(), "Gen4 x8 (device max Gen5 x16)");
  EXPECT_EQ(sizeText(64 << 20), "64 MB");
  EXPECT_EQ(sizeText(8), "8 B");
}

TEST(DoctorMeasureUtil, TempDirIsRemoved) {
  std::string path, why;
  {
    TempDir dir;
    ASSERT_TRUE(dir.create(&why)) << why;
    path = dir.path();
    std::ofstream(path + "/a") << "x";
    std::ofstream(path + "/b") << "y";
  }
  struct stat st {};
  EXPECT_NE(stat(path.c_str(), &st), 0);
}

}  // namespace
}  // namespace braid::doctor::measure
