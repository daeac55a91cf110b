#include "topo/search.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>

namespace braid::topo {

namespace {

// How much a hop of this type costs a ring: close hops are cheap, crossing sockets is dear.
int hopCost(PathType t) {
  switch (t) {
    case PathType::Loc:
    case PathType::Nvl: return 0;
    case PathType::Nvb:
    case PathType::C2c: return 2;
    case PathType::Pix: return 3;
    case PathType::Pxb:
    case PathType::P2c: return 4;
    case PathType::Pxn: return 5;
    case PathType::Phb:
    case PathType::Node: return 6;
    case PathType::Sys: return 12;
    case PathType::Net: return 20;
    case PathType::Dis: return 1000;
  }
  return 1000;
}

// Per-channel speeds tried, fastest first (GB/s). They include NCCL's search speeds for every
// GPU generation, so that results compare with NCCL's at equal quantization.
const double kSpeeds[] = {90, 80, 70, 60, 50, 45, 40, 36, 30, 24, 22, 20, 18, 15, 12, 11, 10,
                          9,  7,  6,  5,  4,  3,  2.4, 1.2, 0.6, 0.24, 0.12};
constexpr double kEps = 1e-6;
constexpr double kSlowerMustGain = 1.1;
// Steps spent improving a channel's order once one is found (an 8-GPU search finishes well within).
constexpr long kRefineSteps = 4096;

class Packer {
 public:
  Packer(const System& sys, const std::vector<int>& gpus, const SearchOptions& opt)
      : opt_(opt), n_(gpus.size()) {
    routes_.resize(n_ * n_);
    cost_.assign(n_ * n_, 0);
    minCost_ = std::numeric_limits<int>::max();
    for (size_t i = 0; i < n_; ++i)
      for (size_t j = 0; j < n_; ++j) {
        if (i == j) continue;
        routes_[i * n_ + j] = effectiveGpuPath(sys, gpus[i], gpus[j], opt.p2p);
        cost_[i * n_ + j] = hopCost(routes_[i * n_ + j].type);
        minCost_ = std::min(minCost_, cost_[i * n_ + j]);
      }
    if (minCost_ == std::numeric_limits<int>::max()) minCost_ = 0;
    cap_.resize(2 * sys.links.size());
    for (size_t l = 0; l < sys.links.size(); ++l) cap_[2 * l] = cap_[2 * l + 1] = sys.links[l].bw;
    // Cuts: the GPUs below each switch or CPU. A channel through all GPUs must cross every cut
    // that splits them, which rejects a hopeless speed before the depth-first search.
    std::map<int, std::vector<bool>> below;
    for (size_t i = 0; i < n_; ++i)
      for (int x = sys.node(gpus[i]).parent; x >= 0; x = sys.node(x).parent) {
        auto& members = below[x];
        members.resize(n_, false);
        members[i] = true;
      }
    for (auto& [node, members] : below) {
      size_t count = static_cast<size_t>(std::count(members.begin(), members.end(), true));
      if (count > 0 && count < n_) cuts_.push_back(std::move(members));
    }
  }

  // As many channels as fit at `speed` (at most maxChannels). ends empty: rings.
  std::vector<std::vector<size_t>> pack(double speed, const std::vector<std::pair<size_t, size_t>>& ends) {
    used_.assign(cap_.size(), 0.0);
    std::vector<std::vector<size_t>> channels;
    for (int c = 0; c < opt_.maxChannels && !exhausted(); ++c) {
      size_t start = ends.empty() ? 0 : ends[static_cast<size_t>(c) % ends.size()].first;
      long end = ends.empty() ? -1 : static_cast<long>(ends[static_cast<size_t>(c) % ends.size()].second);
      std::vector<size_t> order;
      if (!findChannel(speed, start, end, &order)) break;
      applyChannel(order, end < 0, speed);
      channels.push_back(std::move(order));
    }
    return channels;
  }

  bool exhausted() const { return totalSteps_ > opt_.totalBudget; }

  PathType worstType(const std::vector<std::vector<size_t>>& channels, bool ring) const {
    PathType w = PathType::Loc;
    for (const auto& ch : channels)
      for (size_t k = 0; k + 1 < ch.size() + (ring ? 1 : 0); ++k) {
        size_t a = ch[k], b = ch[(k + 1) % ch.size()];
        if (a != b) w = std::max(w, routes_[a * n_ + b].type);
      }
    return w;
  }

 private:
  bool feasible(size_t i, size_t j, double s) const {
    for (DirectedLink d : routes_[i * n_ + j].hops)
      if (used_[static_cast<size_t>(d)] + s > cap_[static_cast<size_t>(d)] + kEps) return false;
    return true;
  }
  void use(size_t i, size_t j, double s) {
    for (DirectedLink d : routes_[i * n_ + j].hops) used_[static_cast<size_t>(d)] += s;
  }
  double residual(size_t i, size_t j) const {
    double r = kLocBw;
    for (DirectedLink d : routes_[i * n_ + j].hops)
      r = std::min(r, cap_[static_cast<size_t>(d)] - used_[static_cast<size_t>(d)]);
    return r;
  }
  void applyChannel(const std::vector<size_t>& order, bool ring, double s) {
    for (size_t k = 0; k + 1 < order.size(); ++k) use(order[k], order[k + 1], s);
    if (ring && order.size() > 1) use(order.back(), order.front(), s);
  }

  // Whether some hop leaves (or enters) the set at speed s with the links' unused bandwidth.
  bool anyCrossing(const std::vector<bool>& inside, bool leaving, double s) const {
    for (size_t a = 0; a < n_; ++a)
      for (size_t b = 0; b < n_; ++b)
        if (inside[a] != inside[b] && inside[a] == leaving && feasible(a, b, s)) return true;
    return false;
  }
  bool cutsAllow(double s, size_t start, long end) const {
    for (const auto& inside : cuts_) {
      bool needOut = true, needIn = true;
      if (end >= 0) {  // a chain crosses out of the set holding its start, into the one holding its end
        bool startIn = inside[start], endIn = inside[static_cast<size_t>(end)];
        needOut = startIn || !endIn;
        needIn = endIn || !startIn;
      }
      if ((needOut && !anyCrossing(inside, true, s)) || (needIn && !anyCrossing(inside, false, s))) return false;
    }
    return true;
  }

  // Depth-first search with branch and bound on the summed hop cost.
  bool findChannel(double s, size_t start, long end, std::vector<size_t>* out) {
    if (n_ == 1) {
      out->assign(1, 0);
      return true;
    }
    if (!cutsAllow(s, start, end)) return false;
    // Candidate order per GPU: closest first, then most unused bandwidth, then lowest index.
    order_.assign(n_, {});
    for (size_t i = 0; i < n_; ++i) {
      for (size_t j = 0; j < n_; ++j)
        if (j != i) order_[i].push_back(j);
      std::vector<double> res(n_);
      for (size_t j = 0; j < n_; ++j) res[j] = j == i ? 0 : residual(i, j);
      std::stable_sort(order_[i].begin(), order_[i].end(), [&](size_t a, size_t b) {
        int ca = cost_[i * n_ + a], cb = cost_[i * n_ + b];
        if (ca != cb) return ca < cb;
        if (res[a] > res[b] + kEps || res[b] > res[a] + kEps) return res[a] > res[b];
        return a < b;
      });
    }
    s_ = s;
    end_ = end;
    steps_ = 0;
    bestCost_ = std::numeric_limits<int>::max();
    best_.clear();
    visited_.assign(n_, false);
    path_.assign(1, start);
    visited_[start] = true;
    size_t hops = end < 0 ? n_ : n_ - 1;
    floor_ = static_cast<int>(hops) * minCost_;
    dfs(start, 0);
    if (best_.empty()) return false;
    *out = best_;
    return true;
  }

  void dfs(size_t cur, int cost) {
    ++totalSteps_;
    if (++steps_ > opt_.stepBudget) return;  // with no order found yet, this speed is given up
    if (!best_.empty() && steps_ > foundAt_ + kRefineSteps) return;  // improving costs bounded time
    if (bestCost_ <= floor_) return;  // cannot do better than the cheapest possible channel
    size_t remaining = n_ - path_.size();
    if (remaining == 0) {
      int total = cost;
      if (end_ < 0) {
        // used_ already holds this ring's own hops, so shared links are accounted for.
        if (!feasible(cur, path_.front(), s_)) return;
        total += cost_[cur * n_ + path_.front()];
      } else if (static_cast<long>(cur) != end_) {
        return;
      }
      if (total < bestCost_) {
        if (best_.empty()) foundAt_ = steps_;
        bestCost_ = total;
        best_ = path_;
      }
      return;
    }
    int bound = cost + static_cast<int>(remaining + (end_ < 0 ? 1 : 0)) * minCost_;
    if (bound >= bestCost_) return;
    for (size_t j : order_[cur]) {
      if (visited_[j]) continue;
      if (end_ >= 0 && static_cast<long>(j) == end_ && remaining > 1) continue;  // the end comes last
      if (!feasible(cur, j, s_)) continue;
      use(cur, j, s_);
      visited_[j] = true;
      path_.push_back(j);
      dfs(j, cost + cost_[cur * n_ + j]);
      path_.pop_back();
      visited_[j] = false;
      use(cur, j, -s_);
      if (steps_ > opt_.stepBudget || (!best_.empty() && steps_ > foundAt_ + kRefineSteps)) return;
      if (bestCost_ <= floor_) return;
    }
  }

  const SearchOptions& opt_;
  size_t n_;
  std::vector<Path> routes_;
  std::vector<int> cost_;
  int minCost_;
  std::vector<double> cap_, used_;
  std::vector<std::vector<size_t>> order_;
  std::vector<std::vector<bool>> cuts_;
  // DFS state
  double s_ = 0;
  long end_ = -1;
  long steps_ = 0;
  long totalSteps_ = 0;
  long foundAt_ = 0;
  int bestCost_ = 0, floor_ = 0;
  std::vector<size_t> best_, path_;
  std::vector<bool> visited_;
};

double speedLimit(const System& sys, const std::vector<int>& gpus, const SearchOptions& opt) {
  if (opt.maxSpeed > 0) return opt.maxSpeed;
  double limit = 0;
  for (int g : gpus) limit = std::max(limit, maxChannelBw(sys.node(g).sm));
  return limit > 0 ? limit : maxChannelBw(0);
}

SearchResult run(const System& sys, const std::vector<int>& gpus, const std::vector<std::pair<int, int>>& nodeEnds,
                 const SearchOptions& opt) {
  SearchResult result;
  if (gpus.empty() || opt.maxChannels <= 0) return result;
  std::vector<std::pair<size_t, size_t>> ends;
  for (const auto& [a, b] : nodeEnds) {
    auto ia = std::find(gpus.begin(), gpus.end(), a), ib = std::find(gpus.begin(), gpus.end(), b);
    if (ia != gpus.end() && ib != gpus.end())
      ends.emplace_back(static_cast<size_t>(ia - gpus.begin()), static_cast<size_t>(ib - gpus.begin()));
  }
  bool ring = nodeEnds.empty();
  Packer packer(sys, gpus, opt);
  double limit = speedLimit(sys, gpus, opt);
  std::vector<std::vector<size_t>> best;
  double bestSpeed = 0;
  size_t minChannels = static_cast<size_t>(std::clamp(opt.minChannels, 1, opt.maxChannels));
  for (double s : kSpeeds) {
    if (s > limit + kEps) continue;
    bool bestQualifies = best.size() >= minChannels;
    // A slower speed must move clearly more in total to win: more channels cost more SMs.
    double bar = bestSpeed * static_cast<double>(best.size()) * kSlowerMustGain + kEps;
    if (bestQualifies && s * opt.maxChannels <= bar) break;
    if (packer.exhausted()) break;  // keep what was found: the search must stay cheap
    auto channels = packer.pack(s, ends);
    bool qualifies = channels.size() >= minChannels;
    if ((qualifies && !bestQualifies && !channels.empty()) ||
        (qualifies == bestQualifies && s * static_cast<double>(channels.size()) > bar)) {
      best = std::move(channels);
      bestSpeed = s;
    }
  }
  if (best.empty()) {
    result.fallback = true;
    result.speed = 0.1;
    std::vector<int> order = gpus;
    if (!ends.empty()) {  // keep the requested ends even in the fallback
      int first = gpus[ends[0].first], last = gpus[ends[0].second];
      order.erase(std::remove_if(order.begin(), order.end(), [&](int g) { return g == first || g == last; }), order.end());
      order.insert(order.begin(), first);
      if (last != first) order.push_back(last);
    }
    result.channels.push_back(order);
    result.worst = PathType::Sys;
    return result;
  }
  result.speed = bestSpeed;
  result.worst = packer.worstType(best, ring);
  for (const auto& ch : best) {
    std::vector<int> nodes;
    for (size_t i : ch) nodes.push_back(gpus[i]);
    result.channels.push_back(std::move(nodes));
  }
  return result;
}

}  // namespace

SearchResult searchRings(const System& sys, const std::vector<int>& gpus, const SearchOptions& opt) {
  return run(sys, gpus, {}, opt);
}

SearchResult searchChains(const System& sys, const std::vector<int>& gpus,
                          const std::vector<std::pair<int, int>>& ends, const SearchOptions& opt) {
  if (ends.empty()) {
    std::vector<std::pair<int, int>> dflt{{gpus.front(), gpus.size() > 1 ? gpus.back() : gpus.front()}};
    return run(sys, gpus, dflt, opt);
  }
  return run(sys, gpus, ends, opt);
}

TreeLinks doubleBinaryTree(int n, int node, int tree) {
  TreeLinks t;
  if (n <= 0 || node < 0 || node >= n) return t;
  // Tree 1 is tree 0 shifted by one place: the leaves of an in-order tree are mostly even
  // positions, so shifted they land on nodes that are inside tree 0.
  int pos = tree == 1 ? (node + 1) % n : node;
  auto unmap = [&](int p) { return p < 0 ? -1 : (tree == 1 ? (p + n - 1) % n : p); };
  // In-order tree over [lo, hi]: the middle is the root of its range.
  int lo = 0, hi = n - 1, parent = -1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (pos == mid) {
      int left = lo <= mid - 1 ? lo + (mid - 1 - lo) / 2 : -1;
      int right = mid + 1 <= hi ? mid + 1 + (hi - mid - 1) / 2 : -1;
      t.parent = unmap(parent);
      t.child[0] = unmap(left);
      t.child[1] = unmap(right);
      return t;
    }
    parent = mid;
    if (pos < mid) hi = mid - 1;
    else lo = mid + 1;
  }
  return t;
}

}  // namespace braid::topo
