#include "transport/cuda_driver.h"

#include <cuda.h>

#include <mutex>

namespace braid::transport {
namespace {

using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using WriteValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using WriteValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
using GetAddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
using PointerGetAttribute = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);

struct Driver {
  cudaError_t status = cudaErrorNotSupported;
  WaitValue32 waitValue32 = nullptr;
  WriteValue32 writeValue32 = nullptr;
  WriteValue64 writeValue64 = nullptr;  // optional
  GetAddressRange getAddressRange = nullptr;
  PointerGetAttribute pointerGetAttribute = nullptr;
};

template <typename Fn>
cudaError_t find(const char* name, Fn* out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
  if (e != cudaSuccess) return e;
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) return cudaErrorNotSupported;
  *out = reinterpret_cast<Fn>(fn);
  return cudaSuccess;
}

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    cudaError_t e = find("cuStreamWaitValue32", &d.waitValue32);
    if (e == cudaSuccess) e = find("cuStreamWriteValue32", &d.writeValue32);
    if (e == cudaSuccess) e = find("cuMemGetAddressRange", &d.getAddressRange);
    if (e == cudaSuccess) e = find("cuPointerGetAttribute", &d.pointerGetAttribute);
    if (e != cudaSuccess) (void)cudaGetLastError();
    d.status = e;
    if (e == cudaSuccess && find("cuStreamWriteValue64", &d.writeValue64) != cudaSuccess) {
      (void)cudaGetLastError();
      d.writeValue64 = nullptr;
    }
  });
  return d;
}

// CUresult codes share the runtime's numbering for the errors these calls return.
cudaError_t fromDriver(CUresult r) { return r == CUDA_SUCCESS ? cudaSuccess : static_cast<cudaError_t>(r); }

}  // namespace

cudaError_t streamWaitAtLeast(cudaStream_t stream, const uint32_t* word, uint32_t value) {
  const Driver& d = driver();
  if (d.status != cudaSuccess) return d.status;
  return fromDriver(d.waitValue32(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(word), value,
                                  CU_STREAM_WAIT_VALUE_GEQ));
}

cudaError_t streamWrite(cudaStream_t stream, uint32_t* word, uint32_t value) {
  const Driver& d = driver();
  if (d.status != cudaSuccess) return d.status;
  return fromDriver(d.writeValue32(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(word), value,
                                   CU_STREAM_WRITE_VALUE_DEFAULT));
}

cudaError_t streamWrite64(cudaStream_t stream, uint64_t* word, uint64_t value) {
  const Driver& d = driver();
  if (d.status != cudaSuccess) return d.status;
  if (d.writeValue64 == nullptr) return cudaErrorNotSupported;
  return fromDriver(d.writeValue64(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(word), value,
                                   CU_STREAM_WRITE_VALUE_DEFAULT));
}

cudaError_t allocationOf(const void* p, Allocation* out) {
  const Driver& d = driver();
  if (d.status != cudaSuccess) return d.status;
  CUdeviceptr base = 0;
  size_t bytes = 0;
  const CUdeviceptr at = reinterpret_cast<CUdeviceptr>(p);
  if (CUresult r = d.getAddressRange(&base, &bytes, at); r != CUDA_SUCCESS) return fromDriver(r);
  unsigned long long id = 0;
  if (CUresult r = d.pointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, at); r != CUDA_SUCCESS) return fromDriver(r);
  out->base = reinterpret_cast<void*>(base);
  out->bytes = bytes;
  out->bufferId = id;
  return cudaSuccess;
}

}  // namespace braid::transport
