// The bootstrap's pure parts: interface selection syntax (NCCL_SOCKET_IFNAME), NCCL_COMM_ID
// parsing, and the unique id's integrity check.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/call_state.h"
#include "core/peer_info.h"
#include "core/socket.h"
#include "core/unique_id.h"

namespace braid {
namespace {

TEST(SocketIfname, PrefixesExclusionAndExactNames) {
  EXPECT_TRUE(interfaceMatches("eth0", "eth"));
  EXPECT_TRUE(interfaceMatches("ib1", "eth,ib"));
  EXPECT_FALSE(interfaceMatches("lo", "eth,ib"));
  EXPECT_FALSE(interfaceMatches("docker0", "^docker,lo"));
  EXPECT_FALSE(interfaceMatches("lo", "^docker,lo"));
  EXPECT_TRUE(interfaceMatches("eth0", "^docker,lo"));
  EXPECT_TRUE(interfaceMatches("eth0", "=eth0"));
  EXPECT_FALSE(interfaceMatches("eth01", "=eth0"));
  EXPECT_FALSE(interfaceMatches("eth0", "^=eth0"));
  EXPECT_TRUE(interfaceMatches("mlx5_0", "mlx5_0:1"));  // ":port" suffixes are ignored
}

TEST(CommId, ParsesIpv4Ipv6AndHostNames) {
  SocketAddress a;
  ASSERT_EQ(parseHostPort("127.0.0.1:29500", &a), ncclSuccess);
  EXPECT_EQ(a.toString(), "127.0.0.1:29500");
  ASSERT_EQ(parseHostPort("[::1]:1234", &a), ncclSuccess);
  EXPECT_EQ(a.toString(), "[::1]:1234");
  ASSERT_EQ(parseHostPort("localhost:80", &a), ncclSuccess);
  EXPECT_EQ(a.sa.sa_family == AF_INET || a.sa.sa_family == AF_INET6, true);
  EXPECT_EQ(parseHostPort("127.0.0.1", &a), ncclInvalidArgument);
  EXPECT_EQ(parseHostPort("127.0.0.1:0", &a), ncclInvalidArgument);
  EXPECT_EQ(parseHostPort("127.0.0.1:70000", &a), ncclInvalidArgument);
  EXPECT_EQ(parseHostPort("[::1:5", &a), ncclInvalidArgument);
}

TEST(UniqueId, RoundTripsAndRejectsDamage) {
  UniqueIdContent c{};
  ASSERT_EQ(parseHostPort("10.1.2.3:4567", &c.root), ncclSuccess);
  c.secret = 0x1234567890abcdefull;
  ncclUniqueId id = encodeUniqueId(c);
  UniqueIdContent back{};
  ASSERT_EQ(decodeUniqueId(id, "test", &back), ncclSuccess);
  EXPECT_EQ(back.secret, c.secret);
  EXPECT_EQ(back.root.toString(), "10.1.2.3:4567");
  for (size_t byte : {0u, 9u, 20u, 40u}) {  // any damaged byte before the checksum is caught
    ncclUniqueId bad = id;
    bad.internal[byte] ^= 0x10;
    EXPECT_EQ(decodeUniqueId(bad, "test", &back), ncclInvalidArgument) << "byte " << byte;
  }
  ncclUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  EXPECT_EQ(decodeUniqueId(zero, "test", &back), ncclInvalidArgument);
  EXPECT_NE(randomSecret(), randomSecret());
}

}  // namespace
}  // namespace braid

// Emulated hosts (BRAID_HOSTID) are other hosts to the transports, but the same machine to
// whatever shares its cores (the UCX proxies' count, transport/ucx_proxies.h).
TEST(HostIdentity, BraidHostIdChangesTheHostNotTheMachine) {
  unsetenv("BRAID_HOSTID");
  const uint64_t host = braid::hostHash(), machine = braid::machineHash();
  EXPECT_EQ(host, machine);
  setenv("BRAID_HOSTID", "emulated-node-7", 1);
  EXPECT_NE(braid::hostHash(), host);
  EXPECT_EQ(braid::machineHash(), machine);
  unsetenv("BRAID_HOSTID");
}

// A served rank's device calls complete when the leader's stream writes its `done` word
// (src/api/served.h): no event in its own stream. Counted cyclically, as the words wrap.
TEST(CallStateDoneWord, CallsCompleteWhenTheWordReachesTheirPost) {
  braid::CallState calls;
  auto word = std::make_shared<uint32_t>(0xfffffffeu);
  std::shared_ptr<const volatile uint32_t> done(word, word.get());
  braid::CallDesc descs[2];
  calls.begin(&descs[0], 1);
  calls.enqueued(done, 0xffffffffu);
  calls.begin(&descs[1], 1);
  calls.enqueued(done, 0u);  // the post numbers wrapped
  braid::CallStatus s = calls.status(0);
  EXPECT_EQ(s.inCall, 1u);
  EXPECT_EQ(s.started, 2u);
  EXPECT_EQ(s.completed, 0u);
  *word = 0xffffffffu;  // the first post's outputs are written
  s = calls.status(0);
  EXPECT_EQ(s.completed, 1u);
  EXPECT_EQ(s.current.seq, 2u);
  EXPECT_FALSE(calls.idle());
  *word = 0u;
  s = calls.status(0);
  EXPECT_EQ(s.inCall, 0u);
  EXPECT_EQ(s.completed, 2u);
  EXPECT_TRUE(calls.idle());
}
