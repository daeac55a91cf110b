#include "perf/perf_memory.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "perf/perf_errors.h"

namespace braid::perf {

RankBuffers::RankBuffers(MemoryKind kind, size_t sendBytes, size_t recvBytes, size_t scratchBytes, cudaStream_t stream)
    : kind_(kind), stream_(stream) {
  try {
    send_ = allocate(sendBytes);
    recv_ = allocate(recvBytes);
    scratch_ = allocate(scratchBytes);
  } catch (...) {
    release(send_);
    release(recv_);
    throw;
  }
}

RankBuffers::~RankBuffers() {
  release(send_);
  release(recv_);
  release(scratch_);
}

char* RankBuffers::allocate(size_t bytes) const {
  size_t size = bytes < 64 ? 64 : bytes;  // never a null buffer, even for count 0
  void* p = nullptr;
  if (kind_ == MemoryKind::Device) {
    PERF_CUDA(cudaMalloc(&p, size));
  } else if (int err = posix_memalign(&p, 4096, size); err != 0) {
    throw PerfError("cannot allocate " + std::to_string(size) + " bytes of host memory: " + std::strerror(err),
                    kExitFailure);
  }
  return static_cast<char*>(p);
}

void RankBuffers::release(char* p) const {
  if (p == nullptr) return;
  if (kind_ == MemoryKind::Device)
    (void)cudaFree(p);  // in a destructor: nothing useful to do with an error
  else
    std::free(p);
}

void RankBuffers::upload(void* dst, const void* host, size_t bytes) const {
  if (bytes == 0) return;
  if (kind_ == MemoryKind::Device) {
    PERF_CUDA(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
    PERF_CUDA(cudaStreamSynchronize(stream_));
  } else {
    std::memcpy(dst, host, bytes);
  }
}

void RankBuffers::download(void* host, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  if (kind_ == MemoryKind::Device) {
    PERF_CUDA(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_));
    PERF_CUDA(cudaStreamSynchronize(stream_));
  } else {
    std::memcpy(host, src, bytes);
  }
}

void RankBuffers::fillBytes(void* dst, unsigned char value, size_t bytes) const {
  if (bytes == 0) return;
  if (kind_ == MemoryKind::Device) {
    PERF_CUDA(cudaMemsetAsync(dst, value, bytes, stream_));
    PERF_CUDA(cudaStreamSynchronize(stream_));
  } else {
    std::memset(dst, value, bytes);
  }
}

}  // namespace braid::perf
