// The shape of the tree algorithm (tree.cc): NCCL's double binary tree across nodes, with a
// chain inside each node. Exposed for its structural tests and for braid-sched.
//
// Across nodes (node ids 0..N-1): tree 0 is the in-order binary tree of the lowest set bit (a
// node's level is its lowest set bit; node 0 is the root with one child, the highest power of
// two below N). Its interior nodes are exactly the even ones. Tree 1 must have the odd nodes
// inside and the even ones as leaves, so that each node forwards for at most one tree:
//  - N even: tree 0 mirrored (node v plays the part of N-1-v), as NCCL does;
//  - N odd: a balanced full binary tree numbered in order (its in-order walk alternates leaf,
//    interior, leaf, ..., so the leaves are the even nodes). NCCL shifts tree 0 by one node
//    here instead, which leaves node 0 interior in both trees.
// Depth of either tree: at most ceil(log2 N).
//
// Inside a node its ranks form a chain in ring order (CollArgs::ring; the lowest rank first
// with the identity ring): the first is the node's vertex of both trees, each next rank hangs
// below the previous one.
#pragma once
#include <vector>

#include "algo/schedule.h"

namespace braid::algo {

constexpr int kTrees = 2;

// A node's links in one of the two trees (-1: none).
struct TreeLinks {
  int parent = -1;
  int child[2] = {-1, -1};
};
// Parents of nodes 0..nNodes-1 in tree `tree` (0 or 1); the root's is -1.
std::vector<int> treeParents(int nNodes, int tree);
TreeLinks nodeTreeLinks(int nNodes, int node, int tree);

// The ranks of each node, each in ring order (the node's tree vertex first). Node ids are
// renumbered in order of first appearance by rank; an unusable nodeOf means one node. With a
// `root` (a rank), node ids are rotated so that the root's node gets id `rootNodeId`, and the
// chains follow the ring from the root on, so that the root heads its node's chain.
struct NodeLayout {
  explicit NodeLayout(const CollArgs& args, int root = -1, int rootNodeId = 0);
  int nodes() const { return static_cast<int>(members.size()); }
  std::vector<std::vector<int>> members;  // [node] -> ranks, chain order
  std::vector<int> nodeOf;                // [rank] -> node
  std::vector<int> chainPos;              // [rank] -> index in its node's chain
  int maxRanksPerNode() const;
};

// The layout the tree algorithm builds the lanes of tree `tree` on: for Broadcast rotated so that
// the root's node is that tree's root and the root heads its chain; for AllReduce as is.
NodeLayout treeLayout(const CollArgs& args, int tree);

// A rank's links in one tree: its parent (kNoPeer at the root), its children in the order it
// adds them up (its chain child first, then the child nodes' vertices), and its depth (hops to
// the root).
struct RankTreeLinks {
  int parent = kNoPeer;
  std::vector<int> children;
  int depth = 0;
};
RankTreeLinks rankTreeLinks(const NodeLayout& layout, const std::vector<int>& nodeParents, int rank);

}  // namespace braid::algo
