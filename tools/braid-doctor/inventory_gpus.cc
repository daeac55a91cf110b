// GPUs: what the CUDA runtime sees (name, bus id, NUMA node, nearest CPUs, memory, SMs, PCIe
// link), the order CUDA_VISIBLE_DEVICES gives, the topology matrix braid builds (topo/), and the
// P2P capability of every pair beside the path topo/ found for it.
#include <algorithm>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include "host_files.h"
#include "inventory.h"
#include "report.h"
#include "topo/matrix.h"
#include "topo/topo.h"

namespace braid::doctor {

namespace {

// NVIDIA display/3D controllers in sysfs: GPUs the kernel sees, whatever CUDA says.
int nvidiaGpusInSysfs() {
  int n = 0;
  for (const auto& dev : listDir("/sys/bus/pci/devices")) {
    auto vendor = readLine("/sys/bus/pci/devices/" + dev + "/vendor");
    auto cls = readLine("/sys/bus/pci/devices/" + dev + "/class");
    if (vendor && *vendor == "0x10de" && cls && cls->rfind("0x03", 0) == 0) ++n;
  }
  return n;
}

std::string gib(size_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return b;
}

// "PCIe 32.0 GT/s x16" from sysfs, with a warning when the link runs narrower than it can.
void pcieLink(Report* r, const std::string& name, const std::string& bus, std::string* desc) {
  std::string base = "/sys/bus/pci/devices/" + bus + "/";
  auto speed = readLine(base + "current_link_speed");
  auto width = readLine(base + "current_link_width");
  auto maxWidth = readLine(base + "max_link_width");
  if (!speed || !width) return;
  *desc += ", PCIe " + *speed + " x" + *width;
  int w = std::atoi(width->c_str()), mw = maxWidth ? std::atoi(maxWidth->c_str()) : 0;
  if (w > 0 && mw > w)
    addFact(r, "gpus", name + " PCIe link", "x" + *width + " of x" + *maxWidth, Severity::Warning,
            "the link trained narrower than the GPU supports: host copies get " + std::to_string(w * 100 / mw) +
                "% of their bandwidth; fix: reseat the card or riser, check the slot's wiring and BIOS bifurcation");
}

std::string cudaBusId(int dev) {
  char buf[64] = {};
  if (cudaDeviceGetPCIBusId(buf, sizeof buf, dev) != cudaSuccess) return {};
  auto n = topo::normalizeBusId(buf);
  return n ? *n : std::string(buf);
}

// The matrix's GPU numbering (topo's, all GPUs of the host) beside CUDA's.
std::string matrixLegend(const topo::System& sys, const std::vector<std::string>& cudaBus) {
  std::string out;
  for (size_t i = 0; i < sys.gpus.size(); ++i) {
    const std::string& bus = sys.node(sys.gpus[i]).busId;
    std::string cuda = "not visible to CUDA here";
    for (size_t k = 0; k < cudaBus.size(); ++k)
      if (cudaBus[k] == bus) cuda = "CUDA device " + std::to_string(k);
    out += "GPU" + std::to_string(i) + " = " + bus + " (" + cuda + ")\n";
  }
  return out;
}

void peerMatrix(Report* r, const topo::System& sys, const std::vector<std::string>& bus, InventoryFindings* found) {
  topo::PathMatrix pm(sys, topo::p2pPolicyFromEnv(sys).nvbAllowed);
  auto topoIndex = [&](const std::string& b) -> int {
    for (size_t i = 0; i < sys.gpus.size(); ++i)
      if (sys.node(sys.gpus[i]).busId == b) return static_cast<int>(i);
    return -1;
  };
  size_t n = bus.size();
  std::vector<std::vector<std::string>> cell(n, std::vector<std::string>(n));
  size_t width = 4;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      if (i == j) {
        cell[i][j] = "X";
        continue;
      }
      int can = 0;
      cudaError_t e = cudaDeviceCanAccessPeer(&can, static_cast<int>(i), static_cast<int>(j));
      int a = topoIndex(bus[i]), b = topoIndex(bus[j]);
      std::string pathName = "?";
      topo::PathType type = topo::PathType::Dis;
      if (a >= 0 && b >= 0) {
        const topo::Path& p = pm.gpuToGpu(static_cast<size_t>(a), static_cast<size_t>(b));
        type = p.type;
        pathName = type == topo::PathType::Nvl ? "NV" + std::to_string(p.nvlinks) : topo::smiPathName(type);
      }
      std::string answer = e != cudaSuccess ? "err" : can ? "yes" : "no";
      cell[i][j] = answer + " " + pathName;
      width = std::max(width, cell[i][j].size());
      bool nvlink = type == topo::PathType::Nvl || type == topo::PathType::Nvb || type == topo::PathType::C2c;
      if (!nvlink) found->pciePeerPairs = true;
      bool shouldPeer = type == topo::PathType::Nvl || type == topo::PathType::Pix || type == topo::PathType::Pxb;
      if (e != cudaSuccess)
        addFact(r, "p2p", "GPU" + std::to_string(i) + "->GPU" + std::to_string(j),
                std::string("cudaDeviceCanAccessPeer: ") + cudaGetErrorString(e), Severity::Warning);
      else if (!can && shouldPeer)
        addFact(r, "p2p", "GPU" + std::to_string(i) + "->GPU" + std::to_string(j), "no peer access over " + pathName,
                Severity::Warning,
                type == topo::PathType::Nvl
                    ? "NVLink joins them but CUDA refuses peer access: check nvidia-smi nvlink -s and the fabric "
                      "manager (NVSwitch systems), or a VM that hides P2P"
                    : "one PCIe switch joins them but CUDA refuses peer access: ACS or the IOMMU on the switch "
                      "ports redirect P2P (see iommu below); fix: disable ACS on the bridges, or boot with iommu=pt");
    }
  std::string text;
  auto pad = [&](const std::string& s) { return s + std::string(width + 2 - std::min(width + 2, s.size()), ' '); };
  text += pad("");
  for (size_t j = 0; j < n; ++j) text += pad("GPU" + std::to_string(j));
  text += "\n";
  for (size_t i = 0; i < n; ++i) {
    text += pad("GPU" + std::to_string(i));
    for (size_t j = 0; j < n; ++j) text += pad(cell[i][j]);
    while (!text.empty() && text.back() == ' ') text.pop_back();
    text += "\n";
  }
  text += "(cudaDeviceCanAccessPeer row->column, then the path topo/ found; CUDA device numbers)\n";
  r->blocks.push_back({"P2P capability", text});
}

}  // namespace

void inventoryGpus(const InventoryOptions&, Report* r, InventoryFindings* found) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    found->cudaDevices = 0;
    found->noGpuReason = std::string("no CUDA device: ") +
                         (e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount gives 0");
    int seen = nvidiaGpusInSysfs();
    // An empty or unmatched CUDA_VISIBLE_DEVICES hides the GPUs on purpose: CUDA then says "no device".
    bool hidden = visible != nullptr && e == cudaErrorNoDevice;
    if (seen == 0 || hidden) addFact(r, "gpus", "CUDA devices", "none", Severity::Ok, found->noGpuReason);
    if (seen > 0 && !hidden)
      addFact(r, "gpus", "CUDA devices", found->noGpuReason, Severity::Error,
              "the kernel sees " + std::to_string(seen) +
                  " NVIDIA GPU(s) but CUDA none: the driver is not loaded or does not match (check nvidia-smi, "
                  "dmesg | grep NVRM, and that libcuda.so.1 is the driver's version)");
    addSkip(r, "GPUs", found->noGpuReason);
    addSkip(r, "topology matrix", found->noGpuReason);
    addSkip(r, "P2P capability", found->noGpuReason);
    if (visible) addFact(r, "gpus", "CUDA_VISIBLE_DEVICES", *visible ? visible : "(empty)");
    return;
  }
  found->cudaDevices = count;
  std::string order;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    std::string name = "GPU" + std::to_string(d);
    if ((e = cudaGetDeviceProperties(&p, d)) != cudaSuccess) {
      addFact(r, "gpus", name, std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e), Severity::Warning);
      found->gpuBusIds.push_back({});
      continue;
    }
    std::string bus = cudaBusId(d);
    found->gpuBusIds.push_back(bus);
    order += (order.empty() ? "" : ", ") + std::to_string(d) + " -> " + bus;
    auto numa = readLine("/sys/bus/pci/devices/" + bus + "/numa_node");
    auto cpus = readLine("/sys/bus/pci/devices/" + bus + "/local_cpulist");
    std::string desc = std::string(p.name) + ", " + bus + ", NUMA " + (numa ? *numa : "?") + ", CPUs " +
                       (cpus ? *cpus : "?") + ", " + gib(p.totalGlobalMem) + ", " +
                       std::to_string(p.multiProcessorCount) + " SMs, sm_" + std::to_string(p.major) +
                       std::to_string(p.minor);
    pcieLink(r, name, bus, &desc);
    addFact(r, "gpus", name, desc);
  }
  addFact(r, "gpus", "CUDA_VISIBLE_DEVICES", visible ? (*visible ? visible : "(empty)") : "(unset: every GPU)");
  addFact(r, "gpus", "CUDA order", order, Severity::Ok, "CUDA index -> PCI bus id; ranks use CUDA indices");

  topo::System sys = topo::loadSystem(0);
  topo::PathMatrix pm(sys, topo::p2pPolicyFromEnv(sys).nvbAllowed);
  int notes = 0;
  for (const auto& d : sys.diagnostics)
    if (d.level == topo::Diagnostic::Warn && notes++ < 10) addFact(r, "topology", "detection note", d.text);
  r->blocks.push_back({"Topology (nvidia-smi topo -m form, from " + sys.source + ")",
                       matrixLegend(sys, found->gpuBusIds) + "\n" + topo::smiMatrix(sys, pm)});
  r->blocks.push_back({"Affinity", topo::affinityReport(sys, pm)});
  if (count < 2) {
    addSkip(r, "P2P capability", "one GPU: no pair");
    return;
  }
  peerMatrix(r, sys, found->gpuBusIds, found);
}

}  // namespace braid::doctor
