// A tree built with -DBRAID_ENABLE_CUDA=OFF has no CUDA compiler step: the P2P kernel figures
// become skips that say so. Empty where the kernels are built (BRAID_HAVE_KERNELS, which braid's
// components hand to whatever links them), so that a glob of measure_*.cc may include it.
#include "tools/braid-doctor/measure_kernels.h"

#ifndef BRAID_HAVE_KERNELS
namespace braid::doctor::measure {

bool peerKernelsBuilt() { return false; }
cudaError_t launchPeerRead(const void*, size_t, void*, int, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t launchPeerWrite(void*, size_t, int, cudaStream_t) { return cudaErrorNotSupported; }

}  // namespace braid::doctor::measure
#endif
