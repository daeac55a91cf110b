// The few CUDA driver calls of the cuMem IPC measurement, found through the runtime
// (cudaGetDriverEntryPointByVersion): the build links no libcuda, and a machine without a
// driver simply has none of them.
#pragma once
#include <cuda.h>

#include <string>

namespace braid::doctor::measure {

struct Driver {
  CUresult (*memGetAllocationGranularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*memCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) = nullptr;
  CUresult (*memRelease)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*memAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*memAddressFree)(CUdeviceptr, size_t) = nullptr;
  CUresult (*memMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*memUnmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*memSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult (*memExportToShareableHandle)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                                         unsigned long long) = nullptr;
  CUresult (*memImportFromShareableHandle)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType) = nullptr;
  CUresult (*getErrorString)(CUresult, const char**) = nullptr;
};

// Fills *driver; false with the missing entry point in *why.
bool loadDriver(Driver* driver, std::string* why);
// "cuMemCreate: CUDA_ERROR_...: text".
std::string driverText(const Driver& driver, CUresult result);

// A device-memory allocation that can be exported as a POSIX file descriptor, mapped on `device`.
struct SharedAllocation {
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr ptr = 0;
  size_t size = 0;
  bool mapped = false;
};
// Rounds `bytes` up to the granularity, creates, reserves, maps and opens it to `device`.
CUresult createShareable(const Driver& d, int device, size_t bytes, SharedAllocation* out, std::string* call);
// Maps an imported handle (`size` bytes) and opens it to `device`.
CUresult mapImported(const Driver& d, int device, CUmemGenericAllocationHandle handle, size_t size,
                     SharedAllocation* out, std::string* call);
// Unmaps, frees the range and releases the handle (safe on a partly built allocation).
void releaseShareable(const Driver& d, SharedAllocation* a);

}  // namespace braid::doctor::measure
