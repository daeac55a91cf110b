// The host kernels reproduce, bit for bit, 2-rank reductions computed on an NVIDIA H200 with
// the operations NCCL's sm_90 kernels use (oracle/nccl_oracle.cu, "EMU-DIGEST" lines). The
// vectors (nccl_vectors.h) hold every fp8 pair, random bit patterns, rounding ties, x and -x,
// subnormals, infinities and NaNs; the digests are FNV-1a hashes of the GPU's results.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <vector>

#include "core/numeric.h"
#include "host/reduce.h"
#include "host/reduce_isa.h"
#include "nccl_vectors.h"

namespace braid::host {
namespace {

namespace bv = braid_vectors;

struct GpuDigest {
  const char* type;
  const char* op;
  uint64_t hash;
};

// Recorded with tests/unit/reduce/oracle/run.sh on an H200 (CUDA 13.0, driver 580).
constexpr GpuDigest kGpuDigests[] = {
#include "gpu_digests.inc"
};

// rank 1's input pre-multiplied (as its sender does), then reduced with rank 0's by the
// final step: what the 2-rank ring computes for every element.
uint64_t braidDigest(KernelIsa isa, int type, int opIndex) {
  const auto t = ncclDataType_t(type);
  const size_t n = bv::vectorCount(type), bytes = n * bv::kTypeSize[type];
  std::vector<char> in0(bytes), in1(bytes), pre1(bytes), out(bytes);
  bv::fillInputs(type, in0.data(), in1.data());
  const uint64_t scalar = bv::premulScalarBits(type);
  auto op = opIndex < 5 ? makeHostOp(ncclRedOp_t(opIndex), t, 2) : makePreMulSumOp(t, &scalar, 2);
  selectElemwiseFor(isa, *op, false, true, true, false)(pre1.data(), nullptr, in1.data(), n, *op);
  selectElemwiseFor(isa, *op, true, true, true, true)(out.data(), pre1.data(), in0.data(), n, *op);
  return bv::fnv1a64(out.data(), bytes);
}

TEST(GpuDigest, HostKernelsReproduceTheGpu) {
  ASSERT_EQ(std::size(kGpuDigests), size_t(bv::kTypes * bv::kOps));
  for (const GpuDigest& d : kGpuDigests) {
    int type = 0, op = 0;
    while (std::string(typeName(ncclDataType_t(type))) != d.type) type++;
    while (std::string(bv::kOpNames[op]) != d.op) op++;
    for (KernelIsa isa : {KernelIsa::Base, KernelIsa::Avx2}) {
      if (!kernelIsaSupported(isa)) continue;
      EXPECT_EQ(braidDigest(isa, type, op), d.hash) << d.type << " " << d.op << " " << kernelIsaName(isa);
    }
  }
}

}  // namespace
}  // namespace braid::host
