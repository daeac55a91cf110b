// What hwloc (Debian's libhwloc, ABI libhwloc.so.15 = hwloc 2.x) says about this machine: NUMA
// nodes and their CPUs, the PCI tree (bridges and devices with their ids and link speeds) and
// the network OS devices (network interfaces, openfabrics HCAs) with the PCI device they sit on.
//
// Optional twice over: compiled in only when the hwloc headers were found at build time
// (BRAID_HAVE_HWLOC), and loaded with dlopen at run time, so that libbraid.so (libnccl.so.2)
// gains no DT_NEEDED and runs where libhwloc is not installed. Whatever fails is said in `why`;
// reading never throws or aborts. detect.cc merges this view into the sysfs one (see README).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace braid::topo {

struct HwlocPci {
  std::string busId;               // normalized
  std::vector<std::string> chain;  // bus ids of the PCI bridges above it, from the root down
  bool bridge = false;
  uint16_t classId = 0, vendor = 0, device = 0, subVendor = 0, subDevice = 0;  // classId: 0x0302
  float linkGBs = 0;               // hwloc's link speed in GB/s, 0 when unknown
  int numa = -1;                   // the one NUMA node local to it, -1 when none or several
};

struct HwlocNet {
  std::string name;        // "mlx5_0", "eth0"
  std::string busId;       // the PCI device it belongs to; empty when not on PCI
  bool openfabrics = false;
  std::map<std::string, std::string> infos;  // hwloc's info pairs ("Port1State" = "4", "Address")
};

struct HwlocView {
  bool loaded = false;  // the topology was loaded
  std::string why;      // why not, when not loaded
  std::string version;  // the run-time library's API version ("2.8.0" for hwloc 2.9.0)
  std::map<int, std::vector<int>> numaCpus;  // NUMA os index -> sorted CPU os indices
  std::map<std::string, HwlocPci> pci;       // bridges and devices by bus id
  std::vector<HwlocNet> nets;
};

// True when braid was built with the hwloc headers (it may still fail to load at run time).
bool hwlocCompiledIn();

// Loads hwloc (once per process) and reads the topology of this machine. Never fails: a view
// with loaded == false and `why` when hwloc is absent, too old/new, or cannot load.
HwlocView readHwloc();

// CPU index list <-> the kernel's cpumap format that NCCL's XML uses for "affinity": 32-bit hex
// groups, most significant first, comma separated ("00000000,0000ffff"). `minGroups` pads.
std::string cpuMaskOf(const std::vector<int>& cpus, size_t minGroups = 1);
std::vector<int> cpusOfMask(const std::string& mask);

// hwloc gives one GB/s figure for a PCIe link (width x lane rate x encoding / 8). A sysfs pair
// (max_link_speed, max_link_width) giving that figure, the widest (x16 first) when several do
// (Gen4 x16 = Gen5 x8): the pair is a guess, its product (what the bandwidth model uses) is not.
// False when no generation gives a valid width.
bool pcieSpeedWidthOf(float gbs, std::string* speed, std::string* width);

}  // namespace braid::topo
