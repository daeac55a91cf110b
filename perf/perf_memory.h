// One rank's buffers, in host memory (braid's CPU engine) or device memory, and the copies
// between them and host staging memory for filling inputs and checking outputs.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "perf/perf_args.h"

namespace braid::perf {

class RankBuffers {
 public:
  // kind is Host or Device (the current CUDA device). Throws PerfError when out of memory.
  RankBuffers(MemoryKind kind, size_t sendBytes, size_t recvBytes, size_t scratchBytes);
  ~RankBuffers();
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;

  MemoryKind kind() const { return kind_; }
  char* send() const { return send_; }
  char* recv() const { return recv_; }
  char* scratch() const { return scratch_; }

  // Copies between host memory and one of the buffers (synchronous).
  void upload(void* dst, const void* host, size_t bytes) const;
  void download(void* host, const void* src, size_t bytes) const;
  void fillBytes(void* dst, unsigned char value, size_t bytes) const;

 private:
  char* allocate(size_t bytes) const;
  void release(char* p) const;

  MemoryKind kind_;
  char* send_ = nullptr;
  char* recv_ = nullptr;
  char* scratch_ = nullptr;
};

}  // namespace braid::perf
