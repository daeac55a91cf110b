// Ring and tree search over the GPUs of one host.
//
// A channel is one ring (or, across hosts, one chain from the GPU where data enters the host to
// the GPU where it leaves). Every hop of a channel moves `speed` GB/s over each link on its path;
// the search never lets the channels of one result use more than a link's bandwidth. It tries
// per-channel speeds from fast to slow, packs as many channels as fit at each speed, and keeps
// the speed that moves the most in total (a slower speed must move 10% more to win, since more
// channels cost more SMs). Within one channel it prefers close hops (NVLink, then
// PCIe switch, then host bridge, then across sockets), so rings stay inside a NUMA node or PCIe
// root when they can; among equally close hops it takes the one with the most unused bandwidth,
// which spreads channels over all NVLinks of a mesh.
#pragma once
#include <utility>
#include <vector>

#include "topo/paths.h"
#include "topo/system.h"

namespace braid::topo {

struct SearchOptions {
  int maxChannels = 16;
  int minChannels = 1;        // a speed that packs fewer channels wins only when no speed packs this many
  double maxSpeed = 0;        // GB/s per channel; 0 = the GPUs' generation limit (maxChannelBw)
  P2pPolicy p2p;
  long stepBudget = 1 << 15;  // DFS steps per channel: then the best order found so far, or none
  long totalBudget = 1 << 21; // DFS steps for the whole search: then the best result so far
};

struct SearchResult {
  std::vector<std::vector<int>> channels;  // GPU node ids in order, one list per channel
  double speed = 0;                        // GB/s per channel
  PathType worst = PathType::Loc;          // the worst hop type used
  bool fallback = false;                   // nothing fit: the GPUs in the order given, speed 0.1
  double total() const { return speed * static_cast<double>(channels.size()); }
};

// Closed rings through all of `gpus` (distinct GPU nodes of one host).
SearchResult searchRings(const System& sys, const std::vector<int>& gpus, const SearchOptions& opt);

// Open chains through all of `gpus`; channel c starts at ends[c % ends.size()].first and ends
// at .second (equal only when there is one GPU).
SearchResult searchChains(const System& sys, const std::vector<int>& gpus,
                          const std::vector<std::pair<int, int>>& ends, const SearchOptions& opt);

// One of NCCL-style double binary trees over `n` hosts (tree 0 or 1): the parent and up to two
// children of `node`, -1 where there is none. Tree 1 is tree 0 shifted by one host, so that a
// host that is a leaf in one tree is usually inside the other.
struct TreeLinks {
  int parent = -1;
  int child[2] = {-1, -1};
};
TreeLinks doubleBinaryTree(int n, int node, int tree);

}  // namespace braid::topo
