// braid-doctor run as users run it (a real process, this machine's real /sys, CUDA and
// libraries): exit codes, the skips without a GPU, the JSON against docs/doctor.schema.json,
// the PNG, and the --quick time bound.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "json_check.h"
#include "subprocess.h"

namespace braid::doctor::test {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class DoctorRun : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/braid-doctor-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const char* f : {"/r.json", "/r.png"}) ::unlink((dir_ + f).c_str());
    ::rmdir(dir_.c_str());
  }
  // The doctor with `env` settings first (NAME=VALUE), BRAID_NCCL_LIBRARY cleared unless given.
  CommandResult doctor(std::vector<std::string> args, std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {"env", "-u", "BRAID_NCCL_LIBRARY"};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.push_back(BRAID_DOCTOR_BIN);
    argv.insert(argv.end(), args.begin(), args.end());
    return runCommand(argv, 60);
  }
  Json report(const std::string& path) {
    Json j;
    std::string error;
    EXPECT_TRUE(parseJson(slurp(path), &j, &error)) << error;
    return j;
  }
  std::string dir_;
};

Json schema() {
  Json s;
  std::string error;
  EXPECT_TRUE(parseJson(slurp(BRAID_DOCTOR_SCHEMA), &s, &error)) << error;
  return s;
}

const Json* factNamed(const Json& r, const std::string& section, const std::string& name) {
  for (const auto& f : r.find("facts")->items)
    if (f.find("section")->text == section && f.find("name")->text == name) return &f;
  return nullptr;
}

TEST_F(DoctorRun, QuickRunIsBoundedValidAndSkipsGpuPartsWithoutAGpu) {
  auto t0 = std::chrono::steady_clock::now();
  CommandResult c = doctor({"--quick", "--json", dir_ + "/r.json"});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(c.started) << c.error;
  ASSERT_FALSE(c.timedOut);
  EXPECT_LT(seconds, 10.0) << "--quick promises under 10 s";
  EXPECT_TRUE(c.exitCode == 0 || c.exitCode == 1) << "exit " << c.exitCode << "\n" << c.output;
  EXPECT_NE(c.output.find("braid-doctor took"), std::string::npos) << c.output;

  Json r = report(dir_ + "/r.json");
  std::vector<std::string> errors = validate(r, schema());
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_EQ(r.find("exitCode")->number, c.exitCode);

  // Without a GPU every part that needs one is listed with CUDA's reason.
  const Json* devices = factNamed(r, "gpus", "CUDA devices");
  if (!devices) GTEST_SKIP() << "this machine has a CUDA device";
  std::vector<std::string> gpuParts = {"GPUs", "topology matrix", "P2P capability", "IOMMU/ACS on GPU paths", "copies",
                                       "peers", "ipc", "collectives", "storage reads"};
  for (const auto& part : gpuParts) {
    bool listed = false;
    for (const auto& s : r.find("skipped")->items)
      if (s.find("part")->text == part) {
        listed = true;
        EXPECT_EQ(s.find("reason")->text.rfind("no CUDA device: ", 0), 0u) << part << ": " << s.find("reason")->text;
        EXPECT_GT(s.find("reason")->text.size(), std::string("no CUDA device: ").size()) << "CUDA's error text";
      }
    EXPECT_TRUE(listed) << part << " is not among the skipped parts";
  }
  // Host parts still ran.
  EXPECT_NE(factNamed(r, "versions", "braid"), nullptr);
  EXPECT_NE(factNamed(r, "mps", "daemon"), nullptr);
}

TEST_F(DoctorRun, BadCommandLinesExitTwoWithUsage) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"--bogus"}, {"--skip", "nonsense"}, {"--json"}}) {
    CommandResult c = doctor(args);
    EXPECT_EQ(c.exitCode, 2) << args[0];
    EXPECT_NE(c.output.find("usage: braid-doctor"), std::string::npos) << c.output;
  }
  EXPECT_EQ(doctor({"--help"}).exitCode, 0);
}

TEST_F(DoctorRun, AMissingRealNcclIsAWarning) {
  CommandResult base = doctor({"--quick", "--skip", "network,storage"});
  ASSERT_TRUE(base.exitCode == 0 || base.exitCode == 1) << base.output;
  CommandResult c = doctor({"--quick", "--skip", "network,storage", "--json", dir_ + "/r.json"},
                           {"BRAID_NCCL_LIBRARY=/nonexistent"});
  EXPECT_EQ(c.exitCode, 1) << c.output;
  Json r = report(dir_ + "/r.json");
  const Json* f = factNamed(r, "versions", "real NCCL");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->find("severity")->text, "warning");
  EXPECT_EQ(f->find("value")->text.rfind("/nonexistent: cannot open it", 0), 0u) << f->find("value")->text;
  EXPECT_EQ(r.find("status")->text, "warning");
}

TEST_F(DoctorRun, SkipListsThePartAndRunsTheRest) {
  CommandResult c = doctor({"--quick", "--skip", "mps,versions", "--json", dir_ + "/r.json"});
  ASSERT_TRUE(c.exitCode == 0 || c.exitCode == 1) << c.output;
  Json r = report(dir_ + "/r.json");
  EXPECT_EQ(factNamed(r, "mps", "daemon"), nullptr);
  EXPECT_EQ(factNamed(r, "versions", "braid"), nullptr);
  EXPECT_NE(factNamed(r, "iommu", "IOMMU groups"), nullptr);
  int skips = 0;
  for (const auto& s : r.find("skipped")->items) skips += s.find("reason")->text.rfind("--skip ", 0) == 0;
  EXPECT_EQ(skips, 2);
}

TEST_F(DoctorRun, PlotWritesAPng) {
  CommandResult c = doctor({"--quick", "--skip", "network,storage", "--plot", dir_ + "/r.png"});
  ASSERT_TRUE(c.exitCode == 0 || c.exitCode == 1) << c.output;
  std::string png = slurp(dir_ + "/r.png");
  ASSERT_GE(png.size(), 33u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png.substr(12, 4), "IHDR");
  auto be32 = [&](size_t at) {
    return (uint32_t(uint8_t(png[at])) << 24) | (uint32_t(uint8_t(png[at + 1])) << 16) |
           (uint32_t(uint8_t(png[at + 2])) << 8) | uint32_t(uint8_t(png[at + 3]));
  };
  EXPECT_GE(be32(16), 320u);  // width: one panel, ~640 px
  EXPECT_GE(be32(20), 200u);  // height
  EXPECT_EQ(png.substr(png.size() - 8, 4), "IEND");
}

TEST_F(DoctorRun, AnUnwritableJsonPathIsAnError) {
  CommandResult c = doctor({"--quick", "--skip", "network,storage", "--json", dir_ + "/no/such/dir/r.json"});
  EXPECT_EQ(c.exitCode, 2);
  EXPECT_NE(c.output.find("cannot open for writing"), std::string::npos) << c.output;
}

}  // namespace
}  // namespace braid::doctor::test
