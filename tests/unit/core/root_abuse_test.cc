// The bootstrap root under abuse, with real ranks: threads of this process calling
// ncclCommInitRank (host-only ranks without a GPU) while other threads play strays and
// attackers against the root, whose address and secret this test reads from the id it made.
// Real ranks must still init, or, where a message is indistinguishable from a real rank's
// mistake, all fail fast with a message that says what happened.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>

#include "bootstrap_test_util.h"
#include "core/socket.h"

namespace braid {
namespace {

using test::secondsSince;
using Clock = std::chrono::steady_clock;

// Long enough that a rank which waits for its timeout is caught by the time bounds below.
class RootAbuse : public ::testing::Test {
 protected:
  void SetUp() override { setenv("BRAID_INIT_TIMEOUT", "30", 1); }
  void TearDown() override { unsetenv("BRAID_INIT_TIMEOUT"); }
};

void expectAllInit(const std::vector<test::RankOutcome>& out, double boundSeconds) {
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].rc, ncclSuccess) << "rank " << i << ": " << out[i].error;
    EXPECT_LT(out[i].seconds, boundSeconds) << "rank " << i;
  }
}

void expectAllFail(const std::vector<test::RankOutcome>& out, const char* text, double boundSeconds) {
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_NE(out[i].rc, ncclSuccess) << "rank " << i;
    EXPECT_NE(out[i].error.find(text), std::string::npos) << "rank " << i << ": " << out[i].error;
    EXPECT_LT(out[i].seconds, boundSeconds) << "rank " << i << ": " << out[i].error;
  }
}

// A rank of our own making: its hello reaches the root, and the root has admitted it when
// this returns (a replay of the same hello is dropped only once the original is in).
int forgeRank(const UniqueIdContent& root, int rank, int nRanks) {
  PeerInfo info = test::validPeerInfo(rank, nRanks);
  auto hello = test::helloBytes(root.secret, info);
  int fd = test::connectRaw(root.root);
  EXPECT_GE(fd, 0);
  EXPECT_TRUE(test::sendRaw(fd, hello.data(), hello.size()));
  int replay = test::connectRaw(root.root);
  EXPECT_TRUE(test::sendRaw(replay, hello.data(), hello.size()));
  EXPECT_TRUE(test::droppedWithin(replay, 5)) << "the root did not admit the forged rank " << rank;
  close(replay);
  return fd;
}

// A man in the middle between one real rank and the root: forwards the rank's hello, can
// replay it to the root, and relays the root's answer back.
class Relay {
 public:
  explicit Relay(const UniqueIdContent& root) : root_(root) {
    SocketAddress at{};
    at.sin.sin_family = AF_INET;
    at.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(listenOn(&at, &listenFd_), ncclSuccess);
    UniqueIdContent viaRelay = root;
    viaRelay.root = at;
    id_ = encodeUniqueId(viaRelay);
    thread_ = std::thread([this] { serve(); });
  }
  ~Relay() {
    thread_.join();
    close(listenFd_);
  }
  const ncclUniqueId& id() const { return id_; }

  // Waits until the rank's hello has gone to the root; false after `seconds`.
  bool waitForHello(double seconds) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return !hello_.empty(); });
  }
  // Sends the rank's hello again on a new connection; true when the root drops it unanswered.
  bool replayIsDropped() {
    std::vector<unsigned char> hello;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      hello = hello_;
    }
    int fd = test::connectRaw(root_.root);
    bool dropped = fd >= 0 && test::sendRaw(fd, hello.data(), hello.size()) && test::droppedWithin(fd, 5);
    if (fd >= 0) close(fd);
    return dropped;
  }

 private:
  void serve() {
    pollfd p{listenFd_, POLLIN, 0};
    if (poll(&p, 1, 20000) <= 0) return;
    int rank = accept(listenFd_, nullptr, nullptr);
    if (rank < 0) return;
    std::vector<char> got = test::recvRaw(rank, wire::kRootHelloBytes, 10);
    int up = test::connectRaw(root_.root);
    if (got.size() == wire::kRootHelloBytes && up >= 0 && test::sendRaw(up, got.data(), got.size())) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        hello_.assign(got.begin(), got.end());
      }
      cv_.notify_all();
      // The answer (or an error) back to the rank, until the root or the rank closes.
      for (auto start = Clock::now(); secondsSince(start) < 40;) {
        pollfd both[2] = {{up, POLLIN, 0}, {rank, POLLIN, 0}};
        if (poll(both, 2, 1000) < 0) break;
        if (both[1].revents) break;  // the rank sends nothing more: it closed
        if (!both[0].revents) continue;
        char buf[4096];
        ssize_t n = ::recv(up, buf, sizeof(buf), 0);
        if (n <= 0 || !test::sendRaw(rank, buf, static_cast<size_t>(n))) break;
      }
    }
    if (up >= 0) close(up);
    close(rank);
  }

  UniqueIdContent root_;
  int listenFd_ = -1;
  ncclUniqueId id_{};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<unsigned char> hello_;
  std::thread thread_;
};

// Strays and attackers of every kind, on connections left open (`keep`) until the test ends.
// Hellos that carry the secret but hostile fields go to `refused`: the root answers those.
// An attack that races with the ranks (`racing`) may find the rendezvous over and the root
// gone: its connects may fail then, and its hostile hellos may be closed unanswered.
void attack(const UniqueIdContent& root, uint64_t seed, bool racing, std::vector<int>* keep,
            std::vector<int>* refused) {
  std::mt19937_64 rng(seed);
  auto open = [&] {
    int fd = test::connectRaw(root.root);
    if (!racing) EXPECT_GE(fd, 0);
    return fd;
  };
  for (int i = 0; i < 10; ++i) keep->push_back(open());  // idle
  for (int i = 0; i < 10; ++i) {                         // random bytes, some then close
    int fd = open();
    std::vector<unsigned char> junk(1 + rng() % 300);
    for (auto& b : junk) b = static_cast<unsigned char>(rng());
    test::sendRaw(fd, junk.data(), junk.size());
    if (i % 2) close(fd);
    else keep->push_back(fd);
  }
  for (int i = 0; i < 10; ++i) {  // truncated hellos with the secret, some then close
    auto hello = test::helloBytes(root.secret, test::validPeerInfo(0, 4));
    int fd = open();
    test::sendRaw(fd, hello.data(), sizeof(wire::Hello) + rng() % sizeof(PeerInfo));
    if (i % 2) close(fd);
    else keep->push_back(fd);
  }
  {  // a megabyte of garbage
    int fd = open();
    std::vector<unsigned char> big(1 << 20, 0x5a);
    test::sendRaw(fd, big.data(), big.size());  // fails once the root drops it: fine
    keep->push_back(fd);
  }
  {  // the right hello with the wrong secret, and the secret on a peer hello
    keep->push_back(open());
    auto wrong = test::helloBytes(root.secret ^ 0x1, test::validPeerInfo(1, 4));
    test::sendRaw(keep->back(), wrong.data(), wrong.size());
    keep->push_back(open());
    auto peer = test::helloBytes(root.secret, test::validPeerInfo(1, 4), 1, wire::kHelloPeer);
    test::sendRaw(keep->back(), peer.data(), peer.size());
  }
  // The secret and hostile fields.
  std::vector<std::pair<PeerInfo, int>> hostile;
  auto add = [&](auto mutate) {
    PeerInfo p = test::validPeerInfo(1, 4);
    int helloRank = 1;
    mutate(p, helloRank);
    hostile.push_back({p, helloRank});
  };
  add([](PeerInfo& p, int&) { p.nRanks = INT_MAX; });
  add([](PeerInfo& p, int&) { p.nRanks = 0; });
  add([](PeerInfo& p, int&) { p.nRanks = wire::kMaxRanks + 1; });
  add([](PeerInfo& p, int& h) { p.rank = h = -1; });
  add([](PeerInfo& p, int& h) { p.rank = h = 4; });
  add([](PeerInfo& p, int& h) { p.rank = h = INT_MAX; });
  add([](PeerInfo&, int& h) { h = 2; });
  add([](PeerInfo& p, int&) { std::memset(p.busId, '7', sizeof(p.busId)); });
  add([](PeerInfo& p, int&) { p.listen.sa.sa_family = AF_UNIX; });
  for (auto& [info, helloRank] : hostile) {
    int fd = open();
    auto bytes = test::helloBytes(root.secret, info, helloRank);
    test::sendRaw(fd, bytes.data(), bytes.size());
    refused->push_back(fd);
  }
}

TEST_F(RootAbuse, StraysGarbageAndHostileHellosDoNotStopTheRanks) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  UniqueIdContent root = test::idContent(id);
  std::vector<int> keep, refused, keepDuring, refusedDuring;
  attack(root, 1, false, &keep, &refused);  // before the ranks come
  std::thread during([&] { attack(root, 2, true, &keepDuring, &refusedDuring); });
  auto out = test::initAll(id, 4);
  during.join();
  expectAllInit(out, 10);
  for (int fd : refusedDuring) close(fd);
  for (int fd : refused) {  // a holder of the secret is told why, in case it is a rank of ours
    wire::RootReply reply = test::readReply(fd, 5);
    EXPECT_EQ(reply.status, ncclInvalidUsage);
    EXPECT_NE(std::strstr(reply.error, "refused the hello"), nullptr) << reply.error;
    close(fd);
  }
  for (int fd : keep) close(fd);
  for (int fd : keepDuring) close(fd);
}

TEST_F(RootAbuse, AReplayedHelloIsDroppedAndTheRanksInit) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  Relay relay(test::idContent(id));
  test::RankOutcome rank0;
  std::thread first([&] {
    std::vector<test::RankOutcome> o = test::initRanks(relay.id(), 3, {0});
    rank0 = o[0];
  });
  ASSERT_TRUE(relay.waitForHello(10));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(relay.replayIsDropped()) << "replay " << i;
  auto rest = test::initRanks(id, 3, {1, 2});
  first.join();
  expectAllInit({rank0}, 15);
  expectAllInit(rest, 10);
}

// Someone with the secret claims rank 1 first: the real rank 1 is a duplicate, as if two
// processes had been given rank 1. Both real ranks fail at once and are told so.
TEST_F(RootAbuse, AForgedRankFailsTheRendezvousFastAndSaysWhy) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  UniqueIdContent root = test::idContent(id);
  int forged = forgeRank(root, 1, 2);
  auto dup = test::initRanks(id, 2, {1});
  expectAllFail(dup, "two ranks both claim rank 1", 5);
  auto late = test::initRanks(id, 2, {0});  // arrives after the failure: hears it at once
  expectAllFail(late, "two ranks both claim rank 1", 5);
  wire::RootReply reply = test::readReply(forged, 5);
  EXPECT_EQ(reply.status, ncclInvalidUsage) << reply.error;
  close(forged);
}

TEST_F(RootAbuse, AnotherNranksFromAHolderOfTheSecretFailsFast) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  int forged = forgeRank(test::idContent(id), 2, 3);
  auto out = test::initAll(id, 2);
  expectAllFail(out, "nranks", 5);
  close(forged);
}

// A rank asking for more ranks than a rendezvous takes learns it at once, by name: the call
// refuses it before the root is asked (the root's own refusal is WireFuzz's).
TEST_F(RootAbuse, MoreRanksThanTheLimitAreRefusedAtOnce) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  auto out = test::initRanks(id, wire::kMaxRanks + 1, {7});
  EXPECT_EQ(out[0].rc, ncclInvalidArgument);
  expectAllFail(out, "limit of 65536 ranks", 5);
}

// Issue 12, item 5 (c): a rank that reached the root and then died (its connection closes)
// fails the rendezvous at once for the ranks waiting there and for those still to come.
TEST_F(RootAbuse, ARankThatDiesAtTheRootFailsEveryoneAtOnceByName) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  UniqueIdContent root = test::idContent(id);
  int dying = forgeRank(root, 2, 3);
  Relay relay(root);
  test::RankOutcome rank0;
  std::thread waiting([&] { rank0 = test::initRanks(relay.id(), 3, {0})[0]; });
  ASSERT_TRUE(relay.waitForHello(10));
  EXPECT_TRUE(relay.replayIsDropped());  // so rank 0 is in, waiting for rank 1
  auto died = Clock::now();
  close(dying);
  waiting.join();
  double noticed = secondsSince(died);
  EXPECT_NE(rank0.rc, ncclSuccess);
  EXPECT_NE(rank0.error.find("rank 2"), std::string::npos) << rank0.error;
  EXPECT_NE(rank0.error.find("closed its connection"), std::string::npos) << rank0.error;
  EXPECT_LT(noticed, 5.0) << "BRAID_INIT_TIMEOUT is 30 s: the root must not wait for it";
  std::printf("rank 0 learned of rank 2's death after %.0f ms\n", noticed * 1e3);
  auto late = test::initRanks(id, 3, {1});
  expectAllFail(late, "closed its connection", 5);
}

// With NCCL_COMM_ID, rank 0 hosts the root on a fixed port and every id (and secret) is the
// same: a failed rendezvous must free the port at once, so that the next init works.
TEST_F(RootAbuse, AFailedFixedRootFreesItsPortForTheNextInit) {
  SocketAddress probe{};
  probe.sin.sin_family = AF_INET;
  probe.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int probeFd = -1;
  ASSERT_EQ(listenOn(&probe, &probeFd), ncclSuccess);  // a free port, given back at once
  close(probeFd);
  setenv("NCCL_COMM_ID", probe.toString().c_str(), 1);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  test::RankOutcome wrong;
  std::thread other([&] { wrong = test::initRanks(id, 3, {1})[0]; });  // nranks 3 against 2
  auto first = test::initRanks(id, 2, {0});
  other.join();
  EXPECT_NE(first[0].rc, ncclSuccess);
  EXPECT_NE(wrong.rc, ncclSuccess);
  auto again = test::initAll(id, 2);
  unsetenv("NCCL_COMM_ID");
  expectAllInit(again, 10);
}

// Issue 12, item 5 (b): 200 idle connections against the root while 4 ranks init, timed
// against a run without them. Only a generous bound is asserted (CI machines are noisy);
// perf/init_time.cc --idle 200 measures it properly.
TEST_F(RootAbuse, TwoHundredIdleConnectionsDoNotDelayInit) {
  // settleMs: how long the idle connections are open before the ranks start (0: the ranks
  // meet the burst in the root's accept queue).
  auto timeInit = [](int idle, int settleMs, double* seconds) {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    UniqueIdContent root = test::idContent(id);
    std::vector<int> fds;
    for (int i = 0; i < idle; ++i) {
      fds.push_back(test::connectRaw(root.root));
      ASSERT_GE(fds.back(), 0) << "idle connection " << i;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(settleMs));
    auto start = Clock::now();
    auto out = test::initAll(id, 4);
    *seconds = secondsSince(start);
    expectAllInit(out, 10);
    for (int fd : fds) close(fd);
  };
  constexpr int kRuns = 5;
  std::vector<double> plain(kRuns), burst(kRuns), settled(kRuns);
  for (int i = 0; i < kRuns; ++i) {
    timeInit(0, 0, &plain[i]);
    timeInit(200, 0, &burst[i]);
    timeInit(200, 50, &settled[i]);
  }
  for (auto* v : {&plain, &burst, &settled}) std::sort(v->begin(), v->end());
  std::printf("init of 4 ranks as threads (median of %d): %.1f ms alone; with 200 idle connections at the root: "
              "%.1f ms opened just before, %.1f ms opened 50 ms before\n",
              kRuns, plain[kRuns / 2] * 1e3, burst[kRuns / 2] * 1e3, settled[kRuns / 2] * 1e3);
  EXPECT_LT(burst[kRuns / 2], 10.0);
  EXPECT_LT(settled[kRuns / 2], 10.0);
}

// A flood: connections opened without pause while the ranks init (at most 300 open at once,
// far past the root's cap on waiting connections): the root evicts the oldest, the ranks'
// fresh connections get through.
TEST_F(RootAbuse, AFloodOfConnectionsDoesNotStopTheRanks) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  UniqueIdContent root = test::idContent(id);
  std::atomic<bool> stop{false};
  int opened = 0;
  std::thread flood([&] {
    std::deque<int> open;
    for (; !stop.load() && opened < 5000; ++opened) {
      int fd = test::connectRaw(root.root);
      if (fd < 0) break;  // the rendezvous is over: the listener is gone
      open.push_back(fd);
      if (open.size() > 300) {
        close(open.front());
        open.pop_front();
      }
    }
    for (int fd : open) close(fd);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the flood fill the root first
  auto out = test::initAll(id, 4);
  stop = true;
  flood.join();
  std::printf("the ranks got through a flood of %d connections\n", opened);
  expectAllInit(out, 10);
  EXPECT_GT(opened, 128);  // the cap was reached: eviction happened
}

}  // namespace
}  // namespace braid
