// hwloc in live detection: on this machine it must agree with sysfs (NUMA CPUs, PCI paths and
// ids); given an hwloc view and no sysfs, detection must take NUMA nodes, PCI paths, link speeds
// and NICs from it; where both answer differently sysfs wins and a note says so. Skips (with
// the reason) where braid was built without the hwloc headers or libhwloc.so.15 is missing.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "topo/detect.h"
#include "topo/detect_hwloc.h"
#include "topo/paths.h"
#include "topo/system.h"

namespace braid::topo {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string notesOf(const DetectReport& r) {
  std::string out;
  for (const auto& n : r.notes) out += n.text + "\n";
  return out;
}

TEST(TopoHwloc, CpuMasksAndLinkSpeeds) {
  EXPECT_EQ(cpuMaskOf({0, 1, 2, 3}), "0000000f");
  EXPECT_EQ(cpuMaskOf({0, 40}, 3), "00000000,00000100,00000001");
  EXPECT_EQ(cpusOfMask("00000000,00000100,00000001"), (std::vector<int>{0, 40}));
  EXPECT_EQ(cpusOfMask("0x0000ffff"), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(cpusOfMask(cpuMaskOf({3, 31, 32, 95})), (std::vector<int>{3, 31, 32, 95}));
  std::string speed, width;
  ASSERT_TRUE(pcieSpeedWidthOf(16 * 16.0f * 128 / 130 / 8, &speed, &width));  // Gen4 x16, as hwloc computes it
  EXPECT_EQ(speed, "16.0 GT/s PCIe");
  EXPECT_EQ(width, "16");
  ASSERT_TRUE(pcieSpeedWidthOf(8 * 32.0f * 128 / 130 / 8, &speed, &width));  // = Gen4 x16: the wider pair
  EXPECT_EQ(speed, "16.0 GT/s PCIe");
  EXPECT_EQ(width, "16");
  ASSERT_TRUE(pcieSpeedWidthOf(4 * 8.0f * 128 / 130 / 8, &speed, &width));
  EXPECT_EQ(speed, "8.0 GT/s PCIe");  // Gen3 x4 (or Gen4 x2, Gen5 x1); not Gen1 x16 (8b/10b: 4.0)
  EXPECT_EQ(width, "4");
  ASSERT_TRUE(pcieSpeedWidthOf(4.0f, &speed, &width));  // Gen1 x16 or Gen2 x8
  EXPECT_EQ(width, "16");
  EXPECT_FALSE(pcieSpeedWidthOf(0.0f, &speed, &width));
  EXPECT_FALSE(pcieSpeedWidthOf(3.3f, &speed, &width));
}

// This machine (CI: a VM or container with no GPU; NUMA node 0 and a few PCI devices).
TEST(TopoHwloc, ThisMachineAgreesWithSysfs) {
  if (!hwlocCompiledIn()) GTEST_SKIP() << "braid was built without hwloc (install libhwloc-dev and reconfigure)";
  HwlocView hw = readHwloc();
  if (!hw.loaded) GTEST_SKIP() << "hwloc compiled in but unusable here: " << hw.why;
  EXPECT_FALSE(hw.version.empty());
  ASSERT_FALSE(hw.numaCpus.empty()) << "hwloc found no NUMA node";

  // NUMA nodes with CPUs: the same CPUs as sysfs.
  const std::string nodeDir = "/sys/devices/system/node";
  int compared = 0;
  for (const auto& [id, cpus] : hw.numaCpus) {
    std::string mask = slurp(nodeDir + "/node" + std::to_string(id) + "/cpumap");
    if (mask.empty()) continue;  // no sysfs NUMA in this container
    EXPECT_EQ(cpusOfMask(mask), cpus) << "node " << id << ": sysfs " << mask << ", hwloc " << cpuMaskOf(cpus);
    ++compared;
  }
  if (::access((nodeDir + "/node0").c_str(), F_OK) == 0) {
    EXPECT_GT(compared, 0);
  }

  // PCI devices: each one hwloc reports is in sysfs with the same class and vendor.
  for (const auto& [bus, d] : hw.pci) {
    std::string dir = "/sys/bus/pci/devices/" + bus;
    if (::access(dir.c_str(), F_OK) != 0) continue;
    char buf[16];
    std::snprintf(buf, sizeof(buf), "0x%04x", d.vendor);
    EXPECT_EQ(slurp(dir + "/vendor"), buf) << bus;
    std::snprintf(buf, sizeof(buf), "0x%04x", d.classId);
    EXPECT_EQ(slurp(dir + "/class").substr(0, 6), buf) << bus;
  }

  // Detection with both: hwloc used, no disagreement, and the graph's CPUs are hwloc's.
  DetectOptions opt;
  opt.useCuda = false;
  opt.useNvml = false;
  DetectReport report;
  XmlElement xml = detectTopologyXml(opt, &report);
  System sys;
  std::string error;
  ASSERT_TRUE(buildSystem(xml, "live", &sys, &error)) << error << "\n" << writeXml(xml);
  EXPECT_TRUE(report.hwlocLoaded);
  EXPECT_EQ(report.hwlocNuma, static_cast<int>(hw.numaCpus.size()));
  EXPECT_EQ(report.hwlocDisagreements, 0) << notesOf(report);
  ASSERT_FALSE(sys.cpus.empty());
  for (int c : sys.cpus) {
    const Node& cpu = sys.node(c);
    auto it = hw.numaCpus.find(cpu.numaId);
    ASSERT_NE(it, hw.numaCpus.end()) << "NUMA node " << cpu.numaId << " not in hwloc\n" << notesOf(report);
    EXPECT_EQ(cpusOfMask(cpu.affinity), it->second) << cpu.affinity;
  }
  EXPECT_NE(notesOf(report).find("hwloc (API " + hw.version), std::string::npos) << notesOf(report);
}

// A machine whose sysfs shows nothing (a locked-down container) and whose hwloc view is given:
// NUMA node 1 with a PCIe Gen4 switch holding a GPU and an InfiniBand HCA, NUMA node 0 empty.
HwlocView twoSocketView() {
  HwlocView hw;
  hw.loaded = true;
  hw.version = "2.9.0";
  for (int c = 0; c < 8; ++c) hw.numaCpus[0].push_back(c);
  for (int c = 8; c < 16; ++c) hw.numaCpus[1].push_back(c);
  float gen4x16 = 16 * 16.0f * 128 / 130 / 8;
  auto add = [&](const std::string& bus, std::vector<std::string> chain, bool bridge, uint16_t cls, uint16_t vendor) {
    HwlocPci d;
    d.busId = bus;
    d.chain = std::move(chain);
    d.bridge = bridge;
    d.classId = cls;
    d.vendor = vendor;
    d.device = 0x2335;
    d.linkGBs = gen4x16;
    d.numa = 1;
    hw.pci[bus] = d;
  };
  add("0000:80:01.0", {}, true, 0x0604, 0x8086);
  add("0000:81:00.0", {"0000:80:01.0"}, true, 0x0604, 0x1000);
  add("0000:82:00.0", {"0000:80:01.0", "0000:81:00.0"}, true, 0x0604, 0x1000);
  add("0000:82:01.0", {"0000:80:01.0", "0000:81:00.0"}, true, 0x0604, 0x1000);
  add("0000:83:00.0", {"0000:80:01.0", "0000:81:00.0", "0000:82:00.0"}, false, 0x0302, 0x10de);
  add("0000:84:00.0", {"0000:80:01.0", "0000:81:00.0", "0000:82:01.0"}, false, 0x0207, 0x15b3);
  HwlocNet ib;
  ib.name = "mlx5_0";
  ib.busId = "0000:84:00.0";
  ib.openfabrics = true;
  ib.infos = {{"NodeGUID", "b83f:d203:00a1:b2c3"}, {"Port1State", "4"}, {"Port2State", "1"}};
  hw.nets.push_back(ib);
  HwlocNet eth;
  eth.name = "ib0";
  eth.busId = "0000:84:00.0";
  hw.nets.push_back(eth);
  return hw;
}

TEST(TopoHwloc, FillsWhatSysfsLacks) {
  HwlocView hw = twoSocketView();
  DetectOptions opt;
  opt.sysfsRoot = "/nonexistent/sys";
  opt.procRoot = "/nonexistent/proc";
  opt.useCuda = false;
  opt.useNvml = false;
  opt.injectedGpus = {{"0000:83:00.0", 0, 90}};
  opt.injectedHwloc = &hw;
  DetectReport report;
  XmlElement xml = detectTopologyXml(opt, &report);
  System sys;
  std::string error;
  ASSERT_TRUE(buildSystem(xml, "hwloc", &sys, &error)) << error << "\n" << writeXml(xml);
  EXPECT_TRUE(report.hwlocLoaded);
  EXPECT_FALSE(report.sysfsNuma);
  EXPECT_EQ(report.numaSource, "hwloc");
  EXPECT_GT(report.hwlocFilled, 0);
  EXPECT_EQ(report.hwlocDisagreements, 0);
  ASSERT_EQ(sys.cpus.size(), 2u) << writeXml(xml);
  EXPECT_EQ(sys.node(sys.cpus[0]).affinity, "000000ff");
  EXPECT_EQ(sys.node(sys.cpus[1]).affinity, "0000ff00");
  ASSERT_EQ(sys.gpus.size(), 1u);
  int gpu = sys.gpus[0];
  EXPECT_EQ(sys.node(sys.node(gpu).parent).busId, "0000:81:00.0");  // the switch; root port folded
  EXPECT_EQ(sys.node(sys.node(gpu).cpu).numaId, 1);
  EXPECT_NEAR(sys.node(gpu).upBw, 24.0, 1e-9);  // Gen4 x16 (as from sysfs) recovered from hwloc's GB/s
  ASSERT_EQ(sys.nets.size(), 1u) << writeXml(xml);  // port 2 is down; ib0 is a socket and RDMA wins
  EXPECT_EQ(sys.node(sys.nets[0]).name, "mlx5_0");
  EXPECT_EQ(sys.node(sys.nets[0]).guid, 0xb83fd20300a1b2c3ull);
  ASSERT_EQ(sys.nics.size(), 1u);
  EXPECT_EQ(deviceToNicPath(sys, gpu, sys.nics[0]).type, PathType::Pix);
}

TEST(TopoHwloc, SysfsWinsWhenTheyDisagree) {
  char tmpl[] = "/tmp/braid-hwloc-sysfs-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string root = tmpl;
  std::string node = root + "/devices/system/node/node0";
  ASSERT_EQ(std::system(("mkdir -p '" + node + "'").c_str()), 0);
  std::ofstream(node + "/cpumap") << "0000000f\n";
  HwlocView hw;
  hw.loaded = true;
  hw.version = "2.9.0";
  hw.numaCpus[0] = {0, 1};
  DetectOptions opt;
  opt.sysfsRoot = root;
  opt.useCuda = false;
  opt.useNvml = false;
  opt.injectedHwloc = &hw;
  DetectReport report;
  System sys;
  std::string error;
  ASSERT_TRUE(buildSystem(detectTopologyXml(opt, &report), "fake", &sys, &error)) << error;
  EXPECT_EQ(std::system(("rm -rf '" + root + "'").c_str()), 0);
  EXPECT_EQ(report.numaSource, "sysfs");
  EXPECT_EQ(report.hwlocDisagreements, 1);
  EXPECT_NE(notesOf(report).find("NUMA node 0: sysfs CPUs 0000000f, hwloc 00000003 (sysfs used)"), std::string::npos)
      << notesOf(report);
  ASSERT_EQ(sys.cpus.size(), 1u);
  EXPECT_EQ(sys.node(sys.cpus[0]).affinity, "0000000f");
}

TEST(TopoHwloc, NotUsedOnAFakeSysfsAndSaysWhy) {
  DetectOptions opt;
  opt.sysfsRoot = "/nonexistent/sys";
  opt.useCuda = false;
  opt.useNvml = false;
  DetectReport report;
  System sys;
  std::string error;
  ASSERT_TRUE(buildSystem(detectTopologyXml(opt, &report), "empty", &sys, &error)) << error;
  EXPECT_FALSE(report.hwlocLoaded);
  EXPECT_NE(notesOf(report).find("hwloc not used"), std::string::npos) << notesOf(report);
}

}  // namespace
}  // namespace braid::topo
