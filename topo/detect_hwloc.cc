#include "topo/detect_hwloc.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "topo/types.h"

#ifdef BRAID_HAVE_HWLOC
#include <dlfcn.h>
#include <hwloc.h>

#include <mutex>
#include <type_traits>
#endif

namespace braid::topo {

std::string cpuMaskOf(const std::vector<int>& cpus, size_t minGroups) {
  size_t groups = std::max<size_t>(minGroups, 1);
  for (int c : cpus)
    if (c >= 0) groups = std::max(groups, static_cast<size_t>(c) / 32 + 1);
  std::vector<uint32_t> words(groups, 0);
  for (int c : cpus)
    if (c >= 0) words[static_cast<size_t>(c) / 32] |= 1u << (c % 32);
  std::string out;
  char buf[16];
  for (size_t i = groups; i-- > 0;) {
    std::snprintf(buf, sizeof(buf), "%08x", words[i]);
    if (!out.empty()) out += ',';
    out += buf;
  }
  return out;
}

std::vector<int> cpusOfMask(const std::string& mask) {
  std::vector<uint32_t> words;  // least significant first
  size_t end = mask.size();
  while (true) {
    size_t comma = end == 0 ? std::string::npos : mask.rfind(',', end - 1);
    size_t begin = comma == std::string::npos ? 0 : comma + 1;
    std::string group = mask.substr(begin, end - begin);
    if (group.rfind("0x", 0) == 0) group = group.substr(2);
    words.push_back(static_cast<uint32_t>(std::strtoul(group.c_str(), nullptr, 16)));
    if (comma == std::string::npos) break;
    end = comma;
  }
  std::vector<int> cpus;
  for (size_t w = 0; w < words.size(); ++w)
    for (int b = 0; b < 32; ++b)
      if (words[w] & (1u << b)) cpus.push_back(static_cast<int>(w * 32) + b);
  return cpus;
}

bool pcieSpeedWidthOf(float gbs, std::string* speed, std::string* width) {
  if (!(gbs > 0)) return false;
  struct Gen {
    const char* text;
    double gbPerLane;  // GB/s per lane after line encoding
  };
  static const Gen gens[] = {{"2.5 GT/s PCIe", 2.5 * 0.8 / 8},          {"5.0 GT/s PCIe", 5.0 * 0.8 / 8},
                             {"8.0 GT/s PCIe", 8.0 * 128 / 130 / 8},    {"16.0 GT/s PCIe", 16.0 * 128 / 130 / 8},
                             {"32.0 GT/s PCIe", 32.0 * 128 / 130 / 8},  {"64.0 GT/s PCIe", 64.0 * 242 / 256 / 8}};
  // Widest first, x16 before x32: generations 3 to 5 share the encoding, so Gen4 x16 and Gen5
  // x8 give the same GB/s; either pair gives the same bandwidth (width x rate) in the model.
  static const int widths[] = {16, 32, 12, 8, 4, 2, 1};
  for (int valid : widths)
    for (const Gen& g : gens)
      if (std::fabs(gbs / g.gbPerLane - valid) < 0.01 * valid) {
        *speed = g.text;
        *width = std::to_string(valid);
        return true;
      }
  return false;
}

#ifndef BRAID_HAVE_HWLOC

bool hwlocCompiledIn() { return false; }

HwlocView readHwloc() {
  HwlocView v;
  v.why = "braid was built without hwloc (no hwloc headers at build time)";
  return v;
}

#else

static_assert(HWLOC_API_VERSION >= 0x00020100 && HWLOC_API_VERSION < 0x00030000,
              "detect_hwloc.cc reads hwloc 2.x structures (libhwloc.so.15)");

bool hwlocCompiledIn() { return true; }

namespace {

// The entry points used, resolved from libhwloc.so.15. Only real functions: hwloc.h's inline
// helpers would call the library directly and make libbraid.so depend on it.
struct HwlocLib {
  unsigned (*getApiVersion)() = nullptr;
  int (*init)(hwloc_topology_t*) = nullptr;
  void (*destroy)(hwloc_topology_t) = nullptr;
  int (*load)(hwloc_topology_t) = nullptr;
  int (*setIoFilter)(hwloc_topology_t, enum hwloc_type_filter_e) = nullptr;
  int (*setTypeFilter)(hwloc_topology_t, hwloc_obj_type_t, enum hwloc_type_filter_e) = nullptr;
  int (*setComponents)(hwloc_topology_t, unsigned long, const char*) = nullptr;  // 2.1+
  hwloc_obj_t (*objByDepth)(hwloc_topology_t, int, unsigned) = nullptr;
  int (*bitmapFirst)(hwloc_const_bitmap_t) = nullptr;
  int (*bitmapNext)(hwloc_const_bitmap_t, int) = nullptr;
  bool ok = false;
  std::string why;
};

const HwlocLib& lib() {
  static HwlocLib l;
  static std::once_flag once;
  std::call_once(once, [] {
    // Kept loaded for the life of the process: hwloc keeps its component registry and plugins.
    void* h = ::dlopen("libhwloc.so.15", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      l.why = std::string("cannot load libhwloc.so.15 (") + (e ? e : "unknown error") + ")";
      return;
    }
    auto sym = [&](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_reference_t<decltype(*fn)>>(::dlsym(h, name));
      return *fn != nullptr;
    };
    bool all = sym(&l.getApiVersion, "hwloc_get_api_version") && sym(&l.init, "hwloc_topology_init") &&
               sym(&l.destroy, "hwloc_topology_destroy") && sym(&l.load, "hwloc_topology_load") &&
               sym(&l.setIoFilter, "hwloc_topology_set_io_types_filter") &&
               sym(&l.setTypeFilter, "hwloc_topology_set_type_filter") &&
               sym(&l.objByDepth, "hwloc_get_obj_by_depth") && sym(&l.bitmapFirst, "hwloc_bitmap_first") &&
               sym(&l.bitmapNext, "hwloc_bitmap_next");
    sym(&l.setComponents, "hwloc_topology_set_components");
    if (!all) {
      l.why = "libhwloc.so.15 lacks an expected hwloc 2.x function";
      return;
    }
    unsigned v = l.getApiVersion();
    if ((v >> 16) != (HWLOC_API_VERSION >> 16)) {
      char buf[96];
      std::snprintf(buf, sizeof(buf), "libhwloc.so.15 has API 0x%x, built for 0x%x", v, HWLOC_API_VERSION);
      l.why = buf;
      return;
    }
    l.ok = true;
  });
  return l;
}

std::string versionText(unsigned v) {
  return std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff) + "." + std::to_string(v & 0xff);
}

std::vector<int> cpusOf(const HwlocLib& l, hwloc_const_bitmap_t set) {
  std::vector<int> cpus;
  if (!set) return cpus;
  for (int i = l.bitmapFirst(set); i >= 0 && cpus.size() < (1u << 20); i = l.bitmapNext(set, i)) cpus.push_back(i);
  return cpus;
}

std::string busIdOf(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", static_cast<unsigned>(p.domain), p.bus, p.dev, p.func);
  auto b = normalizeBusId(buf);
  return b ? *b : buf;
}

class Walker {
 public:
  Walker(const HwlocLib& l, HwlocView* v) : l_(l), v_(v) {}

  void run(hwloc_obj_t root) {
    collectNuma(root, 0);
    walk(root, {}, 0);
  }

 private:
  static bool isIo(hwloc_obj_t o) {
    return o->type == HWLOC_OBJ_BRIDGE || o->type == HWLOC_OBJ_PCI_DEVICE || o->type == HWLOC_OBJ_OS_DEVICE ||
           o->type == HWLOC_OBJ_MISC;
  }

  void collectNuma(hwloc_obj_t o, int depth) {
    if (!o || depth > 64) return;
    if (o->type == HWLOC_OBJ_NUMANODE && o->os_index != HWLOC_UNKNOWN_INDEX && o->os_index < 65536)
      v_->numaCpus[static_cast<int>(o->os_index)] = cpusOf(l_, o->cpuset);
    for (hwloc_obj_t c = o->first_child; c; c = c->next_sibling) collectNuma(c, depth + 1);
    for (hwloc_obj_t c = o->memory_first_child; c; c = c->next_sibling) collectNuma(c, depth + 1);
  }

  // The NUMA node local to an I/O object: the only node (with CPUs) inside the cpuset of its
  // first non-I/O ancestor.
  int numaOf(hwloc_obj_t o) const {
    while (o && isIo(o)) o = o->parent;
    if (!o) return -1;
    std::vector<int> local = cpusOf(l_, o->cpuset);
    int found = -1, count = 0;
    for (const auto& [id, cpus] : v_->numaCpus) {
      if (cpus.empty() || !std::includes(local.begin(), local.end(), cpus.begin(), cpus.end())) continue;
      found = id;
      ++count;
    }
    return count == 1 ? found : -1;
  }

  void walk(hwloc_obj_t o, std::vector<std::string> chain, int depth) {
    if (!o || depth > 64) return;
    if ((o->type == HWLOC_OBJ_PCI_DEVICE || o->type == HWLOC_OBJ_BRIDGE) && o->attr) {
      bool pciSide = o->type == HWLOC_OBJ_PCI_DEVICE || o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
      if (pciSide) {
        const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p = o->type == HWLOC_OBJ_PCI_DEVICE ? o->attr->pcidev : o->attr->bridge.upstream.pci;
        HwlocPci d;
        d.busId = busIdOf(p);
        d.chain = chain;
        d.bridge = o->type == HWLOC_OBJ_BRIDGE;
        d.classId = p.class_id;
        d.vendor = p.vendor_id;
        d.device = p.device_id;
        d.subVendor = p.subvendor_id;
        d.subDevice = p.subdevice_id;
        d.linkGBs = p.linkspeed;
        d.numa = numaOf(o);
        if (d.bridge) chain.push_back(d.busId);
        v_->pci.emplace(d.busId, std::move(d));
      }
    } else if (o->type == HWLOC_OBJ_OS_DEVICE && o->attr &&
               (o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK || o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) &&
               o->name) {
      HwlocNet n;
      n.name = o->name;
      n.openfabrics = o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
      if (o->parent && o->parent->type == HWLOC_OBJ_PCI_DEVICE && o->parent->attr) n.busId = busIdOf(o->parent->attr->pcidev);
      for (unsigned i = 0; i < o->infos_count && o->infos; ++i)
        if (o->infos[i].name && o->infos[i].value) n.infos[o->infos[i].name] = o->infos[i].value;
      v_->nets.push_back(std::move(n));
    }
    for (hwloc_obj_t c = o->first_child; c; c = c->next_sibling) walk(c, chain, depth + 1);
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) walk(c, chain, depth + 1);
  }

  const HwlocLib& l_;
  HwlocView* v_;
};

}  // namespace

HwlocView readHwloc() {
  HwlocView v;
  const HwlocLib& l = lib();
  if (!l.ok) {
    v.why = l.why;
    return v;
  }
  v.version = versionText(l.getApiVersion());
  hwloc_topology_t t = nullptr;
  if (l.init(&t) != 0 || !t) {
    v.why = "hwloc_topology_init failed";
    return v;
  }
  // Bridges, PCI devices and OS devices are filtered out by default; keep them all. The GPU
  // plugins (CUDA, NVML, OpenCL, ROCm, Level Zero, GL) would start driver libraries: braid asks
  // CUDA and NVML itself, so they are excluded (unknown names are ignored by hwloc).
  l.setIoFilter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
  // OS devices: the important ones (network, openfabrics, GPUs), not every disk and DMA engine.
  l.setTypeFilter(t, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (l.setComponents)
    for (const char* name : {"cuda", "nvml", "opencl", "rsmi", "levelzero", "gl"})
      l.setComponents(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, name);
  if (l.load(t) != 0) {
    v.why = "hwloc_topology_load failed";
    l.destroy(t);
    return v;
  }
  hwloc_obj_t root = l.objByDepth(t, 0, 0);
  if (!root) {
    v.why = "hwloc topology has no root object";
    l.destroy(t);
    return v;
  }
  Walker(l, &v).run(root);
  l.destroy(t);
  v.loaded = true;
  return v;
}

#endif  // BRAID_HAVE_HWLOC

}  // namespace braid::topo
