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
  EXPECT_NE(transport::describeChoice(peers, 0, 3).find("other host: UCX"), std::string::npos);
}

}  // namespace
