#include <gtest/gtest.h>

#include <cstdio>
#include <unistd.h>

#include "test_data.h"
#include "topo/paths.h"
#include "topo/system.h"

namespace braid::topo {
namespace {

using testing::allXmlFiles;
using testing::xmlPath;

System load(const std::string& name) { return testing::loadXml(name); }

size_t nicIdentities(const System& sys) {
  size_t n = 0;
  for (int nic : sys.nics) n += sys.node(nic).alias < 0;
  return n;
}

size_t warnings(const System& sys) {
  size_t n = 0;
  for (const auto& d : sys.diagnostics) n += d.level == Diagnostic::Warn;
  return n;
}

size_t linksOfType(const System& sys, LinkType t) {
  size_t n = 0;
  for (const auto& l : sys.links) n += l.type == t;
  return n;
}

// Every file of the collection loads; read -> write -> read gives the same graph, and writing is
// a fixed point after the first write.
TEST(TopoSystem, EveryCollectedFileLoadsAndRoundTrips) {
  for (const auto& name : allXmlFiles()) {
    SCOPED_TRACE(name);
    System first = load(name);
    std::string written = writeXml(first.xml);
    XmlElement again;
    std::string error;
    ASSERT_TRUE(parseXml(written, "rewritten " + name, &again, &error)) << error;
    System second;
    ASSERT_TRUE(buildSystem(again, "rewritten " + name, &second, &error)) << error;
    EXPECT_EQ(describeSystem(first), describeSystem(second));
    EXPECT_EQ(writeXml(second.xml), written);
  }
}

struct Expect {
  const char* file;
  size_t gpus, nics, nets, cpus, warnings;
  bool nvswitch;
  size_t gpuGpuNvlinks;
};

TEST(TopoSystem, CountsAndQuirksPerFile) {
  const Expect table[] = {
      // Static files: GPUs and NICs only as <pci> (skeletons); aws-g5/p5 leaves have no class.
      {"aws-g5-48xl.xml", 0, 0, 0, 2, 0, false, 0},
      {"aws-p4d-24xl.xml", 8, 4, 0, 2, 0, false, 0},
      {"aws-p4de-24xl.xml", 8, 4, 0, 2, 0, false, 0},
      {"aws-p5-48xl.xml", 0, 0, 0, 2, 0, false, 0},
      {"azure-ndv2.xml", 8, 1, 0, 2, 0, false, 0},
      {"azure-ndv4.xml", 8, 8, 0, 4, 0, false, 0},
      {"azure-ndv5.xml", 8, 8, 0, 2, 0, false, 0},
      // ncv4: each GPU's only <nvlink> points at itself: four warnings, no links.
      {"azure-ncv4.xml", 4, 1, 1, 4, 4, false, 0},
      {"h200-1gpu-vm-dump.xml", 1, 1, 1, 1, 0, false, 0},
      {"ibm-gx3d-h100-8gpu-vsi.xml", 8, 8, 8, 2, 0, true, 0},
      // modal: 13 ports on 3 NICs that sit behind host bridges.
      {"modal-gvisor-b200-8gpu-vm.xml", 8, 3, 13, 2, 0, true, 0},
      {"perlmutter-a100-4gpu.xml", 4, 4, 4, 4, 0, false, 6},
      // rtx4090: one real NIC, and the virtual interfaces listed again under every CPU (one NIC).
      {"rtx4090-4gpu-pcie-epyc-nps4.xml", 4, 2, 16, 4, 0, false, 0},
      {"v100-sxm2-8gpu-vm-cubemesh.xml", 8, 1, 1, 1, 0, false, 16},
      // vastai: eth0 is listed under both CPUs; it is one NIC.
      {"vastai-hgx-b200-8gpu.xml", 8, 1, 1, 2, 0, true, 0},
      {"vastai-hgx-h200-8gpu.xml", 8, 1, 1, 2, 0, true, 0},
  };
  for (const auto& e : table) {
    SCOPED_TRACE(e.file);
    System sys = load(e.file);
    EXPECT_EQ(sys.gpus.size(), e.gpus);
    EXPECT_EQ(nicIdentities(sys), e.nics);
    EXPECT_EQ(sys.nets.size(), e.nets);
    EXPECT_EQ(sys.cpus.size(), e.cpus);
    EXPECT_EQ(warnings(sys), e.warnings);
    EXPECT_EQ(sys.hosts.size(), 1u);
    EXPECT_EQ(sys.hosts[0].nvs >= 0, e.nvswitch);
    size_t gg = 0;
    for (const auto& l : sys.links)
      gg += l.type == LinkType::Nvl && sys.node(l.a).type == NodeType::Gpu && sys.node(l.b).type == NodeType::Gpu;
    EXPECT_EQ(gg, e.gpuGpuNvlinks);
  }
}

TEST(TopoSystem, GpuAttributesAndDevNumbering) {
  System rtx = load("rtx4090-4gpu-pcie-epyc-nps4.xml");
  // dev 2 is absent on that machine: the GPUs are devs 0, 1, 3, 4 (sorted by dev).
  std::vector<int> devs;
  for (int g : rtx.gpus) devs.push_back(rtx.node(g).dev);
  EXPECT_EQ(devs, (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(rtx.node(rtx.findGpuByDev(3)).rank, 2);
  EXPECT_EQ(rtx.node(rtx.gpus[0]).sm, 89);
  EXPECT_FALSE(rtx.node(rtx.gpus[0]).gdr);

  // Static files: skeleton GPUs numbered in bus-id order.
  System ndv4 = load("azure-ndv4.xml");
  EXPECT_TRUE(ndv4.node(ndv4.gpus[0]).skeleton);
  EXPECT_EQ(ndv4.node(ndv4.findGpuByDev(0)).busId, "0001:00:00.0");
  EXPECT_EQ(ndv4.node(ndv4.findGpuByDev(7)).busId, "000e:00:00.0");
}

TEST(TopoSystem, LinkBandwidths) {
  System h200 = load("vastai-hgx-h200-8gpu.xml");
  int nvs = h200.hosts[0].nvs;
  int l = h200.linkBetween(h200.gpus[0], nvs);
  ASSERT_GE(l, 0);
  EXPECT_EQ(h200.links[static_cast<size_t>(l)].count, 18);
  EXPECT_NEAR(h200.links[static_cast<size_t>(l)].bw, 18 * 20.6, 1e-9);
  // Gen5 x16 = 48 GB/s; EMR (model 207) socket link 40 GB/s.
  EXPECT_NEAR(h200.node(h200.gpus[0]).upBw, 48.0, 1e-9);
  int sys = h200.linkBetween(h200.cpus[0], h200.cpus[1]);
  ASSERT_GE(sys, 0);
  EXPECT_NEAR(h200.links[static_cast<size_t>(sys)].bw, 40.0, 1e-9);

  System p4d = load("aws-p4d-24xl.xml");  // "8 GT/s" x16 = 12 GB/s, Skylake socket link 10
  EXPECT_NEAR(p4d.node(p4d.gpus[0]).upBw, 12.0, 1e-9);
  EXPECT_NEAR(p4d.links[static_cast<size_t>(p4d.linkBetween(p4d.cpus[0], p4d.cpus[1]))].bw, 10.0, 1e-9);

  System p5 = load("aws-p5-48xl.xml");  // "32 GT/s PCIe/s" still reads as Gen5
  EXPECT_NEAR(p5.node(p5.findBusId("0000:4f:00.0")).upBw, 48.0, 1e-9);

  // IBM's virtual switches report a 2.5 GT/s x1 uplink; it is modeled as wide as the GPU.
  System ibm = load("ibm-gx3d-h100-8gpu-vsi.xml");
  EXPECT_NEAR(ibm.node(ibm.findBusId("0000:a1:00.0")).upBw, 48.0, 1e-9);
  size_t notes = 0;
  for (const auto& d : ibm.diagnostics) notes += d.text.find("narrower than a quarter") != std::string::npos;
  EXPECT_EQ(notes, 8u);

  System perl = load("perlmutter-a100-4gpu.xml");  // NV4 between A100s: 4 x 20 GB/s
  int gl = perl.linkBetween(perl.findGpuByDev(0), perl.findGpuByDev(3));
  ASSERT_GE(gl, 0);
  EXPECT_NEAR(perl.links[static_cast<size_t>(gl)].bw, 80.0, 1e-9);
  EXPECT_EQ(linksOfType(perl, LinkType::Net), 4u);
  // Slingshot ports: 200 Gb/s = 25 GB/s.
  EXPECT_NEAR(perl.links[static_cast<size_t>(perl.linkBetween(perl.nets[0], perl.node(perl.nets[0]).parent))].bw, 25.0,
              1e-9);
}

TEST(TopoSystem, DumpFileIsReadBack) {
  System sys = load("perlmutter-a100-4gpu.xml");
  std::string path = ::testing::TempDir() + "/braid-topo-dump-" + std::to_string(::getpid()) + ".xml";
  std::string error;
  ASSERT_TRUE(writeXmlFile(path, sys.xml, &error)) << error;
  System back;
  ASSERT_TRUE(loadSystemFile(path, &back, &error)) << error;
  EXPECT_EQ(describeSystem(sys), describeSystem(back));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace braid::topo
