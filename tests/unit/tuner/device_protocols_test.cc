// The protocols the tuner weighs for a device task (api/tuner_inputs.h deviceTaskProtocols), on
// the links of a real topology file: a send/recv is chosen for the one protocol its launch runs
// (p2pLaunchProtocol: Simple unless NCCL_PROTO leaves send/recv exactly one), and a task whose
// launch protocol is known (a group's tasks run its first collective's) for that one.
// CommTuning::choose and braid-tune build their tuner input with these functions; a launch of
// sends and receives alone takes its protocol from p2pLaunchProtocol. No GPU.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "algo/tuner.h"
#include "algo/tuner_env.h"
#include "api/tuner_inputs.h"
#include "topo/system.h"
#include "topo/topo.h"

namespace braid::api {
namespace {

using algo::Coll;
using algo::Protocol;

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;

// Two ranks on GPUs 0 and 1 of an 8-GPU HGX H200 (NVLink through the NVSwitch), or both on GPU 0.
LinkFacts h200Pair(bool sameGpu) {
  topo::System sys;
  std::string error;
  const std::string file = std::string(BRAID_TOPO_DATA) + "/nccl-xml/vastai-hgx-h200-8gpu.xml";
  EXPECT_TRUE(topo::loadSystemFile(file, &sys, &error)) << error;
  EXPECT_GE(sys.gpus.size(), 2u);
  if (sys.gpus.size() < 2) return {};
  const std::vector<RankPlace> places = {{1, sys.node(sys.gpus[0]).busId},
                                         {1, sys.node(sys.gpus[sameGpu ? 0 : 1]).busId}};
  return linkFacts(sys, places, {}, 0, /*p2pDisabled=*/false);
}

// NCCL_PROTO's constraints as the communicator parses them (nullptr: unset).
algo::TuningConstraints constraintsOf(const char* ncclProto) {
  algo::TuningConstraints c;
  std::vector<std::string> notes;
  std::string error;
  EXPECT_TRUE(algo::parseTuningEnv(nullptr, ncclProto, &c, &notes, &error)) << error;
  return c;
}

// The tuner's input for a device task on rank 0, as CommTuning::choose builds it.
algo::TunerInput deviceInput(const LinkFacts& links, Coll coll, uint64_t bytes, const algo::TuningConstraints& c,
                             const char* ncclProto, std::optional<Protocol> launch) {
  algo::TunerInput in;
  in.coll = coll;
  in.bytes = bytes;
  in.elemSize = 4;
  in.nRanks = 2;
  in.ranksPerGpu = links.ranksPerGpu;
  in.ring = links.ring;
  in.mesh = coll == Coll::SendRecv ? links.toRank[1] : links.mesh;
  in.sms = 132;
  in.executorProtocols = deviceTaskProtocols(coll, c, deviceProtocols(links, ncclProto != nullptr), launch);
  in.constraints = &c;
  return in;
}

std::vector<uint64_t> sizes() {
  std::vector<uint64_t> s;
  for (uint64_t b = 8; b <= 64 * MiB; b *= 4) s.push_back(b);
  return s;
}

TEST(DeviceProtocols, SendRecvIsChosenForTheProtocolItsLaunchRuns) {
  struct Case {
    const char* ncclProto;
    Protocol runs;
  };
  const Case cases[] = {
      {nullptr, Protocol::Simple},
      {"LL,Simple", Protocol::Simple},  // two protocols left: the launch runs Simple
      {"^LL128", Protocol::Simple},
      {"LL,LL128,Simple", Protocol::Simple},
      {"allreduce:LL", Protocol::Simple},  // send/recv unconstrained
      {"LL", Protocol::LL},
      {"sendrecv:LL;allreduce:Simple", Protocol::LL},
      {"ll", Protocol::LL},
      {"LL128", Protocol::LL128},  // NVLink and one GPU carry LL128
      {"sendrecv:^LL,Simple", Protocol::LL128},
  };
  for (bool sameGpu : {false, true}) {
    const LinkFacts links = h200Pair(sameGpu);
    ASSERT_EQ(links.toRank.size(), 2u);
    for (const Case& k : cases) {
      const algo::TuningConstraints c = constraintsOf(k.ncclProto);
      EXPECT_EQ(p2pLaunchProtocol(c, deviceProtocols(links, k.ncclProto != nullptr)), k.runs) << k.ncclProto;
      for (uint64_t bytes : sizes()) {
        SCOPED_TRACE(std::string(k.ncclProto ? k.ncclProto : "(unset)") + (sameGpu ? " same GPU " : " NVLink ") +
                     std::to_string(bytes) + " B");
        const algo::TunerResult r = algo::tune(deviceInput(links, Coll::SendRecv, bytes, c, k.ncclProto, std::nullopt));
        EXPECT_EQ(r.best.protocol, k.runs);
        EXPECT_EQ(r.best.slicesPerStep, algo::slicesPerStepOf(k.runs));  // the slicing the launch takes
        EXPECT_FALSE(r.hasRunnerUp) << "one protocol to weigh, no other";
        EXPECT_TRUE(r.warning.empty()) << r.warning;
      }
    }
  }
}

// The bug this guards against: left to itself the tuner takes LL for small sends over NVLink
// when NCCL_PROTO allows LL and Simple, while the launch runs Simple.
TEST(DeviceProtocols, UnconstrainedTheTunerWouldPickLLForSmallSends) {
  const LinkFacts links = h200Pair(false);
  ASSERT_EQ(links.toRank.size(), 2u);
  const algo::TuningConstraints c = constraintsOf("LL,Simple");
  algo::TunerInput in = deviceInput(links, Coll::SendRecv, 8, c, "LL,Simple", std::nullopt);
  EXPECT_EQ(algo::tune(in).best.protocol, Protocol::Simple);
  in.executorProtocols = kExecutorProtocols;
  EXPECT_EQ(algo::tune(in).best.protocol, Protocol::LL);
}

TEST(DeviceProtocols, ATaskIsChosenForItsLaunchsProtocolWhenThatIsKnown) {
  const LinkFacts links = h200Pair(false);
  ASSERT_EQ(links.toRank.size(), 2u);
  const algo::TuningConstraints c = constraintsOf("LL,Simple");
  // On its own an 8-byte all-reduce takes LL here; after a collective whose launch runs Simple
  // it is chosen for Simple, and for LL where the launch runs LL.
  EXPECT_EQ(algo::tune(deviceInput(links, Coll::AllReduce, 8, c, "LL,Simple", std::nullopt)).best.protocol, Protocol::LL);
  for (uint64_t bytes : sizes())
    for (Protocol launch : {Protocol::Simple, Protocol::LL}) {
      const algo::TunerResult r = algo::tune(deviceInput(links, Coll::AllReduce, bytes, c, "LL,Simple", launch));
      EXPECT_EQ(r.best.protocol, launch) << bytes;
      EXPECT_TRUE(r.warning.empty()) << r.warning;
      if (r.hasRunnerUp) {
        EXPECT_EQ(r.runnerUp.protocol, launch) << bytes;  // another algorithm, the same protocol
      }
    }
  // A send grouped with a collective runs the collective's protocol, and is chosen for it.
  const algo::TunerResult send = algo::tune(deviceInput(links, Coll::SendRecv, 8, c, "LL,Simple", Protocol::LL));
  EXPECT_EQ(send.best.protocol, Protocol::LL);
  EXPECT_EQ(send.best.slicesPerStep, algo::slicesPerStepOf(Protocol::LL));
  // Not known: the communicator's protocols (NCCL_PROTO unset: Simple between GPUs).
  EXPECT_EQ(deviceTaskProtocols(Coll::AllReduce, c, deviceProtocols(links, false), std::nullopt),
            defaultProtocols(links));
}

TEST(DeviceProtocols, WhereTheLaunchsProtocolCannotRunTheChoiceIsSimpleAndSaysWhy) {
  // NCCL_PROTO=LL128 between PCIe GPUs: the launch asks LL128 and falls back to Simple
  // (GpuResources::usableProtocol); the tuner chooses Simple and names the rule.
  topo::System sys;
  std::string error;
  ASSERT_TRUE(topo::loadSystemFile(std::string(BRAID_TOPO_DATA) + "/nccl-xml/rtx4090-4gpu-pcie-epyc-nps4.xml", &sys, &error))
      << error;
  ASSERT_GE(sys.gpus.size(), 2u);
  const LinkFacts links =
      linkFacts(sys, {{1, sys.node(sys.gpus[0]).busId}, {1, sys.node(sys.gpus[1]).busId}}, {}, 0, false);
  const algo::TuningConstraints c = constraintsOf("LL128");
  EXPECT_EQ(p2pLaunchProtocol(c, deviceProtocols(links, true)), Protocol::LL128);
  const algo::TunerResult r = algo::tune(deviceInput(links, Coll::SendRecv, 8, c, "LL128", std::nullopt));
  EXPECT_EQ(r.best.protocol, Protocol::Simple);
  EXPECT_NE(r.warning.find("LL128 runs only over same-GPU and NVLink hops"), std::string::npos) << r.warning;
  EXPECT_NE(r.warning.find("using the tuner's default (p2p/Simple)"), std::string::npos) << r.warning;
}

}  // namespace
}  // namespace braid::api
