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
  EXPECT_NE(far.find("UCX for device memory (Simple FIFOs staged in pinned host memory"), std::string::npos) << far;
  EXPECT_EQ(far.find("GPUDirect"), std::string::npos) << far;
  // GPUDirect is named where it is used, and why not where UCX could but BRAID_GPUDIRECT=0 said no.
  EXPECT_NE(transport::describeChoice(peers, 0, 3, transport::GpuDirect::On).find("in device memory handed to UCX (GPUDirect)"),
            std::string::npos);
  EXPECT_NE(transport::describeChoice(peers, 0, 3, transport::GpuDirect::TurnedOff).find("GPUDirect off: BRAID_GPUDIRECT=0"),
            std::string::npos);
  EXPECT_NE(transport::describeChoice(peers, 0, 3, transport::GpuDirect::NoRdma).find("GPUDirect off: no RDMA"),
            std::string::npos);
}

// Device slots go to UCX only where it takes CUDA memory; by default only where an RDMA device
// is and UCX_TLS leaves an RDMA transport (over TCP, UCX's own copies were 15-70x slower than
// staging); BRAID_GPUDIRECT=0 keeps them staged, =1 hands them over anyway.
TEST(Select, GpuDirectWhereUcxTakesCudaMemoryOverRdma) {
  using transport::GpuDirect;
  using transport::gpuDirectChoice;
  EXPECT_EQ(gpuDirectChoice(false, nullptr, nullptr, true), GpuDirect::NoCudaUcx);
  EXPECT_EQ(gpuDirectChoice(false, "1", nullptr, true), GpuDirect::NoCudaUcx);
  EXPECT_EQ(gpuDirectChoice(true, nullptr, nullptr, true), GpuDirect::On);
  EXPECT_EQ(gpuDirectChoice(true, "auto", nullptr, true), GpuDirect::On);
  EXPECT_EQ(gpuDirectChoice(true, nullptr, nullptr, false), GpuDirect::NoRdma);
  EXPECT_EQ(gpuDirectChoice(true, "1", nullptr, false), GpuDirect::On);
  EXPECT_EQ(gpuDirectChoice(true, "0", nullptr, true), GpuDirect::TurnedOff);
  EXPECT_EQ(gpuDirectChoice(true, nullptr, "tcp,cuda_copy", true), GpuDirect::NoRdma);
  EXPECT_EQ(gpuDirectChoice(true, nullptr, "tcp", true), GpuDirect::NoRdma);
  EXPECT_EQ(gpuDirectChoice(true, nullptr, "rc_x,cuda_copy", true), GpuDirect::On);
  EXPECT_EQ(gpuDirectChoice(true, nullptr, "sm,dc", true), GpuDirect::On);
  EXPECT_EQ(gpuDirectChoice(true, nullptr, "all", true), GpuDirect::On);
  EXPECT_EQ(gpuDirectChoice(true, nullptr, "^tcp", true), GpuDirect::On);
  EXPECT_EQ(gpuDirectChoice(true, "1", "tcp,cuda_copy", false), GpuDirect::On);
}

// The transport per peer, for both engines: P2P (pointers, IPC or staged shared memory) and
// memory / shared memory on one host, UCX across hosts; a process hash repeated on another
// host is still far. Each transport can connect exactly the pairs select gives it.
TEST(Select, TransportByLocality) {
  auto device = [](const PeerInfo& a, const PeerInfo& b) { return std::string(transport::deviceTransportOf(a, b).name()); };
  auto host = [](const PeerInfo& a, const PeerInfo& b) { return std::string(transport::hostTransportOf(a, b).name()); };
  EXPECT_EQ(device(at(1, 10), at(1, 10)), "P2P");
  EXPECT_EQ(device(at(1, 10), at(1, 11)), "P2P");
  EXPECT_EQ(device(at(1, 10), at(2, 10)), "UCX");
  EXPECT_EQ(device(at(2, 10), at(1, 11)), "UCX");
  EXPECT_EQ(host(at(1, 10), at(1, 10)), "memory");
  EXPECT_EQ(host(at(1, 10), at(1, 11)), "shared memory");
  EXPECT_EQ(host(at(1, 10), at(2, 10)), "UCX");
  const std::vector<PeerInfo> all = {at(1, 10), at(1, 11), at(2, 10), at(2, 12)};
  for (const PeerInfo& a : all)
    for (const PeerInfo& b : all) {
      EXPECT_TRUE(transport::deviceTransportOf(a, b).canConnect(a, b));
      EXPECT_TRUE(transport::hostTransportOf(a, b).canConnect(a, b));
      int devices = 0;
      for (const transport::DeviceTransport* t : transport::deviceTransports()) devices += t->canConnect(a, b);
      EXPECT_EQ(devices, 1) << "exactly one GPU transport joins a pair";
    }
}

// Across hosts only Simple: LL has no tail counter for the proxy to follow, and LL128's lines
// do not arrive whole through the proxy (select.h). On one host both may run (LL128 where the
// P2P link is ordered128, which p2p decides).
TEST(Select, ProtocolsPerDeviceTransport) {
  EXPECT_TRUE(transport::p2pDeviceTransport().carriesLL());
  EXPECT_TRUE(transport::p2pDeviceTransport().carriesLL128());
  EXPECT_FALSE(transport::netDeviceTransport().carriesLL());
  EXPECT_FALSE(transport::netDeviceTransport().carriesLL128());
}

}  // namespace
