// The tree algorithm on multi-node shapes: the double binary tree's structure, and every plan
// verified symbolically for nodes of 1, 2, 3, 4 and 8 ranks and uneven nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <sstream>

#include "algo/algorithm.h"
#include "algo/tree.h"
#include "algo/verifier.h"

namespace braid::algo {
namespace {

int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// Hops from `v` to its tree's root; -1 when the walk does not end there (a cycle).
int depthOf(const std::vector<int>& parents, int v) {
  int d = 0;
  for (; parents[static_cast<size_t>(v)] >= 0; v = parents[static_cast<size_t>(v)])
    if (++d > static_cast<int>(parents.size())) return -1;
  return d;
}

TEST(TreeShape, DoubleBinaryTreeSpansAllNodesWithEachNodeInteriorInOneTreeAtMost) {
  for (int n = 1; n <= 300; ++n) {
    std::vector<int> interiorIn(static_cast<size_t>(n), 0);
    for (int tree = 0; tree < kTrees; ++tree) {
      const std::vector<int> parents = treeParents(n, tree);
      ASSERT_EQ(parents.size(), static_cast<size_t>(n));
      std::vector<int> children(static_cast<size_t>(n), 0);
      int roots = 0, deepest = 0;
      for (int v = 0; v < n; ++v) {
        const int p = parents[static_cast<size_t>(v)];
        ASSERT_GE(p, -1);
        ASSERT_LT(p, n);
        ASSERT_NE(p, v);
        if (p < 0) ++roots;
        else ++children[static_cast<size_t>(p)];
        const int d = depthOf(parents, v);
        ASSERT_GE(d, 0) << n << " nodes, tree " << tree << ": node " << v << " is on a cycle";
        deepest = std::max(deepest, d);
      }
      EXPECT_EQ(roots, 1) << n << " nodes, tree " << tree;  // one root and no cycle: spans all nodes
      EXPECT_LE(deepest, ceilLog2(n) + 1) << n << " nodes, tree " << tree;
      for (int v = 0; v < n; ++v) {
        EXPECT_LE(children[static_cast<size_t>(v)], 2) << n << " nodes, tree " << tree << ", node " << v;
        if (children[static_cast<size_t>(v)] > 0) ++interiorIn[static_cast<size_t>(v)];
        const TreeLinks links = nodeTreeLinks(n, v, tree);
        EXPECT_EQ(links.parent, parents[static_cast<size_t>(v)]);
        EXPECT_EQ((links.child[0] >= 0) + (links.child[1] >= 0), children[static_cast<size_t>(v)]);
      }
    }
    for (int v = 0; v < n; ++v)
      EXPECT_LE(interiorIn[static_cast<size_t>(v)], 1) << n << " nodes: node " << v << " is interior in both trees";
  }
}

TEST(TreeShape, TheSecondTreeIsTheFirstMirroredForAnEvenNodeCount) {
  for (int n = 2; n <= 64; n += 2) {
    const auto t0 = treeParents(n, 0), t1 = treeParents(n, 1);
    for (int v = 0; v < n; ++v) {
      const int p = t0[static_cast<size_t>(n - 1 - v)];
      EXPECT_EQ(t1[static_cast<size_t>(v)], p < 0 ? -1 : n - 1 - p);
    }
  }
  // 8 nodes: NCCL's picture (0 -> 4 -> {2, 6} -> {1, 3, 5, 7}).
  EXPECT_EQ(treeParents(8, 0), (std::vector<int>{-1, 2, 4, 2, 0, 6, 4, 6}));
}

std::vector<int> nodesOf(const std::vector<int>& sizes) {
  std::vector<int> nodeOf;
  for (size_t m = 0; m < sizes.size(); ++m) nodeOf.insert(nodeOf.end(), static_cast<size_t>(sizes[m]), static_cast<int>(m));
  return nodeOf;
}

// Every rank's links agree with its neighbours', each node's ranks hang in one chain below its
// vertex, and every rank reaches the root.
TEST(TreeShape, RankLinksFormOneTreeWithAChainInsideEachNode) {
  for (const std::vector<int>& sizes : std::vector<std::vector<int>>{{1}, {4}, {2, 2}, {3, 1, 2}, {8, 8, 8}, {1, 5, 2, 2, 7}}) {
    CollArgs a;
    a.nodeOf = nodesOf(sizes);
    a.nRanks = static_cast<int>(a.nodeOf.size());
    const NodeLayout layout(a);
    ASSERT_EQ(layout.nodes(), static_cast<int>(sizes.size()));
    EXPECT_EQ(layout.maxRanksPerNode(), *std::max_element(sizes.begin(), sizes.end()));
    for (int tree = 0; tree < kTrees; ++tree) {
      const auto parents = treeParents(layout.nodes(), tree);
      int roots = 0;
      for (int r = 0; r < a.nRanks; ++r) {
        const RankTreeLinks t = rankTreeLinks(layout, parents, r);
        const int node = layout.nodeOf[static_cast<size_t>(r)];
        if (t.parent == kNoPeer) {
          ++roots;
          EXPECT_EQ(t.depth, 0);
          continue;
        }
        const RankTreeLinks up = rankTreeLinks(layout, parents, t.parent);
        EXPECT_EQ(std::count(up.children.begin(), up.children.end(), r), 1) << "rank " << r;
        EXPECT_EQ(up.depth + 1, t.depth);
        const bool vertex = layout.chainPos[static_cast<size_t>(r)] == 0;
        // A node's vertex talks to other nodes' vertices; the rest of the node is a chain.
        EXPECT_EQ(layout.nodeOf[static_cast<size_t>(t.parent)] != node, vertex) << "rank " << r;
        EXPECT_LE(t.children.size(), vertex ? 3u : 1u);
      }
      EXPECT_EQ(roots, 1);
    }
  }
}

// Node shapes: equal nodes of 1, 2, 3, 4 and 8 ranks, uneven ones, and nodes whose ranks are
// interleaved in rank order (ids by first appearance).
std::vector<std::vector<int>> nodeShapes() {
  std::vector<std::vector<int>> shapes;
  for (int per : {1, 2, 3, 4, 8})
    for (int nodes : {1, 2, 3, 4, 5, 7, 8})
      if (per * nodes <= 64) shapes.push_back(nodesOf(std::vector<int>(static_cast<size_t>(nodes), per)));
  for (const std::vector<int>& sizes : std::vector<std::vector<int>>{{3, 1, 2}, {1, 4}, {5, 2, 2, 1}, {2, 7, 1, 3, 3}})
    shapes.push_back(nodesOf(sizes));
  for (int n : {6, 10}) {
    std::vector<int> interleaved(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) interleaved[static_cast<size_t>(r)] = (r * 7 + 3) % 3;
    shapes.push_back(interleaved);
  }
  return shapes;
}

std::string describe(const CollArgs& a, const VerifyOptions& o) {
  std::ostringstream s;
  s << collName(a.coll) << " nodes [";
  for (int m : a.nodeOf) s << m;
  s << "] count " << a.count << " channels " << a.nChannels << " root " << a.root << " align " << a.alignElems
    << " maxStep " << a.maxStepElems << (a.ring.empty() ? "" : " shuffled ring") << (o.inPlace ? " in-place" : "")
    << " slice " << o.sliceElems << " fifo " << o.fifoSlices;
  return s.str();
}

// Counts 0, 1, 7, 4097 and 1000003, in and out of place, every collective the tree runs; the
// verifier's one reduction model stands for every op (a sum of symbolic contributions with the
// pre-multiply on input reads and the post-op at kFinal). Channels, step caps, alignment and ring
// order rotate over the shapes; capped steps run through FIFOs of two steps.
TEST(TreeVerify, EveryNodeShape) {
  const Algorithm* tree = findAlgorithm("tree");
  ASSERT_NE(tree, nullptr);
  size_t turn = 0;
  for (const std::vector<int>& shape : nodeShapes()) {
    const int n = static_cast<int>(shape.size());
    for (Coll coll : {Coll::AllReduce, Coll::Broadcast}) {
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{4097}, uint64_t{1000003}}) {
        ++turn;
        CollArgs a;
        a.coll = coll;
        a.nRanks = n;
        a.count = count;
        a.nodeOf = shape;
        a.nChannels = std::vector<int>{1, 2, 3, 4}[turn % 4];
        a.root = std::vector<int>{0, n - 1, n / 2}[(turn / 4) % 3];
        a.alignElems = turn % 2 ? 4 : 1;
        // A million elements in steps of 256 would be ~4000 chunks a lane: cap them coarser there.
        a.maxStepElems = std::vector<uint64_t>{0, 256, 1000}[(turn / 2) % 3] * (count > 100000 ? 64 : 1);
        if (turn % 5 >= 3) {
          a.ring.resize(static_cast<size_t>(n));
          std::iota(a.ring.begin(), a.ring.end(), 0);
          std::shuffle(a.ring.begin(), a.ring.end(), std::mt19937(static_cast<unsigned>(turn)));
        }
        VerifyOptions o;
        if (a.maxStepElems > 0) {
          o.sliceElems = std::max<uint64_t>(1, a.maxStepElems / 4);
          o.fifoSlices = 8;  // two steps, as executors size maxStepElems
        }
        for (bool inPlace : {false, true}) {
          o.inPlace = inPlace;
          const VerifyResult r = verify(a, *tree, o);
          ASSERT_TRUE(r.ok) << describe(a, o) << ": " << r.summary();
        }
        // One lane per channel at most, no message over the cap (a local copy is no message).
        for (int rank = 0; rank < n; ++rank) {
          CollArgs mine = a;
          mine.rank = rank;
          const RankPlan plan = tree->build(mine);
          ASSERT_LE(plan.lanes.size(), static_cast<size_t>(a.nChannels));
          for (const Lane& lane : plan.lanes)
            for (const Step& s : lane.steps)
              if (a.maxStepElems && (s.recvPeer != kNoPeer || s.sendPeer != kNoPeer)) {
                ASSERT_LE(s.count, a.maxStepElems) << describe(a, o);
              }
        }
      }
    }
  }
}

// Each tree carries half of the data: an all-reduce on two channels sends 2 (n - 1) * count in
// all (every rank but the root sends its sum up and receives the result down, over each tree).
TEST(TreeVerify, EachTreeCarriesHalfTheData) {
  CollArgs a;
  a.coll = Coll::AllReduce;
  a.nodeOf = nodesOf({2, 2, 2});
  a.nRanks = 6;
  a.count = 1000;
  a.nChannels = 2;
  const VerifyResult r = verify(a, *findAlgorithm("tree"), {});
  ASSERT_TRUE(r.ok) << r.summary();
  EXPECT_EQ(r.elementsSent, 2u * 5u * 1000u);
  // Lane 1 runs tree 1, whose root is another node's vertex than tree 0's.
  CollArgs rank0 = a;
  rank0.rank = 0;
  const RankPlan plan = findAlgorithm("tree")->build(rank0);
  ASSERT_EQ(plan.lanes.size(), 2u);
  const RankTreeLinks t0 = rankTreeLinks(NodeLayout(a), treeParents(3, 0), 0);
  const RankTreeLinks t1 = rankTreeLinks(NodeLayout(a), treeParents(3, 1), 0);
  EXPECT_EQ(t0.parent, kNoPeer);
  EXPECT_NE(t1.parent, kNoPeer);
}

}  // namespace
}  // namespace braid::algo
