// The communicator's entry points: ringOrders, hostChains/joinHostChains, loadSystem with
// NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE, and mergeLiveGpus.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <unistd.h>

#include "test_data.h"
#include "topo/topo.h"

namespace braid::topo {
namespace {

System load(const std::string& name) { return testing::loadXml(name); }

// Sets an environment variable for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_;
  std::string old_;
};

std::vector<RankLocation> ranksOnGpus(const System& sys, const std::vector<int>& gpuOfRank, uint64_t host = 7) {
  std::vector<RankLocation> r;
  for (size_t i = 0; i < gpuOfRank.size(); ++i)
    r.push_back({static_cast<int>(i), host, sys.node(sys.gpus[static_cast<size_t>(gpuOfRank[i])]).dev,
                 sys.node(sys.gpus[static_cast<size_t>(gpuOfRank[i])]).busId});
  return r;
}

void expectPermutations(const std::vector<std::vector<int>>& rings, size_t n) {
  for (const auto& ring : rings) {
    std::vector<int> s = ring;
    std::sort(s.begin(), s.end());
    ASSERT_EQ(s.size(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(s[i], static_cast<int>(i));
  }
}

TEST(TopoApi, EightRanksOnH200) {
  ScopedEnv a("NCCL_P2P_DISABLE", nullptr), b("NCCL_P2P_LEVEL", nullptr);
  System sys = load("vastai-hgx-h200-8gpu.xml");
  RingInfo info;
  auto rings = ringOrders(sys, ranksOnGpus(sys, {0, 1, 2, 3, 4, 5, 6, 7}), 12, &info);
  ASSERT_EQ(rings.size(), 12u);
  expectPermutations(rings, 8);
  EXPECT_EQ(rings[0], (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(info.fallback);
  EXPECT_EQ(info.worstIntra, PathType::Nvl);
  EXPECT_EQ(info.searchedRings, 6);
  EXPECT_EQ(info.distinctRings, 1);
  ASSERT_EQ(info.bw.size(), 12u);
  EXPECT_DOUBLE_EQ(info.bw[0], 30.0);  // 6 rings at 60 GB/s shared by 12 channels
}

TEST(TopoApi, RanksSharingGpusAreAdjacentAndOrderIgnoresCudaNumbering) {
  ScopedEnv a("NCCL_P2P_DISABLE", nullptr), b("NCCL_P2P_LEVEL", nullptr);
  System sys = load("perlmutter-a100-4gpu.xml");
  // 8 ranks on 4 GPUs, given in a scrambled order and with nonsense CUDA indices.
  auto ranks = ranksOnGpus(sys, {3, 0, 2, 1, 3, 0, 2, 1});
  for (auto& r : ranks) r.cudaDev = 0;
  std::shuffle(ranks.begin(), ranks.end(), std::mt19937(5));
  RingInfo info;
  auto rings = ringOrders(sys, ranks, 4, &info);
  expectPermutations(rings, 8);
  for (const auto& ring : rings)
    for (size_t k = 0; k < ring.size(); k += 2) {
      // Ranks r and r+4 share a GPU; they must be neighbours.
      int x = ring[k], y = ring[k + 1];
      EXPECT_EQ(x % 4, y % 4) << "ranks " << x << " and " << y;
    }
  EXPECT_EQ(info.worstIntra, PathType::Nvl);
  // The same input in another order gives the same rings.
  std::reverse(ranks.begin(), ranks.end());
  EXPECT_EQ(ringOrders(sys, ranks, 4, nullptr), rings);
}

TEST(TopoApi, HostOnlyAndUnknownRanksFallBackToRankOrder) {
  System sys = load("vastai-hgx-h200-8gpu.xml");
  std::vector<RankLocation> hostOnly;
  for (int i = 0; i < 4; ++i) hostOnly.push_back({3 - i, 1, -1, ""});
  RingInfo info;
  auto rings = ringOrders(sys, hostOnly, 2, &info);
  ASSERT_EQ(rings.size(), 2u);
  EXPECT_EQ(rings[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(info.fallback);
  EXPECT_NE(info.note.find("rank 0 (no GPU)"), std::string::npos) << info.note;

  auto ranks = ranksOnGpus(sys, {0, 1, 2});
  ranks[1].busId = "0000:ee:00.0";  // not in this topology
  rings = ringOrders(sys, ranks, 1, &info);
  EXPECT_EQ(rings[0], (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(info.fallback);
  EXPECT_NE(info.note.find("GPU 0000:ee:00.0 not in the topology"), std::string::npos) << info.note;

  EXPECT_TRUE(ringOrders(sys, {}, 4, &info)[0].empty());
}

TEST(TopoApi, ChannelCountIsClamped) {
  System sys = load("h200-1gpu-vm-dump.xml");
  auto ranks = ranksOnGpus(sys, {0, 0});
  EXPECT_EQ(ringOrders(sys, ranks, 0, nullptr).size(), 1u);
  EXPECT_EQ(ringOrders(sys, ranks, 1000, nullptr).size(), 64u);
}

TEST(TopoApi, P2pEnvironmentIsHonoured) {
  System sys = load("vastai-hgx-h200-8gpu.xml");
  auto ranks = ranksOnGpus(sys, {0, 1, 2, 3, 4, 5, 6, 7});
  RingInfo on, off, level;
  {
    ScopedEnv a("NCCL_P2P_DISABLE", nullptr), b("NCCL_P2P_LEVEL", nullptr);
    ringOrders(sys, ranks, 4, &on);
  }
  {
    ScopedEnv a("NCCL_P2P_DISABLE", "1"), b("NCCL_P2P_LEVEL", nullptr);
    ringOrders(sys, ranks, 4, &off);
    EXPECT_EQ(p2pPolicyFromEnv(sys).level, PathType::Loc);
  }
  {
    ScopedEnv a("NCCL_P2P_DISABLE", nullptr), b("NCCL_P2P_LEVEL", "LOC");
    ringOrders(sys, ranks, 4, &level);
  }
  EXPECT_EQ(on.worstIntra, PathType::Nvl);
  EXPECT_EQ(off.worstIntra, PathType::Sys);
  EXPECT_EQ(level.worstIntra, PathType::Sys);
  EXPECT_LT(off.bw[0], on.bw[0]);
  {
    ScopedEnv a("NCCL_P2P_DISABLE", nullptr), b("NCCL_P2P_LEVEL", "bogus");
    EXPECT_EQ(p2pPolicyFromEnv(sys).level, PathType::Pxb);  // warned and ignored
  }
  {
    ScopedEnv a("NCCL_NVB_DISABLE", "1");
    EXPECT_FALSE(p2pPolicyFromEnv(sys).nvbAllowed);
  }
}

TEST(TopoApi, MultiHostRingsEnterAndLeaveThroughNearNics) {
  ScopedEnv a("NCCL_P2P_DISABLE", nullptr), b("NCCL_P2P_LEVEL", nullptr);
  // IBM H100: each GPU shares a switch with one 200 Gb/s NIC. Two hosts, 8 ranks each.
  System sys = load("ibm-gx3d-h100-8gpu-vsi.xml");
  std::vector<RankLocation> ranks;
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 8; ++i)
      ranks.push_back({h * 8 + i, static_cast<uint64_t>(100 + h), i, sys.node(sys.gpus[static_cast<size_t>(i)]).busId});
  RingInfo info;
  auto rings = ringOrders(sys, ranks, 8, &info);
  expectPermutations(rings, 16);
  PathMatrix pm(sys);
  std::set<std::string> nicsUsed;
  for (size_t c = 0; c < rings.size(); ++c) {
    // Hosts contiguous, host 0 first.
    for (int k = 0; k < 8; ++k) EXPECT_LT(rings[c][static_cast<size_t>(k)], 8);
    // The first GPU of each host's chain is PIX to the channel's NIC.
    int first = sys.gpus[static_cast<size_t>(rings[c][0])];
    ASSERT_FALSE(info.nicIn[c].empty());
    nicsUsed.insert(info.nicIn[c]);
    int nicNode = -1;
    for (int n : sys.nics)
      if (sys.node(n).name == info.nicIn[c]) nicNode = n;
    ASSERT_GE(nicNode, 0);
    EXPECT_EQ(deviceToNicPath(sys, first, nicNode).type, PathType::Pix) << info.nicIn[c];
    // Each channel gets a NIC of its own: 25 GB/s, below the NVLink share.
    EXPECT_NEAR(info.bw[c], 25.0, 1e-9);
  }
  EXPECT_EQ(nicsUsed.size(), 8u);
}

TEST(TopoApi, HostChainsJoinLikeRingOrders) {
  System sys = load("vastai-hgx-h200-8gpu.xml");
  std::vector<RankLocation> ranks;
  for (int h = 0; h < 3; ++h)
    for (int i = 0; i < 4; ++i)
      ranks.push_back({h * 4 + i, static_cast<uint64_t>(h), i, sys.node(sys.gpus[static_cast<size_t>(2 * i)]).busId});
  P2pPolicy policy = p2pPolicyFromEnv(sys);
  std::vector<HostChains> hosts;
  for (uint64_t h = 0; h < 3; ++h) hosts.push_back(hostChains(sys, ranks, h, 4, 3, policy));
  RingInfo viaChains, direct;
  auto joined = joinHostChains(hosts, 4, &viaChains);
  EXPECT_EQ(joined, ringOrders(sys, ranks, 4, &direct));
  expectPermutations(joined, 12);
}

// How many times a ring passes from one node to another (counting the wrap-around).
int nodeCrossings(const std::vector<int>& ring, const std::vector<int>& nodeOf) {
  int crossings = 0;
  for (size_t p = 0; p < ring.size(); ++p)
    crossings += nodeOf[static_cast<size_t>(ring[p])] != nodeOf[static_cast<size_t>(ring[(p + 1) % ring.size()])];
  return crossings;
}

// Ranks of several hosts interleaved in rank order, on GPUs and host-only: nodeOfRanks numbers
// the hosts by their lowest rank, and every channel's ring visits each host's ranks in one run,
// hosts in node order, so it crosses each node boundary once (NCCL's rings across nodes).
TEST(TopoApi, RingsAcrossHostsVisitEachNodeOnceInNodeOrder) {
  ScopedEnv a("NCCL_P2P_DISABLE", nullptr), b("NCCL_P2P_LEVEL", nullptr);
  System sys = load("vastai-hgx-h200-8gpu.xml");
  for (bool gpus : {true, false}) {
    for (int hosts : {2, 3, 5}) {
      std::vector<RankLocation> ranks;
      const int n = 4 * hosts;
      for (int r = 0; r < n; ++r) {
        // Hosts take turns by rank; rank 0's host hash is not the lowest.
        const uint64_t host = 100 + static_cast<uint64_t>((r + 1) % hosts);
        const int gpu = (r / hosts) % 8;
        ranks.push_back(gpus ? RankLocation{r, host, gpu, sys.node(sys.gpus[static_cast<size_t>(gpu)]).busId}
                             : RankLocation{r, host, -1, ""});
      }
      std::shuffle(ranks.begin(), ranks.end(), std::mt19937(static_cast<unsigned>(n)));
      const std::vector<int> nodeOf = nodeOfRanks(ranks);
      ASSERT_EQ(nodeOf.size(), static_cast<size_t>(n));
      std::vector<int> firstRank(static_cast<size_t>(hosts), -1);
      for (int r = 0; r < n; ++r) {
        const int node = nodeOf[static_cast<size_t>(r)];
        ASSERT_GE(node, 0);
        ASSERT_LT(node, hosts);
        if (firstRank[static_cast<size_t>(node)] < 0) firstRank[static_cast<size_t>(node)] = r;
      }
      EXPECT_TRUE(std::is_sorted(firstRank.begin(), firstRank.end())) << "node ids by first appearance";
      EXPECT_EQ(nodeOf[0], 0);
      const auto rings = ringOrders(sys, ranks, 4, nullptr);
      expectPermutations(rings, static_cast<size_t>(n));
      for (const auto& ring : rings) {
        EXPECT_EQ(nodeCrossings(ring, nodeOf), hosts) << (gpus ? "GPU" : "host-only") << " ranks, " << hosts << " hosts";
        for (int k = 0; k < n; ++k) EXPECT_EQ(nodeOf[static_cast<size_t>(ring[static_cast<size_t>(k)])], k / 4);
      }
    }
  }
  // One host: no node structure.
  std::vector<RankLocation> one;
  for (int r = 0; r < 3; ++r) one.push_back({r, 9, -1, ""});
  EXPECT_TRUE(nodeOfRanks(one).empty());
}

TEST(TopoApi, LoadSystemHonoursTopoFileAndDump) {
  std::string dump = ::testing::TempDir() + "/braid-topo-api-dump-" + std::to_string(::getpid()) + ".xml";
  {
    ScopedEnv f("NCCL_TOPO_FILE", testing::xmlPath("perlmutter-a100-4gpu.xml").c_str());
    ScopedEnv d("NCCL_TOPO_DUMP_FILE", dump.c_str());
    resetSystemCache();
    System sys = loadSystem(0);
    EXPECT_EQ(sys.source, testing::xmlPath("perlmutter-a100-4gpu.xml"));
    EXPECT_GE(sys.gpus.size(), 4u);  // plus any GPU of this machine, which would be added
    System back;
    std::string error;
    ASSERT_TRUE(loadSystemFile(dump, &back, &error)) << error;
    EXPECT_EQ(back.gpus.size(), sys.gpus.size());
    std::remove(dump.c_str());
    // A rank other than NCCL_TOPO_DUMP_FILE_RANK does not write.
    resetSystemCache();
    loadSystem(1);
    EXPECT_FALSE(loadSystemFile(dump, &back, &error));
  }
  {
    // A broken file: reported, and live detection used instead.
    ScopedEnv f("NCCL_TOPO_FILE", (testing::dataDir() + "/SOURCES.md").c_str());
    resetSystemCache();
    System sys = loadSystem(0);
    EXPECT_EQ(sys.source, "live detection");
  }
  resetSystemCache();
  System live = loadSystem(0);
  EXPECT_EQ(live.source, "live detection");
  EXPECT_FALSE(live.cpus.empty());
  resetSystemCache();
}

XmlElement parse(const std::string& text) {
  XmlElement root;
  std::string error;
  EXPECT_TRUE(parseXml(text, "t.xml", &root, &error)) << error;
  return root;
}

TEST(TopoApi, MergeLiveGpusIntoStaticAndDumpFiles) {
  // A live machine with two GPUs (one with an NVLink to the other) on NUMA node 1.
  XmlElement live = parse(
      "<system version=\"1\"><cpu numaid=\"1\"><pci busid=\"0000:01:00.0\" class=\"0x030200\">"
      "<gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"1\"><nvlink target=\"0000:02:00.0\" count=\"2\" tclass=\"0x030200\"/></gpu>"
      "</pci><pci busid=\"0000:02:00.0\" class=\"0x030200\"><gpu dev=\"1\" sm=\"90\" rank=\"1\" gdr=\"1\"/></pci></cpu></system>");
  // Static file: knows 0000:01:00.0 only as <pci> behind a switch, and a GPU the machine lacks.
  XmlElement file = parse(
      "<system version=\"1\"><cpu numaid=\"0\"/><cpu numaid=\"1\"><pci busid=\"ffff:ff:01.0\" class=\"0x060400\">"
      "<pci busid=\"0000:01:00.0\" class=\"0x030200\"/></pci>"
      "<pci busid=\"0000:09:00.0\" class=\"0x030200\"><gpu dev=\"5\" sm=\"90\"/></pci></cpu></system>");
  auto notes = mergeLiveGpus(&file, "static.xml", live);
  System sys;
  std::string error;
  ASSERT_TRUE(buildSystem(file, "static.xml", &sys, &error)) << error;
  ASSERT_EQ(sys.gpus.size(), 3u);
  int g1 = sys.findBusId("0000:01:00.0"), g2 = sys.findBusId("0000:02:00.0");
  EXPECT_FALSE(sys.node(g1).skeleton);                                 // got its <gpu> from live
  EXPECT_EQ(sys.node(sys.node(g1).parent).busId, "ffff:ff:01.0");      // kept in the file's place
  EXPECT_EQ(sys.node(sys.node(g2).cpu).numaId, 1);                     // added under its NUMA node
  EXPECT_EQ(gpuPath(sys, g1, g2).type, PathType::Nvl);
  std::string all;
  for (const auto& n : notes) all += n.text + "\n";
  EXPECT_NE(all.find("GPU 0000:01:00.0 is listed only as <pci>"), std::string::npos) << all;
  EXPECT_NE(all.find("GPU 0000:02:00.0 is on this machine but not in the file"), std::string::npos) << all;
  EXPECT_NE(all.find("static.xml:1: GPU 0000:09:00.0 is not on this machine"), std::string::npos) << all;
}

}  // namespace
}  // namespace braid::topo
