#include "topo/system.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

namespace braid::topo {

int System::findBusId(const std::string& busId) const {
  auto it = busIndex.find(busId);
  return it == busIndex.end() ? -1 : it->second;
}

int System::findGpuByDev(int dev) const {
  for (int g : gpus)
    if (node(g).dev == dev) return g;
  return -1;
}

int System::linkBetween(int a, int b) const {
  if (a < 0 || static_cast<size_t>(a) >= adjacency.size()) return -1;
  for (int l : adjacency[static_cast<size_t>(a)]) {
    const Link& k = links[static_cast<size_t>(l)];
    if ((k.a == a && k.b == b) || (k.a == b && k.b == a)) return l;
  }
  return -1;
}

bool System::hasWarnings() const {
  for (const auto& d : diagnostics)
    if (d.level == Diagnostic::Warn) return true;
  return false;
}

namespace {

struct PendingNvLink {
  int gpu;
  std::string target;
  std::string tclass;
  int count;
  int line;
};

class Builder {
 public:
  Builder(System* sys, const std::string& source) : s_(*sys), src_(source) {}

  bool build(std::string* error) {
    const XmlElement& root = s_.xml;
    if (root.name != "system") {
      fail(root.line, "the root element is <" + root.name + ">, expected <system> (an NCCL topology file)");
    } else {
      const std::string* version = root.attr("version");
      if (!version) diag(Diagnostic::Info, root.line, "<system> has no version attribute; reading it as version 1");
      else if (*version != "1")
        diag(Diagnostic::Warn, root.line, "<system version=\"" + *version + "\">: braid reads version 1; reading it anyway");
      for (const auto& a : root.attrs)
        if (a.first != "version" && a.first != "name") unknownAttr(root, a.first);
      for (const auto& c : root.children) {
        if (!err_.empty()) break;
        if (c.name == "cpu") walkCpu(c);
        else unknownElement(c, root);
      }
    }
    if (err_.empty()) finish();
    if (!err_.empty()) {
      *error = err_;
      return false;
    }
    return true;
  }

 private:
  std::string where(int line) const { return line > 0 ? src_ + ":" + std::to_string(line) : src_; }
  void diag(Diagnostic::Level level, int line, const std::string& text) {
    s_.diagnostics.push_back({level, where(line) + ": " + text});
  }
  void fail(int line, const std::string& text) {
    if (err_.empty()) err_ = where(line) + ": " + text;
  }
  void unknownElement(const XmlElement& e, const XmlElement& parent) {
    diag(Diagnostic::Warn, e.line, "unknown element <" + e.name + "> inside <" + parent.name + "> ignored");
  }
  void unknownAttr(const XmlElement& e, const std::string& key) {
    diag(Diagnostic::Info, e.line, "unknown attribute " + key + " of <" + e.name + "> ignored");
  }
  void checkAttrs(const XmlElement& e, std::initializer_list<const char*> known) {
    for (const auto& a : e.attrs) {
      bool ok = false;
      for (const char* k : known) ok = ok || a.first == k;
      if (!ok) unknownAttr(e, a.first);
    }
  }

  // Integer attribute in [lo, hi]; a missing one gives `fallback` silently, a bad one with a warning.
  long intAttr(const XmlElement& e, const char* key, long lo, long hi, long fallback) {
    const std::string* v = e.attr(key);
    if (!v || v->empty()) return fallback;
    const char* p = v->c_str();
    char* end = nullptr;
    errno = 0;
    long x = (v->size() > 2 && (*v)[0] == '0' && ((*v)[1] == 'x' || (*v)[1] == 'X')) ? std::strtol(p, &end, 16)
                                                                                    : std::strtol(p, &end, 10);
    if (end == p || *end != '\0' || errno != 0) {
      diag(Diagnostic::Warn, e.line, std::string(key) + "=\"" + *v + "\" of <" + e.name + "> is not an integer; using " +
                                        std::to_string(fallback));
      return fallback;
    }
    if (x < lo || x > hi) {
      diag(Diagnostic::Warn, e.line, std::string(key) + "=\"" + *v + "\" of <" + e.name + "> is out of range [" +
                                        std::to_string(lo) + ", " + std::to_string(hi) + "]; using " +
                                        std::to_string(fallback));
      return fallback;
    }
    return x;
  }
  double doubleAttr(const XmlElement& e, const char* key, double lo, double hi, double fallback) {
    const std::string* v = e.attr(key);
    if (!v || v->empty()) return fallback;
    char* end = nullptr;
    double x = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(x >= lo && x <= hi)) {
      diag(Diagnostic::Warn, e.line, std::string(key) + "=\"" + *v + "\" of <" + e.name + "> is not a number in [" +
                                        std::to_string(lo) + ", " + std::to_string(hi) + "]; using " +
                                        std::to_string(fallback));
      return fallback;
    }
    return x;
  }
  uint64_t hexAttr(const XmlElement& e, const char* key) {
    const std::string* v = e.attr(key);
    if (!v || v->empty()) return 0;
    const char* p = v->c_str();
    if (v->size() > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) p += 2;
    char* end = nullptr;
    errno = 0;
    unsigned long long x = std::strtoull(p, &end, 16);
    if (end == p || *end != '\0' || errno != 0) {
      diag(Diagnostic::Warn, e.line, std::string(key) + "=\"" + *v + "\" of <" + e.name + "> is not a hex number; using 0");
      return 0;
    }
    return x;
  }

  // A node under `parent`, in its NUMA domain and host.
  Node childOf(int parent, NodeType type, int line) const {
    Node n;
    n.type = type;
    n.line = line;
    n.parent = parent;
    n.cpu = s_.nodes[static_cast<size_t>(parent)].cpu;
    n.host = s_.nodes[static_cast<size_t>(parent)].host;
    return n;
  }
  int addNode(Node n) {
    s_.nodes.push_back(std::move(n));
    return static_cast<int>(s_.nodes.size()) - 1;
  }
  int addLink(int a, int b, LinkType t, double bw, int count = 0) {
    s_.links.push_back(Link{a, b, t, bw, count});
    return static_cast<int>(s_.links.size()) - 1;
  }

  void walkCpu(const XmlElement& e) {
    checkAttrs(e, {"numaid", "affinity", "arch", "vendor", "familyid", "modelid", "host_hash"});
    Node n;
    n.type = NodeType::Cpu;
    n.line = e.line;
    n.numaId = static_cast<int>(intAttr(e, "numaid", -1, 65535, -1));
    std::string aff = e.attrOr("affinity", "");
    bool affOk = true;
    for (char c : aff) affOk = affOk && (std::isxdigit(static_cast<unsigned char>(c)) || c == ',');
    if (!affOk) {
      diag(Diagnostic::Warn, e.line, "affinity=\"" + aff + "\" of <cpu> is not a hex CPU mask; CPU affinity unknown");
      aff.clear();
    }
    n.affinity = aff;
    n.arch = e.attrOr("arch", "");
    n.vendor = e.attrOr("vendor", "");
    n.familyId = static_cast<int>(intAttr(e, "familyid", 0, 100000, -1));
    n.modelId = static_cast<int>(intAttr(e, "modelid", 0, 100000, -1));
    n.hostHash = hexAttr(e, "host_hash");
    int host = -1;
    for (size_t h = 0; h < s_.hosts.size(); ++h)
      if (s_.hosts[h].hostHash == n.hostHash) host = static_cast<int>(h);
    if (host < 0) {
      s_.hosts.push_back(Host{n.hostHash, {}, -1});
      host = static_cast<int>(s_.hosts.size()) - 1;
    }
    n.host = host;
    int id = addNode(n);
    s_.nodes[static_cast<size_t>(id)].cpu = id;
    s_.hosts[static_cast<size_t>(host)].cpus.push_back(id);
    s_.cpus.push_back(id);
    for (const auto& c : e.children) {
      if (!err_.empty()) return;
      if (c.name == "pci") walkPci(c, id);
      else if (c.name == "nic") walkNic(c, makeBareNic(c, id));
      else unknownElement(c, e);
    }
  }

  // A <nic> with no <pci> of its own (socket NICs, or a NIC behind a host bridge).
  int makeBareNic(const XmlElement& e, int parent) {
    Node n = childOf(parent, NodeType::Nic, e.line);
    int id = addNode(n);
    s_.nics.push_back(id);
    // Its bandwidth to the parent is set from its ports in walkNic.
    s_.nodes[static_cast<size_t>(id)].upLink = addLink(id, parent, LinkType::Pci, 0);
    return id;
  }

  void walkPci(const XmlElement& e, int parent) {
    checkAttrs(e, {"busid", "class", "vendor", "device", "subsystem_vendor", "subsystem_device", "link_speed",
                   "link_width", "keep"});
    const std::string* bus = e.attr("busid");
    if (!bus) {
      fail(e.line, "<pci> has no busid attribute");
      return;
    }
    auto busId = normalizeBusId(*bus);
    if (!busId) {
      fail(e.line, "busid=\"" + *bus + "\" of <pci> is not a PCI address (expected dddd:bb:dd.f)");
      return;
    }
    auto seen = busLines_.find(*busId);
    if (seen != busLines_.end()) {
      fail(e.line, "busid " + *busId + " appears twice (first at line " + std::to_string(seen->second) + ")");
      return;
    }
    busLines_[*busId] = e.line;

    Node n = childOf(parent, NodeType::Pci, e.line);  // the class below may make it a GPU, NIC, ...
    n.busId = *busId;
    if (const std::string* cls = e.attr("class"); cls && !cls->empty()) {
      uint64_t v = hexAttr(e, "class");
      if (v <= 0xffffff) {
        n.pciClass = static_cast<uint32_t>(v);
        n.hasClass = true;
      }
    }
    n.upWidth = static_cast<int>(intAttr(e, "link_width", 0, 32, 0));
    std::optional<int> rate;
    if (const std::string* sp = e.attr("link_speed"); sp && !sp->empty()) {
      rate = pciLaneRate(*sp);
      if (!rate)
        diag(Diagnostic::Warn, e.line, "link_speed=\"" + *sp + "\" is not a PCIe speed; counting it as 8 GT/s (Gen3)");
    }
    n.upBw = pciLinkBw(n.upWidth, rate);

    const XmlElement* gpu = nullptr;
    const XmlElement* nic = nullptr;
    for (const auto& c : e.children) {
      if (c.name == "gpu") {
        if (gpu) diag(Diagnostic::Warn, c.line, "second <gpu> inside one <pci> ignored");
        else gpu = &c;
      } else if (c.name == "nic") {
        if (nic) diag(Diagnostic::Warn, c.line, "second <nic> inside one <pci> ignored");
        else nic = &c;
      }
    }
    int cls = n.hasClass ? static_cast<int>(n.pciClass >> 16) : -1;
    bool leaf = e.children.empty();
    if (gpu) {
      n.type = NodeType::Gpu;
      if (cls >= 0 && cls != 0x03)
        diag(Diagnostic::Warn, e.line, "<gpu> inside a <pci> of class " + e.attrOr("class", "") + " (not a display controller)");
    } else if (nic && (cls < 0 || cls == 0x02)) {
      n.type = NodeType::Nic;
    } else if (leaf && cls == 0x03) {
      n.type = NodeType::Gpu;
      n.skeleton = true;
    } else if (leaf && cls == 0x02) {
      n.type = NodeType::Nic;
      n.skeleton = true;
    } else {
      n.type = NodeType::Pci;
    }
    if (n.type == NodeType::Gpu && gpu) readGpu(*gpu, &n);
    int id = addNode(n);
    s_.busIndex[*busId] = id;
    s_.nodes[static_cast<size_t>(id)].upLink = addLink(id, parent, LinkType::Pci, n.upBw);
    if (n.type == NodeType::Gpu) {
      s_.gpus.push_back(id);
      if (gpu) readNvLinks(*gpu, id);
    }
    if (n.type == NodeType::Nic) s_.nics.push_back(id);

    for (const auto& c : e.children) {
      if (!err_.empty()) return;
      if (c.name == "pci") walkPci(c, id);
      else if (&c == gpu) continue;
      else if (&c == nic) walkNic(c, n.type == NodeType::Nic ? id : makeBareNic(c, id));
      else if (c.name == "gpu" || c.name == "nic") continue;  // duplicates, reported above
      else if (c.name == "pcilink")
        diag(Diagnostic::Info, c.line, "<pcilink> (an extra link between PCI switches) is not modeled; ignored");
      else unknownElement(c, e);
    }
  }

  void readGpu(const XmlElement& g, Node* n) {
    checkAttrs(g, {"dev", "sm", "rank", "gdr", "keep", "mlopart"});
    n->dev = static_cast<int>(intAttr(g, "dev", 0, 4095, -1));
    n->sm = static_cast<int>(intAttr(g, "sm", 10, 1000, 0));
    if (n->sm == 0) diag(Diagnostic::Info, g.line, "<gpu> has no sm; NVLink bandwidth uses the oldest generation's");
    n->rank = static_cast<int>(intAttr(g, "rank", 0, 1 << 30, -1));
    n->gdr = intAttr(g, "gdr", 0, 1, 0) == 1;
  }

  void readNvLinks(const XmlElement& g, int gpuNode) {
    for (const auto& c : g.children) {
      if (c.name == "nvlink") {
        checkAttrs(c, {"target", "count", "tclass"});
        const std::string* target = c.attr("target");
        if (!target) {
          diag(Diagnostic::Warn, c.line, "<nvlink> has no target; ignored");
          continue;
        }
        int count = static_cast<int>(intAttr(c, "count", 1, 64, 0));
        if (count == 0) {
          diag(Diagnostic::Warn, c.line, "<nvlink> has no valid count (1..64); ignored");
          continue;
        }
        pending_.push_back({gpuNode, *target, c.attrOr("tclass", ""), count, c.line});
      } else if (c.name == "c2c") {
        diag(Diagnostic::Info, c.line, "<c2c> (GPU-CPU chip-to-chip link) is not modeled; ignored");
      } else {
        unknownElement(c, g);
      }
    }
  }

  void walkNic(const XmlElement& e, int nicNode) {
    checkAttrs(e, {});
    // The identity of a NIC without a PCI address is its ports; NCCL lists socket NICs again under
    // every CPU, and those repeats are one device.
    std::string key;
    for (const auto& c : e.children)
      if (c.name == "net") key += c.attrOr("name", "") + "/" + c.attrOr("dev", "") + ";";
    Node& nic = s_.nodes[static_cast<size_t>(nicNode)];
    if (nic.busId.empty() && !key.empty()) {
      auto [it, fresh] = bareNics_.try_emplace({nic.host, key}, nicNode);
      if (!fresh) {
        nic.alias = it->second;
        nic.name = s_.nodes[static_cast<size_t>(it->second)].name;
      }
    }
    double total = 0;
    for (const auto& c : e.children) {
      if (c.name != "net") {
        unknownElement(c, e);
        continue;
      }
      checkAttrs(c, {"name", "dev", "speed", "port", "latency", "guid", "maxconn", "gdr", "coll", "net", "gin", "rma",
                     "rail", "plane", "keep"});
      Node n = childOf(nicNode, NodeType::Net, c.line);
      n.netDev = static_cast<int>(intAttr(c, "dev", 0, 65535, -1));
      n.name = c.attrOr("name", "");
      if (n.name.empty()) {
        n.name = "net" + std::to_string(n.netDev);
        diag(Diagnostic::Warn, c.line, "<net> has no name; calling it " + n.name);
      }
      n.speedMbps = doubleAttr(c, "speed", -1, 1e8, 0);
      n.port = static_cast<int>(intAttr(c, "port", 0, 1 << 20, 0));
      n.guid = hexAttr(c, "guid");
      n.maxConn = static_cast<int>(intAttr(c, "maxconn", 0, 1 << 30, 64));
      n.gdr = intAttr(c, "gdr", 0, 1, 0) == 1;
      total += netBw(n.speedMbps);
      Node& nicRef = s_.nodes[static_cast<size_t>(nicNode)];
      if (nicRef.name.empty()) nicRef.name = n.name;
      if (nicRef.alias >= 0) continue;  // the first listing owns the ports
      double bw = netBw(n.speedMbps);
      int id = addNode(n);
      s_.nets.push_back(id);
      addLink(id, nicNode, LinkType::Net, bw);
    }
    Node& nicRef = s_.nodes[static_cast<size_t>(nicNode)];
    if (nicRef.busId.empty() && nicRef.upLink >= 0) {
      // A bare NIC's attachment is logical: as fast as its ports.
      s_.links[static_cast<size_t>(nicRef.upLink)].bw = total > 0 ? total : netBw(0);
    }
  }

  void finish() {
    assignGpuDevs();
    resolveNvLinks();
    // CPUs of one host are joined pairwise by the socket interconnect.
    for (auto& h : s_.hosts)
      for (size_t i = 0; i < h.cpus.size(); ++i)
        for (size_t j = i + 1; j < h.cpus.size(); ++j) {
          const Node& a = s_.nodes[static_cast<size_t>(h.cpus[i])];
          const Node& b = s_.nodes[static_cast<size_t>(h.cpus[j])];
          double bw = std::min(cpuInterconnectBw(a.arch, a.vendor, a.familyId, a.modelId),
                               cpuInterconnectBw(b.arch, b.vendor, b.familyId, b.modelId));
          addLink(h.cpus[i], h.cpus[j], LinkType::Sys, bw);
        }
    fixNarrowUplinks();
    std::stable_sort(s_.gpus.begin(), s_.gpus.end(),
                     [&](int a, int b) { return s_.nodes[static_cast<size_t>(a)].dev < s_.nodes[static_cast<size_t>(b)].dev; });
    std::stable_sort(s_.nets.begin(), s_.nets.end(), [&](int a, int b) {
      const Node& x = s_.nodes[static_cast<size_t>(a)];
      const Node& y = s_.nodes[static_cast<size_t>(b)];
      return x.host != y.host ? x.host < y.host : x.netDev < y.netDev;
    });
    s_.adjacency.assign(s_.nodes.size(), {});
    for (size_t l = 0; l < s_.links.size(); ++l) {
      s_.adjacency[static_cast<size_t>(s_.links[l].a)].push_back(static_cast<int>(l));
      s_.adjacency[static_cast<size_t>(s_.links[l].b)].push_back(static_cast<int>(l));
    }
  }

  // GPUs without a dev (static files list GPUs only as <pci>) get the free numbers in bus order;
  // a repeated dev is a broken file and the repeat is renumbered the same way.
  void assignGpuDevs() {
    std::set<int> used;
    std::vector<int> todo;
    for (int g : s_.gpus) {
      Node& n = s_.nodes[static_cast<size_t>(g)];
      if (n.dev >= 0 && used.insert(n.dev).second) continue;
      if (n.dev >= 0)
        diag(Diagnostic::Warn, n.line, "GPU dev " + std::to_string(n.dev) + " appears twice; renumbering this one");
      todo.push_back(g);
    }
    std::sort(todo.begin(), todo.end(), [&](int a, int b) {
      return s_.nodes[static_cast<size_t>(a)].busId < s_.nodes[static_cast<size_t>(b)].busId;
    });
    int next = 0;
    for (int g : todo) {
      while (used.count(next)) ++next;
      s_.nodes[static_cast<size_t>(g)].dev = next;
      used.insert(next);
    }
  }

  void resolveNvLinks() {
    std::map<std::pair<int, int>, std::pair<int, int>> pairCounts;  // (lo, hi) -> (lo->hi, hi->lo)
    std::map<int, int> nvsCounts;                                    // gpu -> links to NVSwitches
    for (const auto& p : pending_) {
      const Node& g = s_.nodes[static_cast<size_t>(p.gpu)];
      auto target = normalizeBusId(p.target);
      if (!target) {
        diag(Diagnostic::Warn, p.line, "nvlink target \"" + p.target + "\" is not a PCI address; ignored");
        continue;
      }
      std::string tc = p.tclass;
      for (auto& ch : tc) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      int targetNode = s_.findBusId(*target);
      bool toNvs = tc.rfind("0x068000", 0) == 0;
      bool toCpu = tc.rfind("0x068001", 0) == 0;
      bool toGpu = tc.rfind("0x03", 0) == 0;
      if (tc.empty()) {
        // No tclass: a GPU when the target is a GPU of this file, otherwise an NVSwitch.
        toGpu = targetNode >= 0 && s_.nodes[static_cast<size_t>(targetNode)].type == NodeType::Gpu;
        toNvs = !toGpu;
        diag(Diagnostic::Info, p.line, std::string("nvlink has no tclass; taking the target as ") + (toGpu ? "a GPU" : "an NVSwitch"));
      }
      if (toCpu) {
        diag(Diagnostic::Info, p.line, "NVLink to a CPU is not modeled (the GPU is reached through PCIe); ignored");
      } else if (toNvs) {
        nvsCounts[p.gpu] += p.count;
      } else if (toGpu) {
        if (*target == g.busId) {
          diag(Diagnostic::Warn, p.line, "nvlink from GPU " + g.busId + " to itself ignored (a known artifact of some VM dumps)");
        } else if (targetNode < 0) {
          diag(Diagnostic::Warn, p.line, "nvlink target " + *target + " is not in the file; ignored");
        } else if (s_.nodes[static_cast<size_t>(targetNode)].type != NodeType::Gpu) {
          diag(Diagnostic::Warn, p.line, "nvlink target " + *target + " is not a GPU; ignored");
        } else if (s_.nodes[static_cast<size_t>(targetNode)].host != g.host) {
          diag(Diagnostic::Warn, p.line, "nvlink target " + *target + " is on another host; ignored");
        } else {
          int lo = std::min(p.gpu, targetNode), hi = std::max(p.gpu, targetNode);
          auto& c = pairCounts[{lo, hi}];
          (p.gpu == lo ? c.first : c.second) += p.count;
        }
      } else {
        diag(Diagnostic::Warn, p.line, "nvlink tclass \"" + p.tclass + "\" is neither a GPU, an NVSwitch nor a CPU; ignored");
      }
    }
    for (const auto& [pair, counts] : pairCounts) {
      const Node& a = s_.nodes[static_cast<size_t>(pair.first)];
      const Node& b = s_.nodes[static_cast<size_t>(pair.second)];
      if (counts.first != counts.second && counts.first && counts.second)
        diag(Diagnostic::Info, a.line, "GPUs " + a.busId + " and " + b.busId + " list different NVLink counts (" +
                                           std::to_string(counts.first) + ", " + std::to_string(counts.second) + "); using the larger");
      int count = std::max(counts.first, counts.second);
      int sm = std::min(a.sm, b.sm);
      addLink(pair.first, pair.second, LinkType::Nvl, count * nvlinkBwPerLink(sm), count);
    }
    for (const auto& [gpu, count] : nvsCounts) {
      // Copies: addNode below may move the nodes.
      int host = s_.nodes[static_cast<size_t>(gpu)].host;
      int sm = s_.nodes[static_cast<size_t>(gpu)].sm;
      if (s_.hosts[static_cast<size_t>(host)].nvs < 0) {
        Node n;
        n.type = NodeType::Nvs;
        n.host = host;
        n.name = "nvswitch";
        s_.hosts[static_cast<size_t>(host)].nvs = addNode(n);
      }
      addLink(gpu, s_.hosts[static_cast<size_t>(host)].nvs, LinkType::Nvl, count * nvlinkBwPerLink(sm), count);
    }
  }

  // A switch whose uplink is far narrower than its widest device is a VM artifact (IBM's virtual
  // switches report 2.5 GT/s x1); model the uplink as wide as that device.
  void fixNarrowUplinks() {
    std::vector<double> widestChild(s_.nodes.size(), 0);
    for (size_t i = s_.nodes.size(); i-- > 0;) {
      Node& n = s_.nodes[i];
      if (n.type == NodeType::Pci && widestChild[i] > 0 && n.upBw * 4 < widestChild[i]) {
        char buf[160];
        std::snprintf(buf, sizeof(buf), "PCI switch %s uplink (%.2f GB/s) is narrower than a quarter of its widest device "
                      "(%.1f GB/s); modeled at %.1f GB/s", n.busId.c_str(), n.upBw, widestChild[i], widestChild[i]);
        diag(Diagnostic::Info, n.line, buf);
        n.upBw = widestChild[i];
        if (n.upLink >= 0) s_.links[static_cast<size_t>(n.upLink)].bw = n.upBw;
      }
      if (n.parent >= 0 && n.type != NodeType::Net && !n.busId.empty())
        widestChild[static_cast<size_t>(n.parent)] = std::max(widestChild[static_cast<size_t>(n.parent)], n.upBw);
    }
  }

  System& s_;
  const std::string& src_;
  std::string err_;
  std::map<std::string, int> busLines_;
  std::map<std::pair<int, std::string>, int> bareNics_;  // (host, ports) -> first listing
  std::vector<PendingNvLink> pending_;
};

}  // namespace

bool buildSystem(XmlElement xml, const std::string& source, System* out, std::string* error) {
  *out = System{};
  out->xml = std::move(xml);
  out->source = source;
  Builder b(out, source);
  if (!b.build(error)) {
    *out = System{};
    return false;
  }
  return true;
}

bool loadSystemFile(const std::string& path, System* out, std::string* error) {
  XmlElement root;
  if (!parseXmlFile(path, &root, error)) return false;
  return buildSystem(std::move(root), path, out, error);
}

std::string describeSystem(const System& sys) {
  std::string out;
  char buf[512];
  for (size_t h = 0; h < sys.hosts.size(); ++h) {
    std::snprintf(buf, sizeof(buf), "host %zu hash=0x%llx nvs=%d\n", h,
                  static_cast<unsigned long long>(sys.hosts[h].hostHash), sys.hosts[h].nvs);
    out += buf;
  }
  for (size_t i = 0; i < sys.nodes.size(); ++i) {
    const Node& n = sys.nodes[i];
    std::snprintf(buf, sizeof(buf), "node %zu %s parent=%d cpu=%d host=%d", i, nodeTypeName(n.type), n.parent, n.cpu, n.host);
    out += buf;
    if (!n.busId.empty()) {
      std::snprintf(buf, sizeof(buf), " bus=%s class=%s0x%06x upBw=%.3f", n.busId.c_str(), n.hasClass ? "" : "?",
                    n.pciClass, n.upBw);
      out += buf;
    }
    switch (n.type) {
      case NodeType::Cpu:
        std::snprintf(buf, sizeof(buf), " numa=%d affinity=%s arch=%s vendor=%s family=%d model=%d", n.numaId,
                      n.affinity.c_str(), n.arch.c_str(), n.vendor.c_str(), n.familyId, n.modelId);
        out += buf;
        break;
      case NodeType::Gpu:
        std::snprintf(buf, sizeof(buf), " dev=%d sm=%d rank=%d gdr=%d skeleton=%d", n.dev, n.sm, n.rank, n.gdr, n.skeleton);
        out += buf;
        break;
      case NodeType::Nic:
        std::snprintf(buf, sizeof(buf), " name=%s alias=%d skeleton=%d", n.name.c_str(), n.alias, n.skeleton);
        out += buf;
        break;
      case NodeType::Net:
        std::snprintf(buf, sizeof(buf), " name=%s dev=%d speed=%.0f port=%d guid=0x%llx maxconn=%d gdr=%d", n.name.c_str(),
                      n.netDev, n.speedMbps, n.port, static_cast<unsigned long long>(n.guid), n.maxConn, n.gdr);
        out += buf;
        break;
      default: break;
    }
    out += '\n';
  }
  for (const auto& l : sys.links) {
    std::snprintf(buf, sizeof(buf), "link %d-%d %s bw=%.3f count=%d\n", l.a, l.b, linkTypeName(l.type), l.bw, l.count);
    out += buf;
  }
  return out;
}

}  // namespace braid::topo
