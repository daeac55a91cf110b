#include "topo/paths.h"

#include <algorithm>

namespace braid::topo {

namespace {

std::vector<int> ancestors(const System& sys, int n) {
  std::vector<int> chain;
  for (int x = n; x >= 0; x = sys.node(x).parent) {
    chain.push_back(x);
    if (chain.size() > sys.nodes.size()) break;  // never loops on a well-formed tree
  }
  return chain;
}

// The directed use of the PCI link from `child` up to its parent (or down when !up).
DirectedLink treeHop(const System& sys, int child, bool up) {
  int l = sys.node(child).upLink;
  return up ? 2 * l : 2 * l + 1;  // PCI links are stored child (a) -> parent (b)
}

DirectedLink hopBetween(const System& sys, int from, int to) {
  int l = sys.linkBetween(from, to);
  if (l < 0) return -1;
  return sys.links[static_cast<size_t>(l)].a == from ? 2 * l : 2 * l + 1;
}

bool isHostBridge(const Node& n) { return n.type == NodeType::Pci && n.hasClass && (n.pciClass >> 8) == 0x0600; }

void addHop(const System& sys, Path* p, DirectedLink h) {
  p->hops.push_back(h);
  p->bw = std::min(p->bw, sys.links[static_cast<size_t>(h / 2)].bw);
}

}  // namespace

Path pciPath(const System& sys, int a, int b, bool viaCpu) {
  Path p;
  if (a == b) {
    p.type = PathType::Loc;
    p.bw = kLocBw;
    return p;
  }
  const Node& na = sys.node(a);
  const Node& nb = sys.node(b);
  if (na.host != nb.host) {
    p.type = PathType::Net;
    return p;
  }
  p.bw = kLocBw;
  std::vector<int> ca = ancestors(sys, a), cb = ancestors(sys, b);
  // Lowest common ancestor; with viaCpu only the CPU can join them.
  int lca = -1;
  size_t ia = 0, ib = 0;
  for (size_t i = 0; i < ca.size() && lca < 0; ++i) {
    if (viaCpu && sys.node(ca[i]).type != NodeType::Cpu) continue;
    for (size_t j = 0; j < cb.size(); ++j)
      if (ca[i] == cb[j]) {
        lca = ca[i];
        ia = i;
        ib = j;
        break;
      }
  }
  std::vector<int> middle;  // nodes strictly between a and b
  if (lca >= 0) {
    for (size_t i = 0; i < ia; ++i) addHop(sys, &p, treeHop(sys, ca[i], true));
    for (size_t j = ib; j-- > 0;) addHop(sys, &p, treeHop(sys, cb[j], false));
    for (size_t i = 1; i <= ia; ++i) middle.push_back(ca[i]);
    for (size_t j = 1; j < ib; ++j) middle.push_back(cb[j]);
    const Node& l = sys.node(lca);
    if (l.type == NodeType::Cpu) {
      p.type = PathType::Node;
    } else {
      bool hostBridge = std::any_of(middle.begin(), middle.end(), [&](int m) { return isHostBridge(sys.node(m)); });
      size_t bridges = std::count_if(middle.begin(), middle.end(), [&](int m) { return sys.node(m).type == NodeType::Pci; });
      p.type = hostBridge ? PathType::Phb : bridges <= 1 ? PathType::Pix : PathType::Pxb;
    }
  } else {
    // Different CPUs of one host: up to a's CPU, across, down from b's CPU.
    for (size_t i = 0; i + 1 < ca.size(); ++i) addHop(sys, &p, treeHop(sys, ca[i], true));
    DirectedLink across = hopBetween(sys, ca.back(), cb.back());
    if (across >= 0) addHop(sys, &p, across);
    for (size_t j = cb.size() - 1; j-- > 0;) addHop(sys, &p, treeHop(sys, cb[j], false));
    p.type = PathType::Sys;
  }
  if (viaCpu && p.type != PathType::Sys) p.type = PathType::Phb;
  return p;
}

Path gpuPath(const System& sys, int a, int b, bool nvbAllowed) {
  if (a == b) return pciPath(sys, a, b);
  const Node& na = sys.node(a);
  const Node& nb = sys.node(b);
  if (na.host != nb.host) return pciPath(sys, a, b);
  Path best;
  // Direct NVLinks.
  if (int l = sys.linkBetween(a, b); l >= 0 && sys.links[static_cast<size_t>(l)].type == LinkType::Nvl) {
    best.type = PathType::Nvl;
    best.bw = kLocBw;
    best.nvlinks = sys.links[static_cast<size_t>(l)].count;
    addHop(sys, &best, hopBetween(sys, a, b));
  }
  // Through the NVSwitch.
  int nvs = sys.hosts[static_cast<size_t>(na.host)].nvs;
  if (nvs >= 0) {
    DirectedLink up = hopBetween(sys, a, nvs), down = hopBetween(sys, nvs, b);
    if (up >= 0 && down >= 0) {
      Path p;
      p.type = PathType::Nvl;
      p.bw = kLocBw;
      addHop(sys, &p, up);
      addHop(sys, &p, down);
      p.nvlinks = std::min(sys.links[static_cast<size_t>(up / 2)].count, sys.links[static_cast<size_t>(down / 2)].count);
      if (best.type != PathType::Nvl || p.bw > best.bw) best = p;
    }
  }
  if (best.type == PathType::Nvl) return best;
  // NVB: through one other GPU's direct NVLinks.
  if (nvbAllowed) {
    for (int l1 : sys.adjacency[static_cast<size_t>(a)]) {
      const Link& first = sys.links[static_cast<size_t>(l1)];
      int c = first.a == a ? first.b : first.a;
      if (first.type != LinkType::Nvl || c == b || sys.node(c).type != NodeType::Gpu) continue;
      int l2 = sys.linkBetween(c, b);
      if (l2 < 0 || sys.links[static_cast<size_t>(l2)].type != LinkType::Nvl) continue;
      Path p;
      p.type = PathType::Nvb;
      p.bw = kLocBw;
      addHop(sys, &p, hopBetween(sys, a, c));
      addHop(sys, &p, hopBetween(sys, c, b));
      p.nvlinks = std::min(sys.links[static_cast<size_t>(l1)].count, sys.links[static_cast<size_t>(l2)].count);
      if (best.type != PathType::Nvb || p.bw > best.bw) best = p;
    }
    if (best.type == PathType::Nvb) return best;
  }
  return pciPath(sys, a, b);
}

Path effectiveGpuPath(const System& sys, int a, int b, const P2pPolicy& policy) {
  Path p = gpuPath(sys, a, b, policy.nvbAllowed);
  if (a == b || p.type == PathType::Net) return p;
  if (ncclPathLevel(p.type) <= ncclPathLevel(policy.level)) return p;
  return pciPath(sys, a, b, /*viaCpu=*/true);
}

Path deviceToNicPath(const System& sys, int device, int nic) {
  int id = sys.nicIdentity(nic);
  Path best;
  for (int n : sys.nics) {
    if (sys.nicIdentity(n) != id) continue;
    Path p = pciPath(sys, device, n);
    if (best.type == PathType::Dis || p.type < best.type || (p.type == best.type && p.bw > best.bw)) best = p;
  }
  return best;
}

PathMatrix::PathMatrix(const System& sys, bool nvbAllowed) {
  for (int n : sys.nics)
    if (sys.node(n).alias < 0) nicIds_.push_back(n);
  nGpu_ = sys.gpus.size();
  nNic_ = nicIds_.size();
  gg_.resize(nGpu_ * nGpu_);
  gn_.resize(nGpu_ * nNic_);
  nn_.resize(nNic_ * nNic_);
  for (size_t i = 0; i < nGpu_; ++i) {
    for (size_t j = 0; j < nGpu_; ++j) gg_[i * nGpu_ + j] = gpuPath(sys, sys.gpus[i], sys.gpus[j], nvbAllowed);
    for (size_t k = 0; k < nNic_; ++k) gn_[i * nNic_ + k] = deviceToNicPath(sys, sys.gpus[i], nicIds_[k]);
  }
  for (size_t k = 0; k < nNic_; ++k)
    for (size_t l = 0; l < nNic_; ++l) nn_[k * nNic_ + l] = deviceToNicPath(sys, nicIds_[k], nicIds_[l]);
}

}  // namespace braid::topo
