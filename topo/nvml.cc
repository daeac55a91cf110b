// NVML through dlopen: only the handful of calls that describe NVLinks. The types below are the
// NVML C API's (an opaque device handle, int return codes with 0 = success); the PCI info struct
// is read only through its first member, the bus id string, so a larger struct in a newer NVML
// cannot be overrun (the buffer passed is bigger than any version of it).
#include <dlfcn.h>

#include <cstring>
#include <map>

#include "topo/detect.h"
#include "topo/types.h"

namespace braid::topo {

namespace {
using NvmlDevice = void*;
using InitFn = int (*)();
using ShutdownFn = int (*)();
using GetHandleByPciFn = int (*)(const char*, NvmlDevice*);
using LinkStateFn = int (*)(NvmlDevice, unsigned, int*);
using RemotePciFn = int (*)(NvmlDevice, unsigned, void*);
using RemoteTypeFn = int (*)(NvmlDevice, unsigned, int*);
using CapabilityFn = int (*)(NvmlDevice, int*, int*);
constexpr unsigned kMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr int kRemoteGpu = 0, kRemoteIbmNpu = 1, kRemoteSwitch = 2;
}  // namespace

Nvml::Nvml() {
  handle_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* e = dlerror();
    why_ = std::string("dlopen(libnvidia-ml.so.1) failed: ") + (e ? e : "unknown error");
    return;
  }
  auto init = reinterpret_cast<InitFn>(dlsym(handle_, "nvmlInit_v2"));
  getHandle_ = dlsym(handle_, "nvmlDeviceGetHandleByPciBusId_v2");
  linkState_ = dlsym(handle_, "nvmlDeviceGetNvLinkState");
  remotePci_ = dlsym(handle_, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  remoteType_ = dlsym(handle_, "nvmlDeviceGetNvLinkRemoteDeviceType");  // newer NVML only
  shutdown_ = dlsym(handle_, "nvmlShutdown");
  capability_ = dlsym(handle_, "nvmlDeviceGetCudaComputeCapability");
  if (!init || !getHandle_ || !linkState_ || !remotePci_) {
    why_ = "libnvidia-ml.so.1 lacks the NVLink calls braid needs";
    return;
  }
  int rc = init();
  if (rc != 0) {
    why_ = "nvmlInit_v2 returned " + std::to_string(rc);
    return;
  }
  initialized_ = true;
}

Nvml::~Nvml() {
  if (initialized_ && shutdown_) reinterpret_cast<ShutdownFn>(shutdown_)();
  if (handle_) dlclose(handle_);
}

int Nvml::computeCapability(const std::string& busId) const {
  if (!loaded() || !capability_) return 0;
  NvmlDevice dev = nullptr;
  if (reinterpret_cast<GetHandleByPciFn>(getHandle_)(busId.c_str(), &dev) != 0) return 0;
  int major = 0, minor = 0;
  if (reinterpret_cast<CapabilityFn>(capability_)(dev, &major, &minor) != 0) return 0;
  return major * 10 + minor;
}

std::vector<NvmlLink> Nvml::nvlinks(const std::string& busId, std::string (*classOf)(const std::string&, const void*),
                                    const void* ctx) const {
  std::vector<NvmlLink> out;
  if (!loaded()) return out;
  NvmlDevice dev = nullptr;
  if (reinterpret_cast<GetHandleByPciFn>(getHandle_)(busId.c_str(), &dev) != 0) return out;
  std::map<std::string, NvmlLink> byTarget;
  for (unsigned link = 0; link < kMaxLinks; ++link) {
    int active = 0;
    if (reinterpret_cast<LinkStateFn>(linkState_)(dev, link, &active) != 0 || !active) continue;
    alignas(8) char pci[512];
    std::memset(pci, 0, sizeof(pci));
    if (reinterpret_cast<RemotePciFn>(remotePci_)(dev, link, pci) != 0) continue;
    pci[15] = '\0';  // busIdLegacy is the first member, 16 bytes
    auto target = normalizeBusId(pci);
    std::string tclass;
    int type = -1;
    if (remoteType_ && reinterpret_cast<RemoteTypeFn>(remoteType_)(dev, link, &type) == 0) {
      if (type == kRemoteGpu) tclass = "0x030200";
      else if (type == kRemoteSwitch) tclass = "0x068000";
      else if (type == kRemoteIbmNpu) tclass = "0x068001";
    }
    if (!target) {
      // NVSwitches that the VM does not show have no address: NCCL's placeholder.
      target = "fffffff:ff:ff.0";
      if (tclass.empty()) tclass = "0x068000";
    }
    if (tclass.empty()) tclass = classOf(*target, ctx);
    if (tclass.empty()) tclass = "0x068000";
    NvmlLink& l = byTarget[*target];
    l.target = *target;
    l.tclass = tclass;
    ++l.count;
  }
  for (auto& [k, v] : byTarget) out.push_back(v);
  return out;
}

}  // namespace braid::topo
