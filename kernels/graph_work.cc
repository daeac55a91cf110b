#include "kernels/graph_work.h"

#include "core/cuda_scope.h"
#include "kernels/kernel_entry.h"

namespace braid::kernels {

GraphWork::GraphWork() : shared_(std::make_shared<Shared>()) {}

GraphWork::~GraphWork() { close(); }

void GraphWork::releaseHold(void* hold) {
  Hold* h = static_cast<Hold*>(hold);
  {
    std::lock_guard<std::mutex> lock(h->shared->mutex);
    if (!h->shared->closed) h->shared->released.push_back(h->buffer);
  }
  delete h;
}

cudaError_t GraphWork::takeBuffer(size_t bytes, Buffer* out) {
  Shared& s = *shared_;
  std::lock_guard<std::mutex> lock(s.mutex);
  // The smallest released buffer that fits: captures of one program repeat a few shapes.
  size_t best = s.released.size();
  for (size_t i = 0; i < s.released.size(); ++i)
    if (s.released[i].bytes >= bytes && (best == s.released.size() || s.released[i].bytes < s.released[best].bytes)) best = i;
  if (best < s.released.size()) {
    *out = s.released[best];
    s.released.erase(s.released.begin() + long(best));
    ++s.reused;
    return cudaSuccess;
  }
  Buffer b;
  b.bytes = bytes;
  {
    RelaxedCapture relaxed;  // cudaMalloc is refused in global capture mode, and enters no graph
    if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&b.device), bytes); e != cudaSuccess) return e;
  }
  s.all.push_back(b);
  *out = b;
  return cudaSuccess;
}

cudaError_t GraphWork::hold(size_t bytes, cudaStream_t stream, unsigned char** device) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  if (cudaError_t e = cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph); e != cudaSuccess) return e;
  if (status != cudaStreamCaptureStatusActive || graph == nullptr) return cudaErrorStreamCaptureInvalidated;
  Buffer b;
  if (cudaError_t e = takeBuffer(bytes, &b); e != cudaSuccess) return e;
  Hold* h = new Hold{shared_, b};
  cudaUserObject_t object = nullptr;
  if (cudaError_t e = cudaUserObjectCreate(&object, h, &GraphWork::releaseHold, 1, cudaUserObjectNoDestructorSync);
      e != cudaSuccess) {
    releaseHold(h);
    return e;
  }
  if (cudaError_t e = cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove); e != cudaSuccess) {
    (void)cudaUserObjectRelease(object, 1);  // runs releaseHold: the buffer goes back
    return e;
  }
  // From here the graph owns the hold: the buffer comes back when the graph is destroyed.
  *device = b.device;
  return cudaSuccess;
}

cudaError_t GraphWork::capture(const std::vector<unsigned char>& blob, cudaStream_t stream, const unsigned char** device) {
  unsigned char* buffer = nullptr;
  if (cudaError_t e = hold(blob.size(), stream, &buffer); e != cudaSuccess) return e;
  if (cudaError_t e = uploadBlob(buffer, blob.data(), blob.size(), stream); e != cudaSuccess) return e;
  *device = buffer;
  return cudaSuccess;
}

void GraphWork::close() {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  if (shared_->closed) return;
  for (const Buffer& b : shared_->all) (void)cudaFree(b.device);
  (void)cudaGetLastError();
  shared_->all.clear();
  shared_->released.clear();
  shared_->closed = true;
}

GraphWork::Stats GraphWork::stats() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  Stats s;
  for (const Buffer& b : shared_->all) s.bytes += b.bytes;
  s.buffers = shared_->all.size();
  s.idle = shared_->released.size();
  s.reused = shared_->reused;
  return s;
}

}  // namespace braid::kernels
