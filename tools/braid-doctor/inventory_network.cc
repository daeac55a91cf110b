// Network: the NICs (Ethernet interfaces and RDMA devices, with PCI address, NUMA node and link
// rate), whether GPUDirect RDMA can work (nvidia_peermem), and whether UCX has CUDA support
// (without it braid stages network traffic through pinned host memory).
#include <algorithm>
#include <dlfcn.h>
#include <link.h>

#include "host_files.h"
#include "inventory.h"
#include "report.h"
#include "subprocess.h"

namespace braid::doctor {

namespace {

std::string where(const std::string& deviceLink) {
  std::string bus = pciAddressOf(deviceLink);
  if (bus.empty()) return "virtual";
  auto numa = readLine(deviceLink + "/numa_node");
  return bus + ", NUMA " + (numa ? *numa : "?");
}

void ethernet(Report* r) {
  int shown = 0;
  for (const auto& ifc : listDir("/sys/class/net")) {
    if (ifc == "lo") continue;
    std::string base = "/sys/class/net/" + ifc;
    std::string loc = where(base + "/device");
    if (loc == "virtual") continue;  // bridges, veths, tunnels: no NIC behind them
    auto speed = readLine(base + "/speed");  // Mb/s; unreadable while the link is down
    auto state = readLine(base + "/operstate");
    std::string rate = speed && !speed->empty() && (*speed)[0] != '-' ? *speed + " Mb/s" : "speed unknown";
    addFact(r, "network", ifc, loc + ", " + rate + ", " + (state ? *state : "?"));
    ++shown;
  }
  if (shown == 0) addFact(r, "network", "Ethernet NICs", "none with a PCI device (only virtual interfaces)");
}

bool rdma(Report* r) {
  std::vector<std::string> devs = listDir("/sys/class/infiniband");
  if (devs.empty()) {
    addFact(r, "network", "RDMA devices", "none", Severity::Ok, "collectives across hosts go over TCP (UCX or sockets)");
    return false;
  }
  for (const auto& d : devs) {
    std::string base = "/sys/class/infiniband/" + d;
    std::string ports;
    for (const auto& p : listDir(base + "/ports")) {
      auto rate = readLine(base + "/ports/" + p + "/rate");
      auto state = readLine(base + "/ports/" + p + "/state");
      auto layer = readLine(base + "/ports/" + p + "/link_layer");
      ports += (ports.empty() ? "" : "; ") + std::string("port ") + p + " " + (rate ? *rate : "?") + " " +
               (state ? *state : "?") + " " + (layer ? *layer : "");
    }
    addFact(r, "network", d, where(base + "/device") + (ports.empty() ? "" : ", " + ports));
  }
  return true;
}

void gpuDirectRdma(Report* r, bool haveRdma, bool haveGpu) {
  std::string mod = exists("/sys/module/nvidia_peermem") ? "nvidia_peermem"
                    : exists("/sys/module/nv_peer_mem") ? "nv_peer_mem" : "";
  if (!mod.empty()) {
    addFact(r, "network", "GPUDirect RDMA", mod + " loaded");
    return;
  }
  bool matters = haveRdma && haveGpu;
  addFact(r, "network", "GPUDirect RDMA", "no nvidia_peermem or nv_peer_mem module", matters ? Severity::Warning : Severity::Ok,
          matters ? "RDMA NICs cannot read GPU memory except through DMA-BUF (kernel >= 5.12 with the open kernel "
                    "module); fix: modprobe nvidia_peermem"
                  : "only matters with RDMA NICs and GPUs");
}

// The directory libucp.so.0 was loaded from, with its ucx/ module folder.
std::string ucxLibraryDir(void* h) {
  link_map* lm = nullptr;
  if (::dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name) return {};
  std::string p = realPath(lm->l_name);
  return p.empty() ? std::string() : p.substr(0, p.rfind('/'));
}

void ucx(const InventoryOptions& opt, Report* r) {
  std::string info = findProgram("ucx_info");
  if (!info.empty()) {
    double t = std::min(opt.budgetSeconds / 2, 5.0);
    CommandResult v = runCommand({info, "-v"}, t);
    std::string version = v.started && v.exitCode == 0 ? trim(v.output.substr(0, v.output.find('\n'))) : v.error;
    addFact(r, "network", "UCX", version + " (" + info + ")");
    if (!opt.quick) {  // ucx_info -d opens every device (seconds); --quick asks the library instead
      CommandResult d = runCommand({info, "-d"}, t);
      if (!d.started || d.timedOut || d.exitCode != 0) {
        addFact(r, "network", "UCX CUDA support", "unknown: " + (d.error.empty() ? "exit " + std::to_string(d.exitCode) : d.error));
        return;
      }
      std::string found;
      for (const char* tl : {"cuda_copy", "cuda_ipc", "gdr_copy"})
        if (d.output.find(tl) != std::string::npos) found += (found.empty() ? "" : ", ") + std::string(tl);
      addFact(r, "network", "UCX CUDA support", found.empty() ? "none" : found, Severity::Ok,
              found.empty() ? "no CUDA transports: braid stages network traffic through pinned host memory"
                            : "UCX can move GPU memory itself");
      return;
    }
  }
  void* h = ::dlopen("libucp.so.0", RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    addFact(r, "network", "UCX", "libucp.so.0 not found", Severity::Ok, "braid's transport across hosts is to use UCX (not built yet)");
    return;
  }
  std::string dir = ucxLibraryDir(h);
  ::dlclose(h);
  if (info.empty()) addFact(r, "network", "UCX", "libucp.so.0 in " + (dir.empty() ? std::string("?") : dir));
  bool cuda = false;
  for (const auto& f : listDir(dir + "/ucx"))
    if (f.rfind("libuct_cuda.so", 0) == 0) cuda = true;
  addFact(r, "network", "UCX CUDA support", cuda ? "libuct_cuda present" : "none (no libuct_cuda in " + dir + "/ucx)",
          Severity::Ok, cuda ? "UCX can move GPU memory itself" : "braid stages network traffic through pinned host memory");
}

}  // namespace

void inventoryNetwork(const InventoryOptions& opt, Report* r, InventoryFindings* found) {
  ethernet(r);
  bool haveRdma = rdma(r);
  gpuDirectRdma(r, haveRdma, found->cudaDevices > 0);
  ucx(opt, r);
}

}  // namespace braid::doctor
