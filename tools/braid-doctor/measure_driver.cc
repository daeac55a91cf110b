#include "tools/braid-doctor/measure_driver.h"

#include <cuda_runtime_api.h>

namespace braid::doctor::measure {
namespace {

template <typename Fn>
bool entry(const char* name, Fn* fn, std::string* why) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    *why = std::string("driver entry point ") + name + " not found" +
           (e != cudaSuccess ? std::string(": ") + cudaGetErrorString(e) : std::string());
    (void)cudaGetLastError();
    return false;
  }
  *fn = reinterpret_cast<Fn>(p);
  return true;
}

CUmemAllocationProp propFor(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

CUresult mapAndOpen(const Driver& d, int device, SharedAllocation* out, std::string* call) {
  CUresult r = d.memAddressReserve(&out->ptr, out->size, 0, 0, 0);
  if (r != CUDA_SUCCESS) {
    out->ptr = 0;
    *call = "cuMemAddressReserve";
    return r;
  }
  if ((r = d.memMap(out->ptr, out->size, 0, out->handle, 0)) != CUDA_SUCCESS) {
    *call = "cuMemMap";
    return r;
  }
  out->mapped = true;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if ((r = d.memSetAccess(out->ptr, out->size, &access, 1)) != CUDA_SUCCESS) *call = "cuMemSetAccess";
  return r;
}

}  // namespace

bool loadDriver(Driver* d, std::string* why) {
  return entry("cuMemGetAllocationGranularity", &d->memGetAllocationGranularity, why) &&
         entry("cuMemCreate", &d->memCreate, why) && entry("cuMemRelease", &d->memRelease, why) &&
         entry("cuMemAddressReserve", &d->memAddressReserve, why) &&
         entry("cuMemAddressFree", &d->memAddressFree, why) && entry("cuMemMap", &d->memMap, why) &&
         entry("cuMemUnmap", &d->memUnmap, why) && entry("cuMemSetAccess", &d->memSetAccess, why) &&
         entry("cuMemExportToShareableHandle", &d->memExportToShareableHandle, why) &&
         entry("cuMemImportFromShareableHandle", &d->memImportFromShareableHandle, why) &&
         entry("cuGetErrorString", &d->getErrorString, why);
}

std::string driverText(const Driver& d, CUresult result) {
  const char* text = nullptr;
  if (d.getErrorString == nullptr || d.getErrorString(result, &text) != CUDA_SUCCESS || text == nullptr)
    return "CUresult " + std::to_string(static_cast<int>(result));
  return std::string(text) + " (CUresult " + std::to_string(static_cast<int>(result)) + ")";
}

CUresult createShareable(const Driver& d, int device, size_t bytes, SharedAllocation* out, std::string* call) {
  CUmemAllocationProp prop = propFor(device);
  size_t granularity = 0;
  CUresult r = d.memGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (r != CUDA_SUCCESS) {
    *call = "cuMemGetAllocationGranularity";
    return r;
  }
  if (granularity == 0) granularity = size_t{2} << 20;
  out->size = (bytes + granularity - 1) / granularity * granularity;
  if ((r = d.memCreate(&out->handle, out->size, &prop, 0)) != CUDA_SUCCESS) {
    out->handle = 0;
    *call = "cuMemCreate(POSIX fd handle type)";
    return r;
  }
  return mapAndOpen(d, device, out, call);
}

CUresult mapImported(const Driver& d, int device, CUmemGenericAllocationHandle handle, size_t size,
                     SharedAllocation* out, std::string* call) {
  out->handle = handle;
  out->size = size;
  return mapAndOpen(d, device, out, call);
}

void releaseShareable(const Driver& d, SharedAllocation* a) {
  if (a->mapped) (void)d.memUnmap(a->ptr, a->size);
  if (a->ptr != 0) (void)d.memAddressFree(a->ptr, a->size);
  if (a->handle != 0) (void)d.memRelease(a->handle);
  *a = SharedAllocation{};
}

}  // namespace braid::doctor::measure
