// Live detection: builds the NCCL topology XML of this machine from the CUDA runtime (GPUs and
// their PCI addresses), NVML (NVLinks, loaded with dlopen and optional), sysfs (NUMA nodes,
// CPUs, the PCI tree, InfiniBand and Ethernet devices) and hwloc (the same facts, loaded with
// dlopen and optional; sysfs wins where both answer, hwloc fills what sysfs lacks and the two
// are compared). Whatever cannot be read is left out and explained in `notes`; it never fails
// and works with no GPU, no driver, no hwloc and a partial /sys.
#pragma once
#include <string>
#include <vector>

#include "topo/detect_hwloc.h"
#include "topo/system.h"
#include "topo/xml.h"

namespace braid::topo {

struct DetectedGpu {
  std::string busId;  // normalized
  int dev = -1;
  int sm = 0;
};

struct DetectOptions {
  std::string sysfsRoot = "/sys";       // tests point this at a fake tree
  std::string procRoot = "/proc";
  bool useCuda = true;                  // ask the CUDA runtime for GPUs
  bool useNvml = true;                  // ask NVML (dlopen libnvidia-ml.so.1) for NVLinks
  std::vector<DetectedGpu> injectedGpus;  // used instead of CUDA when useCuda is false
  // Ask hwloc (libhwloc.so.15 by dlopen, when braid was built with its headers). hwloc reads
  // the real machine, so it is only asked when sysfsRoot and procRoot are the real ones.
  bool useHwloc = true;
  const HwlocView* injectedHwloc = nullptr;  // tests: used instead of asking hwloc
};

// What detection found out about its sources, for the log and for braid-topo.
struct DetectReport {
  int cudaGpus = -1;        // -1: CUDA runtime unusable (no driver)
  bool nvmlLoaded = false;
  bool sysfsNuma = false;   // NUMA nodes came from sysfs
  bool hwlocLoaded = false; // hwloc answered (see notes for why not)
  std::string hwlocVersion;  // the library's API version ("2.8.0" in Debian's 2.9.0 package)
  int hwlocNuma = 0, hwlocPci = 0, hwlocNets = 0;  // what hwloc found
  std::string numaSource = "none";  // "sysfs", "hwloc" or "none"
  int hwlocFilled = 0;      // facts sysfs lacked and hwloc gave (NUMA nodes, paths, attributes, NICs)
  int hwlocDisagreements = 0;  // facts where both answered differently (sysfs used; see notes)
  int pciPathsResolved = 0;
  double cudaMs = 0, nvmlMs = 0, hwlocMs = 0, totalMs = 0;  // where the time went
  std::vector<Diagnostic> notes;
};

XmlElement detectTopologyXml(const DetectOptions& opt, DetectReport* report);

// The GPUs the CUDA runtime sees (empty, with `ok` false, when there is no usable driver).
std::vector<DetectedGpu> cudaGpus(bool* ok, std::string* why);

// NVLinks of one GPU from NVML: target bus id -> (count, tclass). Empty when NVML is missing.
struct NvmlLink {
  std::string target;
  int count = 0;
  std::string tclass;
};
class Nvml {
 public:
  // Loads libnvidia-ml.so.1 and initializes it; loaded() is false (with why()) when it can't.
  Nvml();
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  bool loaded() const { return handle_ != nullptr && initialized_; }
  const std::string& why() const { return why_; }
  // `classOf` gives the PCI class of a bus id (from sysfs) when NVML can't tell the remote type.
  // major*10+minor, 0 when unknown.
  int computeCapability(const std::string& busId) const;
  std::vector<NvmlLink> nvlinks(const std::string& busId, std::string (*classOf)(const std::string&, const void*),
                                const void* ctx) const;

 private:
  void* handle_ = nullptr;
  bool initialized_ = false;
  std::string why_;
  void* getHandle_ = nullptr;
  void* linkState_ = nullptr;
  void* remotePci_ = nullptr;
  void* remoteType_ = nullptr;
  void* shutdown_ = nullptr;
  void* capability_ = nullptr;
};

}  // namespace braid::topo
