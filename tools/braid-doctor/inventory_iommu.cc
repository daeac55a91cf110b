// IOMMU and ACS: whether peer-to-peer and GPUDirect traffic of the GPUs goes through address
// translation, or is redirected up to the root complex by ACS on the bridges above them.
#include <algorithm>
#include <cstdlib>

#include "host_files.h"
#include "inventory.h"
#include "report.h"
#include "subprocess.h"

#include <unistd.h>

namespace braid::doctor {

namespace {

// The kernel's IOMMU switches among the boot arguments.
std::string iommuArguments() {
  std::string out;
  auto cmdline = readLine("/proc/cmdline");
  if (!cmdline) return "(unreadable)";
  size_t start = 0;
  while (start < cmdline->size()) {
    size_t sp = cmdline->find(' ', start);
    if (sp == std::string::npos) sp = cmdline->size();
    std::string arg = cmdline->substr(start, sp - start);
    if (arg.rfind("iommu", 0) == 0 || arg.rfind("intel_iommu", 0) == 0 || arg.rfind("amd_iommu", 0) == 0 ||
        arg.rfind("pcie_acs_override", 0) == 0)
      out += (out.empty() ? "" : " ") + arg;
    start = sp + 1;
  }
  return out.empty() ? "(none)" : out;
}

// lspci -vvv's sections, by address: which bridges have ACS source validation on.
std::vector<std::string> bridgesWithAcs(const std::vector<std::string>& bridges, double timeout, std::string* why) {
  std::vector<std::string> on;
  if (::geteuid() != 0) {
    *why = "not root: lspci cannot read the ACS capability";
    return on;
  }
  if (findProgram("lspci").empty()) {
    *why = "lspci not installed (pciutils)";
    return on;
  }
  CommandResult c = runCommand({"lspci", "-D", "-vvv"}, timeout);
  if (!c.started || c.timedOut || c.exitCode != 0) {
    *why = "lspci: " + (c.error.empty() ? "exit " + std::to_string(c.exitCode) : c.error);
    return on;
  }
  std::string current;
  size_t start = 0;
  const std::string& out = c.output;
  while (start < out.size()) {
    size_t nl = out.find('\n', start);
    if (nl == std::string::npos) nl = out.size();
    std::string line = out.substr(start, nl - start);
    start = nl + 1;
    if (!line.empty() && line[0] != '\t' && line[0] != ' ') current = line.substr(0, 12);
    if (line.find("ACSCtl:") != std::string::npos && line.find("SrcValid+") != std::string::npos)
      for (const auto& b : bridges)
        if (b == current) on.push_back(b);
  }
  return on;
}

}  // namespace

void inventoryIommu(const InventoryOptions& opt, Report* r, InventoryFindings* found) {
  std::vector<std::string> units = listDir("/sys/class/iommu");
  size_t groups = listDir("/sys/kernel/iommu_groups", 1 << 16).size();
  std::string unitText = units.empty() ? "none" : std::to_string(units.size()) + " (" + units.front() + (units.size() > 1 ? ", ..." : "") + ")";
  addFact(r, "iommu", "IOMMU units", unitText);
  addFact(r, "iommu", "IOMMU groups", std::to_string(groups));
  std::string args = iommuArguments();
  addFact(r, "iommu", "kernel arguments", args);
  if (found->cudaDevices == 0) {
    addSkip(r, "IOMMU/ACS on GPU paths", found->noGpuReason);
    return;
  }
  // Translation matters for traffic between devices: GPU pairs over PCIe and GPU<->NIC.
  bool peerTraffic = found->pciePeerPairs || !listDir("/sys/class/infiniband").empty();
  std::vector<std::string> bridges;
  for (size_t d = 0; d < found->gpuBusIds.size(); ++d) {
    const std::string& bus = found->gpuBusIds[d];
    if (bus.empty()) continue;
    std::string group = realPath("/sys/bus/pci/devices/" + bus + "/iommu_group");
    std::string name = "GPU" + std::to_string(d) + " IOMMU group";
    if (group.empty()) {
      addFact(r, "iommu", name, "none (no IOMMU translation)");
    } else {
      std::string id = group.substr(group.rfind('/') + 1);
      auto type = readLine(group + "/type");
      std::string t = type ? *type : "unknown";
      bool translated = t == "DMA" || t == "DMA-FQ";
      addFact(r, "iommu", name, id + " (type " + t + ")", translated && peerTraffic ? Severity::Warning : Severity::Ok,
              translated ? std::string("GPU peer and GPUDirect RDMA traffic is translated by the IOMMU") +
                               (peerTraffic ? ": it can be slow or fail; fix: boot with iommu=pt (with intel_iommu=on / amd_iommu=on)"
                                            : "; no PCIe peer path here, so it does not matter now")
                         : "");
    }
    for (const auto& b : upstreamBridges(bus)) bridges.push_back(b);
  }
  if (!found->pciePeerPairs) {
    addFact(r, "iommu", "ACS", "not checked", Severity::Ok, "no GPU pair uses PCIe for P2P");
    return;
  }
  std::string why;
  std::vector<std::string> acs = bridgesWithAcs(bridges, std::min(opt.budgetSeconds, 5.0), &why);
  if (!why.empty()) {
    addFact(r, "iommu", "ACS", "unknown", Severity::Ok, why);
    return;
  }
  if (acs.empty()) {
    addFact(r, "iommu", "ACS", "off on the GPUs' " + std::to_string(bridges.size()) + " upstream bridges");
    return;
  }
  std::string list;
  for (const auto& b : acs) list += (list.empty() ? "" : " ") + b;
  addFact(r, "iommu", "ACS", "SrcValid+ on " + list, Severity::Warning,
          "ACS sends GPU peer traffic up to the root complex (slow or refused P2P); fix: disable ACS on these "
          "bridges (BIOS, or setpci -s <bridge> ECAP_ACS+6.w=0000 at boot), or boot with iommu=pt");
}

}  // namespace braid::doctor
