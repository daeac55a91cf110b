#include "topo/matrix.h"

#include <cstdio>
#include <cstdlib>

namespace braid::topo {

std::vector<NicColumn> nicColumns(const System& sys, const PathMatrix& pm) {
  std::vector<NicColumn> cols;
  const auto& ids = pm.nicIds();
  for (size_t k = 0; k < ids.size(); ++k) {
    bool any = false;
    for (int net : sys.nets)
      if (sys.node(net).parent == ids[k]) {
        cols.push_back({static_cast<int>(k), net, sys.node(net).name});
        any = true;
      }
    if (!any) {
      const Node& n = sys.node(ids[k]);
      cols.push_back({static_cast<int>(k), ids[k], n.name.empty() ? "pci:" + n.busId : n.name});
    }
  }
  return cols;
}

std::string cpuListFromMask(const std::string& mask) {
  // Words are most significant first.
  std::vector<uint32_t> words;
  size_t start = 0;
  while (start <= mask.size()) {
    size_t comma = mask.find(',', start);
    std::string w = mask.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    words.push_back(static_cast<uint32_t>(std::strtoul(w.c_str(), nullptr, 16)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::string out;
  int runStart = -1;
  int total = static_cast<int>(words.size()) * 32;
  auto bit = [&](int i) {
    size_t word = words.size() - 1 - static_cast<size_t>(i / 32);
    return (words[word] >> (i % 32)) & 1u;
  };
  for (int i = 0; i <= total; ++i) {
    bool on = i < total && bit(i);
    if (on && runStart < 0) runStart = i;
    if (!on && runStart >= 0) {
      if (!out.empty()) out += ',';
      out += std::to_string(runStart);
      if (i - 1 > runStart) out += "-" + std::to_string(i - 1);
      runStart = -1;
    }
  }
  return out;
}

namespace {

std::string smiCell(const Path& p) {
  if (p.type == PathType::Loc) return " X ";
  if (p.type == PathType::Nvl) return "NV" + std::to_string(p.nvlinks);
  return smiPathName(p.type);
}

// nvidia-smi shows the PCIe relation for pairs that NCCL would join through a third GPU.
Path smiGpuPath(const System& sys, const PathMatrix& pm, size_t i, size_t j) {
  const Path& p = pm.gpuToGpu(i, j);
  if (p.type == PathType::Nvb) return pciPath(sys, sys.gpus[i], sys.gpus[j]);
  return p;
}

Path nicColumnPath(const PathMatrix& pm, const NicColumn& a, const NicColumn& b) {
  if (a.node == b.node) {
    Path p;
    p.type = PathType::Loc;
    return p;
  }
  if (a.nicIndex == b.nicIndex) {  // two ports of one NIC
    Path p;
    p.type = PathType::Pix;
    return p;
  }
  return pm.nicToNic(static_cast<size_t>(a.nicIndex), static_cast<size_t>(b.nicIndex));
}

}  // namespace

std::string smiMatrix(const System& sys, const PathMatrix& pm) {
  std::vector<NicColumn> nics = nicColumns(sys, pm);
  size_t ng = sys.gpus.size();
  std::string out;
  for (size_t i = 0; i < ng; ++i) out += "\tGPU" + std::to_string(i);
  for (size_t k = 0; k < nics.size(); ++k) out += "\tNIC" + std::to_string(k);
  out += "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n";
  for (size_t i = 0; i < ng; ++i) {
    out += "GPU" + std::to_string(i);
    for (size_t j = 0; j < ng; ++j) out += "\t" + smiCell(smiGpuPath(sys, pm, i, j));
    for (const auto& c : nics) out += "\t" + smiCell(pm.gpuToNic(i, static_cast<size_t>(c.nicIndex)));
    const Node& cpu = sys.node(sys.node(sys.gpus[i]).cpu);
    std::string cpus = cpuListFromMask(cpu.affinity);
    out += "\t" + (cpus.empty() ? std::string("N/A") : cpus);
    out += "\t" + (cpu.numaId >= 0 ? std::to_string(cpu.numaId) : std::string("N/A"));
    out += "\t\tN/A\n";
  }
  for (size_t k = 0; k < nics.size(); ++k) {
    out += "NIC" + std::to_string(k);
    for (size_t i = 0; i < ng; ++i) out += "\t" + smiCell(pm.gpuToNic(i, static_cast<size_t>(nics[k].nicIndex)));
    for (const auto& c : nics) out += "\t" + smiCell(nicColumnPath(pm, nics[k], c));
    out += "\t\t\t\t\n";
  }
  out +=
      "\nLegend:\n\n"
      "  X    = Self\n"
      "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
      "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
      "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
      "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
      "  PIX  = Connection traversing at most a single PCIe bridge\n"
      "  NV#  = Connection traversing a bonded set of # NVLinks\n";
  if (!nics.empty()) {
    out += "\nNIC Legend:\n\n";
    for (size_t k = 0; k < nics.size(); ++k) out += "  NIC" + std::to_string(k) + ": " + nics[k].name + "\n";
  }
  return out;
}

std::string ncclMatrix(const System& sys, const PathMatrix& pm) {
  std::vector<NicColumn> nics = nicColumns(sys, pm);
  size_t ng = sys.gpus.size();
  auto cell = [](const Path& p) {
    char buf[32];
    if (p.type == PathType::Loc) return std::string("LOC");
    std::snprintf(buf, sizeof(buf), "%s %.1f", ncclPathName(p.type), p.bw);
    return std::string(buf);
  };
  std::vector<std::string> labels;
  for (size_t i = 0; i < ng; ++i) labels.push_back("GPU" + std::to_string(i));
  for (size_t k = 0; k < nics.size(); ++k) labels.push_back("NIC" + std::to_string(k));
  std::vector<std::vector<std::string>> rows(labels.size());
  for (size_t r = 0; r < labels.size(); ++r) {
    for (size_t c = 0; c < labels.size(); ++c) {
      Path p;
      if (r < ng && c < ng) p = pm.gpuToGpu(r, c);
      else if (r < ng) p = pm.gpuToNic(r, static_cast<size_t>(nics[c - ng].nicIndex));
      else if (c < ng) p = pm.gpuToNic(c, static_cast<size_t>(nics[r - ng].nicIndex));
      else p = nicColumnPath(pm, nics[r - ng], nics[c - ng]);
      rows[r].push_back(cell(p));
    }
  }
  size_t width = 6;
  for (const auto& row : rows)
    for (const auto& s : row) width = std::max(width, s.size() + 2);
  std::string out;
  auto pad = [&](const std::string& s) { return s + std::string(width > s.size() ? width - s.size() : 1, ' '); };
  out += pad("");
  for (const auto& l : labels) out += pad(l);
  out += "\n";
  for (size_t r = 0; r < labels.size(); ++r) {
    out += pad(labels[r]);
    for (const auto& s : rows[r]) out += pad(s);
    out += "\n";
  }
  out += "(path type as NCCL names it, and the narrowest link on the path in GB/s per direction)\n";
  return out;
}

std::string affinityReport(const System& sys, const PathMatrix& pm) {
  std::vector<NicColumn> nics = nicColumns(sys, pm);
  std::string out;
  char buf[512];
  for (size_t i = 0; i < sys.gpus.size(); ++i) {
    const Node& g = sys.node(sys.gpus[i]);
    const Node& cpu = sys.node(g.cpu);
    std::string cpus = cpuListFromMask(cpu.affinity);
    std::string nearest = "none";
    const Path* best = nullptr;
    for (const auto& c : nics) {
      const Path& p = pm.gpuToNic(i, static_cast<size_t>(c.nicIndex));
      if (!best || p.type < best->type || (p.type == best->type && p.bw > best->bw)) {
        best = &p;
        char nb[256];
        std::snprintf(nb, sizeof(nb), "%s (%s, %.1f GB/s)", c.name.c_str(), smiPathName(p.type), p.bw);
        nearest = nb;
      }
    }
    std::snprintf(buf, sizeof(buf), "GPU%zu  bus %s  dev %d  sm %d%s  NUMA %s  CPUs %s  nearest NIC %s\n", i,
                  g.busId.c_str(), g.dev, g.sm, g.skeleton ? " (from a static file)" : "",
                  cpu.numaId >= 0 ? std::to_string(cpu.numaId).c_str() : "N/A", cpus.empty() ? "N/A" : cpus.c_str(),
                  nearest.c_str());
    out += buf;
  }
  for (size_t k = 0; k < nics.size(); ++k) {
    const Node& n = sys.node(nics[k].node);
    const Node& cpu = sys.node(n.cpu);
    std::string cpus = cpuListFromMask(cpu.affinity);
    const Node& nic = sys.node(pm.nicIds()[static_cast<size_t>(nics[k].nicIndex)]);
    std::snprintf(buf, sizeof(buf), "NIC%zu  %s  bus %s  %.1f GB/s  gdr %d  NUMA %s  CPUs %s\n", k, nics[k].name.c_str(),
                  nic.busId.empty() ? "-" : nic.busId.c_str(), n.type == NodeType::Net ? netBw(n.speedMbps) : nic.upBw,
                  n.type == NodeType::Net ? int(n.gdr) : 0,
                  cpu.numaId >= 0 ? std::to_string(cpu.numaId).c_str() : "N/A", cpus.empty() ? "N/A" : cpus.c_str());
    out += buf;
  }
  return out;
}

}  // namespace braid::topo
