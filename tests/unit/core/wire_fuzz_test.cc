// Fuzz test of the bootstrap's wire checks (src/core/bootstrap_wire.h, root_roster.h): random,
// truncated, oversized, bit-flipped and field-mutated messages. Whatever the checks accept
// must be safe to use: counts in range, strings terminated, addresses of a known family.
// Fixed seeds and bounded iterations, so that a failure reproduces.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <random>
#include <set>

#include "bootstrap_test_util.h"
#include "core/bootstrap_wire.h"
#include "core/root_roster.h"

namespace braid {
namespace {

constexpr uint64_t kSecret = 0x5eed5eed12345678ull;

// What every accepted PeerInfo must satisfy before the root or a rank uses it.
void expectSafe(const PeerInfo& p, const char* where) {
  EXPECT_GE(p.nRanks, 1) << where;
  EXPECT_LE(p.nRanks, wire::kMaxRanks) << where;
  EXPECT_GE(p.rank, 0) << where;
  EXPECT_LT(p.rank, p.nRanks) << where;
  EXPECT_NE(std::memchr(p.busId, '\0', sizeof(p.busId)), nullptr) << where;
  EXPECT_TRUE(p.listen.sa.sa_family == AF_INET || p.listen.sa.sa_family == AF_INET6) << where;
}

void expectSafe(const wire::RootHello& h, const char* where) {
  if (h.fault != wire::HelloFault::kNone) {
    EXPECT_FALSE(h.problem.empty()) << where;
    return;
  }
  EXPECT_TRUE(h.authenticated) << where;
  expectSafe(h.info, where);
}

TEST(WireFuzz, AValidHelloIsAccepted) {
  PeerInfo info = test::validPeerInfo(3, 8);
  auto bytes = test::helloBytes(kSecret, info);
  wire::RootHello h = wire::parseRootHello(bytes.data(), bytes.size(), kSecret);
  ASSERT_EQ(h.fault, wire::HelloFault::kNone) << h.problem;
  EXPECT_EQ(std::memcmp(&h.info, &info, sizeof(info)), 0);
}

TEST(WireFuzz, EveryTruncationIsShortAndAuthenticatedOnlyPastTheSecret) {
  auto bytes = test::helloBytes(kSecret, test::validPeerInfo(0, 2));
  for (size_t n = 0; n < bytes.size(); ++n) {
    wire::RootHello h = wire::parseRootHello(bytes.data(), n, kSecret);
    EXPECT_EQ(h.fault, wire::HelloFault::kShort) << n << " bytes";
    EXPECT_EQ(h.authenticated, n >= sizeof(wire::Hello)) << n << " bytes";
  }
  // A wrong secret is known as soon as the Hello is there, whatever follows.
  auto wrong = test::helloBytes(kSecret ^ 1, test::validPeerInfo(0, 2));
  EXPECT_EQ(wire::parseRootHello(wrong.data(), sizeof(wire::Hello), kSecret).fault, wire::HelloFault::kWrongSecret);
}

TEST(WireFuzz, OversizedInputIsJudgedByTheHelloAlone) {
  auto bytes = test::helloBytes(kSecret, test::validPeerInfo(1, 2));
  bytes.resize(1 << 20, 0xff);  // a megabyte of trailing garbage
  wire::RootHello h = wire::parseRootHello(bytes.data(), bytes.size(), kSecret);
  EXPECT_EQ(h.fault, wire::HelloFault::kNone) << h.problem;
  EXPECT_EQ(h.info.rank, 1);
}

TEST(WireFuzz, RandomBytesAreNeverAuthenticated) {
  std::mt19937_64 rng(12);
  std::vector<unsigned char> buf(512);
  for (int i = 0; i < 20000; ++i) {
    size_t n = rng() % buf.size();
    for (auto& b : buf) b = static_cast<unsigned char>(rng());
    wire::RootHello h = wire::parseRootHello(buf.data(), n, kSecret);
    EXPECT_FALSE(h.authenticated) << "iteration " << i;
    EXPECT_NE(h.fault, wire::HelloFault::kNone) << "iteration " << i;
  }
}

// Random bytes behind the right secret and kind: whatever passes is in range.
TEST(WireFuzz, RandomPeerInfoBehindTheSecretIsSafeWhenAccepted) {
  std::mt19937_64 rng(34);
  int accepted = 0;
  for (int i = 0; i < 50000; ++i) {
    PeerInfo info = test::validPeerInfo(static_cast<int>(rng() % 4), 4);
    unsigned char* raw = reinterpret_cast<unsigned char*>(&info);
    // Overwrite 1..8 random bytes (or the whole struct every 16th time) with random values.
    if (i % 16 == 0) {
      for (size_t b = 0; b < sizeof(info); ++b) raw[b] = static_cast<unsigned char>(rng());
    } else {
      for (int k = 1 + static_cast<int>(rng() % 8); k > 0; --k)
        raw[rng() % sizeof(info)] = static_cast<unsigned char>(rng());
    }
    int helloRank = (rng() % 4 == 0) ? static_cast<int>(rng()) : info.rank;
    auto bytes = test::helloBytes(kSecret, info, helloRank);
    wire::RootHello h = wire::parseRootHello(bytes.data(), bytes.size(), kSecret);
    EXPECT_TRUE(h.authenticated);
    expectSafe(h, "random PeerInfo");
    if (h.fault == wire::HelloFault::kNone) {
      ++accepted;
      EXPECT_EQ(h.info.rank, helloRank);
    }
  }
  EXPECT_GT(accepted, 0);  // the mutations leave some hellos valid: the accept path is exercised
}

TEST(WireFuzz, EveryBitFlipIsSafe) {
  PeerInfo info = test::validPeerInfo(2, 4);
  std::strcpy(info.busId, "0000:18:00.0");
  auto good = test::helloBytes(kSecret, info);
  for (size_t byte = 0; byte < good.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      auto bytes = good;
      bytes[byte] ^= static_cast<unsigned char>(1u << bit);
      wire::RootHello h = wire::parseRootHello(bytes.data(), bytes.size(), kSecret);
      std::string where = "byte " + std::to_string(byte) + " bit " + std::to_string(bit);
      expectSafe(h, where.c_str());
      if (byte < offsetof(wire::Hello, rank)) EXPECT_FALSE(h.authenticated) << where;  // secret or kind
    }
}

// Each hostile value of each field is refused with a text that names what was wrong.
TEST(WireFuzz, HostileFieldsAreRefusedByName) {
  struct Case {
    const char* name;
    void (*mutate)(PeerInfo&, int& helloRank);
    const char* expect;
  };
  const Case cases[] = {
      {"nRanks INT_MAX", [](PeerInfo& p, int&) { p.nRanks = INT_MAX; }, "nranks"},
      {"nRanks max+1", [](PeerInfo& p, int&) { p.nRanks = wire::kMaxRanks + 1; }, "nranks"},
      {"nRanks 0", [](PeerInfo& p, int&) { p.nRanks = 0; }, "nranks"},
      {"nRanks negative", [](PeerInfo& p, int&) { p.nRanks = INT_MIN; }, "nranks"},
      {"rank negative", [](PeerInfo& p, int& h) { p.rank = h = -1; }, "rank -1"},
      {"rank INT_MIN", [](PeerInfo& p, int& h) { p.rank = h = INT_MIN; }, "rank"},
      {"rank == nRanks", [](PeerInfo& p, int& h) { p.rank = h = p.nRanks; }, "rank 4"},
      {"rank INT_MAX", [](PeerInfo& p, int& h) { p.rank = h = INT_MAX; }, "rank"},
      {"hello rank differs", [](PeerInfo&, int& h) { h = 3; }, "the hello says rank 3"},
      {"cudaDev -2", [](PeerInfo& p, int&) { p.cudaDev = -2; }, "cudaDev"},
      {"pid negative", [](PeerInfo& p, int&) { p.pid = -5; }, "pid"},
      {"timeout negative", [](PeerInfo& p, int&) { p.initTimeoutMs = -1; }, "timeout"},
      {"busId unterminated", [](PeerInfo& p, int&) { std::memset(p.busId, 'x', sizeof(p.busId)); }, "bus id"},
      {"family unix", [](PeerInfo& p, int&) { p.listen.sa.sa_family = AF_UNIX; }, "family"},
      {"family garbage", [](PeerInfo& p, int&) { p.listen.sa.sa_family = 0xabcd; }, "family"},
      {"port 0", [](PeerInfo& p, int&) { p.listen.sin.sin_port = 0; }, "port 0"},
      {"liveness family", [](PeerInfo& p, int&) { p.monitor.sa.sa_family = AF_UNIX; }, "liveness address has family"},
      {"liveness port 0", [](PeerInfo& p, int&) { p.monitor.sin.sin_port = 0; }, "liveness address has port 0"},
  };
  for (const Case& c : cases) {
    PeerInfo info = test::validPeerInfo(1, 4);
    int helloRank = info.rank;
    c.mutate(info, helloRank);
    auto bytes = test::helloBytes(kSecret, info, helloRank);
    wire::RootHello h = wire::parseRootHello(bytes.data(), bytes.size(), kSecret);
    EXPECT_EQ(h.fault, wire::HelloFault::kBadPeerInfo) << c.name;
    EXPECT_TRUE(h.authenticated) << c.name;
    EXPECT_NE(h.problem.find(c.expect), std::string::npos) << c.name << ": " << h.problem;
  }
  auto peerKind = test::helloBytes(kSecret, test::validPeerInfo(0, 2), 0, wire::kHelloPeer);
  EXPECT_EQ(wire::parseRootHello(peerKind.data(), peerKind.size(), kSecret).fault, wire::HelloFault::kWrongKind);
}

// Random sequences of reports (valid, replayed, duplicate, wrong nranks) against the roster:
// it never admits two reports for one rank or a report of another nranks, and its table is
// complete and in rank order exactly when every rank has arrived.
TEST(WireFuzz, RosterStaysConsistentUnderRandomReports) {
  std::mt19937_64 rng(56);
  for (int round = 0; round < 300; ++round) {
    int n = 1 + static_cast<int>(rng() % 12);
    Roster roster;
    std::set<int> admitted;
    std::vector<PeerInfo> sent;
    for (int step = 0; step < 40 && !roster.complete(); ++step) {
      PeerInfo info;
      int kind = static_cast<int>(rng() % 8);
      if (kind == 0 && !sent.empty()) {
        info = sent[rng() % sent.size()];  // a replay
      } else {
        info = test::validPeerInfo(static_cast<int>(rng() % n), n);
        info.pid = static_cast<int>(rng() % 1000);
        if (kind == 1) info.nRanks = n + 1 + static_cast<int>(rng() % 3);
        if (info.rank >= info.nRanks) info.rank = info.nRanks - 1;
      }
      ASSERT_EQ(wire::peerInfoProblem(info, 0), "");
      std::string problem;
      Roster::Verdict v = roster.admit(info, &problem);
      if (v == Roster::Verdict::kAdmitted) {
        EXPECT_TRUE(admitted.insert(info.rank).second) << "rank " << info.rank << " admitted twice";
        EXPECT_EQ(info.nRanks, roster.nRanks());
        sent.push_back(info);
      } else if (v == Roster::Verdict::kReplay) {
        EXPECT_TRUE(admitted.count(info.rank));
      } else {
        EXPECT_FALSE(problem.empty());
        EXPECT_EQ(roster.arrived(), static_cast<int>(admitted.size()));
        break;  // the rendezvous fails here
      }
      EXPECT_EQ(roster.arrived(), static_cast<int>(admitted.size()));
    }
    std::vector<PeerInfo> table = roster.table();
    if (roster.complete()) {
      ASSERT_EQ(static_cast<int>(table.size()), roster.nRanks());
      for (int r = 0; r < roster.nRanks(); ++r) EXPECT_EQ(table[r].rank, r);
      EXPECT_EQ(roster.missing(), "");
      EXPECT_EQ(wire::peerTableProblem(table, roster.nRanks()), "");
    } else {
      EXPECT_TRUE(table.empty());
    }
  }
}

TEST(WireFuzz, RosterOfTheLargestCommunicatorNamesTheMissingBriefly) {
  Roster roster;
  std::string problem;
  ASSERT_EQ(roster.admit(test::validPeerInfo(5, wire::kMaxRanks), &problem), Roster::Verdict::kAdmitted);
  std::string missing = roster.missing();
  EXPECT_EQ(missing.rfind("0, 1, 2, 3, 4, 6,", 0), 0u) << missing;
  EXPECT_NE(missing.find("(" + std::to_string(wire::kMaxRanks - 1) + " in all)"), std::string::npos) << missing;
  EXPECT_LT(missing.size(), 200u);
}

TEST(WireFuzz, RootReplyChecksCatchEveryBadField) {
  wire::RootReply ok{};
  ok.status = ncclSuccess;
  ok.nRanks = 4;
  EXPECT_EQ(wire::rootReplyProblem(ok, 4), "");
  wire::RootReply r = ok;
  r.nRanks = INT_MAX;
  EXPECT_NE(wire::rootReplyProblem(r, 4), "");
  r.nRanks = -1;
  EXPECT_NE(wire::rootReplyProblem(r, 4), "");
  for (int status : {-1, static_cast<int>(ncclNumResults), INT_MAX, INT_MIN}) {
    r = ok;
    r.status = status;
    EXPECT_NE(wire::rootReplyProblem(r, 4), "") << status;
  }
  r = ok;
  r.status = ncclInvalidUsage;
  std::snprintf(r.error, sizeof(r.error), "bad");
  EXPECT_EQ(wire::rootReplyProblem(r, 4), "");
  std::memset(r.error, 'x', sizeof(r.error));
  EXPECT_NE(wire::rootReplyProblem(r, 4), "");

  std::mt19937_64 rng(78);
  for (int i = 0; i < 20000; ++i) {
    wire::RootReply any;
    unsigned char* raw = reinterpret_cast<unsigned char*>(&any);
    for (size_t b = 0; b < sizeof(any); ++b) raw[b] = static_cast<unsigned char>(rng());
    if (i % 2) any.status = static_cast<int>(rng() % 10) - 1;
    if (i % 4 == 1) any.nRanks = 4;
    if (!wire::rootReplyProblem(any, 4).empty()) continue;
    EXPECT_TRUE(any.status >= 0 && any.status < ncclNumResults);
    if (any.status == ncclSuccess) EXPECT_EQ(any.nRanks, 4);
    else EXPECT_NE(std::memchr(any.error, '\0', sizeof(any.error)), nullptr);
  }
}

TEST(WireFuzz, PeerTableChecksEveryEntry) {
  std::vector<PeerInfo> table;
  for (int r = 0; r < 4; ++r) table.push_back(test::validPeerInfo(r, 4));
  EXPECT_EQ(wire::peerTableProblem(table, 4), "");
  EXPECT_NE(wire::peerTableProblem(table, 5), "");
  std::mt19937_64 rng(90);
  for (int i = 0; i < 5000; ++i) {
    std::vector<PeerInfo> t = table;
    PeerInfo& victim = t[rng() % t.size()];
    unsigned char* raw = reinterpret_cast<unsigned char*>(&victim);
    raw[rng() % offsetof(PeerInfo, hostHash)] = static_cast<unsigned char>(rng());  // rank, nRanks, cudaDev, pid
    if (!wire::peerTableProblem(t, 4).empty()) continue;
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(t[r].rank, r);
      expectSafe(t[r], "table entry");
    }
  }
  table[2].rank = 1;
  EXPECT_NE(wire::peerTableProblem(table, 4).find("entry 2"), std::string::npos);
}

}  // namespace
}  // namespace braid
