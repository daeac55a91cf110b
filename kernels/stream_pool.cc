#include "kernels/stream_pool.h"

namespace braid::kernels {

cudaError_t makeIsolatedPool(int dev, uint64_t keepBytes, cudaMemPool_t* pool) {
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = dev;
  cudaMemPool_t p = nullptr;
  if (cudaError_t e = cudaMemPoolCreate(&p, &props); e != cudaSuccess) return e;
  int no = 0;
  cudaError_t e = cudaMemPoolSetAttribute(p, cudaMemPoolReuseAllowInternalDependencies, &no);
  if (e == cudaSuccess) e = cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keepBytes);
  if (e != cudaSuccess) {
    (void)cudaMemPoolDestroy(p);
    return e;
  }
  *pool = p;
  return cudaSuccess;
}

}  // namespace braid::kernels
