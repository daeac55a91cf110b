#include "topo/topo.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "core/env.h"
#include "core/log.h"
#include "topo/detect.h"

namespace braid::topo {

P2pPolicy p2pPolicyFromEnv(const System& sys) {
  P2pPolicy p;
  p.level = PathType::Pxb;
  bool amd = !sys.cpus.empty() && sys.node(sys.cpus[0]).vendor == "AuthenticAMD";
  if (amd && sys.gpus.size() <= 2) p.level = PathType::Sys;
  if (const char* v = env::get("NCCL_P2P_DISABLE"); v && std::atoi(v) != 0) {
    p.level = PathType::Loc;
  } else if (const char* lvl = env::get("NCCL_P2P_LEVEL")) {
    if (auto t = parsePathLevel(lvl)) p.level = *t;
    else BRAID_WARN("NCCL_P2P_LEVEL=%s is not a path level (LOC, NVL, NVB, PIX, PXB, PHB, SYS or 0-5); ignored", lvl);
  }
  if (const char* v = env::get("NCCL_NVB_DISABLE"); v && std::atoi(v) != 0) p.nvbAllowed = false;
  return p;
}

namespace {

struct GpuGroup {
  int gpu;                 // node id
  std::vector<int> ranks;  // ascending
};

std::vector<int> expand(const std::vector<int>& gpuOrder, const std::map<int, std::vector<int>>& ranksOfGpu) {
  std::vector<int> out;
  for (int g : gpuOrder) {
    const auto& r = ranksOfGpu.at(g);
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

bool better(const Path& a, const Path& b) { return a.type < b.type || (a.type == b.type && a.bw > b.bw + 1e-9); }

}  // namespace

HostChains hostChains(const System& sys, const std::vector<RankLocation>& ranks, uint64_t hostHash, int nChannels,
                      int nHosts, const P2pPolicy& policy) {
  HostChains hc;
  hc.hostHash = hostHash;
  nChannels = std::clamp(nChannels, 1, 64);
  std::vector<RankLocation> mine;
  for (const auto& r : ranks)
    if (r.hostHash == hostHash) mine.push_back(r);
  std::sort(mine.begin(), mine.end(), [](const RankLocation& a, const RankLocation& b) { return a.rank < b.rank; });
  if (mine.empty()) return hc;

  // Place every rank on a GPU of the graph, by PCI address.
  std::map<int, std::vector<int>> ranksOfGpu;
  std::string unknown;
  for (const auto& r : mine) {
    int g = -1;
    if (!r.busId.empty()) {
      if (auto b = normalizeBusId(r.busId)) {
        g = sys.findBusId(*b);
        if (g >= 0 && sys.node(g).type != NodeType::Gpu) g = -1;
      }
    }
    if (g < 0) {
      if (!unknown.empty()) unknown += ", ";
      unknown += "rank " + std::to_string(r.rank) + (r.busId.empty() ? " (no GPU)" : " (GPU " + r.busId + " not in the topology)");
      continue;
    }
    ranksOfGpu[g].push_back(r.rank);
  }
  auto fallback = [&](const std::string& why) {
    std::vector<int> order;
    for (const auto& r : mine) order.push_back(r.rank);
    hc.chains.assign(static_cast<size_t>(nChannels), order);
    hc.bw.assign(static_cast<size_t>(nChannels), 0.0);
    hc.nicIn.assign(static_cast<size_t>(nChannels), "");
    hc.nicOut.assign(static_cast<size_t>(nChannels), "");
    hc.worst = PathType::Sys;
    hc.distinct = 1;
    hc.fallback = true;
    hc.note = why;
    return hc;
  };
  if (!unknown.empty()) return fallback("ranks in rank order: " + unknown);

  // GPUs in PCI address order: the same on every process, whatever its CUDA numbering.
  std::vector<int> gpus;
  for (const auto& [g, r] : ranksOfGpu) gpus.push_back(g);
  std::sort(gpus.begin(), gpus.end(), [&](int a, int b) { return sys.node(a).busId < sys.node(b).busId; });

  SearchOptions opt;
  opt.maxChannels = nChannels;
  opt.p2p = policy;
  SearchResult res;
  std::vector<int> plannedNic;  // per searched channel, the NIC it enters through (multi-host)
  std::vector<int> nicIds;
  if (nHosts <= 1) {
    res = searchRings(sys, gpus, opt);
  } else {
    int host = sys.node(gpus[0]).host;
    for (int n : sys.nics)
      if (sys.node(n).alias < 0 && sys.node(n).host == host) nicIds.push_back(n);
    // NICs closest to the ranks' GPUs first; channels take them in turn.
    std::vector<std::pair<Path, int>> ranked;
    for (int n : nicIds) {
      Path best;
      best.type = PathType::Dis;
      for (int g : gpus) {
        Path p = deviceToNicPath(sys, g, n);
        if (better(p, best)) best = p;
      }
      ranked.emplace_back(best, n);
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first.type < b.first.type; });
    // Keep only the NICs as close as the best one: a far NIC would slow every channel it carries.
    nicIds.clear();
    for (const auto& [p, n] : ranked)
      if (ranked.empty() || p.type == ranked.front().first.type) nicIds.push_back(n);
    std::vector<std::pair<int, int>> ends;
    if (nicIds.empty()) {
      ends.emplace_back(gpus.front(), gpus.back());
      plannedNic.push_back(-1);
    } else {
      for (size_t k = 0; k < nicIds.size(); ++k) {
        int nic = nicIds[k];
        std::vector<int> byDistance = gpus;
        std::stable_sort(byDistance.begin(), byDistance.end(),
                         [&](int a, int b) { return better(deviceToNicPath(sys, a, nic), deviceToNicPath(sys, b, nic)); });
        int entry = byDistance[0];
        int exit = byDistance.size() > 1 ? byDistance[1] : entry;
        ends.emplace_back(entry, exit);
        plannedNic.push_back(nic);
      }
    }
    // One channel per near NIC at least, so that every NIC carries traffic.
    opt.minChannels = std::min<int>(nChannels, static_cast<int>(ends.size()));
    res = searchChains(sys, gpus, ends, opt);
  }

  size_t k = res.channels.size();
  hc.distinct = static_cast<int>(k);
  hc.worst = res.worst;
  hc.fallback = res.fallback;
  if (res.fallback) hc.note = "no ring fits the links of this host; GPUs in address order";
  std::map<int, int> channelsPerNic;
  for (int c = 0; c < nChannels; ++c) {
    size_t i = static_cast<size_t>(c) % k;
    hc.chains.push_back(expand(res.channels[i], ranksOfGpu));
    double bw = static_cast<size_t>(nChannels) > k ? res.speed * static_cast<double>(k) / nChannels : res.speed;
    hc.bw.push_back(bw);
    int nic = plannedNic.empty() ? -1 : plannedNic[i % plannedNic.size()];
    hc.nicIn.push_back(nic >= 0 ? sys.node(nic).name : "");
    // Data leaves through the NIC nearest the chain's last GPU.
    int out = -1;
    if (!nicIds.empty()) {
      Path best;
      best.type = PathType::Dis;
      for (int n : nicIds) {
        Path p = deviceToNicPath(sys, res.channels[i].back(), n);
        if (better(p, best) || (n == nic && p.type == best.type)) {
          best = p;
          out = n;
        }
      }
    }
    hc.nicOut.push_back(out >= 0 ? sys.node(out).name : "");
    if (nic >= 0) ++channelsPerNic[nic];
  }
  // Channels that share a NIC share its bandwidth.
  if (nHosts > 1)
    for (int c = 0; c < nChannels; ++c) {
      int nic = plannedNic.empty() ? -1 : plannedNic[(static_cast<size_t>(c) % k) % plannedNic.size()];
      if (nic < 0) continue;
      double nicBw = 0;
      for (int net : sys.nets)
        if (sys.node(net).parent == nic) nicBw += netBw(sys.node(net).speedMbps);
      if (nicBw <= 0) nicBw = sys.node(nic).upBw;
      hc.bw[static_cast<size_t>(c)] = std::min(hc.bw[static_cast<size_t>(c)], nicBw / channelsPerNic[nic]);
    }
  return hc;
}

std::vector<std::vector<int>> joinHostChains(const std::vector<HostChains>& hosts, int nChannels, RingInfo* info) {
  nChannels = std::clamp(nChannels, 1, 64);
  std::vector<std::vector<int>> rings(static_cast<size_t>(nChannels));
  RingInfo local;
  RingInfo& ri = info ? *info : local;
  ri = RingInfo{};
  ri.bw.assign(static_cast<size_t>(nChannels), hosts.empty() ? 0.0 : 1e300);
  ri.nicIn.assign(static_cast<size_t>(nChannels), "");
  ri.nicOut.assign(static_cast<size_t>(nChannels), "");
  ri.searchedRings = hosts.empty() ? 0 : 1 << 30;
  for (const auto& h : hosts) {
    for (size_t c = 0; c < rings.size(); ++c) {
      const auto& chain = h.chains.empty() ? std::vector<int>{} : h.chains[c % h.chains.size()];
      rings[c].insert(rings[c].end(), chain.begin(), chain.end());
      double bw = h.bw.empty() ? 0.0 : h.bw[c % h.bw.size()];
      ri.bw[c] = std::min(ri.bw[c], bw);
      if (ri.nicIn[c].empty() && !h.nicIn.empty()) ri.nicIn[c] = h.nicIn[c % h.nicIn.size()];
      if (ri.nicOut[c].empty() && !h.nicOut.empty()) ri.nicOut[c] = h.nicOut[c % h.nicOut.size()];
    }
    ri.worstIntra = std::max(ri.worstIntra, h.worst);
    ri.searchedRings = std::min(ri.searchedRings, std::max(1, h.distinct));
    if (h.fallback) {
      ri.fallback = true;
      if (!ri.note.empty()) ri.note += "; ";
      ri.note += h.note;
    }
  }
  if (hosts.empty()) ri.searchedRings = 0;
  std::set<std::vector<int>> orders(rings.begin(), rings.end());
  ri.distinctRings = hosts.empty() ? 0 : static_cast<int>(orders.size());
  return rings;
}

std::vector<int> nodeOfRanks(const std::vector<RankLocation>& ranks) {
  const size_t n = ranks.size();
  std::vector<uint64_t> hostOf(n);
  std::vector<bool> seen(n, false);
  for (const auto& r : ranks) {
    if (r.rank < 0 || static_cast<size_t>(r.rank) >= n || seen[static_cast<size_t>(r.rank)]) return {};
    seen[static_cast<size_t>(r.rank)] = true;
    hostOf[static_cast<size_t>(r.rank)] = r.hostHash;
  }
  std::map<uint64_t, int> idOf;
  std::vector<int> nodeOf(n);
  for (size_t r = 0; r < n; ++r) nodeOf[r] = idOf.emplace(hostOf[r], static_cast<int>(idOf.size())).first->second;
  if (idOf.size() <= 1) return {};
  return nodeOf;
}

std::vector<std::vector<int>> ringOrders(const System& sys, const std::vector<RankLocation>& ranks, int nChannels,
                                         RingInfo* info) {
  // Hosts in the order of their lowest rank.
  std::map<uint64_t, int> lowest;
  for (const auto& r : ranks) {
    auto it = lowest.find(r.hostHash);
    if (it == lowest.end() || r.rank < it->second) lowest[r.hostHash] = r.rank;
  }
  std::vector<std::pair<int, uint64_t>> order;
  for (const auto& [h, r] : lowest) order.emplace_back(r, h);
  std::sort(order.begin(), order.end());
  P2pPolicy policy = p2pPolicyFromEnv(sys);
  std::vector<HostChains> hosts;
  for (const auto& [r, h] : order)
    hosts.push_back(hostChains(sys, ranks, h, nChannels, static_cast<int>(order.size()), policy));
  return joinHostChains(hosts, nChannels, info);
}

std::vector<Diagnostic> mergeLiveGpus(XmlElement* fileXml, const std::string& fileName, const XmlElement& liveXml) {
  std::vector<Diagnostic> notes;
  struct LiveGpu {
    std::string busId;
    int numa;
    const XmlElement* pci;
  };
  std::vector<LiveGpu> live;
  std::function<void(const XmlElement&, int)> walkLive = [&](const XmlElement& e, int numa) {
    for (const auto& c : e.children) {
      if (c.name == "cpu") walkLive(c, std::atoi(c.attrOr("numaid", "-1").c_str()));
      else if (c.name == "pci") {
        bool isGpu = std::any_of(c.children.begin(), c.children.end(), [](const XmlElement& x) { return x.name == "gpu"; });
        if (auto b = normalizeBusId(c.attrOr("busid", "")); b && isGpu) live.push_back({*b, numa, &c});
        walkLive(c, numa);
      }
    }
  };
  walkLive(liveXml, -1);

  auto hasGpu = [](const XmlElement& e) {
    return std::any_of(e.children.begin(), e.children.end(), [](const XmlElement& x) { return x.name == "gpu"; });
  };
  std::map<std::string, const LiveGpu*> liveById;
  for (const auto& g : live) liveById[g.busId] = &g;

  // First pass, read only: which live GPUs the file lacks, and which file GPUs are not live.
  std::set<std::string> inFile;
  bool fileHasGpus = false;
  std::function<void(const XmlElement&)> survey = [&](const XmlElement& e) {
    for (const auto& c : e.children) {
      if (c.name == "gpu") fileHasGpus = true;
      if (c.name == "pci") {
        if (auto b = normalizeBusId(c.attrOr("busid", ""))) {
          inFile.insert(*b);
          if (!live.empty() && hasGpu(c) && !liveById.count(*b))
            notes.push_back({Diagnostic::Warn, fileName + ":" + std::to_string(c.line) + ": GPU " + *b +
                                                   " is not on this machine; kept in the graph, where no rank will use it"});
        }
      }
      survey(c);
    }
  };
  survey(*fileXml);

  // Second pass: GPUs the file knows only as <pci> get their <gpu> element. Elements are edited
  // in place while walking, never through saved pointers (adding children moves vectors).
  std::function<void(XmlElement&)> fill = [&](XmlElement& e) {
    for (auto& c : e.children) {
      auto b = c.name == "pci" ? normalizeBusId(c.attrOr("busid", "")) : std::nullopt;
      auto it = b ? liveById.find(*b) : liveById.end();
      if (it != liveById.end() && !hasGpu(c)) {
        for (const auto& x : it->second->pci->children)
          if (x.name == "gpu") c.children.push_back(x);
        if (!c.attr("class")) c.setAttr("class", it->second->pci->attrOr("class", "0x030200"));
        notes.push_back({Diagnostic::Info, fileName + ": GPU " + *b + " is listed only as <pci>; its <gpu> comes from live detection"});
      }
      fill(c);
    }
  };
  fill(*fileXml);

  // Last: live GPUs the file lacks go under the CPU of their NUMA node (or the first CPU).
  for (const auto& g : live) {
    if (inFile.count(g.busId)) continue;
    XmlElement* cpu = nullptr;
    for (auto& c : fileXml->children) {
      if (c.name != "cpu") continue;
      if (!cpu) cpu = &c;
      if (std::atoi(c.attrOr("numaid", "-1").c_str()) == g.numa) {
        cpu = &c;
        break;
      }
    }
    if (!cpu) {
      cpu = &fileXml->addChild("cpu");
      cpu->setAttr("numaid", std::to_string(g.numa));
    }
    XmlElement copy = *g.pci;
    copy.children.erase(std::remove_if(copy.children.begin(), copy.children.end(),
                                       [](const XmlElement& x) { return x.name == "pci"; }),
                        copy.children.end());
    cpu->children.push_back(std::move(copy));
    notes.push_back({fileHasGpus ? Diagnostic::Warn : Diagnostic::Info,
                     fileName + ": GPU " + g.busId + " is on this machine but not in the file; added from live detection "
                                "under NUMA node " + cpu->attrOr("numaid", "-1")});
  }
  return notes;
}

namespace {

std::mutex gCacheMutex;
bool gCached = false;
std::string gCachedKey;
System gCache;
std::set<std::string> gDumped;

void logDiagnostics(const System& sys) {
  for (const auto& d : sys.diagnostics) {
    if (d.level == Diagnostic::Warn) BRAID_WARN("topology: %s", d.text.c_str());
    else BRAID_INFO(kGraph, "topology: %s", d.text.c_str());
  }
}

System buildCached(const std::string& file) {
  auto t0 = std::chrono::steady_clock::now();
  DetectReport report;
  XmlElement liveXml = detectTopologyXml(DetectOptions{}, &report);
  System sys;
  std::string error;
  bool fromFile = false;
  if (!file.empty()) {
    XmlElement fileXml;
    if (parseXmlFile(file, &fileXml, &error)) {
      std::vector<Diagnostic> notes = mergeLiveGpus(&fileXml, file, liveXml);
      if (buildSystem(std::move(fileXml), file, &sys, &error)) {
        sys.diagnostics.insert(sys.diagnostics.begin(), notes.begin(), notes.end());
        fromFile = true;
      }
    }
    if (!fromFile) BRAID_WARN("NCCL_TOPO_FILE: %s; using live detection instead", error.c_str());
  }
  if (!fromFile && !buildSystem(liveXml, "live detection", &sys, &error)) {
    // Detection writes only what the builder accepts; this is a bug, not a machine problem.
    BRAID_WARN("topology: live detection produced an unusable tree (%s); continuing without topology", error.c_str());
    XmlElement empty;
    empty.name = "system";
    empty.setAttr("version", "1");
    buildSystem(empty, "empty", &sys, &error);
  }
  sys.diagnostics.insert(sys.diagnostics.begin(), report.notes.begin(), report.notes.end());
  logDiagnostics(sys);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  size_t nics = 0;
  for (int n : sys.nics) nics += sys.node(n).alias < 0;
  BRAID_INFO(kGraph | kInit,
             "topology from %s: %zu GPUs, %zu NICs, %zu NUMA nodes, NVML %s; %.1f ms (detection %.1f: CUDA %.1f, NVML %.1f)",
             sys.source.c_str(), sys.gpus.size(), nics, sys.cpus.size(), report.nvmlLoaded ? "yes" : "no", ms,
             report.totalMs, report.cudaMs, report.nvmlMs);
  return sys;
}

}  // namespace

System loadSystem(int rank) {
  std::string file = env::getString("NCCL_TOPO_FILE");
  std::lock_guard<std::mutex> lock(gCacheMutex);
  if (!gCached || gCachedKey != file) {
    gCache = buildCached(file);
    gCachedKey = file;
    gCached = true;
  }
  std::string dump = env::getString("NCCL_TOPO_DUMP_FILE");
  if (!dump.empty() && rank == env::getInt("NCCL_TOPO_DUMP_FILE_RANK", 0) && !gDumped.count(dump)) {
    std::string error;
    if (writeXmlFile(dump, gCache.xml, &error)) {
      BRAID_INFO(kGraph, "topology written to NCCL_TOPO_DUMP_FILE=%s", dump.c_str());
      gDumped.insert(dump);
    } else {
      BRAID_WARN("NCCL_TOPO_DUMP_FILE: %s", error.c_str());
    }
  }
  return gCache;
}

void resetSystemCache() {
  std::lock_guard<std::mutex> lock(gCacheMutex);
  gCached = false;
  gCache = System{};
  gDumped.clear();
}

}  // namespace braid::topo
