// The P2P transport's staging decision (planStaging) with fake GPU queries: no CUDA calls.
// And one rank staging with no peers: on a GPU it connects and closes; without one,
// cudaHostRegister fails and nothing may be left in /dev/shm.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
#include "transport/p2p.h"

namespace braid::transport {
namespace {

constexpr int64_t bus(unsigned domain, unsigned b, unsigned dev, unsigned fn) {
  return (int64_t(domain) << 20) | (int64_t(b) << 12) | (int64_t(dev) << 4) | fn;
}

P2pPeerInfo rank(int r, int cudaDev, int64_t pid, int64_t busId) {
  P2pPeerInfo p;
  p.rank = r;
  p.cudaDev = cudaDev;
  p.pid = pid;
  p.hostHash = 7;
  p.busId = busId;
  return p;
}

// A fake machine: which bus ids this process sees (as which ordinal), and which ordered
// device pairs have peer access. Records the bus ids looked up.
struct FakeGpus {
  std::map<int64_t, int> visible;
  std::set<std::pair<int, int>> access;
  std::set<std::pair<int, int>> nvlink;  // ordered device pairs joined by NVLink
  std::vector<int64_t> lookedUp;
  GpuQueries queries() {
    return GpuQueries{[this](int64_t b) {
                        lookedUp.push_back(b);
                        auto it = visible.find(b);
                        return it == visible.end() ? -1 : it->second;
                      },
                      [this](int from, int to) { return from == to || access.count({from, to}) != 0; },
                      [this](int from, int to) { return nvlink.count({from, to}) != 0; }};
  }
};

const int64_t kBus0 = bus(0, 0x18, 0, 0), kBus1 = bus(0, 0x2a, 0, 0), kBus2 = bus(0, 0x3a, 0, 0);

TEST(P2pStaging, BusIdString) {
  EXPECT_EQ(busIdString(kBus0), "0000:18:00.0");
  EXPECT_EQ(busIdString(bus(0x1, 0xab, 0x1f, 7)), "0001:ab:1f.7");
  EXPECT_EQ(busIdString(bus(0xffff, 0xff, 0xff, 0xf)), "ffff:ff:ff.f");
  EXPECT_EQ(busIdString(-1), "?");
}

TEST(P2pStaging, SameGpuIsDirectUnlessP2pDisabled) {
  FakeGpus gpus;
  // rank 1: same process, same device; rank 2: other process, same GPU (the bus id says so).
  std::vector<P2pPeerInfo> peers = {rank(0, 0, 100, kBus0), rank(1, 0, 100, kBus0), rank(2, 3, 200, kBus0)};
  auto r = planStaging(peers[0], peers, {1, 2}, false, gpus.queries());
  EXPECT_EQ(r, (std::vector<StageReason>{StageReason::kNone, StageReason::kNone}));
  r = planStaging(peers[0], peers, {1, 2}, true, gpus.queries());
  EXPECT_EQ(r, (std::vector<StageReason>{StageReason::kP2pDisabled, StageReason::kP2pDisabled}));
  EXPECT_TRUE(gpus.lookedUp.empty());  // same GPU: no lookup by bus id
}

TEST(P2pStaging, SameProcessUsesTheOrdinals) {
  FakeGpus gpus;
  gpus.access = {{0, 1}, {1, 0}, {0, 2}};  // 0 <-> 1 both ways; 0 -> 2 only
  std::vector<P2pPeerInfo> peers = {rank(0, 0, 100, kBus0), rank(1, 1, 100, kBus1), rank(2, 2, 100, kBus2)};
  auto r = planStaging(peers[0], peers, {1, 2}, false, gpus.queries());
  EXPECT_EQ(r, (std::vector<StageReason>{StageReason::kNone, StageReason::kNoPeerAccess}));
  EXPECT_TRUE(gpus.lookedUp.empty());
  // The physical reason wins over NCCL_P2P_DISABLE (it also says device memory is unusable).
  r = planStaging(peers[0], peers, {1, 2}, true, gpus.queries());
  EXPECT_EQ(r, (std::vector<StageReason>{StageReason::kP2pDisabled, StageReason::kNoPeerAccess}));
}

TEST(P2pStaging, OtherProcessLooksTheGpuUpByBusId) {
  FakeGpus gpus;
  // This process sees the peers' GPUs under its own ordinals (0 = ours, 5, 6); kBus2 not at all.
  gpus.visible = {{kBus0, 0}, {kBus1, 5}, {bus(0, 0x4a, 0, 0), 6}};
  gpus.access = {{0, 5}, {5, 0}, {6, 0}};  // 0 <-> 5; 6 -> 0 only
  // The peers' own ordinals (0) must not matter: they are another process's numbering.
  std::vector<P2pPeerInfo> peers = {rank(0, 0, 100, kBus0), rank(1, 0, 200, kBus1), rank(2, 0, 300, kBus2),
                                    rank(3, 0, 400, bus(0, 0x4a, 0, 0))};
  auto r = planStaging(peers[0], peers, {1, 2, 3}, false, gpus.queries());
  EXPECT_EQ(r, (std::vector<StageReason>{StageReason::kNone, StageReason::kGpuNotVisible, StageReason::kNoPeerAccess}));
  EXPECT_EQ(gpus.lookedUp, (std::vector<int64_t>{kBus1, kBus2, bus(0, 0x4a, 0, 0)}));
}

TEST(P2pStaging, UnknownBusIdsAreNotTheSameGpu) {
  FakeGpus gpus;
  // Both bus ids unknown, other process: nothing says it is this GPU, and it cannot be found.
  std::vector<P2pPeerInfo> peers = {rank(0, 0, 100, -1), rank(1, 0, 200, -1)};
  auto r = planStaging(peers[0], peers, {1}, false, gpus.queries());
  EXPECT_EQ(r, (std::vector<StageReason>{StageReason::kGpuNotVisible}));
}

TEST(P2pStaging, NoLinksNoReasons) {
  FakeGpus gpus;
  std::vector<P2pPeerInfo> peers = {rank(0, 0, 100, kBus0)};
  EXPECT_TRUE(planStaging(peers[0], peers, {}, true, gpus.queries()).empty());
}

// LL128's paths: the same GPU (by ordinal in one process, by bus id across processes), or
// GPUs this process sees joined by NVLink with peer access both ways; PCIe peers, GPUs this
// process cannot see, other hosts and host staging (NCCL_P2P_DISABLE) do not qualify.
TEST(P2pOrdered128, SameGpuOrNvlinkOnly) {
  FakeGpus gpus;
  gpus.visible = {{kBus0, 0}, {kBus1, 1}, {kBus2, 2}};
  gpus.access = {{0, 1}, {1, 0}, {0, 2}, {2, 0}};
  gpus.nvlink = {{0, 1}, {1, 0}};  // 0 <-> 1 NVLink; 0 <-> 2 PCIe only
  const P2pPeerInfo me = rank(0, 0, 100, kBus0);
  EXPECT_TRUE(ordered128Path(me, me, rank(1, 0, 100, kBus0), gpus.queries()));   // this GPU, this process
  EXPECT_TRUE(ordered128Path(me, me, rank(1, 7, 200, kBus0), gpus.queries()));   // this GPU, another process
  EXPECT_TRUE(ordered128Path(me, me, rank(1, 1, 100, kBus1), gpus.queries()));   // NVLink, by ordinal
  EXPECT_TRUE(ordered128Path(me, me, rank(1, 4, 200, kBus1), gpus.queries()));   // NVLink, by bus id
  EXPECT_FALSE(ordered128Path(me, me, rank(1, 2, 100, kBus2), gpus.queries()));  // PCIe
  P2pPeerInfo far = rank(1, 0, 300, bus(0, 0x4a, 0, 0));
  EXPECT_FALSE(ordered128Path(me, me, far, gpus.queries()));  // not visible here: in doubt, no
  far = rank(1, 0, 100, kBus0);
  far.hostHash = 8;
  EXPECT_FALSE(ordered128Path(me, me, far, gpus.queries()));  // another host
  gpus.nvlink = {{0, 1}};  // one way only
  EXPECT_FALSE(ordered128Path(me, me, rank(1, 1, 100, kBus1), gpus.queries()));
  GpuQueries noNvlinkQuery = gpus.queries();
  noNvlinkQuery.nvlink = nullptr;
  EXPECT_FALSE(ordered128Path(me, me, rank(1, 1, 100, kBus1), noNvlinkQuery));
  EXPECT_TRUE(ordered128Path(me, me, rank(1, 0, 100, kBus0), noNvlinkQuery));
}

// The communicator-wide verdict: every pair, and no staging.
TEST(P2pOrdered128, EverywhereMeansEveryPair) {
  FakeGpus gpus;
  gpus.visible = {{kBus0, 0}, {kBus1, 1}, {kBus2, 2}};
  gpus.access = {{0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 2}, {2, 1}};
  gpus.nvlink = {{0, 1}, {1, 0}, {0, 2}, {2, 0}};  // 1 <-> 2 over PCIe
  // Three ranks on GPUs 0, 0, 1 (processes 100, 100, 200): all pairs qualify, seen from
  // either process (the fake numbers the GPUs alike in both, as one machine's processes that
  // see every GPU do).
  std::vector<P2pPeerInfo> peers = {rank(0, 0, 100, kBus0), rank(1, 0, 100, kBus0), rank(2, 1, 200, kBus1)};
  EXPECT_TRUE(ordered128Everywhere(peers, 0, false, gpus.queries()));
  EXPECT_TRUE(ordered128Everywhere(peers, 2, false, gpus.queries()));
  EXPECT_FALSE(ordered128Everywhere(peers, 0, true, gpus.queries()));  // NCCL_P2P_DISABLE: staged
  // A rank on GPU 2 joins: its pair with the rank on GPU 1 is PCIe, though neither is this rank.
  peers.push_back(rank(3, 2, 300, kBus2));
  EXPECT_FALSE(ordered128Everywhere(peers, 0, false, gpus.queries()));
  EXPECT_TRUE(ordered128Everywhere({peers[0]}, 0, false, gpus.queries()));  // one rank: nothing to refuse
}

TEST(P2pStaging, ReasonNames) {
  EXPECT_STREQ(stageReasonName(StageReason::kNone), "direct");
  EXPECT_STREQ(stageReasonName(StageReason::kP2pDisabled), "NCCL_P2P_DISABLE");
  EXPECT_STREQ(stageReasonName(StageReason::kNoPeerAccess), "no peer access");
  EXPECT_STREQ(stageReasonName(StageReason::kGpuNotVisible), "GPU not visible in this process");
}

// A bootstrap of one rank that is never asked to exchange anything.
class LoneBootstrap : public Bootstrap {
 public:
  int rank() const override { return 0; }
  int nRanks() const override { return 1; }
  ncclResult_t allGather(void*, size_t) override { return ncclSuccess; }
  ncclResult_t send(int, uint32_t, const void*, size_t) override { return ncclInternalError; }
  ncclResult_t recv(int, uint32_t, void*, size_t) override { return ncclInternalError; }
  ncclResult_t barrier() override { return ncclSuccess; }
};

// Names in /dev/shm that this process's staged regions would have.
std::vector<std::string> ownShmNames() {
  std::vector<std::string> names;
  const std::string prefix = "braid-fifo-" + std::to_string(getpid()) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

TEST(P2pStaging, LoneStagedRankLeavesNothingInDevShm) {
  const char* old = std::getenv("NCCL_P2P_DISABLE");
  const std::string saved = old ? old : "";
  setenv("NCCL_P2P_DISABLE", "1", 1);
  LoneBootstrap boot;
  std::vector<P2pPeerInfo> peers = {rank(0, 0, getpid(), kBus0)};
  std::unique_ptr<P2pTransport> t;
  ncclResult_t r = P2pTransport::connect(boot, peers, P2pOptions{}, {}, {}, &t);
  if (r == ncclSuccess) {  // a GPU: staged, the name already unlinked (no peer to wait for)
    ASSERT_NE(t, nullptr);
    EXPECT_TRUE(t->hostStaged());
    EXPECT_EQ(t->bytesAllocated(), size_t(2) << 20);
    EXPECT_TRUE(ownShmNames().empty());
    EXPECT_EQ(t->close(), ncclSuccess);
  } else {  // no GPU: the region was made and mapped, then cudaHostRegister failed
    EXPECT_EQ(r, ncclUnhandledCudaError);
    EXPECT_NE(std::string(lastError()).find("p2p: rank 0: cudaHostRegister of /braid-fifo-"), std::string::npos)
        << lastError();
    EXPECT_TRUE(ownShmNames().empty());
  }
  if (old) setenv("NCCL_P2P_DISABLE", saved.c_str(), 1);
  else unsetenv("NCCL_P2P_DISABLE");
}

}  // namespace
}  // namespace braid::transport
