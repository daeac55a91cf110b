#include "api/tuner_inputs.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <utility>

#include "topo/paths.h"
#include "topo/types.h"

namespace braid::api {

namespace {

// The GPU node of a bus id in `sys`, -1 when the topology does not have it.
int gpuNode(const topo::System& sys, const std::string& busId) {
  if (busId.empty()) return -1;
  auto normalized = topo::normalizeBusId(busId);
  if (!normalized) return -1;
  const int node = sys.findBusId(*normalized);
  return node >= 0 && sys.node(node).type == topo::NodeType::Gpu ? node : -1;
}

bool sameGpu(const RankPlace& a, const RankPlace& b) {
  if (a.host != b.host || a.busId.empty() || b.busId.empty()) return false;
  auto na = topo::normalizeBusId(a.busId), nb = topo::normalizeBusId(b.busId);
  return na && nb ? *na == *nb : a.busId == b.busId;
}

// One direction of the hop between two GPUs of the topology.
algo::Hops gpuHop(const topo::System& sys, int from, int to, bool p2pDisabled) {
  if (p2pDisabled) {
    // The FIFO is pinned host memory: the bytes go up one GPU's PCIe path and down the other's.
    const topo::Path p = topo::pciPath(sys, from, to, /*viaCpu=*/true);
    return {algo::LinkKind::HostStaged, from == to ? 0.0 : p.bw};
  }
  // Peer access never routes through a third GPU (NCCL's NVB paths need its proxy): without an
  // NVLink of their own (direct or through the NVSwitch), two GPUs talk over PCIe.
  const topo::Path p = topo::gpuPath(sys, from, to, /*nvbAllowed=*/false);
  switch (p.type) {
    case topo::PathType::Loc: return {algo::LinkKind::SameGpu, 0.0};
    case topo::PathType::Nvl: return {algo::LinkKind::NvLink, p.bw};
    case topo::PathType::Net: return {algo::LinkKind::Network, 0.0};
    case topo::PathType::Dis: return {algo::LinkKind::Pcie, 0.0};
    default: return {algo::LinkKind::Pcie, p.bw};
  }
}

algo::Hops oneWay(const topo::System& sys, const RankPlace& a, const RankPlace& b, int ga, int gb, bool p2pDisabled) {
  if (a.host != b.host) return {algo::LinkKind::Network, 0.0};
  if (p2pDisabled) return ga >= 0 && gb >= 0 ? gpuHop(sys, ga, gb, true) : algo::Hops{algo::LinkKind::HostStaged, 0.0};
  if (sameGpu(a, b)) return {algo::LinkKind::SameGpu, 0.0};
  if (ga < 0 || gb < 0) return {algo::LinkKind::Pcie, 0.0};  // a GPU the topology does not show
  return gpuHop(sys, ga, gb, false);
}

}  // namespace

algo::Hops hopBetween(const topo::System& sys, const RankPlace& a, const RankPlace& b, bool p2pDisabled) {
  const int ga = gpuNode(sys, a.busId), gb = gpuNode(sys, b.busId);
  return algo::combine(oneWay(sys, a, b, ga, gb, p2pDisabled), oneWay(sys, b, a, gb, ga, p2pDisabled));
}

LinkFacts linkFacts(const topo::System& sys, const std::vector<RankPlace>& ranks, const std::vector<int>& ring, int self,
                    bool p2pDisabled) {
  LinkFacts f;
  const int n = static_cast<int>(ranks.size());
  std::vector<int> node(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) node[r] = gpuNode(sys, ranks[r].busId);
  // Ranks that share GPUs meet over and over: one topology path per pair of GPUs.
  std::map<std::pair<int, int>, algo::Hops> perGpuPair;
  auto hop = [&](int a, int b) {
    const RankPlace &ra = ranks[a], &rb = ranks[b];
    if (node[a] < 0 || node[b] < 0 || ra.host != rb.host || sameGpu(ra, rb))
      return algo::combine(oneWay(sys, ra, rb, node[a], node[b], p2pDisabled),
                           oneWay(sys, rb, ra, node[b], node[a], p2pDisabled));
    const auto key = std::minmax(node[a], node[b]);
    auto it = perGpuPair.find(key);
    if (it == perGpuPair.end())
      it = perGpuPair.emplace(key, algo::combine(gpuHop(sys, key.first, key.second, p2pDisabled),
                                                 gpuHop(sys, key.second, key.first, p2pDisabled))).first;
    return it->second;
  };
  std::vector<int> order = ring;
  if (static_cast<int>(order.size()) != n) {
    order.resize(ranks.size());
    std::iota(order.begin(), order.end(), 0);
  }
  bool first = true;
  for (int i = 0; i < n && n > 1; ++i) {
    const algo::Hops h = hop(order[i], order[(i + 1) % n]);
    f.ring = first ? h : algo::combine(f.ring, h);
    first = false;
  }
  first = true;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      const algo::Hops h = hop(a, b);
      f.mesh = first ? h : algo::combine(f.mesh, h);
      first = false;
    }
  if (p2pDisabled && n > 1) f.ring.kind = f.mesh.kind = algo::LinkKind::HostStaged;
  std::map<std::pair<uint64_t, std::string>, int> perGpu;
  for (const RankPlace& r : ranks) {
    auto normalized = topo::normalizeBusId(r.busId);
    f.ranksPerGpu = std::max(f.ranksPerGpu, ++perGpu[{r.host, normalized ? *normalized : r.busId}]);
  }
  f.toRank.resize(ranks.size());
  for (int r = 0; r < n; ++r)
    f.toRank[r] = r == self ? (p2pDisabled ? algo::Hops{algo::LinkKind::HostStaged, 0.0} : algo::Hops{}) : hop(self, r);
  return f;
}

algo::ProtocolSet defaultProtocols(const LinkFacts& links) {
  algo::ProtocolSet set = algo::protocolBit(algo::Protocol::Simple);
  if (algo::combine(links.ring, links.mesh).kind == algo::LinkKind::SameGpu) set |= algo::protocolBit(algo::Protocol::LL);
  return set;
}

algo::ProtocolSet deviceProtocols(const LinkFacts& links, bool ncclProtoSet) {
  return ncclProtoSet ? kExecutorProtocols : defaultProtocols(links);
}

algo::Protocol p2pLaunchProtocol(const algo::TuningConstraints& constraints, algo::ProtocolSet protocols) {
  const algo::ProtocolSet set = constraints.protocolsFor(algo::Coll::SendRecv) & protocols;
  for (algo::Protocol p : {algo::Protocol::LL, algo::Protocol::LL128})
    if (set == algo::protocolBit(p)) return p;
  return algo::Protocol::Simple;
}

algo::ProtocolSet deviceTaskProtocols(algo::Coll coll, const algo::TuningConstraints& constraints,
                                      algo::ProtocolSet protocols, std::optional<algo::Protocol> launch) {
  if (launch) return algo::protocolBit(*launch);
  if (coll == algo::Coll::SendRecv) return algo::protocolBit(p2pLaunchProtocol(constraints, protocols));
  return protocols;
}

std::string describeHops(const algo::Hops& h) {
  char buf[64];
  if (h.gbps > 0) std::snprintf(buf, sizeof(buf), "%s %.1f GB/s", algo::linkKindName(h.kind), h.gbps);
  else std::snprintf(buf, sizeof(buf), "%s (the tuner's default bandwidth)", algo::linkKindName(h.kind));
  return buf;
}

}  // namespace braid::api
