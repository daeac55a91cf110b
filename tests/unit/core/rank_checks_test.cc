// The rank's side of the bootstrap under a hostile or broken counterpart: a fake root (this
// test's listener, named in an id made here) answers a real rank's ncclCommInitRank with
// malformed replies, and a fake peer announces a huge message. The rank must fail with a
// message, never allocate by the count it was sent, and never wait for its timeout.
#include <gtest/gtest.h>

#include <climits>
#include <functional>

#include "bootstrap_test_util.h"
#include "core/socket.h"
#include "core/tcp_bootstrap.h"

namespace braid {
namespace {

using test::secondsSince;

constexpr uint64_t kSecret = 0xfeedface0badf00dull;

class FakeRoot {
 public:
  FakeRoot() {
    at_.sin.sin_family = AF_INET;
    at_.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(listenOn(&at_, &listenFd_), ncclSuccess);
    UniqueIdContent c{};
    c.secret = kSecret;
    c.root = at_;
    id_ = encodeUniqueId(c);
  }
  ~FakeRoot() { stop(); }
  void stop() {
    if (listenFd_ >= 0) close(listenFd_);
    listenFd_ = -1;
  }
  const ncclUniqueId& id() const { return id_; }
  // Accepts one rank and reads its hello; -1 when none came within 10 s.
  int acceptRank(PeerInfo* info) {
    pollfd p{listenFd_, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return -1;
    int fd = accept(listenFd_, nullptr, nullptr);
    std::vector<char> hello = test::recvRaw(fd, wire::kRootHelloBytes, 10);
    EXPECT_EQ(hello.size(), wire::kRootHelloBytes);
    if (hello.size() == wire::kRootHelloBytes) std::memcpy(info, hello.data() + sizeof(wire::Hello), sizeof(*info));
    return fd;
  }

 private:
  SocketAddress at_{};
  int listenFd_ = -1;
  ncclUniqueId id_{};
};

// Rank 0 of 2 inits against the fake root, which answers with `answer(fd, rank0's info)`.
test::RankOutcome initAgainst(FakeRoot& root, const std::function<void(int, const PeerInfo&)>& answer) {
  test::RankOutcome out;
  std::thread rank([&] { out = test::initRanks(root.id(), 2, {0})[0]; });
  PeerInfo info{};
  int fd = root.acceptRank(&info);
  if (fd >= 0) {
    answer(fd, info);
    close(fd);
  }
  rank.join();
  return out;
}

void sendReply(int fd, int32_t status, int32_t nRanks, const std::vector<PeerInfo>& table = {}) {
  wire::RootReply reply{};
  reply.status = status;
  reply.nRanks = nRanks;
  std::snprintf(reply.error, sizeof(reply.error), "fake root says no");
  test::sendRaw(fd, &reply, sizeof(reply));
  if (!table.empty()) test::sendRaw(fd, table.data(), table.size() * sizeof(PeerInfo));
}

void expectRefused(const test::RankOutcome& out, const char* text) {
  EXPECT_EQ(out.rc, ncclRemoteError) << out.error;
  EXPECT_NE(out.error.find(text), std::string::npos) << out.error;
  EXPECT_LT(out.seconds, 5.0) << out.error;
}

TEST(RankChecks, AnAnswerForAnotherNranksIsRefusedBeforeItSizesAnything) {
  for (int32_t n : {INT_MAX, 3, 0, -1, INT_MIN}) {
    FakeRoot root;
    auto out = initAgainst(root, [&](int fd, const PeerInfo&) { sendReply(fd, ncclSuccess, n); });
    expectRefused(out, "malformed answer");
  }
}

TEST(RankChecks, ATableWithAWrongEntryIsRefused) {
  using Mutate = void (*)(std::vector<PeerInfo>&);
  const Mutate mutations[] = {
      [](std::vector<PeerInfo>& t) { t[1].rank = 0; },
      [](std::vector<PeerInfo>& t) { t[1].nRanks = INT_MAX; },
      [](std::vector<PeerInfo>& t) { t[0].listen.sa.sa_family = AF_UNIX; },
      [](std::vector<PeerInfo>& t) { std::memset(t[1].busId, 'z', sizeof(t[1].busId)); },
  };
  for (Mutate mutate : mutations) {
    FakeRoot root;
    auto out = initAgainst(root, [&](int fd, const PeerInfo& rank0) {
      std::vector<PeerInfo> table = {rank0, test::validPeerInfo(1, 2)};
      mutate(table);
      sendReply(fd, ncclSuccess, 2, table);
    });
    expectRefused(out, "malformed answer");
  }
}

TEST(RankChecks, AnUnknownStatusOrAnUnterminatedErrorIsRefused) {
  for (int32_t status : {99, -7, INT_MAX}) {
    FakeRoot root;
    auto out = initAgainst(root, [&](int fd, const PeerInfo&) { sendReply(fd, status, 2); });
    expectRefused(out, "malformed answer");
  }
  FakeRoot root;
  auto out = initAgainst(root, [](int fd, const PeerInfo&) {
    wire::RootReply reply{};
    reply.status = ncclInvalidUsage;
    std::memset(reply.error, 'e', sizeof(reply.error));
    test::sendRaw(fd, &reply, sizeof(reply));
  });
  expectRefused(out, "malformed answer");
}

TEST(RankChecks, TheRootsErrorReachesTheCaller) {
  FakeRoot root;
  auto out = initAgainst(root, [](int fd, const PeerInfo&) { sendReply(fd, ncclInvalidUsage, 0); });
  EXPECT_EQ(out.rc, ncclInvalidUsage);
  EXPECT_NE(out.error.find("fake root says no"), std::string::npos) << out.error;
}

// The real root drops a connection before reading its hello only when strays fill its table;
// the rank then says its hello again.
TEST(RankChecks, AConnectionClosedBeforeTheAnswerIsRetried) {
  FakeRoot root;
  test::RankOutcome out;
  std::thread rank([&] { out = test::initRanks(root.id(), 2, {0})[0]; });
  PeerInfo info{};
  int first = root.acceptRank(&info);
  close(first);  // dropped, no answer
  int second = root.acceptRank(&info);
  ASSERT_GE(second, 0) << "the rank did not come back";
  EXPECT_EQ(info.rank, 0);
  sendReply(second, ncclInvalidUsage, 0);
  close(second);
  rank.join();
  EXPECT_EQ(out.rc, ncclInvalidUsage) << out.error;
}

// ... but a root that is gone costs about a second, not BRAID_INIT_TIMEOUT.
TEST(RankChecks, ARootThatClosesAndIsGoneFailsTheRankFast) {
  FakeRoot root;
  test::RankOutcome out;
  std::thread rank([&] { out = test::initRanks(root.id(), 2, {0})[0]; });
  PeerInfo info{};
  int fd = root.acceptRank(&info);
  root.stop();
  close(fd);
  rank.join();
  EXPECT_EQ(out.rc, ncclRemoteError);
  EXPECT_NE(out.error.find("closed the connection"), std::string::npos) << out.error;
  EXPECT_LT(out.seconds, 5.0);
}

// A peer (holding the secret) announces a 2^60-byte message on a tag nobody waits for: the
// rank refuses it by name instead of allocating it.
TEST(RankChecks, AHugeMessageHeaderIsRefusedBeforeAllocating) {
  SocketAddress at{};
  int listenFd = -1;
  ASSERT_EQ(TcpBootstrap::openListener(&at, &listenFd), ncclSuccess);
  std::vector<PeerInfo> peers = {test::validPeerInfo(0, 2), test::validPeerInfo(1, 2)};
  peers[0].listen = at;
  auto bootstrap = TcpBootstrap::fromPeers(0, peers, kSecret, listenFd);
  bootstrap->setTimeout(10);
  std::thread peer([&] {
    int fd = test::connectRaw(at);
    ASSERT_GE(fd, 0);
    wire::Hello hello{kSecret, wire::kHelloPeer, 1};
    wire::MessageHeader header{77, 0, 1ull << 60};
    test::sendRaw(fd, &hello, sizeof(hello));
    test::sendRaw(fd, &header, sizeof(header));
    test::closedWithin(fd, 10);
    close(fd);
  });
  auto start = std::chrono::steady_clock::now();
  char buf[4];
  ncclResult_t rc = bootstrap->recv(1, 55, buf, sizeof(buf));
  double secs = secondsSince(start);
  std::string error = ncclGetLastError(nullptr);
  bootstrap.reset();  // closes the connection: the peer thread ends
  peer.join();
  EXPECT_EQ(rc, ncclRemoteError);
  EXPECT_NE(error.find("announced a 1152921504606846976-byte message"), std::string::npos) << error;
  EXPECT_LT(secs, 5.0);
}

}  // namespace
}  // namespace braid
