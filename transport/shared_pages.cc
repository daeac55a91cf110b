#include "transport/shared_pages.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "core/log.h"

namespace braid::transport {
namespace {

ncclResult_t cudaFail(const char* who, int rank, const char* what, cudaError_t e) {
  (void)cudaGetLastError();
  return fail(ncclUnhandledCudaError, "%s: rank %d: %s: %s", who, rank, what, cudaGetErrorString(e));
}

ncclResult_t sysFail(const char* who, int rank, const char* what, const char* name, int err) {
  return fail(ncclSystemError, "%s: rank %d: %s(%s): %s", who, rank, what, name, std::strerror(err));
}

}  // namespace

std::string uniqueShmName(const char* kind, int rank) {
  static std::atomic<uint64_t> counter{0};
  uint64_t random = 0;
  if (getentropy(&random, sizeof(random)) != 0)
    random = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^ uint64_t(uintptr_t(&random));
  char name[kShmNameBytes];
  std::snprintf(name, sizeof(name), "/braid-%s-%lld-%d-%llu-%016llx", kind, static_cast<long long>(getpid()), rank,
                static_cast<unsigned long long>(counter.fetch_add(1)), static_cast<unsigned long long>(random));
  return name;
}

ncclResult_t mapShared(const char* who, int rank, const char* name, size_t bytes, bool create, void** host, void** dev) {
  int fd = shm_open(name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
  if (fd < 0) return sysFail(who, rank, "shm_open", name, errno);
  int err = 0;
  const char* what = "";
  if (create) {
    // ftruncate sizes it; posix_fallocate takes the pages now, so that a full /dev/shm
    // fails here with ENOSPC instead of with SIGBUS at the first touch.
    if (ftruncate(fd, off_t(bytes)) != 0) err = errno, what = "ftruncate";
    else if (int e = posix_fallocate(fd, 0, off_t(bytes)); e != 0) err = e, what = "posix_fallocate";
  } else {
    struct stat st {};
    if (fstat(fd, &st) != 0) {
      err = errno, what = "fstat";
    } else if (st.st_size < off_t(bytes)) {
      (void)::close(fd);
      return fail(ncclInternalError, "%s: rank %d: shared-memory object %s has %lld bytes, not the %zu announced", who, rank,
                  name, static_cast<long long>(st.st_size), bytes);
    }
  }
  void* p = MAP_FAILED;
  if (err == 0) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) err = errno, what = "mmap";
  }
  if (::close(fd) != 0 && err == 0) err = errno, what = "close";  // the mapping keeps the object
  if (err != 0) {
    if (p != MAP_FAILED) (void)munmap(p, bytes);
    if (create) (void)shm_unlink(name);
    return sysFail(who, rank, what, name, err);
  }
  char what2[64 + kShmNameBytes];
  std::snprintf(what2, sizeof(what2), "cudaHostRegister of %s (%zu bytes)", name, bytes);
  void* d = nullptr;
  cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (e == cudaSuccess) {
    std::snprintf(what2, sizeof(what2), "cudaHostGetDevicePointer of %s", name);
    e = cudaHostGetDevicePointer(&d, p, 0);
    if (e != cudaSuccess) (void)cudaHostUnregister(p);
  }
  if (e != cudaSuccess) {
    (void)munmap(p, bytes);
    if (create) (void)shm_unlink(name);
    return cudaFail(who, rank, what2, e);
  }
  *host = p;
  *dev = d;
  return ncclSuccess;
}

ncclResult_t unmapShared(const char* who, int rank, void* host, size_t bytes) {
  ncclResult_t result = ncclSuccess;
  cudaError_t e = cudaHostUnregister(host);
  if (e != cudaSuccess) result = cudaFail(who, rank, "cudaHostUnregister of a staged FIFO region", e);
  if (munmap(host, bytes) != 0 && result == ncclSuccess) result = sysFail(who, rank, "munmap", "staged FIFO region", errno);
  return result;
}

}  // namespace braid::transport
