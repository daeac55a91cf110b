#include "topo/detect.h"

#include <cstdio>

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include <cuda_runtime_api.h>

namespace braid::topo {

namespace {

// Whole small file, trailing whitespace trimmed; empty when it can't be read.
std::string readSmallFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[4096];
  std::string out;
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1u << 20)) break;
  }
  ::close(fd);  // read-only descriptor: nothing to lose on a failed close
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ' || out.back() == '\r')) out.pop_back();
  return out;
}

std::vector<std::string> listDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* d = ::opendir(path.c_str());
  if (!d) return names;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::string realPath(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return "";
  return buf;
}

void note(DetectReport* r, Diagnostic::Level level, const std::string& text) {
  r->notes.push_back({level, "live detection: " + text});
}

struct CpuInfo {
  std::string arch, vendor;
  int family = -1, model = -1;
};

CpuInfo readCpuInfo(const DetectOptions& opt) {
  CpuInfo c;
  struct utsname u;
  if (::uname(&u) == 0) {
    c.arch = u.machine;
    if (c.arch == "aarch64") c.arch = "arm64";
  }
  std::string text = readSmallFile(opt.procRoot + "/cpuinfo");
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    std::string line = text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? text.size() : eol + 1;
    if (line.empty()) break;  // the first processor is enough
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "vendor_id") c.vendor = value;
    else if (key == "cpu family") c.family = std::atoi(value.c_str());
    else if (key == "model") c.model = std::atoi(value.c_str());
  }
  return c;
}

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// One PCI device or switch to write, keyed by bus id; `parent` is a bus id or "" for a CPU.
struct PciEntry {
  std::string busId;
  std::string parent;
  int numa = -1;
  std::vector<std::pair<std::string, std::string>> attrs;
  bool isGpu = false;
  DetectedGpu gpu;
  std::vector<NvmlLink> nvlinks;
  bool isNic = false;
  std::vector<XmlElement> nets;
};

class Detector {
 public:
  Detector(const DetectOptions& opt, DetectReport* r) : opt_(opt), r_(r) {}

  XmlElement run() {
    auto t0 = std::chrono::steady_clock::now();
    auto since = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
    };
    loadHwloc();
    r_->hwlocMs = since(t0);
    readNuma();
    std::vector<DetectedGpu> gpus = opt_.injectedGpus;
    if (opt_.useCuda) {
      auto tc = std::chrono::steady_clock::now();
      bool ok = false;
      std::string why;
      gpus = cudaGpus(&ok, &why);
      r_->cudaGpus = ok ? static_cast<int>(gpus.size()) : -1;
      if (!ok) note(r_, Diagnostic::Info, "no GPUs from the CUDA runtime (" + why + ")");
      r_->cudaMs = since(tc);
    } else {
      r_->cudaGpus = static_cast<int>(gpus.size());
    }
    // GPUs that this process's CUDA does not show (CUDA_VISIBLE_DEVICES, or no driver) are still
    // part of the machine: every rank must see the same graph, whatever its CUDA view.
    std::set<std::string> known;
    for (const auto& g : gpus) known.insert(g.busId);
    for (const auto& name : listDir(opt_.sysfsRoot + "/bus/pci/devices")) {
      auto b = normalizeBusId(name);
      if (!b || known.count(*b)) continue;
      if (readPci(*b, "vendor") != "0x10de" || readPci(*b, "class").rfind("0x03", 0) != 0) continue;
      gpus.push_back({*b, -1, 0});
      known.insert(*b);
    }
    std::unique_ptr<Nvml> nvml;
    auto tn = std::chrono::steady_clock::now();
    if (opt_.useNvml && !gpus.empty()) {
      nvml = std::make_unique<Nvml>();
      r_->nvmlLoaded = nvml->loaded();
      if (!nvml->loaded()) note(r_, Diagnostic::Info, "NVML unavailable, NVLinks unknown: " + nvml->why());
    }
    fillUnknownSm(&gpus, nvml.get());
    for (const auto& g : gpus) {
      std::string leaf = addDeviceChain(g.busId);
      PciEntry& e = entries_[leaf];
      e.isGpu = true;
      e.gpu = g;
      if (nvml && nvml->loaded()) e.nvlinks = nvml->nvlinks(g.busId, &Detector::classOfThunk, this);
    }
    nvml.reset();
    r_->nvmlMs = since(tn);
    detectNics();
    XmlElement xml = assemble();
    summarizeHwloc();
    r_->totalMs = since(t0);
    return xml;
  }

 private:
  // A GPU's SM version from CUDA, else NVML, else another GPU of the same PCI device id.
  void fillUnknownSm(std::vector<DetectedGpu>* gpus, const Nvml* nvml) const {
    std::map<std::string, int> smOfDevice;
    int maxSm = 0;
    for (auto& g : *gpus) {
      if (g.sm == 0 && nvml && nvml->loaded()) g.sm = nvml->computeCapability(g.busId);
      if (g.sm > 0) {
        smOfDevice[readPci(g.busId, "device")] = g.sm;
        maxSm = std::max(maxSm, g.sm);
      }
    }
    for (auto& g : *gpus) {
      if (g.sm > 0) continue;
      auto it = smOfDevice.find(readPci(g.busId, "device"));
      g.sm = it != smOfDevice.end() ? it->second : maxSm;
    }
  }

  static std::string classOfThunk(const std::string& busId, const void* self) {
    return static_cast<const Detector*>(self)->readPci(busId, "class");
  }
  std::string readPci(const std::string& busId, const char* file) const {
    return readSmallFile(opt_.sysfsRoot + "/bus/pci/devices/" + busId + "/" + file);
  }

  void readNuma() {
    std::string base = opt_.sysfsRoot + "/devices/system/node";
    for (const auto& name : listDir(base)) {
      if (name.rfind("node", 0) != 0 || name.size() == 4) continue;
      char* end = nullptr;
      long id = std::strtol(name.c_str() + 4, &end, 10);
      if (*end != '\0' || id < 0 || id > 65535) continue;
      std::string mask = readSmallFile(base + "/" + name + "/cpumap");
      if (mask.find_first_not_of("0,") == std::string::npos) continue;  // memory-only node (or unreadable)
      numa_[static_cast<int>(id)] = mask;
    }
    r_->sysfsNuma = !numa_.empty();
    if (!numa_.empty()) r_->numaSource = "sysfs";
    if (hw_.loaded) {
      if (numa_.empty()) {
        for (const auto& [id, cpus] : hw_.numaCpus)
          if (!cpus.empty()) numa_[id] = cpuMaskOf(cpus);
        if (!numa_.empty()) {
          r_->numaSource = "hwloc";
          ++r_->hwlocFilled;
          note(r_, Diagnostic::Info, "no NUMA nodes in " + base + "; " + std::to_string(numa_.size()) + " from hwloc");
        }
      } else {
        for (const auto& [id, mask] : numa_) {
          auto it = hw_.numaCpus.find(id);
          if (it != hw_.numaCpus.end() && it->second == cpusOfMask(mask)) continue;
          ++r_->hwlocDisagreements;
          note(r_, Diagnostic::Info, "NUMA node " + std::to_string(id) + ": sysfs CPUs " + mask + ", hwloc " +
                                         (it == hw_.numaCpus.end() ? "has no such node" : cpuMaskOf(it->second)) +
                                         " (sysfs used)");
        }
      }
    }
    if (numa_.empty()) note(r_, Diagnostic::Info, "no NUMA nodes in " + base + "; one CPU node with unknown affinity");
  }

  void loadHwloc() {
    bool realRoots = opt_.sysfsRoot == "/sys" && opt_.procRoot == "/proc";
    if (opt_.injectedHwloc) {
      hw_ = *opt_.injectedHwloc;
    } else if (!opt_.useHwloc) {
      hw_.why = "disabled by the caller";
    } else if (!realRoots) {
      hw_.why = "sysfs root is " + opt_.sysfsRoot + ", and hwloc reads the real machine";
    } else {
      hw_ = readHwloc();
    }
    r_->hwlocLoaded = hw_.loaded;
    r_->hwlocVersion = hw_.version;
    if (!hw_.loaded) {
      note(r_, Diagnostic::Info, "hwloc not used (" + hw_.why + "); NUMA nodes, PCI tree and NICs from sysfs alone");
      return;
    }
    r_->hwlocNuma = static_cast<int>(hw_.numaCpus.size());
    r_->hwlocPci = static_cast<int>(hw_.pci.size());
    r_->hwlocNets = static_cast<int>(hw_.nets.size());
  }

  void summarizeHwloc() {
    if (!hw_.loaded) return;
    note(r_, Diagnostic::Info,
         "hwloc (API " + hw_.version + ", " + std::to_string(static_cast<int>(r_->hwlocMs + 0.5)) + " ms): " + std::to_string(r_->hwlocNuma) + " NUMA nodes, " + std::to_string(r_->hwlocPci) +
             " PCI devices and bridges, " + std::to_string(r_->hwlocNets) + " network devices; NUMA nodes from " +
             r_->numaSource + ", " + std::to_string(r_->hwlocFilled) + " facts filled from hwloc, " +
             std::to_string(r_->hwlocDisagreements) + " disagreements with sysfs (sysfs used)");
  }

  const HwlocPci* hwPci(const std::string& busId) const {
    auto it = hw_.pci.find(busId);
    return it == hw_.pci.end() ? nullptr : &it->second;
  }

  int numaOf(const std::string& busId) {
    std::string v = readPci(busId, "numa_node");
    int n = v.empty() ? -1 : std::atoi(v.c_str());
    if (numa_.count(n)) return n;
    // sysfs says nothing (no file, or -1 as on single-node VMs): hwloc's locality if it has one.
    if (const HwlocPci* h = hwPci(busId); h && numa_.count(h->numa)) {
      ++r_->hwlocFilled;
      return h->numa;
    }
    return -1;
  }

  // sysfs files first; what sysfs lacks from hwloc (ids; link speed and width when hwloc's
  // GB/s figure maps to one PCIe generation and width).
  std::vector<std::pair<std::string, std::string>> pciAttrs(const std::string& busId) {
    std::vector<std::pair<std::string, std::string>> a;
    a.emplace_back("busid", busId);
    const HwlocPci* h = hwPci(busId);
    std::string hwSpeed, hwWidth;
    bool hwLink = h && pcieSpeedWidthOf(h->linkGBs, &hwSpeed, &hwWidth);
    auto hex = [](unsigned v, int digits) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), "0x%0*x", digits, v);
      return std::string(buf);
    };
    static const std::pair<const char*, const char*> files[] = {
        {"class", "class"}, {"vendor", "vendor"}, {"device", "device"}, {"subsystem_vendor", "subsystem_vendor"},
        {"subsystem_device", "subsystem_device"}, {"link_speed", "max_link_speed"}, {"link_width", "max_link_width"}};
    for (const auto& [attr, file] : files) {
      std::string v = readPci(busId, file);
      if (v.empty() && h) {
        std::string key = attr;
        if (key == "class") v = hex(h->classId, 4) + "00";
        else if (key == "vendor") v = hex(h->vendor, 4);
        else if (key == "device") v = hex(h->device, 4);
        else if (key == "subsystem_vendor" && h->subVendor) v = hex(h->subVendor, 4);
        else if (key == "subsystem_device" && h->subVendor) v = hex(h->subDevice, 4);
        else if (key == "link_speed" && hwLink) v = hwSpeed;
        else if (key == "link_width" && hwLink) v = hwWidth;
        if (!v.empty()) ++r_->hwlocFilled;
      }
      if (!v.empty()) a.emplace_back(attr, v);
    }
    return a;
  }

  // Adds the device and the switches above it; returns the device's bus id. NCCL's XML shows one
  // <pci> per switch (the upstream port), folding each downstream port and root port into it,
  // so the parent of a device is the bridge two levels up in sysfs.
  std::string addDeviceChain(const std::string& busId) {
    std::string path = realPath(opt_.sysfsRoot + "/bus/pci/devices/" + busId);
    std::vector<std::string> chain;  // PCI addresses from the root down, the device last
    if (!path.empty()) {
      size_t pos = 0;
      while (pos < path.size()) {
        size_t slash = path.find('/', pos);
        std::string comp = path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
        pos = slash == std::string::npos ? path.size() : slash + 1;
        if (auto b = normalizeBusId(comp); b && comp.find(':') != std::string::npos && comp.rfind("pci", 0) != 0)
          chain.push_back(*b);
      }
      ++r_->pciPathsResolved;
      if (const HwlocPci* h = hwPci(busId)) {
        std::vector<std::string> hwChain = h->chain;
        hwChain.push_back(busId);
        if (hwChain != chain) {
          ++r_->hwlocDisagreements;
          note(r_, Diagnostic::Info, "PCI path of " + busId + " differs between sysfs and hwloc (sysfs used)");
        }
      }
    } else if (const HwlocPci* h = hwPci(busId)) {
      chain = h->chain;
      chain.push_back(busId);
      ++r_->pciPathsResolved;
      ++r_->hwlocFilled;
      note(r_, Diagnostic::Info, "no sysfs entry for " + busId + "; its PCI path comes from hwloc");
    } else {
      note(r_, Diagnostic::Info, "no sysfs entry for " + busId + "; it is placed directly under a CPU");
    }
    if (chain.empty() || chain.back() != busId) chain.assign(1, busId);
    std::vector<std::string> levels{chain.back()};
    for (long i = static_cast<long>(chain.size()) - 3; i >= 1; i -= 2) levels.push_back(chain[static_cast<size_t>(i)]);
    // levels: device, its switch, that switch's switch, ...
    int numa = numaOf(busId);
    for (size_t k = 0; k < levels.size(); ++k) {
      const std::string& b = levels[k];
      std::string parent = k + 1 < levels.size() ? levels[k + 1] : "";
      auto it = entries_.find(b);
      if (it == entries_.end()) {
        PciEntry e;
        e.busId = b;
        e.parent = parent;
        e.numa = numa;
        e.attrs = pciAttrs(b);
        entries_[b] = std::move(e);
        order_.push_back(b);
      }
    }
    return busId;
  }

  void detectNics() {
    bool peermem = !readSmallFile(opt_.sysfsRoot + "/module/nvidia_peermem/version").empty() ||
                   !readSmallFile(opt_.sysfsRoot + "/kernel/mm/memory_peers/nv_mem/version").empty();
    int dev = 0;
    std::string ibBase = opt_.sysfsRoot + "/class/infiniband";
    for (const auto& name : listDir(ibBase)) {
      std::string devPath = realPath(ibBase + "/" + name + "/device");
      std::string busId;
      if (!devPath.empty())
        if (auto b = normalizeBusId(devPath.substr(devPath.rfind('/') + 1))) busId = *b;
      if (busId.empty()) busId = hwlocBusIdOf(name);
      std::string guidText = readSmallFile(ibBase + "/" + name + "/node_guid");
      std::string guid = "0x";
      for (char c : guidText)
        if (c != ':') guid += c;
      if (guid == "0x") guid = "0x0";
      for (const auto& port : listDir(ibBase + "/" + name + "/ports")) {
        std::string state = readSmallFile(ibBase + "/" + name + "/ports/" + port + "/state");
        if (state.find("ACTIVE") == std::string::npos) continue;
        std::string rate = readSmallFile(ibBase + "/" + name + "/ports/" + port + "/rate");  // "400 Gb/sec (4X NDR)"
        double gbps = std::atof(rate.c_str());
        XmlElement net;
        net.name = "net";
        net.attrs = {{"name", name}, {"dev", std::to_string(dev++)}, {"speed", std::to_string(static_cast<long>(gbps * 1000))},
                     {"port", port}, {"latency", "0"}, {"guid", guid}, {"maxconn", "131072"}, {"gdr", peermem ? "1" : "0"}};
        addNet(busId, std::move(net));
      }
    }
    if (dev == 0) dev = hwlocRdmaNics(peermem);
    if (dev > 0) return;  // with RDMA devices, NCCL uses those and not the sockets
    std::string netBase = opt_.sysfsRoot + "/class/net";
    for (const auto& name : listDir(netBase)) {
      if (name == "lo") continue;
      std::string devPath = realPath(netBase + "/" + name + "/device");
      if (devPath.empty()) continue;  // virtual interface (bridge, tunnel, veth)
      std::string speedText = readSmallFile(netBase + "/" + name + "/speed");
      long speed = speedText.empty() ? -1 : std::atol(speedText.c_str());
      XmlElement net;
      net.name = "net";
      net.attrs = {{"name", name}, {"dev", std::to_string(dev++)}, {"latency", "0"},
                   {"speed", std::to_string(speed > 0 ? speed : 10000)}, {"port", "0"}, {"guid", "0x" + std::to_string(dev - 1)},
                   {"maxconn", "65536"}, {"gdr", "0"}};
      socketNets_.push_back(std::move(net));
    }
    // sysfs has no class/net (or it is empty): hwloc's interfaces on PCI.
    if (dev == 0)
      for (const auto& n : hw_.nets) {
        if (n.openfabrics || n.busId.empty() || n.name == "lo") continue;
        ++r_->hwlocFilled;
        XmlElement net;
        net.name = "net";
        net.attrs = {{"name", n.name}, {"dev", std::to_string(dev++)}, {"latency", "0"}, {"speed", "10000"}, {"port", "0"},
                     {"guid", "0x" + std::to_string(dev - 1)}, {"maxconn", "65536"}, {"gdr", "0"}};
        socketNets_.push_back(std::move(net));
        note(r_, Diagnostic::Info, "network interface " + n.name + " from hwloc (not in " + netBase + "); speed unknown");
      }
    if (dev == 0) note(r_, Diagnostic::Info, "no network devices found in " + ibBase + ", " + netBase + " or hwloc");
  }

  std::string hwlocBusIdOf(const std::string& name) {
    for (const auto& n : hw_.nets)
      if (n.name == name && !n.busId.empty()) {
        ++r_->hwlocFilled;
        return n.busId;
      }
    return "";
  }

  // hwloc's openfabrics devices with an ACTIVE port (state 4), when sysfs listed none.
  int hwlocRdmaNics(bool peermem) {
    int dev = 0;
    for (const auto& n : hw_.nets) {
      if (!n.openfabrics) continue;
      std::string guid = "0x0";
      if (auto g = n.infos.find("NodeGUID"); g != n.infos.end()) {
        guid = "0x";
        for (char c : g->second)
          if (c != ':') guid += c;
      }
      for (const auto& [key, value] : n.infos) {
        // "Port1State" = "4"
        if (key.rfind("Port", 0) != 0 || key.size() < 10 || key.compare(key.size() - 5, 5, "State") != 0) continue;
        if (value != "4") continue;
        std::string port = key.substr(4, key.size() - 9);
        XmlElement net;
        net.name = "net";
        net.attrs = {{"name", n.name}, {"dev", std::to_string(dev++)}, {"speed", "10000"}, {"port", port},
                     {"latency", "0"}, {"guid", guid}, {"maxconn", "131072"}, {"gdr", peermem ? "1" : "0"}};
        ++r_->hwlocFilled;
        note(r_, Diagnostic::Info, "RDMA device " + n.name + " port " + port + " from hwloc; its rate is unknown");
        addNet(n.busId, std::move(net));
      }
    }
    return dev;
  }

  void addNet(const std::string& busId, XmlElement net) {
    if (busId.empty() || (readPci(busId, "class").empty() && !hwPci(busId))) {
      socketNets_.push_back(std::move(net));
      return;
    }
    std::string leaf = addDeviceChain(busId);
    PciEntry& e = entries_[leaf];
    e.isNic = true;
    e.nets.push_back(std::move(net));
  }

  XmlElement assemble() {
    XmlElement root;
    root.name = "system";
    root.attrs = {{"version", "1"}};
    CpuInfo info = readCpuInfo(opt_);
    char host[256] = "";
    if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
    uint64_t hash = fnv1a(readSmallFile(opt_.procRoot + "/sys/kernel/random/boot_id"), fnv1a(host));
    char hashText[32];
    std::snprintf(hashText, sizeof(hashText), "0x%llx", static_cast<unsigned long long>(hash));
    std::vector<int> numas;
    for (const auto& [id, mask] : numa_) numas.push_back(id);
    if (numas.empty()) numas.push_back(-1);
    std::map<int, size_t> cpuIndex;
    for (int id : numas) {
      XmlElement& cpu = root.addChild("cpu");
      cpu.setAttr("host_hash", hashText);
      cpu.setAttr("numaid", std::to_string(id));
      if (id >= 0) cpu.setAttr("affinity", numa_[id]);
      if (!info.arch.empty()) cpu.setAttr("arch", info.arch);
      if (!info.vendor.empty()) cpu.setAttr("vendor", info.vendor);
      if (info.family >= 0) cpu.setAttr("familyid", std::to_string(info.family));
      if (info.model >= 0) cpu.setAttr("modelid", std::to_string(info.model));
      cpuIndex[id] = root.children.size() - 1;
    }
    // Top-level entries go under their NUMA node's CPU (the first CPU when unknown).
    for (const auto& b : order_) {
      const PciEntry& e = entries_[b];
      if (!e.parent.empty()) continue;
      size_t ci = cpuIndex.count(e.numa) ? cpuIndex[e.numa] : 0;
      if (!cpuIndex.count(e.numa) && numas.size() > 1)
        note(r_, Diagnostic::Info, b + " has no NUMA node in sysfs; placed under the first CPU");
      emit(b, &root.children[ci]);
    }
    // Socket NICs have no place in the PCI tree: NCCL lists them under every CPU.
    if (!socketNets_.empty())
      for (auto& cpu : root.children) {
        XmlElement& nic = cpu.addChild("nic");
        nic.children = socketNets_;
      }
    return root;
  }

  void emit(const std::string& busId, XmlElement* parent) {
    const PciEntry& e = entries_[busId];
    XmlElement& pci = parent->addChild("pci");
    pci.attrs = e.attrs;
    if (e.isGpu) {
      XmlElement& gpu = pci.addChild("gpu");
      // dev is this process's CUDA index; GPUs it cannot see have none (System numbers them).
      if (e.gpu.dev >= 0) gpu.setAttr("dev", std::to_string(e.gpu.dev));
      if (e.gpu.sm > 0) gpu.setAttr("sm", std::to_string(e.gpu.sm));
      if (e.gpu.dev >= 0) gpu.setAttr("rank", std::to_string(e.gpu.dev));
      gpu.setAttr("gdr", e.gpu.sm >= 70 ? "1" : "0");
      for (const auto& l : e.nvlinks) {
        XmlElement& nv = gpu.addChild("nvlink");
        nv.attrs = {{"target", l.target}, {"count", std::to_string(l.count)}, {"tclass", l.tclass}};
      }
    }
    if (e.isNic) {
      XmlElement& nic = pci.addChild("nic");
      nic.children = e.nets;
    }
    for (const auto& b : order_)
      if (entries_[b].parent == busId) emit(b, &pci);
  }

  const DetectOptions& opt_;
  DetectReport* r_;
  std::map<int, std::string> numa_;  // NUMA id -> cpumap
  std::map<std::string, PciEntry> entries_;
  std::vector<std::string> order_;   // insertion order of entries_
  std::vector<XmlElement> socketNets_;
  HwlocView hw_;  // loaded == false when hwloc is not used
};

}  // namespace

std::vector<DetectedGpu> cudaGpus(bool* ok, std::string* why) {
  std::vector<DetectedGpu> out;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    *ok = false;
    *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return out;
  }
  *ok = true;
  for (int d = 0; d < count; ++d) {
    char bus[64] = "";
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), d) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d) != cudaSuccess)
      cudaGetLastError();
    auto b = normalizeBusId(bus);
    if (!b) continue;
    out.push_back({*b, d, major * 10 + minor});
  }
  return out;
}

XmlElement detectTopologyXml(const DetectOptions& opt, DetectReport* report) {
  Detector d(opt, report);
  return d.run();
}

}  // namespace braid::topo
