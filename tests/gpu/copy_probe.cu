// Device-to-device copy strategies against cudaMemcpyAsync, 1 MiB .. 1 GiB (one rank's
// collective is a copy; NCCL 2.28 uses cudaMemcpyAsync there). Grid-stride SIMT copies in
// several shapes and cache hints, and a TMA bulk copy (cp.async.bulk through shared memory, sm_90).
// Each variant's output is checked against the source. Time: 20 copies back to back between
// two events, median of 7 rounds; the variants take turns within a round so drift hits all.
//   gpu_copy_probe [max_bytes]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "gpu_present.h"
#include "kernels/copy.h"
#include "kernels/copy_loop.cuh"

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

namespace {

// braid's copy loop (kernels/copy_loop.cuh) over the whole grid, U packs in flight.
template <int U, bool Streaming>
__global__ void gridStride(uint4* dst, const uint4* src, size_t packs) {
  braid::kernels::copyPacksStrided<U, Streaming>(dst, src, packs, size_t(blockIdx.x) * blockDim.x + threadIdx.x,
                                                 size_t(gridDim.x) * blockDim.x);
}

__device__ size_t dmin(size_t a, size_t b) { return a < b ? a : b; }

__device__ uint32_t smemAddr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// One thread per block moves chunks of `chunk` bytes (a multiple of 16) through `Stages`
// shared-memory buffers: a bulk load completes on the stage's mbarrier, then a bulk store
// reads the stage; the stage is refilled once that store has read it. Chunks go round-robin
// over the blocks. bytes: a multiple of 16.
template <int Stages>
__global__ void tmaCopy(char* dst, const char* src, size_t bytes, uint32_t chunk) {
  extern __shared__ __align__(128) char stage[];
  __shared__ __align__(8) uint64_t bar[Stages];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < Stages; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smemAddr(&bar[s])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const size_t nChunks = (bytes + chunk - 1) / chunk;
  auto mine = [&](size_t k) { return blockIdx.x + k * gridDim.x; };  // k-th chunk of this block
  auto load = [&](size_t k) {
    const size_t c = mine(k);
    if (c >= nChunks) return;
    const uint32_t n = uint32_t(dmin(chunk, bytes - c * chunk));
    const int s = int(k % Stages);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smemAddr(&bar[s])), "r"(n) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smemAddr(stage + size_t(s) * chunk)),
                 "l"(src + c * chunk), "r"(n), "r"(smemAddr(&bar[s]))
                 : "memory");
  };
  for (int k = 0; k < Stages; ++k) load(k);
  for (size_t k = 0; mine(k) < nChunks; ++k) {
    const int s = int(k % Stages);
    const uint32_t parity = uint32_t((k / Stages) & 1);
    uint32_t done = 0;
    while (!done)
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
          : "=r"(done)
          : "r"(smemAddr(&bar[s])), "r"(parity)
          : "memory");
    const size_t c = mine(k);
    const uint32_t n = uint32_t(dmin(chunk, bytes - c * chunk));
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + c * chunk),
                 "r"(smemAddr(stage + size_t(s) * chunk)), "r"(n)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    // The previous chunk's store has read its stage once at most one group is still reading.
    if (k >= 1) {
      asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
      load(k - 1 + Stages);
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

struct Variant {
  std::string name;
  // Enqueues one copy of `bytes` (a multiple of 16).
  std::function<void(void*, const void*, size_t, cudaStream_t)> run;
};

int sms() {
  int dev = 0, n = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  return n;
}

template <int U, bool Streaming>
Variant gridVariant(int threads, int blocksPerSm) {
  const unsigned blocks = unsigned(sms() * blocksPerSm);
  return {"grid u" + std::to_string(U) + (Streaming ? " ldcs stcs" : "") + " t" + std::to_string(threads) + " b" +
              std::to_string(blocksPerSm) + "xSM",
          [=](void* d, const void* s, size_t bytes, cudaStream_t st) {
            gridStride<U, Streaming><<<blocks, threads, 0, st>>>(static_cast<uint4*>(d), static_cast<const uint4*>(s), bytes / 16);
          }};
}

// braid's copy before this probe: a pack per thread up to 1024 blocks of 512, then grid-stride.
Variant braidBefore() {
  return {"braid before (grid u4 t512 <=1024 blocks)", [](void* d, const void* s, size_t b, cudaStream_t st) {
            size_t packs = b / 16, blocks = std::min<size_t>(1024, (packs + 511) / 512);
            gridStride<4, false><<<unsigned(blocks), 512, 0, st>>>(static_cast<uint4*>(d), static_cast<const uint4*>(s), packs);
          }};
}

template <int Stages>
Variant tmaVariant(uint32_t chunk, int blocksPerSm) {
  const unsigned blocks = unsigned(sms() * blocksPerSm);
  const size_t smem = size_t(Stages) * chunk;
  CHECK(cudaFuncSetAttribute(tmaCopy<Stages>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  return {"tma s" + std::to_string(Stages) + " " + std::to_string(chunk >> 10) + "K b" + std::to_string(blocksPerSm) +
              "xSM",
          [=](void* d, const void* s, size_t bytes, cudaStream_t st) {
            tmaCopy<Stages><<<blocks, 32, smem, st>>>(static_cast<char*>(d), static_cast<const char*>(s), bytes, chunk);
          }};
}

// A copy split between the copy engine (cudaMemcpyAsync on a side stream, forked from and
// joined back to the caller's stream) and the streaming kernel: `share` of the bytes to the
// former. Both draw on the same HBM; this asks whether together they draw more.
Variant splitVariant(double share) {
  static cudaStream_t side = nullptr;
  static cudaEvent_t fork = nullptr, join = nullptr;
  if (side == nullptr) {
    CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  }
  const unsigned blocks = unsigned(sms() * 2);
  return {"split memcpy " + std::to_string(int(share * 100)) + "% + kernel",
          [=](void* d, const void* s, size_t bytes, cudaStream_t st) {
            const size_t a = size_t(double(bytes) * share) & ~size_t(15);
            CHECK(cudaEventRecord(fork, st));
            CHECK(cudaStreamWaitEvent(side, fork));
            CHECK(cudaMemcpyAsync(d, s, a, cudaMemcpyDeviceToDevice, side));
            gridStride<4, true><<<blocks, 512, 0, st>>>(static_cast<uint4*>(d) + a / 16,
                                                               static_cast<const uint4*>(s) + a / 16, (bytes - a) / 16);
            CHECK(cudaEventRecord(join, side));
            CHECK(cudaStreamWaitEvent(st, join));
          }};
}

}  // namespace

int main(int argc, char** argv) {
  const size_t maxBytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : size_t(1) << 30;
  if (braid::gputest::skipWithoutGpu()) return braid::gputest::kSkipExit;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  std::vector<Variant> v;
  v.push_back({"cudaMemcpyAsync", [](void* d, const void* s, size_t b, cudaStream_t st) {
                 CHECK(cudaMemcpyAsync(d, s, b, cudaMemcpyDeviceToDevice, st));
               }});
  // The shapes that led in three runs on the H200 (2026-11-29), one of each kind: braid's copy
  // as it was and as it is, the best plain and streaming grid-stride shapes, TMA, splits.
  v.push_back(braidBefore());
  v.push_back({"braid kernels::copyAsync (now)", [](void* d, const void* s, size_t b, cudaStream_t st) {
                 CHECK(braid::kernels::copyAsync(d, s, b, st));
               }});
  v.push_back(gridVariant<4, true>(256, 4));
  v.push_back(gridVariant<8, false>(256, 1));
  v.push_back(gridVariant<8, true>(256, 1));
  v.push_back(tmaVariant<4>(16u << 10, 1));
  v.push_back(tmaVariant<4>(32u << 10, 1));
  v.push_back(splitVariant(0.5));
  v.push_back(splitVariant(0.9));

  char *src = nullptr, *dst = nullptr;
  CHECK(cudaMalloc(&src, maxBytes));
  CHECK(cudaMalloc(&dst, maxBytes));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Check: a pattern, an odd size (a multiple of 16 that is not one of the chunk sizes).
  {
    const size_t n = std::min<size_t>(maxBytes, (size_t(64) << 20) + 48);
    std::vector<uint32_t> h(n / 4), back(n / 4);
    for (size_t i = 0; i < h.size(); ++i) h[i] = uint32_t(i * 2654435761u);
    CHECK(cudaMemcpy(src, h.data(), n, cudaMemcpyHostToDevice));
    for (const Variant& x : v) {
      CHECK(cudaMemset(dst, 0, n + 16 <= maxBytes ? n + 16 : n));
      x.run(dst, src, n, stream);
      CHECK(cudaGetLastError());
      CHECK(cudaStreamSynchronize(stream));
      CHECK(cudaMemcpy(back.data(), dst, n, cudaMemcpyDeviceToHost));
      if (back != h) {
        std::printf("WRONG: %s copies the wrong bytes\n", x.name.c_str());
        return 1;
      }
      uint32_t after = 1;
      if (n + 16 <= maxBytes) CHECK(cudaMemcpy(&after, dst + n, 4, cudaMemcpyDeviceToHost));
      if (n + 16 <= maxBytes && after != 0) {
        std::printf("WRONG: %s writes past the end\n", x.name.c_str());
        return 1;
      }
    }
    std::printf("# every variant copied %zu bytes exactly\n", n);
  }
  std::vector<size_t> sizes;
  for (size_t s = size_t(1) << 20; s <= maxBytes; s *= 2) sizes.push_back(s);
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const int rounds = 7, reps = 20;
  std::vector<std::vector<double>> us(v.size(), std::vector<double>(sizes.size()));
  for (size_t si = 0; si < sizes.size(); ++si) {
    std::vector<std::vector<double>> samples(v.size());
    for (int r = 0; r < rounds + 1; ++r)
      for (size_t k = 0; k < v.size(); ++k) {
        CHECK(cudaEventRecord(e0, stream));
        for (int i = 0; i < reps; ++i) v[k].run(dst, src, sizes[si], stream);
        CHECK(cudaEventRecord(e1, stream));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (r > 0) samples[k].push_back(ms * 1e3 / reps);
      }
    for (size_t k = 0; k < v.size(); ++k) {
      std::sort(samples[k].begin(), samples[k].end());
      us[k][si] = samples[k][rounds / 2];
    }
  }
  std::printf("# us per copy (median of %d rounds of %d back to back); (x) = cudaMemcpyAsync time / this time\n", rounds,
              reps);
  std::printf("%-40s", "variant");
  for (size_t s : sizes) std::printf(" %14zuM", s >> 20);
  std::printf("  %s\n", "worst");
  for (size_t k = 0; k < v.size(); ++k) {
    std::printf("%-40s", v[k].name.c_str());
    double worst = 1e9;
    for (size_t si = 0; si < sizes.size(); ++si) {
      double rel = us[0][si] / us[k][si];
      worst = std::min(worst, rel);
      std::printf(" %8.2f(%.3f)", us[k][si], rel);
    }
    std::printf("  %.3f\n", worst);
  }
  return 0;
}
