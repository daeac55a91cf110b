// GPU memory for the rank programs of tests/mp, through the CUDA driver API loaded at run
// time (libcuda.so.1): the programs need no CUDA to build, nor to run on host memory. The
// primary context of the chosen device is made current, so braid (which uses the runtime API)
// sees the same device and context. Without a GPU, loadDriver() prints "SKIP ..." and exits 77.
#pragma once
#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "tests/mp/rank_util.h"

namespace braid::mptest {

namespace gpu {

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUstream = void*;
using CUdeviceptr = unsigned long long;

struct Api {
  CUresult (*init)(unsigned);
  CUresult (*deviceGetCount)(int*);
  CUresult (*deviceGet)(CUdevice*, int);
  CUresult (*primaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*ctxSetCurrent)(CUcontext);
  CUresult (*memAlloc)(CUdeviceptr*, size_t);
  CUresult (*memFree)(CUdeviceptr);
  CUresult (*memcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*memcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*memsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*streamCreate)(CUstream*, unsigned);
  CUresult (*streamSynchronize)(CUstream);
  CUresult (*streamQuery)(CUstream);
  CUresult (*ctxSynchronize)();
  CUresult (*getErrorString)(CUresult, const char**);
};
inline Api api;  // loaded once per process
// Per rank (per thread in threads mode).
inline thread_local bool enabled = false;
inline thread_local int device = -1;
inline thread_local CUstream stream = nullptr;

inline const char* errorText(CUresult r) {
  const char* text = nullptr;
  if (api.getErrorString) api.getErrorString(r, &text);
  return text ? text : "unknown CUDA error";
}

#define CU_OK(call)                                                                     \
  do {                                                                                  \
    gpu::CUresult r_ = (call);                                                          \
    if (r_ != 0) {                                                                      \
      say("FAIL %s:%d %s -> CUDA error %d %s\n", __FILE__, __LINE__, #call, r_,         \
          gpu::errorText(r_));                                                          \
      failRank();                                                                       \
    }                                                                                   \
  } while (0)

template <typename F>
bool load(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

// Opens CUDA (once per process) and counts the devices. Exits 77 ("SKIP") where there
// is no GPU.
inline int deviceCount = 0;
inline void loadDriver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::printf("SKIP device memory: no CUDA driver (%s)\n", dlerror());
    std::exit(77);
  }
  bool ok = load(lib, "cuInit", &api.init) && load(lib, "cuDeviceGetCount", &api.deviceGetCount) &&
            load(lib, "cuDeviceGet", &api.deviceGet) && load(lib, "cuDevicePrimaryCtxRetain", &api.primaryCtxRetain) &&
            load(lib, "cuCtxSetCurrent", &api.ctxSetCurrent) && load(lib, "cuMemAlloc_v2", &api.memAlloc) &&
            load(lib, "cuMemFree_v2", &api.memFree) && load(lib, "cuMemcpyHtoD_v2", &api.memcpyHtoD) &&
            load(lib, "cuMemcpyDtoH_v2", &api.memcpyDtoH) && load(lib, "cuMemsetD8_v2", &api.memsetD8) &&
            load(lib, "cuStreamCreate", &api.streamCreate) && load(lib, "cuStreamSynchronize", &api.streamSynchronize) &&
            load(lib, "cuStreamQuery", &api.streamQuery) && load(lib, "cuCtxSynchronize", &api.ctxSynchronize) &&
            load(lib, "cuGetErrorString", &api.getErrorString);
  if (!ok) {
    std::printf("FAIL libcuda.so.1 lacks a driver entry point: %s\n", dlerror());
    std::exit(1);
  }
  CUresult r = api.init(0);
  if (r == 0) r = api.deviceGetCount(&deviceCount);
  if (r != 0 || deviceCount == 0) {
    std::printf("SKIP device memory: no CUDA device (cuInit/cuDeviceGetCount: %d %s, %d devices)\n", r,
                r ? errorText(r) : "ok", deviceCount);
    std::exit(77);
  }
}

// Makes device rank % count (its primary context) current in the calling thread and gives the
// rank its own non-blocking stream. After loadDriver().
inline void start(int rank) {
  device = rank % deviceCount;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CU_OK(api.deviceGet(&dev, device));
  CU_OK(api.primaryCtxRetain(&ctx, dev));
  CU_OK(api.ctxSetCurrent(ctx));
  CU_OK(api.streamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */));
  enabled = true;
}

// A device buffer of at least one byte, filled with `fill`.
struct Buffer {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  explicit Buffer(size_t n, unsigned char fill = 0x5a) : bytes(std::max<size_t>(n, 1)) {
    CU_OK(api.memAlloc(&ptr, bytes));
    CU_OK(api.memsetD8(ptr, fill, bytes));
  }
  // Not after a failure in threads mode: a peer's kernel may still wait for this rank, and
  // cuMemFree can wait for the device.
  ~Buffer() {
    if (!gFailed) api.memFree(ptr);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* get() const { return reinterpret_cast<char*>(ptr); }
  void upload(const void* host, size_t n) { CU_OK(api.memcpyHtoD(ptr, host, std::min(n, bytes))); }
  void download(void* host, size_t n) { CU_OK(api.memcpyDtoH(host, ptr, std::min(n, bytes))); }
};

}  // namespace gpu

}  // namespace braid::mptest
