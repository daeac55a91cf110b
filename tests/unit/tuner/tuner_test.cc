// The tuner as a pure function (src/algo/tuner.h): today's Simple choices reproduced, the model's
// shape (monotone in size, the choice never dearer than an allowed alternative), the protocol
// rules (LL128 only over same-GPU and NVLink hops), and NCCL_ALGO / NCCL_PROTO forcing.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "algo/tuner.h"
#include "algo/tuner_env.h"

namespace braid::algo {
namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;
constexpr LinkKind kKinds[] = {LinkKind::SameGpu, LinkKind::NvLink, LinkKind::Pcie, LinkKind::HostStaged, LinkKind::Network};
constexpr Protocol kProtocols[] = {Protocol::LL, Protocol::LL128, Protocol::Simple};
constexpr Coll kColls[] = {Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter, Coll::AllReduce,
                           Coll::AlltoAll,  Coll::Gather, Coll::Scatter,   Coll::SendRecv};

// 0, 1, and around every power of two up to 16 GiB.
std::vector<uint64_t> sizes() {
  std::vector<uint64_t> s = {0, 1};
  for (uint64_t p = 2; p <= 16 * GiB; p *= 2)
    for (uint64_t b : {p - 1, p, p + 1, p + p / 2}) s.push_back(b);
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

TunerInput input(Coll coll, int nRanks, uint64_t bytes, Hops hops, int ranksPerGpu = 1) {
  TunerInput in;
  in.coll = coll;
  in.bytes = bytes;
  in.elemSize = 4;
  in.nRanks = nRanks;
  in.ranksPerGpu = ranksPerGpu;
  in.ring = in.mesh = hops;
  in.sms = 132;
  return in;
}

std::string describe(const TunerInput& in) {
  return std::string(collName(in.coll)) + " n=" + std::to_string(in.nRanks) + " rpg=" + std::to_string(in.ranksPerGpu) +
         " bytes=" + std::to_string(in.bytes) + " ring=" + linkKindName(in.ring.kind) + " mesh=" + linkKindName(in.mesh.kind);
}

std::string name(const TunerChoice& c) {
  return std::string(c.algorithm ? c.algorithm->name : "p2p") + "/" + protocolName(c.protocol);
}

// Today's rules as they were before the tuner took them over (api/channels.h,
// api/device_resources.cc channelsFor/p2pPartsFor, algo/registry.cc tunedAlgorithm, the
// executor's 2 slices per step): the oracle for Simple-only inputs.
namespace today {
uint64_t channelsWanted(uint64_t bytes, uint64_t perChannel) {
  const uint64_t fine = (bytes + perChannel - 1) / perChannel, coarse = (bytes + 512 * KiB - 1) / (512 * KiB);
  return std::max<uint64_t>(1, std::max(std::min<uint64_t>(fine, 16), coarse));
}
int channels(uint64_t bytes, int ranksPerGpu, int sms, int minCTAs, int maxCTAs) {
  const int cap = std::clamp(std::min(64, sms / std::max(1, ranksPerGpu)), minCTAs, maxCTAs);
  // Since the tuner, minCTAs is also a floor (NCCL's meaning; it only raised the cap before).
  // Ranks sharing a GPU took a channel per 512 KiB before the measurements of 2026-12-01.
  const auto wanted = static_cast<int>(std::min<uint64_t>(channelsWanted(bytes, 64 * KiB), cap));
  return std::max(wanted, minCTAs);
}
// Since the tuner: at most half the channel cap, so that a send/recv pair's blocks of every rank
// on a GPU fit on it together.
int p2pParts(uint64_t bytes, int ranksPerGpu, int sms, int minCTAs, int maxCTAs) {
  const int cap = std::clamp(std::min(64, sms / std::max(1, ranksPerGpu)), minCTAs, maxCTAs);
  return static_cast<int>(std::min<uint64_t>(channelsWanted(bytes, 64 * KiB), std::min(32, std::max(1, cap / 2))));
}
const Algorithm* algorithm(Coll coll, int nRanks, uint64_t bytes) {
  if (coll == Coll::AllReduce && nRanks == 2 && bytes <= 64 * KiB) return findAlgorithm("direct");
  return defaultAlgorithm(coll, nRanks);
}
}  // namespace today

TEST(Tuner, SimpleOnlyGivesTodaysChoices) {
  struct Caps {
    int sms, minCTAs, maxCTAs;
  };
  int checked = 0;
  for (Coll coll : kColls)
    for (int n : {1, 2, 3, 4, 5, 8, 16})
      for (int rpg : {1, 2, 4, 8})
        for (LinkKind kind : kKinds)
          for (Caps caps : {Caps{132, 1, 64}, Caps{16, 1, 64}, Caps{132, 1, 8}, Caps{132, 12, 64}, Caps{78, 2, 2}}) {
            if (rpg > n || (kind == LinkKind::SameGpu) != (rpg == n)) continue;  // all on one GPU, or spread
            for (uint64_t bytes : sizes()) {
              if (bytes > 4 * GiB) continue;
              TunerInput in = input(coll, n, bytes, {kind, kind == LinkKind::NvLink ? 370.8 : 0.0}, rpg);
              in.sms = caps.sms;
              in.minChannels = caps.minCTAs;
              in.maxChannels = caps.maxCTAs;
              const TunerResult r = tune(in);
              const TunerChoice& c = r.best;
              SCOPED_TRACE(describe(in));
              ASSERT_EQ(c.protocol, Protocol::Simple);
              ASSERT_EQ(c.slicesPerStep, 2);
              ASSERT_TRUE(r.warning.empty()) << r.warning;
              if (coll == Coll::SendRecv) {
                ASSERT_EQ(c.algorithm, nullptr);
                ASSERT_EQ(c.channels, today::p2pParts(bytes, rpg, caps.sms, caps.minCTAs, caps.maxCTAs));
                ASSERT_LE(2 * c.channels * rpg, std::max(2 * rpg, caps.sms)) << "a send/recv pair's blocks must fit the GPU";
              } else {
                ASSERT_EQ(c.algorithm, today::algorithm(coll, n, bytes)) << name(c);
                ASSERT_EQ(c.channels, today::channels(bytes, rpg, caps.sms, caps.minCTAs, caps.maxCTAs));
              }
              ++checked;
            }
          }
  EXPECT_GT(checked, 50000);
}

TEST(Tuner, ChannelRule) {
  // One rank per GPU: a channel per 64 KiB up to 16, then one per 512 KiB.
  EXPECT_EQ(channelsWanted(0, 64 * KiB), 1u);
  EXPECT_EQ(channelsWanted(8, 64 * KiB), 1u);
  EXPECT_EQ(channelsWanted(64 * KiB, 64 * KiB), 1u);
  EXPECT_EQ(channelsWanted(64 * KiB + 1, 64 * KiB), 2u);
  EXPECT_EQ(channelsWanted(512 * KiB, 64 * KiB), 8u);
  EXPECT_EQ(channelsWanted(1 * MiB, 64 * KiB), 16u);
  EXPECT_EQ(channelsWanted(8 * MiB, 64 * KiB), 16u);
  EXPECT_EQ(channelsWanted(16 * MiB, 64 * KiB), 32u);
  EXPECT_EQ(channelsWanted(32 * MiB, 64 * KiB), 64u);
  // Ranks sharing a GPU: one per 512 KiB.
  for (uint64_t bytes : {uint64_t{1}, 512 * KiB, 512 * KiB + 1, 3 * MiB, 8 * MiB, 100 * MiB})
    EXPECT_EQ(channelsWanted(bytes, 512 * KiB), std::max<uint64_t>(1, (bytes + 512 * KiB - 1) / (512 * KiB))) << bytes;
  uint64_t last = 0;
  for (uint64_t bytes = 0; bytes <= 64 * MiB; bytes += 4 * KiB + 3) {
    const uint64_t c = channelsWanted(bytes, 64 * KiB);
    EXPECT_GE(c, last) << bytes;
    last = c;
  }
  // Caps: 64, the SMs over the most ranks on a GPU, config.minCTAs/maxCTAs; 32 parts for send/recv.
  TunerInput in = input(Coll::AllReduce, 4, 1 * GiB, {LinkKind::SameGpu, 0}, 4);
  EXPECT_EQ(collectiveChannels(in, Protocol::Simple), 33);  // 132 SMs / 4 ranks
  in.sms = 0;                                               // unknown: only 64
  EXPECT_EQ(collectiveChannels(in, Protocol::Simple), 64);
  in.maxChannels = 8;
  EXPECT_EQ(collectiveChannels(in, Protocol::Simple), 8);
  in.coll = Coll::SendRecv;
  EXPECT_EQ(p2pParts(in, Protocol::Simple), 4);  // half the 8 channels: the pair's two blocks each
  in.maxChannels = 64;
  EXPECT_EQ(p2pParts(in, Protocol::Simple), 32);
  in.sms = 132;
  in.ranksPerGpu = 8;  // 16 channels a rank: 8 parts, 16 blocks a rank, 128 on the GPU
  EXPECT_EQ(p2pParts(in, Protocol::Simple), 8);
  in.hostMemory = true;  // the CPU engine: one lane
  EXPECT_EQ(collectiveChannels(in, Protocol::Simple), 1);
}

// Every (algorithm, protocol) of a collective, whatever the rules.
std::vector<std::pair<const Algorithm*, Protocol>> everything(Coll coll, int n) {
  std::vector<std::pair<const Algorithm*, Protocol>> out;
  for (Protocol p : kProtocols) {
    if (coll == Coll::SendRecv) out.push_back({nullptr, p});
    for (const Algorithm* a : algorithms())
      if (coll != Coll::SendRecv && a->supports(coll, n)) out.push_back({a, p});
  }
  return out;
}

TEST(Tuner, EstimateNeverFallsAsTheSizeGrowsForAFixedChoice) {
  const std::vector<uint64_t> all = sizes();
  for (Coll coll : kColls)
    for (int n : {1, 2, 3, 8, 64})
      for (LinkKind kind : kKinds)
        for (bool host : {false, true})
          for (auto [a, p] : everything(coll, n))
            for (int channels : {1, 2, 7, 16, 64}) {
              TunerInput in = input(coll, n, 0, {kind, kind == LinkKind::Pcie ? 24.0 : 0.0}, kind == LinkKind::SameGpu ? n : 1);
              in.hostMemory = host;
              double last = -1;
              for (uint64_t bytes : all) {
                in.bytes = bytes;
                const double us = estimateMicroseconds(in, a, p, channels);
                ASSERT_GE(us, last) << describe(in) << " " << (a ? a->name : "p2p") << "/" << protocolName(p) << " x" << channels;
                ASSERT_GT(us, 0.0);
                last = us;
              }
            }
}

// A spread of inputs: every collective, rank counts, link kinds (ring and mesh alike, or the
// mesh worse), ranks per GPU, protocol sets and sizes.
template <class F>
void forManyInputs(F f) {
  for (Coll coll : kColls)
    for (int n : {2, 3, 4, 8, 32})
      for (LinkKind ring : kKinds)
        for (LinkKind mesh : kKinds) {
          if (mesh < ring) continue;  // every ring hop is also a pair
          for (ProtocolSet exec : {protocolBit(Protocol::Simple), kAllProtocols,
                                   ProtocolSet(protocolBit(Protocol::LL) | protocolBit(Protocol::Simple))})
            for (uint64_t bytes : {uint64_t{8}, 4 * KiB, 64 * KiB, 64 * KiB + 8, 1 * MiB, 8 * MiB, 256 * MiB, 4 * GiB}) {
              const int rpg = ring == LinkKind::SameGpu && mesh == LinkKind::SameGpu ? n : 1;
              TunerInput in = input(coll, n, bytes, {ring, ring == LinkKind::NvLink ? 370.8 : 0.0}, rpg);
              in.mesh = {mesh, mesh == LinkKind::NvLink ? 300.0 : 0.0};
              in.executorProtocols = exec;
              f(in);
            }
        }
}

TEST(Tuner, TheChoiceIsNeverDearerThanAnAllowedAlternative) {
  forManyInputs([](const TunerInput& in) {
    const TunerResult r = tune(in);
    const Candidates all = candidates(in);
    ASSERT_GT(all.size, 0);
    bool found = false;
    for (int i = 0; i < all.size; ++i) {
      const TunerChoice& c = all.items[i];
      EXPECT_LE(r.best.microseconds, c.microseconds) << describe(in) << ": " << name(r.best) << " over " << name(c);
      found = found || (c.algorithm == r.best.algorithm && c.protocol == r.best.protocol);
      // What the candidates say is what the model says.
      EXPECT_EQ(c.microseconds, estimateMicroseconds(in, c.algorithm, c.protocol, c.channels));
      EXPECT_TRUE(in.executorProtocols & protocolBit(c.protocol)) << describe(in);
    }
    EXPECT_TRUE(found) << describe(in);
    EXPECT_EQ(r.hasRunnerUp, all.size > 1);
    if (r.hasRunnerUp) {
      EXPECT_LE(r.best.microseconds, r.runnerUp.microseconds) << describe(in);
      EXPECT_FALSE(r.runnerUp.algorithm == r.best.algorithm && r.runnerUp.protocol == r.best.protocol) << describe(in);
      for (int i = 0; i < all.size; ++i) {
        const TunerChoice& c = all.items[i];
        if (c.algorithm == r.best.algorithm && c.protocol == r.best.protocol) continue;
        EXPECT_LE(r.runnerUp.microseconds, c.microseconds) << describe(in);
      }
    }
  });
}

TEST(Tuner, LL128OnlyOverSameGpuAndNvlinkHops) {
  TuningConstraints onlyLL128;
  std::string error;
  ASSERT_TRUE(parseProtocolList("LL128", &onlyLL128, &error)) << error;
  int ll128Chosen = 0;
  forManyInputs([&](TunerInput in) {
    for (const TuningConstraints* constraints : {static_cast<const TuningConstraints*>(nullptr), static_cast<const TuningConstraints*>(&onlyLL128)}) {
      in.constraints = constraints;
      const Candidates all = candidates(in);
      for (int i = 0; i < all.size; ++i) {
        const TunerChoice& c = all.items[i];
        if (c.protocol != Protocol::LL128) continue;
        // The hops this algorithm uses: the ring's for the ring, every pair's otherwise.
        const bool usesRing = c.algorithm && std::string(c.algorithm->name) == "ring";
        const LinkKind kind = usesRing ? in.ring.kind : in.mesh.kind;
        EXPECT_TRUE(kind == LinkKind::SameGpu || kind == LinkKind::NvLink)
            << describe(in) << ": " << name(c) << " over " << linkKindName(kind);
      }
      const TunerResult r = tune(in);
      if (r.best.protocol == Protocol::LL128) ++ll128Chosen;
      if (constraints && !(in.executorProtocols & protocolBit(Protocol::LL128))) {
        EXPECT_FALSE(r.warning.empty());
      }
    }
  });
  EXPECT_GT(ll128Chosen, 0);  // it is chosen where it may be
  // Forced onto PCIe: refused, with a warning that says why, and the default runs.
  TunerInput in = input(Coll::AllReduce, 4, 8 * MiB, {LinkKind::Pcie, 24.0});
  in.executorProtocols = kAllProtocols;
  in.constraints = &onlyLL128;
  const TunerResult r = tune(in);
  EXPECT_NE(r.best.protocol, Protocol::LL128);
  EXPECT_NE(r.warning.find("LL128 runs only over same-GPU and NVLink hops"), std::string::npos) << r.warning;
  EXPECT_NE(r.warning.find("PCIe"), std::string::npos) << r.warning;
}

TEST(Tuner, ProtocolsFollowTheModelWhereAllAreAllowed) {
  // Over NVLink (2 H200s) every protocol gets its range: LL small, Simple large.
  TunerInput in = input(Coll::AllReduce, 8, 8, {LinkKind::NvLink, 370.8});
  in.executorProtocols = kAllProtocols;
  EXPECT_EQ(tune(in).best.protocol, Protocol::LL);
  in.bytes = 4 * GiB;
  EXPECT_EQ(tune(in).best.protocol, Protocol::Simple);
  // LL's estimate beats Simple's at 8 bytes by more than a hop's handshakes.
  in.bytes = 8;
  EXPECT_LT(estimateMicroseconds(in, findAlgorithm("ring"), Protocol::LL, 1) + 5,
            estimateMicroseconds(in, findAlgorithm("ring"), Protocol::Simple, 1));
}

TuningConstraints parsed(const char* algos, const char* protos) {
  TuningConstraints t;
  std::string error;
  EXPECT_TRUE(parseTuningEnv(algos, protos, &t, nullptr, &error)) << error;
  return t;
}

TEST(Tuner, NcclAlgoAndNcclProtoForceTheChoice) {
  TunerInput in = input(Coll::AllReduce, 2, 1 * MiB, {LinkKind::NvLink, 370.8});
  in.executorProtocols = kAllProtocols;
  // A protocol for every size.
  TuningConstraints t = parsed(nullptr, "LL");
  in.constraints = &t;
  for (uint64_t bytes : sizes()) {
    in.bytes = bytes;
    const TunerResult r = tune(in);
    ASSERT_EQ(r.best.protocol, Protocol::LL) << bytes;
    ASSERT_TRUE(r.warning.empty());
  }
  t = parsed(nullptr, "^LL,LL128");
  in.bytes = 8;
  EXPECT_EQ(tune(in).best.protocol, Protocol::Simple);
  // An algorithm: the only one allowed runs even where the tuner would not weigh it.
  in.bytes = 1 * MiB;
  t = parsed("allreduce:direct", nullptr);
  EXPECT_STREQ(tune(in).best.algorithm->name, "direct");  // past the one-shot's 64 KiB
  in.nRanks = 4;
  EXPECT_STREQ(tune(in).best.algorithm->name, "direct");  // and with more than 2 ranks
  t = parsed("twoshot", nullptr);
  EXPECT_STREQ(tune(in).best.algorithm->name, "twoshot");
  // Several allowed: the tuner's rules pick among them.
  in.nRanks = 2;
  t = parsed("ring,direct", nullptr);
  EXPECT_STREQ(tune(in).best.algorithm->name, "ring");
  in.bytes = 8;
  EXPECT_STREQ(tune(in).best.algorithm->name, "direct");
  t = parsed("^direct", nullptr);
  EXPECT_STRNE(tune(in).best.algorithm->name, "direct");
  // Per collective: the others are free.
  t = parsed("allgather:direct", "allreduce:Simple");
  EXPECT_STREQ(tune(in).best.algorithm->name, "direct");
  EXPECT_EQ(tune(in).best.protocol, Protocol::Simple);
  in.coll = Coll::AllGather;
  EXPECT_STREQ(tune(in).best.algorithm->name, "direct");
  EXPECT_EQ(tune(in).best.protocol, Protocol::LL);
  in.coll = Coll::Broadcast;  // direct broadcast runs only when asked for
  EXPECT_STREQ(tune(in).best.algorithm->name, "ring");
  t = parsed("broadcast:direct", nullptr);
  EXPECT_STREQ(tune(in).best.algorithm->name, "direct");
  // Send/recv: NCCL_PROTO applies, NCCL_ALGO has nothing to choose.
  in.coll = Coll::SendRecv;
  t = parsed("ring", "sendrecv:Simple");
  const TunerResult p2p = tune(in);
  EXPECT_EQ(p2p.best.algorithm, nullptr);
  EXPECT_EQ(p2p.best.protocol, Protocol::Simple);
  EXPECT_TRUE(p2p.warning.empty());
}

TEST(Tuner, ConstraintsThatLeaveNothingFallBackToTheDefaultWithAWarning) {
  struct Case {
    Coll coll;
    const char* algos;
    const char* protos;
    ProtocolSet exec;
    Hops hops;
    const char* says;
  };
  const Case cases[] = {
      {Coll::AllReduce, nullptr, "LL", protocolBit(Protocol::Simple), {LinkKind::NvLink, 370.8}, "the executor runs Simple only"},
      {Coll::AllReduce, nullptr, "^LL,LL128,Simple", kAllProtocols, {LinkKind::NvLink, 370.8}, "cannot run here"},
      {Coll::AllGather, nullptr, "LL128", kAllProtocols, {LinkKind::HostStaged, 0}, "LL128 runs only over"},
      {Coll::SendRecv, nullptr, "LL128", kAllProtocols, {LinkKind::Network, 0}, "network"},
      {Coll::AlltoAll, "ring", nullptr, kAllProtocols, {LinkKind::NvLink, 370.8}, "AlltoAll runs on direct only"},
      {Coll::Broadcast, "twoshot", nullptr, kAllProtocols, {LinkKind::NvLink, 370.8}, "Broadcast runs on ring, direct, tree only"},
  };
  for (const Case& k : cases) {
    TuningConstraints t = parsed(k.algos, k.protos);
    TunerInput in = input(k.coll, 4, 64 * KiB, k.hops);
    in.executorProtocols = k.exec;
    TunerInput free = in;
    in.constraints = &t;
    const TunerResult r = tune(in), def = tune(free);
    SCOPED_TRACE(describe(in));
    EXPECT_NE(r.warning.find(k.says), std::string::npos) << r.warning;
    EXPECT_NE(r.warning.find("using the tuner's default"), std::string::npos) << r.warning;
    EXPECT_EQ(r.best.algorithm, def.best.algorithm);
    EXPECT_EQ(r.best.protocol, def.best.protocol);
    EXPECT_EQ(r.best.microseconds, def.best.microseconds);
  }
}

TEST(Tuner, TiesGoToTheDefaultAlgorithmAndSimple) {
  // Ring and direct all-gather move the same bytes over as many hops on a uniform machine.
  TunerInput in = input(Coll::AllGather, 8, 1 * MiB, {LinkKind::NvLink, 370.8});
  const TunerResult r = tune(in);
  ASSERT_TRUE(r.hasRunnerUp);
  EXPECT_STREQ(r.best.algorithm->name, "ring");
  EXPECT_STREQ(r.runnerUp.algorithm->name, "direct");
  EXPECT_EQ(r.best.microseconds, r.runnerUp.microseconds);
  // A slower mesh makes direct dearer, never cheaper.
  in.mesh = {LinkKind::Pcie, 24.0};
  EXPECT_LT(tune(in).best.microseconds, tune(in).runnerUp.microseconds);
}

TEST(Tuner, OneRankAndHostMemoryHaveNothingToChoose) {
  for (Coll coll : kColls) {
    TunerInput in = input(coll, 1, 1 * MiB, {LinkKind::SameGpu, 0});
    in.executorProtocols = kAllProtocols;
    TuningConstraints t = parsed("twoshot", "LL");  // ignored: one rank is a copy
    in.constraints = &t;
    TunerResult r = tune(in);
    EXPECT_EQ(r.best.algorithm, coll == Coll::SendRecv ? nullptr : defaultAlgorithm(coll, 1)) << collName(coll);
    EXPECT_EQ(r.best.protocol, Protocol::Simple);
    EXPECT_FALSE(r.hasRunnerUp);
    EXPECT_TRUE(r.warning.empty());
    in.nRanks = 4;
    in.hostMemory = true;  // the CPU engine: the default algorithm on one lane
    t = parsed(nullptr, "LL");  // no protocols there
    r = tune(in);
    EXPECT_EQ(r.best.algorithm, coll == Coll::SendRecv ? nullptr : defaultAlgorithm(coll, 4)) << collName(coll);
    EXPECT_EQ(r.best.channels, 1);
    EXPECT_EQ(r.best.protocol, Protocol::Simple);
    EXPECT_FALSE(r.hasRunnerUp);
  }
}

// NCCL_ALGO reaches the CPU engine: the default when it is allowed, else the cheapest allowed
// algorithm on the CPU engine's model; nothing allowed that runs the collective: the default and
// a warning.
TEST(Tuner, HostMemoryRunsWhatNcclAlgoNames) {
  TunerInput in = input(Coll::AllReduce, 6, 1 * MiB, {LinkKind::Network, 0});
  in.hostMemory = true;
  in.nNodes = 3;
  in.ranksPerNode = 2;
  TuningConstraints t = parsed("allreduce:tree", nullptr);
  in.constraints = &t;
  TunerResult r = tune(in);
  EXPECT_STREQ(r.best.algorithm->name, "tree");
  EXPECT_TRUE(r.warning.empty());
  t = parsed("Tree", nullptr);  // NCCL's name, for every collective
  in.coll = Coll::Broadcast;
  EXPECT_STREQ(tune(in).best.algorithm->name, "tree");
  in.coll = Coll::AllGather;
  r = tune(in);
  EXPECT_STREQ(r.best.algorithm->name, "ring");
  EXPECT_NE(r.warning.find("AllGather runs on ring, direct only"), std::string::npos) << r.warning;
  in.coll = Coll::AllReduce;
  t = parsed("ring,tree", nullptr);  // both allowed: across hosts the model weighs them (tree: fewer network hops)
  EXPECT_STREQ(tune(in).best.algorithm->name, "tree");
  t = parsed("ring", nullptr);
  EXPECT_STREQ(tune(in).best.algorithm->name, "ring");
  t = parsed("^tree", nullptr);
  EXPECT_STREQ(tune(in).best.algorithm->name, "ring");
  t = parsed("direct,twoshot", nullptr);  // as many hops, less traffic than one-shot's n-1 copies
  EXPECT_STREQ(tune(in).best.algorithm->name, "twoshot");
}

// The tree runs only when NCCL_ALGO names it (it is not measured, so not in kConsidered); its
// estimate counts ~2 log2(nodes) + 2 (ranks per node - 1) hops.
TEST(Tuner, TheTreeRunsOnlyWhenAskedAndCountsItsDepth) {
  for (int nodes : {1, 2, 3, 8, 16}) {
    for (int per : {1, 2, 4}) {
      const int n = nodes * per;
      if (n < 2) continue;
      TunerInput in = input(Coll::AllReduce, n, 8, {LinkKind::Network, 0});
      in.executorProtocols = kAllProtocols;
      in.nNodes = nodes;
      in.ranksPerNode = per;
      for (uint64_t bytes : sizes()) {
        in.bytes = bytes;
        ASSERT_STRNE(tune(in).best.algorithm->name, "tree") << describe(in);
      }
      TuningConstraints t = parsed("allreduce:tree", nullptr);
      in.constraints = &t;
      EXPECT_STREQ(tune(in).best.algorithm->name, "tree") << describe(in);
      // Host memory at 0 bytes, across hosts: a network hop per tree level, a CPU hop per chain
      // link; the ring a network hop per step (each waits for its network link).
      in.hostMemory = true;
      in.bytes = 0;
      int log2 = 0;
      while ((1 << log2) < nodes) ++log2;
      const Algorithm* tree = findAlgorithm("tree");
      const Algorithm* ring = findAlgorithm("ring");
      const double netHop = estimateMicroseconds(in, ring, Protocol::Simple, 1) / (2 * (n - 1));
      const double cpuHop = 1.0;  // tuner_table.h cpuHopUs
      // One node's tree has no level (log2 = 0): its oneWay is at least one hop.
      const int chain = std::max(1, log2 + per - 1) - log2;
      EXPECT_DOUBLE_EQ(estimateMicroseconds(in, tree, Protocol::Simple, 1), 2 * (log2 * netHop + chain * cpuHop))
          << describe(in);
      in.coll = Coll::Broadcast;
      EXPECT_DOUBLE_EQ(estimateMicroseconds(in, tree, Protocol::Simple, 1), log2 * netHop + chain * cpuHop) << describe(in);
    }
  }
}

// Recursive doubling runs only when NCCL_ALGO names it (on the 2-core VM it measured no faster
// than the tree: perf/NOTES.md); its estimate counts log2(p) rounds (+2 where n is not a power
// of two), of which only the last log2(nodes) cross hosts.
TEST(Tuner, DoublingRunsOnlyWhenAskedAndCountsItsRounds) {
  const Algorithm* doubling = findAlgorithm("doubling");
  const Algorithm* ring = findAlgorithm("ring");
  ASSERT_NE(doubling, nullptr);
  struct Shape {
    int nodes, per, hops, network;
  } shapes[] = {{2, 1, 1, 1}, {2, 2, 2, 1}, {4, 2, 3, 2}, {8, 1, 3, 3}, {3, 1, 3, 3}, {1, 4, 2, 0}, {1, 6, 4, 0}};
  for (const Shape& sh : shapes) {
    const int n = sh.nodes * sh.per;
    TunerInput in = input(Coll::AllReduce, n, 8, {LinkKind::Network, 0});
    in.nNodes = sh.nodes;
    in.ranksPerNode = sh.per;
    in.hostMemory = true;
    for (uint64_t bytes : sizes()) {
      in.bytes = bytes;
      ASSERT_STRNE(tune(in).best.algorithm->name, "doubling") << describe(in);
    }
    TuningConstraints t = parsed("allreduce:doubling", nullptr);
    in.constraints = &t;
    in.bytes = 0;
    EXPECT_STREQ(tune(in).best.algorithm->name, "doubling") << describe(in);
    in.constraints = nullptr;
    const double netHop = estimateMicroseconds(in, ring, Protocol::Simple, 1) / (2 * (n - 1));
    const double cpuHop = 1.0;  // tuner_table.h cpuHopUs
    const double expected = sh.nodes > 1 ? sh.network * netHop + (sh.hops - sh.network) * cpuHop : sh.hops * cpuHop;
    EXPECT_DOUBLE_EQ(estimateMicroseconds(in, doubling, Protocol::Simple, 1), expected)
        << sh.nodes << " x " << sh.per;
  }
}

// Host memory across hosts (the UCX path): the CPU engine weighs the tree and, on 2 ranks up to
// 64 KB, direct against the ring with the network's measured constants (tuner_table.h
// kHostConsidered): the tree where it has fewer network hops (2 nodes x 2 ranks: 2 against the
// ring's 6), direct on 2 nodes x 1 rank (1 hop against 2) up to 64 KB and the default ring
// beyond (the tree ties it), the ring within one host, and what NCCL_ALGO says.
TEST(Tuner, AcrossHostsTheCpuEngineWeighsTheTree) {
  auto pick = [](int nodes, int per, uint64_t bytes, LinkKind kind, const char* algo = nullptr) {
    TunerInput in = input(Coll::AllReduce, nodes * per, bytes, {kind, 0});
    in.hostMemory = true;
    in.nNodes = nodes;
    in.ranksPerNode = per;
    TuningConstraints t = parsed(algo, nullptr);
    if (algo) in.constraints = &t;
    return std::string(tune(in).best.algorithm->name);
  };
  for (uint64_t bytes : {uint64_t{8}, uint64_t{512}, 64 * KiB, 2 * MiB, 64 * MiB}) {
    EXPECT_EQ(pick(2, 2, bytes, LinkKind::Network), "tree") << bytes;
    EXPECT_EQ(pick(8, 1, bytes, LinkKind::Network), "tree") << bytes;
    EXPECT_EQ(pick(2, 1, bytes, LinkKind::Network), bytes <= 64 * KiB ? "direct" : "ring") << bytes;
    EXPECT_EQ(pick(2, 1, bytes, LinkKind::Network, "^direct"), "ring") << bytes;
    EXPECT_EQ(pick(1, 4, bytes, LinkKind::HostStaged), "ring") << bytes;
    EXPECT_EQ(pick(2, 2, bytes, LinkKind::Network, "ring"), "ring") << bytes;
    EXPECT_EQ(pick(2, 2, bytes, LinkKind::Network, "^tree"), "ring") << bytes;
  }
  // Broadcast is not in kHostConsidered: its default stays.
  TunerInput in = input(Coll::Broadcast, 4, 8, {LinkKind::Network, 0});
  in.hostMemory = true;
  in.nNodes = 2;
  in.ranksPerNode = 2;
  EXPECT_STREQ(tune(in).best.algorithm->name, defaultAlgorithm(Coll::Broadcast, 4)->name);
  // The estimates where they were measured (UCX/TCP over veth on a 2-core VM, perf/NOTES.md):
  // 2 nodes x 1 rank direct 8 B 17.0 us (2026-12-06); ring 16 MB 16.6 ms (2026-12-01).
  in = input(Coll::AllReduce, 2, 8, {LinkKind::Network, 0});
  in.hostMemory = true;
  in.nNodes = 2;
  in.ranksPerNode = 1;
  EXPECT_NEAR(tune(in).best.microseconds, 17, 5);
  in.bytes = 16 * MiB;
  EXPECT_NEAR(tune(in).best.microseconds, 16600, 16600 * 0.2);
}

TEST(Tuner, EstimatesAreInTheRangeBraidMeasured) {
  // Not a fit, a guard against a broken table: Simple on 2 H200s over NVLink (perf/NOTES.md:
  // 8 B 11.95 us, 8 MB 56.2 us, 128 MB 473 us, 2 GB 6363 us), 2 ranks on one H200 (8 B 9-11 us).
  TunerInput in = input(Coll::AllReduce, 2, 8, {LinkKind::NvLink, 370.8});
  auto us = [&](uint64_t bytes) {
    in.bytes = bytes;
    return tune(in).best.microseconds;
  };
  EXPECT_NEAR(us(8), 11.95, 3);
  EXPECT_NEAR(us(8 * MiB), 56.2, 56.2 * 0.3);
  EXPECT_NEAR(us(128 * MiB), 473, 473 * 0.3);
  EXPECT_NEAR(us(2 * GiB), 6363, 6363 * 0.3);
  in = input(Coll::AllReduce, 2, 8, {LinkKind::SameGpu, 0}, 2);
  EXPECT_NEAR(us(8), 10.5, 3);
}

}  // namespace
}  // namespace braid::algo
