// The tree algorithm: AllReduce and Broadcast over NCCL's double binary tree across nodes, with
// a chain inside each node (tree.h has the shape and why).
//
// Lane c (channel c) uses tree c % 2, so with two or more channels each tree carries half of
// the data; each lane loops over chunks of at most maxStepElems elements.
//  - AllReduce, per chunk: up (each rank adds its children's partial sums to its input, in the
//    order of RankTreeLinks::children, and sends the sum to its parent; the root applies kFinal)
//    then down (the root's result is stored and forwarded to the children). The two passes are
//    pipelined in one lane: a rank at depth d runs up(k) then down(k - 2d), so chunks flow both
//    ways at once (a chunk's result comes back 2d chunks after its own part went up). Every
//    element is added up at the same ranks in the same order, so all ranks get the same bits.
//    A rank with two or more children keeps its partial sum in its output: the input is read
//    once per chunk, before anything of that chunk is written (in-place is safe).
//  - Broadcast: the tree is rooted at the root (its node and its chain rotated to the front);
//    down only.
// Reduce is not offered: a rank with two children needs somewhere to keep a partial sum, and a
// Reduce's ranks other than the root have no output buffer (the IR has no scratch buffers).
#include "algo/tree.h"

#include <algorithm>

#include "algo/algorithm.h"
#include "algo/partition.h"

namespace braid::algo {

namespace {

// Tree 0: the parent of v is the node one level up (its lowest set bit doubled) on v's side,
// or the one below when that is past the end.
int lowestBitParent(int nNodes, int v) {
  if (v == 0) return -1;
  const int bit = v & -v;
  const int up = (v & ~bit) | (bit << 1);
  return up < nNodes ? up : (v & ~bit);
}

// A balanced full binary tree over the odd-sized range [lo, hi], numbered in order.
void fullInOrder(int lo, int hi, int parent, std::vector<int>& parents) {
  const int count = hi - lo + 1;
  if (count == 1) {
    parents[static_cast<size_t>(lo)] = parent;
    return;
  }
  const int leaves = (count + 1) / 2;
  const int leftCount = 2 * ((leaves + 1) / 2) - 1;
  const int root = lo + leftCount;
  parents[static_cast<size_t>(root)] = parent;
  fullInOrder(lo, root - 1, root, parents);
  fullInOrder(root + 1, hi, root, parents);
}

}  // namespace

std::vector<int> treeParents(int nNodes, int tree) {
  std::vector<int> parents(static_cast<size_t>(std::max(0, nNodes)), -1);
  if (nNodes <= 1) return parents;
  if (tree % 2 == 0) {
    for (int v = 0; v < nNodes; ++v) parents[static_cast<size_t>(v)] = lowestBitParent(nNodes, v);
  } else if (nNodes % 2 == 0) {
    for (int v = 0; v < nNodes; ++v) {
      const int p = lowestBitParent(nNodes, nNodes - 1 - v);
      parents[static_cast<size_t>(v)] = p < 0 ? -1 : nNodes - 1 - p;
    }
  } else {
    fullInOrder(0, nNodes - 1, -1, parents);
  }
  return parents;
}

TreeLinks nodeTreeLinks(int nNodes, int node, int tree) {
  TreeLinks links;
  if (node < 0 || node >= nNodes) return links;
  const std::vector<int> parents = treeParents(nNodes, tree);
  links.parent = parents[static_cast<size_t>(node)];
  int k = 0;
  for (int v = 0; v < nNodes && k < 2; ++v)
    if (parents[static_cast<size_t>(v)] == node) links.child[k++] = v;
  return links;
}

NodeLayout::NodeLayout(const CollArgs& args, int root, int rootNodeId) {
  const int n = std::max(1, args.nRanks);
  bool usable = static_cast<int>(args.nodeOf.size()) == n;
  for (int r = 0; usable && r < n; ++r) usable = args.nodeOf[static_cast<size_t>(r)] >= 0;
  // Renumber by first appearance, so that any labels give the same layout.
  nodeOf.assign(static_cast<size_t>(n), 0);
  if (usable) {
    std::vector<std::pair<int, int>> seen;  // (label, node)
    for (int r = 0; r < n; ++r) {
      const int label = args.nodeOf[static_cast<size_t>(r)];
      auto it = std::find_if(seen.begin(), seen.end(), [label](const auto& s) { return s.first == label; });
      if (it == seen.end()) it = seen.insert(seen.end(), {label, static_cast<int>(seen.size())});
      nodeOf[static_cast<size_t>(r)] = it->second;
    }
  }
  const int nodes = 1 + *std::max_element(nodeOf.begin(), nodeOf.end());
  const RingOrder ring(args);
  int first = 0;  // ring position the chains start from
  if (root >= 0 && root < n) {
    // Rotated: the root's node gets id rootNodeId, and the root heads its chain.
    const int shift = ((rootNodeId - nodeOf[static_cast<size_t>(root)]) % nodes + nodes) % nodes;
    for (int& m : nodeOf) m = (m + shift) % nodes;
    first = ring.posOf(root);
  }
  members.assign(static_cast<size_t>(nodes), {});
  for (int p = 0; p < n; ++p) {
    const int r = ring.at(first + p);
    members[static_cast<size_t>(nodeOf[static_cast<size_t>(r)])].push_back(r);
  }
  chainPos.assign(static_cast<size_t>(n), 0);
  for (const auto& m : members)
    for (size_t i = 0; i < m.size(); ++i) chainPos[static_cast<size_t>(m[i])] = static_cast<int>(i);
}

int NodeLayout::maxRanksPerNode() const {
  size_t most = 0;
  for (const auto& m : members) most = std::max(most, m.size());
  return static_cast<int>(most);
}

RankTreeLinks rankTreeLinks(const NodeLayout& layout, const std::vector<int>& nodeParents, int rank) {
  RankTreeLinks links;
  const int node = layout.nodeOf[static_cast<size_t>(rank)];
  const int pos = layout.chainPos[static_cast<size_t>(rank)];
  const std::vector<int>& chain = layout.members[static_cast<size_t>(node)];
  if (pos + 1 < static_cast<int>(chain.size())) links.children.push_back(chain[static_cast<size_t>(pos) + 1]);
  if (pos > 0) {
    links.parent = chain[static_cast<size_t>(pos) - 1];
  } else {
    const int up = nodeParents[static_cast<size_t>(node)];
    if (up >= 0) links.parent = layout.members[static_cast<size_t>(up)].front();
    for (size_t v = 0; v < nodeParents.size(); ++v)
      if (nodeParents[v] == node) links.children.push_back(layout.members[v].front());
  }
  int nodeDepth = 0;
  for (int v = node; nodeParents[static_cast<size_t>(v)] >= 0 && nodeDepth <= layout.nodes(); v = nodeParents[static_cast<size_t>(v)])
    ++nodeDepth;
  links.depth = nodeDepth + pos;
  return links;
}

NodeLayout treeLayout(const CollArgs& args, int tree) {
  const bool rooted = args.coll == Coll::Broadcast && args.root >= 0 && args.root < args.nRanks;
  if (!rooted) return NodeLayout(args);
  const std::vector<int> parents = treeParents(NodeLayout(args).nodes(), tree);
  const int rootId = static_cast<int>(std::find(parents.begin(), parents.end(), -1) - parents.begin());
  return NodeLayout(args, args.root, rootId);
}

namespace {

// Up, at a rank other than the root: the children's sums added to the input, sent on.
void upChunk(const RankTreeLinks& t, Range c, Lane& lane) {
  if (t.children.empty()) {
    addStep(lane, {.sendPeer = t.parent, .src = kInput, .srcOff = c.begin, .count = c.size()});
    return;
  }
  for (size_t i = 0; i < t.children.size(); ++i) {
    const bool last = i + 1 == t.children.size();
    Step s{.recvPeer = t.children[i], .src = i == 0 ? kInput : kOutput, .flags = kReduce, .srcOff = c.begin,
           .count = c.size()};
    if (last) {
      s.sendPeer = t.parent;
    } else {
      s.dst = kOutput;
      s.dstOff = c.begin;
    }
    addStep(lane, s);
  }
}

// Down from the value stored at out[c] (after `first`, the step that stores it): to the
// children in the reverse order of the up pass (the child nodes, the deeper ones, first).
void forwardDown(const RankTreeLinks& t, Range c, Step first, Lane& lane) {
  const size_t k = t.children.size();
  if (k > 0) first.sendPeer = t.children[k - 1];
  addStep(lane, first);
  for (size_t i = 1; i < k; ++i)
    addStep(lane, {.sendPeer = t.children[k - 1 - i], .src = kOutput, .srcOff = c.begin, .count = c.size()});
}

void downChunk(const RankTreeLinks& t, Range c, Lane& lane) {
  forwardDown(t, c, {.recvPeer = t.parent, .dst = kOutput, .dstOff = c.begin, .count = c.size()}, lane);
}

// The root's up and down of one chunk: the last child's sum completes the result.
void rootAllReduceChunk(const RankTreeLinks& t, Range c, Lane& lane) {
  for (size_t i = 0; i + 1 < t.children.size(); ++i)
    addStep(lane, {.recvPeer = t.children[i], .src = i == 0 ? kInput : kOutput, .dst = kOutput, .flags = kReduce,
                   .srcOff = c.begin, .dstOff = c.begin, .count = c.size()});
  const size_t lastChild = t.children.size() - 1;
  const Step final{.recvPeer = t.children[lastChild], .src = lastChild == 0 ? kInput : kOutput, .dst = kOutput,
                   .flags = kReduce | kFinal, .srcOff = c.begin, .dstOff = c.begin, .count = c.size()};
  forwardDown(t, c, final, lane);
}

void allReduceLane(const CollArgs& a, const RankTreeLinks& t, Range range, Lane& lane) {
  const std::vector<Range> chunks = chunkRange(range, 1, a.maxStepElems, effectiveAlign(a));
  const int64_t k = static_cast<int64_t>(chunks.size());
  if (t.parent == kNoPeer) {
    for (Range c : chunks) rootAllReduceChunk(t, c, lane);
    return;
  }
  const int64_t lag = 2 * static_cast<int64_t>(t.depth);
  for (int64_t i = 0; i < k + lag; ++i) {
    if (i < k) upChunk(t, chunks[static_cast<size_t>(i)], lane);
    if (i - lag >= 0 && i - lag < k) downChunk(t, chunks[static_cast<size_t>(i - lag)], lane);
  }
}

void broadcastLane(const CollArgs& a, const RankTreeLinks& t, Range range, Lane& lane) {
  for (Range c : chunkRange(range, 1, a.maxStepElems, effectiveAlign(a))) {
    if (t.parent == kNoPeer)
      forwardDown(t, c, {.src = kInput, .dst = kOutput, .srcOff = c.begin, .dstOff = c.begin, .count = c.size()}, lane);
    else
      downChunk(t, c, lane);
  }
}

bool treeSupports(Coll coll, int nRanks) {
  return nRanks >= 1 && (coll == Coll::AllReduce || coll == Coll::Broadcast);
}

RankPlan treeBuild(const CollArgs& a) {
  if (a.count == 0 || !treeSupports(a.coll, a.nRanks)) return {};
  const bool bcast = a.coll == Coll::Broadcast;
  if (bcast && (a.root < 0 || a.root >= a.nRanks)) return {};
  RankPlan plan;
  const auto ranges = laneRanges(a, a.count);
  for (size_t c = 0; c < ranges.size(); ++c) {
    Lane lane{.channel = static_cast<int32_t>(c), .steps = {}};
    if (a.nRanks == 1) {
      addStep(lane, {.src = kInput, .dst = kOutput, .flags = bcast ? uint8_t{0} : kFinal, .srcOff = ranges[c].begin,
                     .dstOff = ranges[c].begin, .count = ranges[c].size()});
    } else {
      const int tree = static_cast<int>(c % kTrees);
      const NodeLayout layout = treeLayout(a, tree);
      const RankTreeLinks t = rankTreeLinks(layout, treeParents(layout.nodes(), tree), a.rank);
      if (bcast) broadcastLane(a, t, ranges[c], lane);
      else allReduceLane(a, t, ranges[c], lane);
    }
    if (!lane.steps.empty()) plan.lanes.push_back(std::move(lane));
  }
  return plan;
}

}  // namespace

extern const Algorithm kTree{"tree", treeSupports, treeBuild};

}  // namespace braid::algo
