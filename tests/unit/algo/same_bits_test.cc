// The algorithms that promise every rank the same bits of an all-reduce (schedule.h's
// conventions: ring, twoshot, tree, doubling) keep it, in float arithmetic: the plans run here
// on real numbers (a small interpreter of the IR, lanes in lockstep over unbounded FIFOs), with
// inputs whose float sums depend on the order of addition. The symbolic verifier proves each
// rank gets every contribution once; this checks the order agrees. Also: where doubling
// crosses hosts (only its last log2(nodes) rounds do).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <numeric>
#include <random>
#include <tuple>

#include "algo/algorithm.h"

namespace braid::algo {
namespace {

// Every rank's output of an out-of-place float-sum all-reduce run by `algo`'s plans.
std::vector<std::vector<float>> runSum(const Algorithm& algo, const CollArgs& base,
                                       const std::vector<std::vector<float>>& inputs) {
  const int n = base.nRanks;
  std::vector<RankPlan> plans;
  for (int r = 0; r < n; ++r) {
    CollArgs a = base;
    a.rank = r;
    plans.push_back(algo.build(a));
  }
  std::vector<std::vector<float>> outputs(n, std::vector<float>(base.count, NAN));
  std::map<std::tuple<int, int, int>, std::deque<std::vector<float>>> fifos;  // (channel, from, to)
  std::vector<std::vector<size_t>> next(n);
  for (int r = 0; r < n; ++r) next[r].assign(plans[r].lanes.size(), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < n; ++r) {
      for (size_t l = 0; l < plans[r].lanes.size(); ++l) {
        const Lane& lane = plans[r].lanes[l];
        while (next[r][l] < lane.steps.size()) {
          const Step& s = lane.steps[next[r][l]];
          std::vector<float> value(s.count);
          if (s.recvPeer != kNoPeer) {
            auto& q = fifos[{lane.channel, s.recvPeer, r}];
            if (q.empty()) break;
            value = q.front();
            q.pop_front();
          }
          auto read = [&](uint64_t i) { return s.src == kInput ? inputs[r][s.srcOff + i] : outputs[r][s.srcOff + i]; };
          for (uint64_t i = 0; i < s.count; ++i)
            if (s.src != kNoBuf) value[i] = s.recvPeer == kNoPeer ? read(i) : value[i] + read(i);  // op(recv, src)
          if (s.dst == kOutput)
            for (uint64_t i = 0; i < s.count; ++i) outputs[r][s.dstOff + i] = value[i];
          if (s.sendPeer != kNoPeer) fifos[{lane.channel, r, s.sendPeer}].push_back(value);
          ++next[r][l];
          moved = true;
        }
      }
    }
  }
  for (int r = 0; r < n; ++r)
    for (size_t l = 0; l < plans[r].lanes.size(); ++l)
      EXPECT_EQ(next[r][l], plans[r].lanes[l].steps.size()) << algo.name << ": rank " << r << " lane " << l << " stuck";
  return outputs;
}

// Inputs whose float sum depends on the order: magnitudes from 1e-3 to 1e7, both signs.
std::vector<std::vector<float>> orderSensitiveInputs(int n, uint64_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-3, 7);
  std::vector<std::vector<float>> in(n, std::vector<float>(count));
  for (auto& v : in)
    for (float& x : v) x = mant(rng) * std::pow(10.0f, float(exp(rng)));
  return in;
}

TEST(SameBits, AllReduceAlgorithmsGiveEveryRankTheSameFloatSum) {
  for (const char* name : {"ring", "twoshot", "tree", "doubling"}) {
    const Algorithm* algo = findAlgorithm(name);
    ASSERT_NE(algo, nullptr) << name;
    for (int n : {2, 3, 4, 5, 6, 7, 8, 12, 16}) {
      for (int per : {1, 2, 4}) {
        if (n % per != 0) continue;
        CollArgs a;
        a.coll = Coll::AllReduce;
        a.nRanks = n;
        a.count = 257;
        a.nChannels = 2;
        a.maxStepElems = 64;
        for (int r = 0; r < n; ++r) a.nodeOf.push_back(r / per);
        const auto in = orderSensitiveInputs(n, a.count, unsigned(n * 31 + per));
        const auto out = runSum(*algo, a, in);
        bool orderMatters = false;  // the test can fail: some element's float sum differs by order
        for (uint64_t i = 0; i < a.count; ++i) {
          double exact = 0;
          float forward = 0, backward = 0;
          for (int r = 0; r < n; ++r) {
            exact += in[r][i];
            forward += in[r][i];
            backward += in[n - 1 - r][i];
          }
          orderMatters |= forward != backward;
          ASSERT_NEAR(out[0][i], exact, 1e-4 * std::fabs(exact) + 1e-2) << name << " n " << n << " element " << i;
          for (int r = 1; r < n; ++r)
            ASSERT_EQ(std::memcmp(&out[r][i], &out[0][i], sizeof(float)), 0)
                << name << " n " << n << " per node " << per << ": rank " << r << " element " << i << " " << out[r][i]
                << " vs rank 0's " << out[0][i];
        }
        if (n > 2) EXPECT_TRUE(orderMatters) << "inputs too tame to tell orders apart, n " << n;
      }
    }
  }
}

// With each host's ranks adjacent in the ring order, doubling's first rounds stay inside a
// host: a rank sends across hosts log2(nodes) times per chunk (nodes and ranks per node powers
// of two), its whole critical path, where every one of the ring's 2(n-1) steps waits for a
// network link and the tree has 2 log2(nodes) network hops in a row.
TEST(SameBits, DoublingCrossesHostsOnlyInItsLastRounds) {
  const Algorithm* algo = findAlgorithm("doubling");
  ASSERT_NE(algo, nullptr);
  for (int nodes : {1, 2, 4, 8}) {
    for (int per : {1, 2, 4}) {
      const int n = nodes * per;
      CollArgs a;
      a.coll = Coll::AllReduce;
      a.nRanks = n;
      a.count = 1000;
      for (int r = 0; r < n; ++r) a.nodeOf.push_back(r / per);
      int log2nodes = 0, log2n = 0;
      while ((1 << log2nodes) < nodes) ++log2nodes;
      while ((1 << log2n) < n) ++log2n;
      for (int r = 0; r < n; ++r) {
        a.rank = r;
        int far = 0, sends = 0;
        for (const Lane& lane : algo->build(a).lanes)
          for (const Step& s : lane.steps)
            if (s.sendPeer != kNoPeer) {
              ++sends;
              far += a.nodeOf[s.sendPeer] != a.nodeOf[r];
            }
        EXPECT_EQ(sends, n > 1 ? log2n : 0) << nodes << " x " << per << " rank " << r;
        EXPECT_EQ(far, log2nodes) << nodes << " x " << per << " rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace braid::algo
