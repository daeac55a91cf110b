// Every algorithm and collective it supports, verified symbolically for 1..64 ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <sstream>

#include "algo/algorithm.h"
#include "algo/verifier.h"

namespace braid::algo {
namespace {

struct Case {
  const Algorithm* algo;
  Coll coll;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.algo->name << " " << collName(c.coll); }

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (const Algorithm* a : algorithms())
    for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce,
                   Coll::AlltoAll, Coll::Gather, Coll::Scatter})
      if (a->supports(c, 2)) cases.push_back({a, c});
  return cases;
}

std::string caseName(const testing::TestParamInfo<Case>& info) {
  return std::string(info.param.algo->name) + "_" + collName(info.param.coll);
}

bool rooted(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter; }

std::vector<int> shuffledRing(int n, unsigned seed) {
  std::vector<int> ring(n);
  std::iota(ring.begin(), ring.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(ring.begin(), ring.end(), rng);
  return ring;
}

std::string describeArgs(const CollArgs& a, const Algorithm& algo, bool inPlace) {
  std::ostringstream s;
  s << algo.name << " " << collName(a.coll) << " ranks " << a.nRanks << " count " << a.count << " channels "
    << a.nChannels << " root " << a.root << " align " << a.alignElems << " maxStep " << a.maxStepElems
    << (a.ring.empty() ? " identity ring" : " shuffled ring") << (inPlace ? " in-place" : " out-of-place");
  return s.str();
}

// Plan properties every algorithm promises: no empty steps, at most one lane per channel,
// steps no larger than maxStepElems, and the same plan for the same arguments.
void checkShape(const CollArgs& base, const Algorithm& algo) {
  for (int r = 0; r < base.nRanks; ++r) {
    CollArgs a = base;
    a.rank = r;
    const RankPlan plan = algo.build(a);
    EXPECT_LE(plan.lanes.size(), static_cast<size_t>(std::max(1, a.nChannels))) << describeArgs(a, algo, false);
    for (const Lane& lane : plan.lanes) {
      EXPECT_FALSE(lane.steps.empty());
      for (const Step& s : lane.steps) {
        ASSERT_GT(s.count, 0u) << describeArgs(a, algo, false);
        if (a.maxStepElems) {
          ASSERT_LE(s.count, a.maxStepElems) << describeArgs(a, algo, false);
        }
      }
    }
    EXPECT_EQ(dump(plan, a), dump(algo.build(a), a)) << "not pure: " << describeArgs(a, algo, false);
  }
}

class AlgorithmSweep : public testing::TestWithParam<Case> {
 protected:
  // Verifies out of place and (where NCCL defines it) in place; returns false on failure.
  bool verified(const CollArgs& args, VerifyOptions options = {}) {
    for (bool inPlace : {false, true}) {
      if (inPlace && !collHasInPlace(args.coll)) continue;
      options.inPlace = inPlace;
      const VerifyResult r = verify(args, *GetParam().algo, options);
      if (!r.ok) {
        ADD_FAILURE() << describeArgs(args, *GetParam().algo, inPlace) << ": " << r.summary();
        return false;
      }
    }
    return true;
  }
  CollArgs args(int n, uint64_t count) const {
    CollArgs a;
    a.coll = GetParam().coll;
    a.nRanks = n;
    a.count = count;
    return a;
  }
};

// 1..64 ranks, counts 0, 1, n-1, a prime and a large one; channels, roots, alignment and
// ring order rotate with the rank count so that each value meets every other over the sweep.
// Symbolic values cover whole runs of elements, so the large count costs no more than 1009.
TEST_P(AlgorithmSweep, EveryRankCount) {
  for (int n = 1; n <= 64; ++n) {
    std::vector<uint64_t> counts = {0, 1, static_cast<uint64_t>(n - 1), 1009, 100003};
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    for (size_t i = 0; i < counts.size(); ++i) {
      CollArgs a = args(n, counts[i]);
      const size_t turn = static_cast<size_t>(n) + i;
      a.nChannels = std::vector<int>{1, 2, 4}[turn % 3];
      a.root = std::vector<int>{0, n - 1, n / 2}[(turn / 3) % 3];
      a.alignElems = turn % 2 ? 4 : 1;
      if (turn % 4 >= 2) a.ring = shuffledRing(n, static_cast<unsigned>(turn));
      if (!verified(a)) return;
    }
  }
}

// Small rank counts: the full grid of channels, roots, ring orders and counts.
TEST_P(AlgorithmSweep, SmallRankGrid) {
  for (int n = 1; n <= 8; ++n) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(n - 1), uint64_t{7}, uint64_t{1009}}) {
      for (int channels : {1, 2, 4}) {
        for (int root = 0; root < (rooted(GetParam().coll) ? n : 1); ++root) {
          for (bool shuffled : {false, true}) {
            CollArgs a = args(n, count);
            a.nChannels = channels;
            a.root = root;
            a.alignElems = shuffled ? 4 : 1;
            if (shuffled) a.ring = shuffledRing(n, static_cast<unsigned>(7 * n + root));
            checkShape(a, *GetParam().algo);
            if (!verified(a)) return;
          }
        }
      }
    }
  }
}

// With steps capped at maxStepElems and FIFOs holding two steps' worth of slices (how
// executors are meant to set maxStepElems), no algorithm deadlocks.
TEST_P(AlgorithmSweep, ChunkedStepsRunInFiniteFifos) {
  for (int n : {2, 3, 4, 7, 16, 33}) {
    for (uint64_t count : {1009u, 10007u}) {
      for (uint64_t align : {1u, 4u}) {
        CollArgs a = args(n, count);
        a.nChannels = 2;
        a.root = n / 2;
        a.alignElems = static_cast<uint32_t>(align);
        a.maxStepElems = 256;
        VerifyOptions options;
        options.sliceElems = 64;
        options.fifoSlices = 8;
        checkShape(a, *GetParam().algo);
        if (!verified(a, options)) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algo, AlgorithmSweep, testing::ValuesIn(allCases()), caseName);

// Bandwidth: the ring and two-shot move the minimum data; direct one-shot moves n-1 copies.
TEST(AlgorithmTraffic, ElementsSentMatchTheTextbook) {
  for (int n : {2, 5, 16}) {
    const uint64_t count = 1000, hops = static_cast<uint64_t>(n - 1);
    auto sent = [&](const char* algo, Coll coll) {
      CollArgs a;
      a.coll = coll;
      a.nRanks = n;
      a.count = count;
      a.nChannels = 2;
      const VerifyResult r = verify(a, *findAlgorithm(algo), {});
      EXPECT_TRUE(r.ok) << r.summary();
      return r.elementsSent;
    };
    EXPECT_EQ(sent("ring", Coll::AllReduce), 2 * hops * count);
    EXPECT_EQ(sent("twoshot", Coll::AllReduce), 2 * hops * count);
    EXPECT_EQ(sent("direct", Coll::AllReduce), n * hops * count);
    EXPECT_EQ(sent("ring", Coll::AllGather), n * hops * count);
    EXPECT_EQ(sent("ring", Coll::ReduceScatter), n * hops * count);
    EXPECT_EQ(sent("ring", Coll::Broadcast), hops * count);
    EXPECT_EQ(sent("ring", Coll::Reduce), hops * count);
    EXPECT_EQ(sent("direct", Coll::AlltoAll), n * hops * count);
  }
}

}  // namespace
}  // namespace braid::algo
