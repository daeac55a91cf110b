#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>

#include "test_data.h"
#include "topo/paths.h"
#include "topo/search.h"
#include "topo/system.h"

namespace braid::topo {
namespace {

System load(const std::string& name) { return testing::loadXml(name); }

System fromText(const std::string& text) {
  XmlElement root;
  System sys;
  std::string error;
  EXPECT_TRUE(parseXml(text, "inline.xml", &root, &error)) << error;
  EXPECT_TRUE(buildSystem(root, "inline.xml", &sys, &error)) << error;
  return sys;
}

// NCCL's graph dump: per graph, its pattern, channel count, speed and the GPU orders.
struct NcclGraph {
  int pattern = -1;
  int nChannels = 0;
  double speedIntra = 0;
  std::vector<std::vector<int>> channels;  // GPU devs
};

std::vector<NcclGraph> readNcclGraphs(const std::string& name) {
  XmlElement root;
  std::string error;
  EXPECT_TRUE(parseXmlFile(testing::dataDir() + "/nccl-graph/" + name, &root, &error)) << error;
  std::vector<NcclGraph> out;
  for (const auto& g : root.children) {
    NcclGraph graph;
    graph.pattern = std::atoi(g.attrOr("pattern", "-1").c_str());
    graph.nChannels = std::atoi(g.attrOr("nchannels", "0").c_str());
    graph.speedIntra = std::atof(g.attrOr("speedintra", "0").c_str());
    for (const auto& c : g.children) {
      std::vector<int> order;
      for (const auto& gpu : c.children)
        if (gpu.name == "gpu") order.push_back(static_cast<int>(std::strtol(gpu.attrOr("dev", "-1").c_str(), nullptr, 0)));
      graph.channels.push_back(order);
    }
    out.push_back(graph);
  }
  return out;
}

std::vector<int> devs(const System& sys, const std::vector<int>& nodes) {
  std::vector<int> d;
  for (int n : nodes) d.push_back(sys.node(n).dev);
  return d;
}

// Rotated to start at the smallest dev, so that rings compare regardless of where they start.
std::vector<int> canonical(std::vector<int> ring) {
  std::rotate(ring.begin(), std::min_element(ring.begin(), ring.end()), ring.end());
  return ring;
}

// Independent check of the search's bookkeeping: no link carries more than its bandwidth.
void expectWithinCapacity(const System& sys, const SearchResult& r, bool ring, const P2pPolicy& policy = {}) {
  std::map<int, double> used;
  for (const auto& ch : r.channels)
    for (size_t k = 0; k + 1 < ch.size() + (ring ? 1 : 0); ++k) {
      int a = ch[k], b = ch[(k + 1) % ch.size()];
      if (a == b) continue;
      for (DirectedLink d : effectiveGpuPath(sys, a, b, policy).hops) used[d] += r.speed;
    }
  for (const auto& [d, u] : used) EXPECT_LE(u, sys.links[static_cast<size_t>(d / 2)].bw + 1e-6) << "link " << d / 2;
}

std::map<PathType, int> hopTypes(const System& sys, const std::vector<int>& ring) {
  std::map<PathType, int> n;
  for (size_t k = 0; k < ring.size(); ++k) ++n[gpuPath(sys, ring[k], ring[(k + 1) % ring.size()]).type];
  return n;
}

TEST(TopoSearch, HgxH200SameRingsAsNccl) {
  System sys = load("vastai-hgx-h200-8gpu.xml");
  SearchOptions opt;
  opt.maxChannels = 32;  // NCCL's search limit (MAXCHANNELS/2)
  SearchResult r = searchRings(sys, sys.gpus, opt);
  expectWithinCapacity(sys, r, true);
  auto graphs = readNcclGraphs("vastai-hgx-h200-8gpu.graph.xml");
  const NcclGraph& ring = graphs[0];
  ASSERT_EQ(ring.pattern, 4);
  // NCCL: 12 channels x 30 GB/s, all 0..7. braid: the same order, 6 channels x 60 GB/s (NCCL
  // splits each 60 GB/s channel in two in its second pass). Total: 360 GB/s for both, bounded by
  // the 18 NVLinks of each GPU (370.8 GB/s).
  std::set<std::vector<int>> ncclOrders, braidOrders;
  for (const auto& c : ring.channels) ncclOrders.insert(canonical(c));
  for (const auto& c : r.channels) braidOrders.insert(canonical(devs(sys, c)));
  EXPECT_EQ(braidOrders, ncclOrders);
  EXPECT_GE(r.total() + 1e-9, ring.nChannels * ring.speedIntra);
  EXPECT_EQ(r.worst, PathType::Nvl);
  // Trees: NCCL's tree channels are chains in the same order, at the same total.
  const NcclGraph& tree = graphs[1];
  ASSERT_EQ(tree.pattern, 1);
  EXPECT_GE(r.total() + 1e-9, tree.nChannels * tree.speedIntra);
}

TEST(TopoSearch, PerlmutterMeshSameRingsAsNccl) {
  System sys = load("perlmutter-a100-4gpu.xml");
  SearchOptions opt;
  opt.maxChannels = 32;
  SearchResult r = searchRings(sys, sys.gpus, opt);
  expectWithinCapacity(sys, r, true);
  auto graphs = readNcclGraphs("perlmutter-a100-4gpu.graph.xml");
  const NcclGraph& ring = graphs[0];
  // NCCL: 12 channels at 20 GB/s over 6 orders (all directed Hamiltonian cycles of the NV4 mesh,
  // each used twice). braid: the same 6 orders once each at 40 GB/s. Both 240 GB/s: every NVLink
  // direction (80 GB/s) carries two rings.
  std::set<std::vector<int>> ncclOrders, braidOrders;
  for (const auto& c : ring.channels) ncclOrders.insert(canonical(c));
  for (const auto& c : r.channels) braidOrders.insert(canonical(devs(sys, c)));
  EXPECT_EQ(ncclOrders.size(), 6u);
  EXPECT_EQ(braidOrders, ncclOrders);
  EXPECT_GE(r.total() + 1e-9, ring.nChannels * ring.speedIntra);
  EXPECT_GE(r.total() + 1e-9, graphs[1].nChannels * graphs[1].speedIntra);
}

TEST(TopoSearch, OneGpuVmAsNccl) {
  System sys = load("h200-1gpu-vm-dump.xml");
  SearchOptions opt;
  opt.maxChannels = 32;
  SearchResult r = searchRings(sys, sys.gpus, opt);
  auto graphs = readNcclGraphs("h200-1gpu-vm-dump.graph.xml");
  EXPECT_EQ(static_cast<int>(r.channels.size()), graphs[0].nChannels);  // 32
  EXPECT_DOUBLE_EQ(r.speed, graphs[0].speedIntra);                     // 60
}

TEST(TopoSearch, PcieRingsStayInsideSwitchesAndSockets) {
  // p4d (static file, PCIe only): switch pairs adjacent, each socket contiguous, two crossings.
  System sys = load("aws-p4d-24xl.xml");
  SearchResult r = searchRings(sys, sys.gpus, SearchOptions{});
  ASSERT_FALSE(r.channels.empty());
  expectWithinCapacity(sys, r, true);
  for (const auto& ring : r.channels) {
    auto n = hopTypes(sys, ring);
    EXPECT_EQ(n[PathType::Pix], 4);
    EXPECT_EQ(n[PathType::Node], 2);
    EXPECT_EQ(n[PathType::Sys], 2);
  }
  EXPECT_EQ(r.worst, PathType::Sys);
}

TEST(TopoSearch, InterleavedNumberingStillCrossesSocketsTwice) {
  // GPU devs alternate between the sockets: a ring in dev order would cross 8 times.
  std::string text = "<system version=\"1\">";
  for (int cpu = 0; cpu < 2; ++cpu) {
    text += "<cpu numaid=\"" + std::to_string(cpu) + "\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">";
    for (int k = 0; k < 4; ++k) {
      int dev = 2 * k + cpu;
      char bus[32];
      std::snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x10 + dev);
      text += std::string("<pci busid=\"") + bus + "\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">" +
              "<gpu dev=\"" + std::to_string(dev) + "\" sm=\"80\" rank=\"" + std::to_string(dev) + "\" gdr=\"1\"/></pci>";
    }
    text += "</cpu>";
  }
  text += "</system>";
  System sys = fromText(text);
  SearchResult r = searchRings(sys, sys.gpus, SearchOptions{});
  ASSERT_FALSE(r.channels.empty());
  for (const auto& ring : r.channels) EXPECT_EQ(hopTypes(sys, ring)[PathType::Sys], 2);
  expectWithinCapacity(sys, r, true);
}

TEST(TopoSearch, LargeHostsStayCheapEvenWhenSpeedsFail) {
  // 32 PCIe GPUs on two AMD sockets: every speed above the 16 GB/s socket link fails only after
  // the first socket is placed, the worst case for a depth-first search (16! orders).
  std::string text = "<system version=\"1\">";
  for (int cpu = 0; cpu < 2; ++cpu) {
    text += "<cpu numaid=\"" + std::to_string(cpu) + "\" arch=\"x86_64\" vendor=\"AuthenticAMD\" familyid=\"25\" modelid=\"1\">";
    for (int k = 0; k < 16; ++k) {
      char bus[32];
      std::snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x10 + cpu * 16 + k);
      text += std::string("<pci busid=\"") + bus + "\" class=\"0x030200\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">" +
              "<gpu dev=\"" + std::to_string(cpu * 16 + k) + "\" sm=\"90\"/></pci>";
    }
    text += "</cpu>";
  }
  text += "</system>";
  System sys = fromText(text);
  auto t0 = std::chrono::steady_clock::now();
  SearchResult r = searchRings(sys, sys.gpus, SearchOptions{});
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms, 1000.0);
  ASSERT_FALSE(r.channels.empty());
  EXPECT_FALSE(r.fallback);
  for (const auto& ring : r.channels) EXPECT_EQ(hopTypes(sys, ring)[PathType::Sys], 2);
  expectWithinCapacity(sys, r, true);
}

TEST(TopoSearch, CubeMeshRingsUseOnlyNvlink) {
  System sys = load("v100-sxm2-8gpu-vm-cubemesh.xml");
  SearchOptions opt;
  opt.maxChannels = 8;
  SearchResult r = searchRings(sys, sys.gpus, opt);
  EXPECT_EQ(r.worst, PathType::Nvl);
  expectWithinCapacity(sys, r, true);
  // Each GPU has 6 NVLinks (120 GB/s out); eight channels reach at least 100 GB/s.
  EXPECT_GE(r.total(), 100.0 - 1e-9);
}

TEST(TopoSearch, P2pDisabledRoutesThroughHostMemory) {
  System sys = load("vastai-hgx-h200-8gpu.xml");
  SearchOptions opt;
  opt.p2p.level = PathType::Loc;
  SearchResult r = searchRings(sys, sys.gpus, opt);
  expectWithinCapacity(sys, r, true, opt.p2p);
  EXPECT_EQ(r.worst, PathType::Sys);
  // Through PCIe Gen5 (48 GB/s) and the socket link (40 GB/s): far below NVLink.
  EXPECT_LE(r.total(), 40.0 + 1e-9);
}

TEST(TopoSearch, ChainsHonourTheirEnds) {
  System sys = load("aws-p4d-24xl.xml");
  int g0 = sys.findBusId("0000:10:1c.0"), g1 = sys.findBusId("0000:10:1d.0");
  int g6 = sys.findBusId("0000:a0:1c.0"), g7 = sys.findBusId("0000:a0:1d.0");
  SearchOptions opt;
  opt.minChannels = 2;  // both chains cross the sockets twice: 5 GB/s each over the 10 GB/s link
  SearchResult r = searchChains(sys, sys.gpus, {{g0, g1}, {g6, g7}}, opt);
  EXPECT_DOUBLE_EQ(r.speed, 5.0);
  ASSERT_GE(r.channels.size(), 2u);
  EXPECT_EQ(r.channels[0].front(), g0);
  EXPECT_EQ(r.channels[0].back(), g1);
  EXPECT_EQ(r.channels[1].front(), g6);
  EXPECT_EQ(r.channels[1].back(), g7);
  for (const auto& c : r.channels) {
    std::set<int> s(c.begin(), c.end());
    EXPECT_EQ(s.size(), 8u);
  }
  expectWithinCapacity(sys, r, false);
}

TEST(TopoSearch, EveryFileGivesValidRingsQuickly) {
  for (const auto& name : testing::allXmlFiles()) {
    SCOPED_TRACE(name);
    System sys = load(name);
    if (sys.gpus.empty()) continue;
    auto t0 = std::chrono::steady_clock::now();
    SearchResult r = searchRings(sys, sys.gpus, SearchOptions{});
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(ms, 50.0);
    ASSERT_FALSE(r.channels.empty());
    EXPECT_FALSE(r.fallback);
    for (const auto& c : r.channels) {
      std::vector<int> sorted = c, expect = sys.gpus;
      std::sort(sorted.begin(), sorted.end());
      std::sort(expect.begin(), expect.end());
      EXPECT_EQ(sorted, expect);
    }
    expectWithinCapacity(sys, r, true);
  }
}

TEST(TopoSearch, DoubleBinaryTreesAreTrees) {
  for (int n = 1; n <= 64; ++n)
    for (int t = 0; t < 2; ++t) {
      int roots = 0;
      for (int v = 0; v < n; ++v) {
        TreeLinks l = doubleBinaryTree(n, v, t);
        if (l.parent < 0) ++roots;
        else {
          TreeLinks p = doubleBinaryTree(n, l.parent, t);
          EXPECT_TRUE(p.child[0] == v || p.child[1] == v) << n << " " << t << " " << v;
        }
        for (int c : l.child) {
          if (c >= 0) {
            EXPECT_EQ(doubleBinaryTree(n, c, t).parent, v);
          }
        }
      }
      EXPECT_EQ(roots, 1) << n;
    }
  // The two trees differ, so the roots' load is spread.
  EXPECT_NE(doubleBinaryTree(8, 0, 0).parent, doubleBinaryTree(8, 0, 1).parent);
}

}  // namespace
}  // namespace braid::topo
