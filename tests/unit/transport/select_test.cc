// transport/select.h: where two ranks run decides the transport, for both engines.
#include <gtest/gtest.h>

#include "transport/select.h"

namespace {

using namespace braid;
using transport::Locality;

PeerInfo at(uint64_t host, uint64_t process) {
  PeerInfo p;
  p.hostHash = host;
  p.processHash = process;
  return p;
}

TEST(Select, Locality) {
  EXPECT_EQ(transport::localityOf(at(1, 10), at(1, 10)), Locality::SameProcess);
  EXPECT_EQ(transport::localityOf(at(1, 10), at(1, 11)), Locality::SameHost);
  EXPECT_EQ(transport::localityOf(at(1, 10), at(2, 10)), Locality::OtherHost);  // a process hash can repeat across hosts
}

TEST(Select, NeedsNetworkOnlyWithAnotherHost) {
  std::vector<PeerInfo> oneHost = {at(1, 10), at(1, 11), at(1, 11)};
  EXPECT_FALSE(transport::needsNetwork(oneHost, 0));
  std::vector<PeerInfo> twoHosts = {at(1, 10), at(1, 11), at(2, 12)};
  for (int me = 0; me < 3; ++me) EXPECT_TRUE(transport::needsNetwork(twoHosts, me)) << me;
}

TEST(Select, DescribesEachChoice) {
  std::vector<PeerInfo> peers = {at(1, 10), at(1, 10), at(1, 11), at(2, 12)};
  EXPECT_EQ(transport::describeChoice(peers, 0, 1).rfind("rank 0 -> rank 1: same process", 0), 0u);
  EXPECT_NE(transport::describeChoice(peers, 0, 2).find("same host: shared memory"), std::string::npos);
  const std::string far = transport::describeChoice(peers, 0, 3);
  EXPECT_NE(far.find("other host: UCX"), std::string::npos);
  EXPECT_NE(far.find("device memory: Simple FIFOs staged in pinned host memory"), std::string::npos) << far;
  EXPECT_EQ(far.find("GPUDirect"), std::string::npos) << far;
  // GPUDirect is named where it is used, and why not where UCX could but BRAID_GPUDIRECT=0 said no.
  EXPECT_NE(transport::describeChoice(peers, 0, 3, true, true).find("in device memory handed to UCX (GPUDirect)"),
            std::string::npos);
  EXPECT_NE(transport::describeChoice(peers, 0, 3, true, false).find("GPUDirect off: BRAID_GPUDIRECT=0"),
            std::string::npos);
}

// Device slots go to UCX only where it takes CUDA memory, and BRAID_GPUDIRECT=0 keeps them staged.
TEST(Select, GpuDirectWhereUcxTakesCudaMemory) {
  EXPECT_FALSE(transport::netSlotsInDeviceMemory(false, nullptr));
  EXPECT_FALSE(transport::netSlotsInDeviceMemory(false, "1"));
  EXPECT_TRUE(transport::netSlotsInDeviceMemory(true, nullptr));
  EXPECT_TRUE(transport::netSlotsInDeviceMemory(true, "1"));
  EXPECT_TRUE(transport::netSlotsInDeviceMemory(true, "auto"));
  EXPECT_FALSE(transport::netSlotsInDeviceMemory(true, "0"));
}

// The GPU connection per peer: P2P (pointers, IPC or staged shared memory) on one host, the
// UCX proxy's staged FIFOs across hosts; a process hash repeated on another host is still far.
TEST(Select, DeviceTransportByLocality) {
  using transport::DeviceTransport;
  EXPECT_EQ(transport::deviceTransportOf(at(1, 10), at(1, 10)), DeviceTransport::P2p);
  EXPECT_EQ(transport::deviceTransportOf(at(1, 10), at(1, 11)), DeviceTransport::P2p);
  EXPECT_EQ(transport::deviceTransportOf(at(1, 10), at(2, 10)), DeviceTransport::NetStaged);
  EXPECT_EQ(transport::deviceTransportOf(at(2, 10), at(1, 11)), DeviceTransport::NetStaged);
}

// Across hosts only Simple: LL has no tail counter for the proxy to follow, and LL128's lines
// do not arrive whole through the proxy (select.h). On one host both may run (LL128 where the
// P2P link is ordered128, which p2p decides).
TEST(Select, ProtocolsPerDeviceTransport) {
  using transport::DeviceTransport;
  EXPECT_TRUE(transport::carriesLL(DeviceTransport::P2p));
  EXPECT_TRUE(transport::carriesLL128(DeviceTransport::P2p));
  EXPECT_FALSE(transport::carriesLL(DeviceTransport::NetStaged));
  EXPECT_FALSE(transport::carriesLL128(DeviceTransport::NetStaged));
}

}  // namespace
