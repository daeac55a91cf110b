// GPU oracle for braid's reductions (run by hand on a GPU machine: run.sh).
//
// 1. With 2 GPUs: runs the real NCCL's all-reduce (ncclCommInitAll) for every type and op of
//    nccl_vectors.h, computes the same 2-rank reduction with braid's host kernels
//    (post(pre(x1) op pre(x0))), and compares bit for bit ("DIGEST" and "MISMATCH" lines).
// 2. On one GPU: the same 2-rank reduction with the CUDA operations NCCL's kernels use,
//    against braid's host kernels ("EMU" lines); the "EMU-DIGEST" lines are the hashes of the
//    GPU's results that gpu_digests.inc records for reduce_gpu_digest_test.cc.
// 3. numeric.h's conversions compiled for the GPU against CUDA's conversion instructions over
//    every float bit pattern, and how the GPU treats NaN and signed zeros in the operations
//    NCCL uses (fmaxf, __hmax, add) ("GPU-CONVERSION", "GPU-PROBE" lines).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/numeric.h"
#include "host/reduce.h"
#include "nccl_vectors.h"

#define CHECK_CUDA(x)                                                                     \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)
#define CHECK_NCCL(x)                                                                     \
  do {                                                                                    \
    ncclResult_t r_ = (x);                                                                \
    if (r_ != ncclSuccess) {                                                              \
      std::printf("NCCL error %s at %s:%d\n", ncclGetErrorString(r_), __FILE__, __LINE__); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

namespace bv = braid_vectors;
using namespace braid;

// ---- Part 1: NCCL against braid -------------------------------------------------------------

static int compareWithNccl(ncclComm_t comms[2], cudaStream_t streams[2]) {
  int totalBad = 0;
  for (int type = 0; type < bv::kTypes; type++) {
    const size_t n = bv::vectorCount(type), size = bv::kTypeSize[type], bytes = n * size;
    std::vector<char> in0(bytes), in1(bytes), out0(bytes), out1(bytes), pre1(bytes), expect(bytes);
    bv::fillInputs(type, in0.data(), in1.data());
    void *send[2], *recv[2];
    for (int r = 0; r < 2; r++) {
      CHECK_CUDA(cudaSetDevice(r));
      CHECK_CUDA(cudaMalloc(&send[r], bytes));
      CHECK_CUDA(cudaMalloc(&recv[r], bytes));
      CHECK_CUDA(cudaMemcpy(send[r], r == 0 ? in0.data() : in1.data(), bytes, cudaMemcpyHostToDevice));
    }
    const uint64_t scalar = bv::premulScalarBits(type);
    for (int opIndex = 0; opIndex < bv::kOps; opIndex++) {
      ncclRedOp_t ops[2];
      for (int r = 0; r < 2; r++) {
        if (opIndex < 5) ops[r] = ncclRedOp_t(opIndex);
        else CHECK_NCCL(ncclRedOpCreatePreMulSum(&ops[r], const_cast<uint64_t*>(&scalar), ncclDataType_t(type),
                                                 ncclScalarHostImmediate, comms[r]));
      }
      CHECK_NCCL(ncclGroupStart());
      for (int r = 0; r < 2; r++) {
        CHECK_CUDA(cudaSetDevice(r));
        CHECK_NCCL(ncclAllReduce(send[r], recv[r], n, ncclDataType_t(type), ops[r], comms[r], streams[r]));
      }
      CHECK_NCCL(ncclGroupEnd());
      for (int r = 0; r < 2; r++) {
        CHECK_CUDA(cudaSetDevice(r));
        CHECK_CUDA(cudaStreamSynchronize(streams[r]));
        if (opIndex == 5) CHECK_NCCL(ncclRedOpDestroy(ops[r], comms[r]));
      }
      CHECK_CUDA(cudaMemcpy(out0.data(), recv[0], bytes, cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(out1.data(), recv[1], bytes, cudaMemcpyDeviceToHost));
      if (std::memcmp(out0.data(), out1.data(), bytes) != 0)
        std::printf("NOTE %s %s: NCCL's two ranks differ\n", typeName(ncclDataType_t(type)), bv::kOpNames[opIndex]);

      // braid: rank 1's contribution arrives pre-multiplied; rank 0 adds its own and finishes.
      auto op = opIndex < 5 ? host::makeHostOp(ncclRedOp_t(opIndex), ncclDataType_t(type), 2)
                            : host::makePreMulSumOp(ncclDataType_t(type), &scalar, 2);
      host::selectElemwise(*op, false, true, true, false)(pre1.data(), nullptr, in1.data(), n, *op);
      host::selectElemwise(*op, true, true, true, true)(expect.data(), pre1.data(), in0.data(), n, *op);

      int bad = 0;
      for (size_t i = 0; i < n; i++) {
        if (std::memcmp(&out0[i * size], &expect[i * size], size) == 0) continue;
        if (bad++ < 6) {
          auto t = ncclDataType_t(type);
          std::printf("MISMATCH %s %s [%zu]: x0=%s x1=%s nccl=%s braid=%s\n", typeName(t), bv::kOpNames[opIndex], i,
                      host::formatValue(t, &in0[i * size]).c_str(), host::formatValue(t, &in1[i * size]).c_str(),
                      host::formatValue(t, &out0[i * size]).c_str(), host::formatValue(t, &expect[i * size]).c_str());
        }
      }
      totalBad += bad;
      std::printf("DIGEST %s %s 0x%016" PRIx64 " mismatches %d of %zu\n", typeName(ncclDataType_t(type)),
                  bv::kOpNames[opIndex], bv::fnv1a64(out0.data(), bytes), bad, n);
    }
    for (int r = 0; r < 2; r++) {
      CHECK_CUDA(cudaSetDevice(r));
      CHECK_CUDA(cudaFree(send[r]));
      CHECK_CUDA(cudaFree(recv[r]));
    }
  }
  return totalBad;
}

// ---- Part 2: conversions and operation semantics on the GPU ---------------------------------

__global__ void sweepConversions(unsigned long long* bad, unsigned* firstBad) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
    const uint32_t u = uint32_t(i);
    const float f = __uint_as_float(u);
    uint16_t h = __half_as_ushort(__float2half_rn(f));
    if (h != floatToHalfBits(f)) { atomicAdd(&bad[0], 1); firstBad[0] = u; }
    uint16_t b = __bfloat16_as_ushort(__float2bfloat16_rn(f));
    if (b != floatToBf16Bits(f)) { atomicAdd(&bad[1], 1); firstBad[1] = u; }
    uint8_t e4 = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
    if (e4 != floatToFp8e4m3Bits(f)) { atomicAdd(&bad[2], 1); firstBad[2] = u; }
    uint8_t e5 = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2);
    if (e5 != floatToFp8e5m2Bits(f)) { atomicAdd(&bad[3], 1); firstBad[3] = u; }
    if (i < 65536) {
      float x = __half2float(__ushort_as_half(uint16_t(i)));
      if (__float_as_uint(x) != __float_as_uint(halfBitsToFloat(uint16_t(i))) && !(x != x)) { atomicAdd(&bad[4], 1); firstBad[4] = u; }
      x = __bfloat162float(__ushort_as_bfloat16(uint16_t(i)));
      if (__float_as_uint(x) != __float_as_uint(bf16BitsToFloat(uint16_t(i))) && !(x != x)) { atomicAdd(&bad[5], 1); firstBad[5] = u; }
    }
    if (i < 256) {
      __nv_fp8_e4m3 p; p.__x = uint8_t(i);
      __nv_fp8_e5m2 q; q.__x = uint8_t(i);
      float x = float(p);
      if (__float_as_uint(x) != __float_as_uint(fp8e4m3BitsToFloat(uint8_t(i))) && !(x != x)) { atomicAdd(&bad[6], 1); firstBad[6] = u; }
      x = float(q);
      if (__float_as_uint(x) != __float_as_uint(fp8e5m2BitsToFloat(uint8_t(i))) && !(x != x)) { atomicAdd(&bad[7], 1); firstBad[7] = u; }
    }
  }
}

// NaN and signed-zero behaviour of what NCCL's kernels use, as bit patterns.
__global__ void probeSemantics(uint32_t* out) {
  const float pz = 0.0f, nz = __uint_as_float(0x80000000u), one = 1.0f;
  const float nanA = __uint_as_float(0x7fc00001u), nanB = __uint_as_float(0xffc00002u);
  const float inf = __uint_as_float(0x7f800000u);
  int k = 0;
  volatile float v[8] = {pz, nz, one, nanA, nanB, inf, -inf, 0.0f};  // defeat constant folding
  out[k++] = __float_as_uint(fmaxf(v[0], v[1]));  // 0 max(+0,-0)
  out[k++] = __float_as_uint(fmaxf(v[1], v[0]));  // 1 max(-0,+0)
  out[k++] = __float_as_uint(fminf(v[0], v[1]));  // 2 min(+0,-0)
  out[k++] = __float_as_uint(fminf(v[1], v[0]));  // 3 min(-0,+0)
  out[k++] = __float_as_uint(fmaxf(v[3], v[2]));  // 4 max(nanA,1)
  out[k++] = __float_as_uint(fmaxf(v[3], v[4]));  // 5 max(nanA,nanB)
  out[k++] = __float_as_uint(v[3] + v[2]);        // 6 nanA+1
  out[k++] = __float_as_uint(v[5] + v[6]);        // 7 inf-inf
  out[k++] = __float_as_uint(v[4] * v[2]);        // 8 nanB*1
  __half hp = __float2half(0.0f), hn = __ushort_as_half(0x8000), hnan = __ushort_as_half(0x7e01),
         hnan2 = __ushort_as_half(0xfe02), hone = __float2half(1.0f);
  volatile unsigned short hv[5] = {__half_as_ushort(hp), __half_as_ushort(hn), __half_as_ushort(hnan),
                                   __half_as_ushort(hnan2), __half_as_ushort(hone)};
  auto H = [&](int j) { return __ushort_as_half(hv[j]); };
  out[k++] = __half_as_ushort(__hmax(H(0), H(1)));   // 9
  out[k++] = __half_as_ushort(__hmax(H(1), H(0)));   // 10
  out[k++] = __half_as_ushort(__hmin(H(0), H(1)));   // 11
  out[k++] = __half_as_ushort(__hmin(H(1), H(0)));   // 12
  out[k++] = __half_as_ushort(__hmax(H(2), H(4)));   // 13 max(nan,1)
  out[k++] = __half_as_ushort(__hmax(H(2), H(3)));   // 14 max(nan,nan2)
  out[k++] = __half_as_ushort(__hadd(H(2), H(4)));   // 15 nan+1
  out[k++] = __half_as_ushort(__hmul(H(3), H(4)));   // 16 nan2*1
  volatile double dv[3] = {0.0, -0.0, 1.0};
  out[k++] = uint32_t(__double_as_longlong(fmax(dv[0], dv[1])) >> 32);  // 17 fmax(+0,-0) high word
  out[k++] = uint32_t(__double_as_longlong(fmin(dv[0], dv[1])) >> 32);  // 18
  double dn = __longlong_as_double(0x7ff8000000000123ll);
  volatile double dnv = dn;
  out[k++] = uint32_t(__double_as_longlong(dnv + dv[2]));               // 19 low word of nan+1
  out[k++] = uint32_t(__double_as_longlong(dnv + dv[2]) >> 32);         // 20 high word
}

// ---- Part 3 (one GPU): the 2-rank reduction with the CUDA operations that NCCL's sm_90
// kernels use (src/device/reduce_kernel.h: __hadd/__hmul/__hmax/__hmin for fp16 and bf16;
// fp8 through __half and back with the saturating constructor; fmaxf/fminf; integer
// SumPostDiv truncating; the PreMulSum product of the own input fused into the sum, as the
// SASS of NCCL's kernels shows). Without a second GPU the real NCCL cannot reduce two ranks,
// so this checks braid's reading of those operations. Built with -fmad=false, so that only
// the fusions written here happen.

template <class T> struct Emu;  // per type: r = post(pre(a) op pre(b)), op 0..5 as in nccl_vectors.h
template <class T> struct EmuInt {
  __device__ static T run(int op, T a, T b, T s, int n) {
    using U = typename std::make_unsigned<T>::type;
    switch (op) {
      case 0: return T(U(a) + U(b));
      case 1: return T(U(a) * U(b));
      case 2: return a < b ? b : a;
      case 3: return b < a ? b : a;
      case 4: { T sum = T(U(a) + U(b)); return T(sum / T(n)); }  // C division truncates, like SumPostDiv
      default: return T(U(U(a) * U(s)) + U(U(b) * U(s)));
    }
  }
};
template <> struct Emu<int8_t> : EmuInt<int8_t> {};
template <> struct Emu<uint8_t> : EmuInt<uint8_t> {};
template <> struct Emu<int32_t> : EmuInt<int32_t> {};
template <> struct Emu<uint32_t> : EmuInt<uint32_t> {};
template <> struct Emu<int64_t> : EmuInt<int64_t> {};
template <> struct Emu<uint64_t> : EmuInt<uint64_t> {};
template <class F> struct EmuFloat {
  __device__ static F run(int op, F a, F b, F s, int n) {
    switch (op) {
      case 0: return a + b;
      case 1: return a * b;
      case 2: return sizeof(F) == 4 ? F(fmaxf(float(a), float(b))) : F(fmax(double(a), double(b)));
      case 3: return sizeof(F) == 4 ? F(fminf(float(a), float(b))) : F(fmin(double(a), double(b)));
      // PreMulSum and avg (s = 1/n in the type): the peer's product arrives rounded; NCCL's
      // build fuses its own product into the sum (FFMA/DFMA in its SASS).
      default: return sizeof(F) == 4 ? F(fmaf(float(b), float(s), float(a * s))) : F(fma(double(b), double(s), double(a * s)));
    }
  }
};
template <> struct Emu<float> {
  __device__ static float run(int op, float a, float b, float s, int n) {
    switch (op) {
      case 2: return fmaxf(a, b);
      case 3: return fminf(a, b);
      default: return EmuFloat<float>::run(op, a, b, s, n);
    }
  }
};
template <> struct Emu<double> {
  __device__ static double run(int op, double a, double b, double s, int n) {
    switch (op) {
      case 2: return fmax(a, b);
      case 3: return fmin(a, b);
      default: return EmuFloat<double>::run(op, a, b, s, n);
    }
  }
};
template <class H> struct EmuHalfLike {  // __half and __nv_bfloat16
  __device__ static H run(int op, H a, H b, H s, int) {
    switch (op) {
      case 0: return __hadd(a, b);
      case 1: return __hmul(a, b);
      case 2: return __hmax(a, b);
      case 3: return __hmin(a, b);
      default: return __hfma(b, s, __hmul(a, s));  // fused like NCCL's HFMA2
    }
  }
};
template <> struct Emu<__half> : EmuHalfLike<__half> {};
template <> struct Emu<__nv_bfloat16> : EmuHalfLike<__nv_bfloat16> {};
template <class P> struct EmuFp8 {
  __device__ static P run(int op, P a, P b, P s, int n) {
    __half x = __half(a), y = __half(b), t = __half(s);
    if (op >= 4) { x = __half(P(__hmul(x, t))); y = __half(P(__hmul(y, t))); }  // pre-multiply, rounded to fp8
    __half r = Emu<__half>::run(op >= 4 ? 0 : op, x, y, t, n);
    return P(r);
  }
};
template <> struct Emu<__nv_fp8_e4m3> : EmuFp8<__nv_fp8_e4m3> {};
template <> struct Emu<__nv_fp8_e5m2> : EmuFp8<__nv_fp8_e5m2> {};

template <class T>
__global__ void emulateKernel(int op, const T* x0, const T* x1, T* out, size_t n, T scalar, int nRanks) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = Emu<T>::run(op, x1[i], x0[i], scalar, nRanks);
}

template <class T>
static void launchEmulation(int op, const void* x0, const void* x1, void* out, size_t n, uint64_t scalarBits) {
  T scalar;
  std::memcpy(&scalar, &scalarBits, sizeof(T));
  emulateKernel<T><<<264, 256>>>(op, (const T*)x0, (const T*)x1, (T*)out, n, scalar, 2);
}

static int compareWithEmulation() {
  CHECK_CUDA(cudaSetDevice(0));
  int totalBad = 0;
  for (int type = 0; type < bv::kTypes; type++) {
    const auto t = ncclDataType_t(type);
    const size_t n = bv::vectorCount(type), size = bv::kTypeSize[type], bytes = n * size;
    std::vector<char> in0(bytes), in1(bytes), gpu(bytes), pre1(bytes), expect(bytes);
    bv::fillInputs(type, in0.data(), in1.data());
    void *d0, *d1, *dout;
    CHECK_CUDA(cudaMalloc(&d0, bytes));
    CHECK_CUDA(cudaMalloc(&d1, bytes));
    CHECK_CUDA(cudaMalloc(&dout, bytes));
    CHECK_CUDA(cudaMemcpy(d0, in0.data(), bytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d1, in1.data(), bytes, cudaMemcpyHostToDevice));
    for (int opIndex = 0; opIndex < bv::kOps; opIndex++) {
      uint64_t scalar = bv::premulScalarBits(type);
      auto op = opIndex < 5 ? host::makeHostOp(ncclRedOp_t(opIndex), t, 2) : host::makePreMulSumOp(t, &scalar, 2);
      if (opIndex == 4) scalar = op->scalar;  // 1/n in the type (floating types)
      switch (type) {
        case 0: launchEmulation<int8_t>(opIndex, d0, d1, dout, n, scalar); break;
        case 1: launchEmulation<uint8_t>(opIndex, d0, d1, dout, n, scalar); break;
        case 2: launchEmulation<int32_t>(opIndex, d0, d1, dout, n, scalar); break;
        case 3: launchEmulation<uint32_t>(opIndex, d0, d1, dout, n, scalar); break;
        case 4: launchEmulation<int64_t>(opIndex, d0, d1, dout, n, scalar); break;
        case 5: launchEmulation<uint64_t>(opIndex, d0, d1, dout, n, scalar); break;
        case 6: launchEmulation<__half>(opIndex, d0, d1, dout, n, scalar); break;
        case 7: launchEmulation<float>(opIndex, d0, d1, dout, n, scalar); break;
        case 8: launchEmulation<double>(opIndex, d0, d1, dout, n, scalar); break;
        case 9: launchEmulation<__nv_bfloat16>(opIndex, d0, d1, dout, n, scalar); break;
        case 10: launchEmulation<__nv_fp8_e4m3>(opIndex, d0, d1, dout, n, scalar); break;
        case 11: launchEmulation<__nv_fp8_e5m2>(opIndex, d0, d1, dout, n, scalar); break;
      }
      CHECK_CUDA(cudaDeviceSynchronize());
      CHECK_CUDA(cudaMemcpy(gpu.data(), dout, bytes, cudaMemcpyDeviceToHost));
      host::selectElemwise(*op, false, true, true, false)(pre1.data(), nullptr, in1.data(), n, *op);
      host::selectElemwise(*op, true, true, true, true)(expect.data(), pre1.data(), in0.data(), n, *op);
      int bad = 0;
      for (size_t i = 0; i < n; i++) {
        if (std::memcmp(&gpu[i * size], &expect[i * size], size) == 0) continue;
        if (bad++ < 6)
          std::printf("EMU-MISMATCH %s %s [%zu]: x0=%s x1=%s gpu=%s braid=%s\n", typeName(t), bv::kOpNames[opIndex], i,
                      host::formatValue(t, &in0[i * size]).c_str(), host::formatValue(t, &in1[i * size]).c_str(),
                      host::formatValue(t, &gpu[i * size]).c_str(), host::formatValue(t, &expect[i * size]).c_str());
      }
      totalBad += bad;
      std::printf("EMU %s %s mismatches %d of %zu\n", typeName(t), bv::kOpNames[opIndex], bad, n);
      std::printf("EMU-DIGEST {\"%s\", \"%s\", 0x%016" PRIx64 "ull},\n", typeName(t), bv::kOpNames[opIndex],
                  bv::fnv1a64(gpu.data(), bytes));
    }
    CHECK_CUDA(cudaFree(d0));
    CHECK_CUDA(cudaFree(d1));
    CHECK_CUDA(cudaFree(dout));
  }
  return totalBad;
}

static void checkGpuConversions() {
  CHECK_CUDA(cudaSetDevice(0));
  unsigned long long* bad;
  unsigned* first;
  CHECK_CUDA(cudaMallocManaged(&bad, 8 * sizeof(unsigned long long)));
  CHECK_CUDA(cudaMallocManaged(&first, 8 * sizeof(unsigned)));
  std::memset(bad, 0, 8 * sizeof(unsigned long long));
  std::memset(first, 0, 8 * sizeof(unsigned));
  sweepConversions<<<132 * 8, 512>>>(bad, first);
  CHECK_CUDA(cudaDeviceSynchronize());
  const char* names[8] = {"f32->f16", "f32->bf16", "f32->e4m3", "f32->e5m2", "f16->f32", "bf16->f32", "e4m3->f32", "e5m2->f32"};
  for (int i = 0; i < 8; i++)
    std::printf("GPU-CONVERSION %-10s mismatches %llu (last 0x%08x)\n", names[i], bad[i], first[i]);
  uint32_t* probe;
  CHECK_CUDA(cudaMallocManaged(&probe, 64 * sizeof(uint32_t)));
  probeSemantics<<<1, 1>>>(probe);
  CHECK_CUDA(cudaDeviceSynchronize());
  const char* probes[] = {"fmaxf(+0,-0)", "fmaxf(-0,+0)", "fminf(+0,-0)", "fminf(-0,+0)", "fmaxf(nanA,1)",
                          "fmaxf(nanA,nanB)", "nanA+1", "inf-inf", "nanB*1", "hmax(+0,-0)", "hmax(-0,+0)",
                          "hmin(+0,-0)", "hmin(-0,+0)", "hmax(nan,1)", "hmax(nan,nan2)", "hadd(nan,1)",
                          "hmul(nan2,1)", "fmax(+0,-0).hi", "fmin(+0,-0).hi", "dnan+1.lo", "dnan+1.hi"};
  for (int i = 0; i < 21; i++) std::printf("GPU-PROBE %-18s 0x%08x\n", probes[i], probe[i]);
}

int main(int argc, char** argv) {
  int nDev = 0;
  CHECK_CUDA(cudaGetDeviceCount(&nDev));
  int version = 0;
  ncclGetVersion(&version);
  std::printf("devices %d, NCCL version %d, NCCL_ALGO=%s NCCL_PROTO=%s\n", nDev, version,
              getenv("NCCL_ALGO") ? getenv("NCCL_ALGO") : "-", getenv("NCCL_PROTO") ? getenv("NCCL_PROTO") : "-");
  const bool conversions = argc > 1 && std::strcmp(argv[1], "--conversions") == 0;
  if (conversions) {
    checkGpuConversions();
    std::printf("EMU TOTAL mismatches %d\n", compareWithEmulation());
  }
  if (nDev < 2) {
    std::printf("need 2 GPUs for the NCCL comparison\n");
    return conversions ? 0 : 1;
  }
  ncclComm_t comms[2];
  int devs[2] = {0, 1};
  CHECK_NCCL(ncclCommInitAll(comms, 2, devs));
  cudaStream_t streams[2];
  for (int r = 0; r < 2; r++) {
    CHECK_CUDA(cudaSetDevice(r));
    CHECK_CUDA(cudaStreamCreate(&streams[r]));
  }
  int bad = compareWithNccl(comms, streams);
  std::printf("TOTAL mismatches %d\n", bad);
  for (int r = 0; r < 2; r++) CHECK_NCCL(ncclCommDestroy(comms[r]));
  return bad == 0 ? 0 : 2;
}
