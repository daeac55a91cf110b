#include "transport/ipc_refs.h"

#include <cstring>
#include <iterator>
#include <mutex>
#include <vector>

#include "core/cuda_scope.h"
#include "core/log.h"
#include "transport/cuda_driver.h"

namespace braid::transport {
namespace {

struct ImportedRegion {
  size_t bytes;
  IpcRef ref;  // offset 0
};

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::map<uintptr_t, ImportedRegion>& imported() {  // by local base
  static std::map<uintptr_t, ImportedRegion> m;
  return m;
}
struct OwnHandle {
  uint64_t bufferId;
  size_t bytes;
  cudaIpcMemHandle_t handle;
};
std::map<uintptr_t, OwnHandle>& ownHandles() {  // this process's allocations, by base
  static std::map<uintptr_t, OwnHandle> m;
  return m;
}

}  // namespace

void noteShared(void* localBase, size_t bytes, int64_t ownerPid, uint64_t ownerHost, uint64_t ownerBase,
                uint64_t bufferId, const cudaIpcMemHandle_t& handle) {
  ImportedRegion r{bytes, {}};
  r.ref.ownerPid = ownerPid;
  r.ref.ownerHost = ownerHost;
  r.ref.ownerBase = ownerBase;
  r.ref.bufferId = bufferId;
  r.ref.handle = handle;
  std::lock_guard<std::mutex> lock(registryMutex());
  imported()[reinterpret_cast<uintptr_t>(localBase)] = r;
}

void forgetShared(void* localBase) {
  std::lock_guard<std::mutex> lock(registryMutex());
  imported().erase(reinterpret_cast<uintptr_t>(localBase));
}

ncclResult_t describePointer(const void* p, int64_t pid, uint64_t host, const char* what, IpcRef* out) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    auto& regions = imported();
    auto it = regions.upper_bound(at);
    if (it != regions.begin() && at < std::prev(it)->first + std::prev(it)->second.bytes) {
      --it;
      *out = it->second.ref;
      out->offset = at - it->first;
      return ncclSuccess;
    }
  }
  Allocation a;
  if (cudaError_t e = allocationOf(p, &a); e != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(ncclInvalidArgument, "%s %p is not device memory of this process that CUDA can tell the allocation of (%s)",
                what, p, cudaGetErrorString(e));
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(a.base);
  out->ownerPid = pid;
  out->ownerHost = host;
  out->ownerBase = base;
  out->bufferId = a.bufferId;
  out->offset = at - base;
  std::lock_guard<std::mutex> lock(registryMutex());
  auto& own = ownHandles();
  auto it = own.find(base);
  if (it != own.end() && it->second.bufferId == a.bufferId) {
    out->handle = it->second.handle;
    return ncclSuccess;
  }
  cudaIpcMemHandle_t h;
  if (cudaError_t e = cudaIpcGetMemHandle(&h, a.base); e != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(ncclInvalidArgument,
                "%s %p (allocation %p, %zu bytes) cannot be shared with the process that runs this GPU's kernels "
                "(cudaIpcGetMemHandle: %s). Ranks of several processes on one GPU without MPS need buffers from "
                "cudaMalloc (not a stream-ordered pool, cuMem* or memory imported from another process). Fix: use "
                "cudaMalloc'd buffers, start MPS (nvidia-cuda-mps-control -d), or set BRAID_SERVED=0",
                what, p, a.base, a.bytes, cudaGetErrorString(e));
  }
  own[base] = OwnHandle{a.bufferId, a.bytes, h};
  out->handle = h;
  return ncclSuccess;
}

IpcImports::~IpcImports() {
  closeRetired();
  DeviceScope scope(cudaDev_);
  for (auto& [key, m] : byKey_)
    if (cudaIpcCloseMemHandle(m.local) != cudaSuccess) (void)cudaGetLastError();
}

void IpcImports::closeRetired() {
  if (retired_.empty()) return;
  DeviceScope scope(cudaDev_);
  for (char* p : retired_)
    if (cudaIpcCloseMemHandle(p) != cudaSuccess) (void)cudaGetLastError();
  retired_.clear();
}

ncclResult_t IpcImports::resolve(const IpcRef& ref, void** out, std::string* error) {
  if (ref.ownerPid == pid_ && ref.ownerHost == host_) {
    *out = reinterpret_cast<char*>(ref.ownerBase) + ref.offset;
    return ncclSuccess;
  }
  const Key key{ref.ownerHost, ref.ownerPid, ref.ownerBase};
  auto it = byKey_.find(key);
  if (it != byKey_.end() && it->second.bufferId != ref.bufferId) {  // freed and allocated again
    retired_.push_back(it->second.local);
    byKey_.erase(it);
    it = byKey_.end();
  }
  if (it == byKey_.end()) {
    void* local = nullptr;
    cudaError_t e = cudaIpcOpenMemHandle(&local, ref.handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      *error = std::string("cudaIpcOpenMemHandle of process ") + std::to_string(ref.ownerPid) + "'s allocation at " +
               std::to_string(ref.ownerBase) + ": " + cudaGetErrorString(e);
      return ncclUnhandledCudaError;
    }
    ++opens_;
    it = byKey_.emplace(key, Mapping{ref.bufferId, static_cast<char*>(local)}).first;
  }
  *out = it->second.local + ref.offset;
  return ncclSuccess;
}

}  // namespace braid::transport
