// Which build of the element-wise kernels selectElemwise uses: the x86-64 baseline, or AVX2
// with FMA and F16C where the CPU has them. Both give the same bits; tests run both.
#pragma once
#include "host/reduce.h"

namespace braid::host {

enum class KernelIsa { Base, Avx2 };

// The best build this CPU runs (Avx2 where it has AVX2, FMA and F16C).
KernelIsa bestKernelIsa();
bool kernelIsaSupported(KernelIsa isa);
const char* kernelIsaName(KernelIsa isa);

// selectElemwise for a given build (which the CPU must support).
ElemwiseFn selectElemwiseFor(KernelIsa isa, const HostOp& op, bool hasRecv, bool hasSrc, bool premulSrc, bool final);

}  // namespace braid::host
