// Device buffers that CUDA graphs hold: the spilled work of captured launches, and captured
// scratch copies.
//
// Why not graph memory nodes (cudaMallocAsync under capture): a graph launch may have to map
// or remap the physical memory of its allocations, and the driver's mapping work waits for
// kernels already running on the device. braid's ranks on one GPU run kernels that spin until
// the other ranks' kernels arrive, so one rank's cudaGraphLaunch could wait for a kernel that
// waits for the next rank's graph, which that thread has not launched yet: observed on the H200
// as 4 ranks' graph replays that never finished once earlier graphs had used the pool.
// NCCL keeps captured work in memory of its own for the same reason.
//
// So a captured launch gets a buffer made with cudaMalloc (outside the capture), written by an
// upload kernel that is captured (each replay rewrites the same bytes just before the kernel
// that reads them; replays of one graph never overlap). A CUDA user object retained by the
// graph hands the buffer back when the last graph or executable graph holding it is destroyed
// (and its launches are done); a later capture reuses it. close() (the owner's device is idle)
// frees every buffer: a graph must not be replayed after its communicator is gone.
// Plain C++ header.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace braid::kernels {

class GraphWork {
 public:
  struct Stats {
    size_t buffers = 0, bytes = 0;  // made so far
    size_t idle = 0;                // of those, held by no graph now
    size_t reused = 0;              // captures that took an idle buffer
  };

  GraphWork();
  ~GraphWork();  // close()
  GraphWork(const GraphWork&) = delete;
  GraphWork& operator=(const GraphWork&) = delete;

  // A device buffer of `bytes` that the graph being captured on `stream` holds until it is
  // destroyed. Fails (a CUDA error) when `stream` is not capturing.
  cudaError_t hold(size_t bytes, cudaStream_t stream, unsigned char** device);
  // hold() for a copy of `blob`: its upload is captured on `stream`, before whatever reads it.
  cudaError_t capture(const std::vector<unsigned char>& blob, cudaStream_t stream, const unsigned char** device);

  // Frees every buffer, also those that graphs still hold. Call with the device idle.
  void close();

  Stats stats() const;

 private:
  struct Buffer {
    unsigned char* device = nullptr;
    size_t bytes = 0;
  };
  // What the graphs' user objects reach after this keeper may be gone.
  struct Shared {
    std::mutex mutex;
    std::vector<Buffer> all;       // every buffer made (freed by close)
    std::vector<Buffer> released;  // of those, the ones no graph holds any more
    bool closed = false;
    size_t reused = 0;  // captures that took a released buffer
  };
  struct Hold {  // one graph's hold on one buffer (the user object's data)
    std::shared_ptr<Shared> shared;
    Buffer buffer;
  };
  static void releaseHold(void* hold);  // the user object's destructor: no CUDA calls

  cudaError_t takeBuffer(size_t bytes, Buffer* out);

  std::shared_ptr<Shared> shared_;
};

}  // namespace braid::kernels
