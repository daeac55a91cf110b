// One rank's buffers, in host memory (braid's CPU engine) or device memory, and the copies
// between them and host staging memory for filling inputs and checking outputs.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "perf/perf_args.h"

namespace braid::perf {

class RankBuffers {
 public:
  // kind is Host or Device (the current CUDA device). Copies to and from device buffers run
  // on `stream`, the one the collectives use, so that they are ordered with them (a plain
  // cudaMemcpy would race with work on a non-blocking stream). Throws PerfError when out of
  // memory.
  RankBuffers(MemoryKind kind, size_t sendBytes, size_t recvBytes, size_t scratchBytes, cudaStream_t stream);
  ~RankBuffers();
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;

  MemoryKind kind() const { return kind_; }
  char* send() const { return send_; }
  char* recv() const { return recv_; }
  char* scratch() const { return scratch_; }

  // Copies between host memory and one of the buffers; complete when they return.
  void upload(void* dst, const void* host, size_t bytes) const;
  void download(void* host, const void* src, size_t bytes) const;
  void fillBytes(void* dst, unsigned char value, size_t bytes) const;

 private:
  char* allocate(size_t bytes) const;
  void release(char* p) const;

  MemoryKind kind_;
  cudaStream_t stream_;
  char* send_ = nullptr;
  char* recv_ = nullptr;
  char* scratch_ = nullptr;
};

}  // namespace braid::perf
