#include <gtest/gtest.h>

#include "test_data.h"
#include "topo/paths.h"
#include "topo/system.h"

namespace braid::topo {
namespace {

System load(const std::string& name) { return testing::loadXml(name); }

TEST(TopoPaths, PcieTreeTypesOnP4d) {
  // Per switch: two GPUs and one EFA; two switches per socket.
  System sys = load("aws-p4d-24xl.xml");
  int g0 = sys.findBusId("0000:10:1c.0"), g1 = sys.findBusId("0000:10:1d.0");
  int g2 = sys.findBusId("0000:20:1c.0"), g4 = sys.findBusId("0000:90:1c.0");
  int nic0 = sys.findBusId("0000:10:1b.0"), nic2 = sys.findBusId("0000:90:1b.0");
  EXPECT_EQ(gpuPath(sys, g0, g1).type, PathType::Pix);
  EXPECT_EQ(gpuPath(sys, g0, g2).type, PathType::Node);
  EXPECT_EQ(gpuPath(sys, g0, g4).type, PathType::Sys);
  EXPECT_EQ(deviceToNicPath(sys, g0, nic0).type, PathType::Pix);
  EXPECT_EQ(deviceToNicPath(sys, g0, nic2).type, PathType::Sys);
  // Bottlenecks: 12 GB/s PCIe Gen3, and the 10 GB/s Skylake socket link across.
  EXPECT_NEAR(gpuPath(sys, g0, g1).bw, 12.0, 1e-9);
  EXPECT_NEAR(gpuPath(sys, g0, g4).bw, 10.0, 1e-9);
  // Hops: up to the switch and down again; across sockets: 3 up, SYS, 3 down (with the switch levels).
  EXPECT_EQ(gpuPath(sys, g0, g1).hops.size(), 2u);
  EXPECT_EQ(gpuPath(sys, g0, g4).hops.size(), 5u);
}

TEST(TopoPaths, NvlinkThroughSwitchMeshAndThirdGpu) {
  System h200 = load("vastai-hgx-h200-8gpu.xml");
  Path p = gpuPath(h200, h200.gpus[0], h200.gpus[7]);
  EXPECT_EQ(p.type, PathType::Nvl);
  EXPECT_EQ(p.nvlinks, 18);
  EXPECT_NEAR(p.bw, 370.8, 1e-9);
  EXPECT_EQ(p.hops.size(), 2u);  // GPU -> NVSwitch -> GPU

  System perl = load("perlmutter-a100-4gpu.xml");
  Path q = gpuPath(perl, perl.gpus[1], perl.gpus[2]);
  EXPECT_EQ(q.type, PathType::Nvl);
  EXPECT_EQ(q.nvlinks, 4);
  EXPECT_EQ(q.hops.size(), 1u);

  // Hybrid cube-mesh: GPU 0 has no NVLink to GPUs 5, 6, 7 and reaches them through a neighbour.
  System v100 = load("v100-sxm2-8gpu-vm-cubemesh.xml");
  int d0 = v100.findGpuByDev(0), d1 = v100.findGpuByDev(1), d6 = v100.findGpuByDev(6);
  EXPECT_EQ(gpuPath(v100, d0, d1).type, PathType::Nvl);
  EXPECT_EQ(gpuPath(v100, d0, d1).nvlinks, 1);
  Path nvb = gpuPath(v100, d0, d6);
  EXPECT_EQ(nvb.type, PathType::Nvb);
  EXPECT_NEAR(nvb.bw, 40.0, 1e-9);  // through GPU 2 or 4: double links on both hops
  EXPECT_EQ(gpuPath(v100, d0, d6, /*nvbAllowed=*/false).type, PathType::Node);
}

TEST(TopoPaths, HostBridgeIsPhbAndNumaAcrossIsSys) {
  System modal = load("modal-gvisor-b200-8gpu-vm.xml");
  // GPUs hang off the CPU directly; the NICs sit behind host bridges (class 0x060000).
  PathMatrix pm(modal);
  EXPECT_EQ(pm.gpuToNic(0, 0).type, PathType::Node);
  EXPECT_EQ(pm.gpuToNic(4, 0).type, PathType::Sys);
  EXPECT_EQ(pm.gpuToGpu(0, 4).type, PathType::Nvl);
  // A device under a host bridge and another under it: PHB.
  System t;
  XmlElement root;
  std::string error;
  ASSERT_TRUE(parseXml("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:00:00.0\" class=\"0x060000\">"
                       "<pci busid=\"0000:01:00.0\" class=\"0x030200\"/><pci busid=\"0000:02:00.0\" class=\"0x020000\"/>"
                       "</pci></cpu></system>",
                       "hb.xml", &root, &error))
      << error;
  ASSERT_TRUE(buildSystem(root, "hb.xml", &t, &error)) << error;
  EXPECT_EQ(deviceToNicPath(t, t.gpus[0], t.nics[0]).type, PathType::Phb);
}

TEST(TopoPaths, P2pPolicyRoutesThroughHostMemory) {
  System h200 = load("vastai-hgx-h200-8gpu.xml");
  P2pPolicy off;
  off.level = PathType::Loc;  // NCCL_P2P_DISABLE=1
  Path same = effectiveGpuPath(h200, h200.gpus[0], h200.gpus[1], off);
  EXPECT_EQ(same.type, PathType::Phb);
  EXPECT_NEAR(same.bw, 48.0, 1e-9);
  Path across = effectiveGpuPath(h200, h200.gpus[0], h200.gpus[4], off);
  EXPECT_EQ(across.type, PathType::Sys);
  EXPECT_NEAR(across.bw, 40.0, 1e-9);
  P2pPolicy dflt;
  dflt.level = PathType::Pxb;
  EXPECT_EQ(effectiveGpuPath(h200, h200.gpus[0], h200.gpus[4], dflt).type, PathType::Nvl);

  System p4d = load("aws-p4d-24xl.xml");
  P2pPolicy pix;
  pix.level = PathType::Pix;
  int g0 = p4d.findBusId("0000:10:1c.0"), g1 = p4d.findBusId("0000:10:1d.0");
  EXPECT_EQ(effectiveGpuPath(p4d, g0, g1, pix).type, PathType::Pix);
  EXPECT_EQ(effectiveGpuPath(p4d, g0, g1, off).type, PathType::Phb);
  EXPECT_EQ(effectiveGpuPath(p4d, g0, g1, off).hops.size(), 4u);  // up to the CPU and back down
}

TEST(TopoPaths, LevelNamesAndLegacyNumbers) {
  EXPECT_EQ(parsePathLevel("pxb"), PathType::Pxb);
  EXPECT_EQ(parsePathLevel(" SYS "), PathType::Sys);
  EXPECT_EQ(parsePathLevel("NODE"), PathType::Node);
  EXPECT_EQ(parsePathLevel("0"), PathType::Loc);
  EXPECT_EQ(parsePathLevel("1"), PathType::Pix);
  EXPECT_EQ(parsePathLevel("3"), PathType::Phb);
  EXPECT_EQ(parsePathLevel("5"), PathType::Sys);
  EXPECT_FALSE(parsePathLevel("fast").has_value());
  EXPECT_EQ(ncclPathLevel(PathType::Node), ncclPathLevel(PathType::Phb));
  EXPECT_EQ(normalizeBusId("0000:1A:00.0"), "0000:1a:00.0");
  EXPECT_EQ(normalizeBusId("1a:00.0"), "0000:1a:00.0");
  EXPECT_EQ(normalizeBusId("fffffff:ff:ff.0"), "fffffff:ff:ff.0");
  EXPECT_FALSE(normalizeBusId("0000:1g:00.0").has_value());
  EXPECT_FALSE(normalizeBusId("garbage").has_value());
  EXPECT_EQ(pciLaneRate("16.0 GT/s PCIe"), 120);
  EXPECT_EQ(pciLaneRate("2.5 GT/s PCIe"), 15);
  EXPECT_FALSE(pciLaneRate("").has_value());
  EXPECT_FALSE(pciLaneRate("fast").has_value());
}

}  // namespace
}  // namespace braid::topo
