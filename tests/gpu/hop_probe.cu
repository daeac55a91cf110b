// How long one hop of a ring takes between blocks of one GPU, by the way it is signalled
// (issue 13: braid's ring costs ~2.7 us per step on one H200 whatever the protocol, and the
// question is how much of that the hardware asks for). A token goes round a ring of N blocks
// (each its own rank: another SM), LAPS times; each hop is one block waiting for the previous
// one's data and passing it on. Time per hop = the kernel's time / (LAPS x N).
//
//   gpu_hop_probe [LAPS]      (default 2000; exit 77 without a GPU)
//
// Variants, from the floor up to what braid's LL step does:
//   flag        thread 0 spins on one 8-byte word (ld.volatile), then stores the next's word
//   ll-1        LL: the block's threads poll their 16-byte lines (1 line holds 8 data bytes),
//               a barrier, the lines stored to the next block, thread 0 posts a head counter
//               back to the previous block (st.relaxed.gpu) -- one interpreter LL step
//   ll-64       the same with 64 lines (512 bytes of data)
//   ll-1+fence  ll-1 with fence.acq_rel.gpu before the post (what Simple pays)
//   ll-1 x2bar  ll-1 with a second barrier per hop (the interpreter's first-slice barrier)
// each with 32 and 512 threads, as one kernel of N blocks and as N one-block kernels on N
// streams (ranks as threads of one process launch like that).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define PROBE_CHECK(call)                                                                             \
  do {                                                                                                \
    cudaError_t e_ = (call);                                                                          \
    if (e_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "hop_probe: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, \
                   __LINE__);                                                                         \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

namespace {

constexpr int kLineBytes = 16;
constexpr int kSlotBytes = 64 * 1024;  // one slot per block, lines at its start
constexpr uint64_t kSpinLimit = uint64_t(1) << 32;  // a lost token ends the kernel, not the machine

enum Kind { kFlag, kLL, kLLFence, kLLTwoBarriers };

struct Ring {
  char* slots;       // block b receives into slots + b * kSlotBytes
  uint64_t* heads;   // block b's head counter (written by block b+1), 128 bytes apart
  unsigned* failed;  // set when a spin gave up
  int n;
  int laps;
  int lines;
};

__device__ inline void loadLine(const char* p, uint64_t& lo, uint64_t& hi) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(lo), "=l"(hi) : "l"(p) : "memory");
}
__device__ inline void storeLine(char* p, uint64_t lo, uint64_t hi) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
}
__device__ inline void storeRelaxedGpu(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// One rank's part: `lap` + 1 is the flag of the token's lap (steps only grow, as in LL).
template <Kind K>
__device__ void rank(const Ring r, int b) {
  const int next = (b + 1) % r.n, prev = (b + r.n - 1) % r.n;
  char* mine = r.slots + size_t(b) * kSlotBytes;
  char* theirs = r.slots + size_t(next) * kSlotBytes;
  uint64_t* prevHead = r.heads + size_t(prev) * 16;
  for (int lap = 0; lap < r.laps; ++lap) {
    const uint32_t flag = uint32_t(lap + 1);
    const bool starts = b == 0;  // block 0 sends first in each lap, then waits for the token
    for (int phase = 0; phase < 2; ++phase) {
      const bool receive = starts ? phase == 1 : phase == 0;
      if (receive) {
        if constexpr (K == kFlag) {
          if (threadIdx.x == 0) {
            uint64_t lo, hi, spins = 0;
            do loadLine(mine, lo, hi);
            while (uint32_t(lo >> 32) != flag && ++spins < kSpinLimit);
            if (spins >= kSpinLimit) atomicExch(r.failed, 1u);
          }
        } else {
          if constexpr (K == kLLTwoBarriers) __syncthreads();
          bool lost = false;
          for (int l = threadIdx.x; l < r.lines; l += blockDim.x) {
            uint64_t lo, hi, spins = 0;
            do loadLine(mine + size_t(l) * kLineBytes, lo, hi);
            while ((uint32_t(lo >> 32) != flag || uint32_t(hi >> 32) != flag) && ++spins < kSpinLimit);
            lost = lost || spins >= kSpinLimit;
          }
          if (__syncthreads_or(lost) && threadIdx.x == 0) atomicExch(r.failed, 1u);
          if (threadIdx.x == 0) {
            if constexpr (K == kLLFence) asm volatile("fence.acq_rel.gpu;" ::: "memory");
            storeRelaxedGpu(prevHead, uint64_t(lap + 1));
          }
        }
      } else {  // send
        if constexpr (K == kFlag) {
          if (threadIdx.x == 0) storeLine(theirs, uint64_t(flag) << 32, uint64_t(flag) << 32);
        } else {
          const uint64_t f = uint64_t(flag) << 32;
          for (int l = threadIdx.x; l < r.lines; l += blockDim.x)
            storeLine(theirs + size_t(l) * kLineBytes, f | uint32_t(l), f | uint32_t(b));
        }
      }
      if (starts && r.n == 1) break;
    }
  }
}

template <Kind K>
__global__ void __launch_bounds__(512, 1) ringKernel(const Ring r) { rank<K>(r, blockIdx.x); }

template <Kind K>
__global__ void __launch_bounds__(512, 1) oneRankKernel(const Ring r, int b) { rank<K>(r, b); }

struct Variant {
  const char* name;
  Kind kind;
  int lines;
};

template <Kind K>
float run(const Ring& r, int threads, bool streams, const std::vector<cudaStream_t>& ss) {
  cudaEvent_t start, stop;
  PROBE_CHECK(cudaEventCreate(&start));
  PROBE_CHECK(cudaEventCreate(&stop));
  PROBE_CHECK(cudaMemset(r.slots, 0, size_t(r.n) * kSlotBytes));
  PROBE_CHECK(cudaMemset(r.heads, 0, size_t(r.n) * 128));
  PROBE_CHECK(cudaDeviceSynchronize());
  PROBE_CHECK(cudaEventRecord(start, ss[0]));
  if (streams) {
    // Every stream waits for `start`, so that the timed span covers every kernel.
    for (int b = 1; b < r.n; ++b) PROBE_CHECK(cudaStreamWaitEvent(ss[b], start, 0));
    for (int b = 0; b < r.n; ++b) oneRankKernel<K><<<1, threads, 0, ss[b]>>>(r, b);
    PROBE_CHECK(cudaGetLastError());
    for (int b = 1; b < r.n; ++b) {
      cudaEvent_t done;
      PROBE_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
      PROBE_CHECK(cudaEventRecord(done, ss[b]));
      PROBE_CHECK(cudaStreamWaitEvent(ss[0], done, 0));
      PROBE_CHECK(cudaEventDestroy(done));
    }
  } else {
    ringKernel<K><<<r.n, threads, 0, ss[0]>>>(r);
    PROBE_CHECK(cudaGetLastError());
  }
  PROBE_CHECK(cudaEventRecord(stop, ss[0]));
  PROBE_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  PROBE_CHECK(cudaEventElapsedTime(&ms, start, stop));
  PROBE_CHECK(cudaEventDestroy(start));
  PROBE_CHECK(cudaEventDestroy(stop));
  unsigned failed = 0;
  PROBE_CHECK(cudaMemcpy(&failed, r.failed, sizeof failed, cudaMemcpyDeviceToHost));
  if (failed) {
    std::fprintf(stderr, "hop_probe: a token was lost (spin limit reached)\n");
    std::exit(1);
  }
  return ms;
}

float runKind(Kind k, const Ring& r, int threads, bool streams, const std::vector<cudaStream_t>& ss) {
  switch (k) {
    case kFlag: return run<kFlag>(r, threads, streams, ss);
    case kLL: return run<kLL>(r, threads, streams, ss);
    case kLLFence: return run<kLLFence>(r, threads, streams, ss);
    case kLLTwoBarriers: return run<kLLTwoBarriers>(r, threads, streams, ss);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int laps = argc > 1 ? std::atoi(argv[1]) : 2000;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop;
  PROBE_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# hop_probe on %s (%d SMs), %d laps; us per hop (median of 3 runs)\n", prop.name,
              prop.multiProcessorCount, laps);
  const int maxRanks = 8;
  Ring r{};
  PROBE_CHECK(cudaMalloc(&r.slots, size_t(maxRanks) * kSlotBytes));
  PROBE_CHECK(cudaMalloc(&r.heads, size_t(maxRanks) * 128));
  PROBE_CHECK(cudaMalloc(&r.failed, sizeof(unsigned)));
  PROBE_CHECK(cudaMemset(r.failed, 0, sizeof(unsigned)));
  r.laps = laps;
  std::vector<cudaStream_t> ss(maxRanks);
  for (auto& s : ss) PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const Variant variants[] = {{"flag", kFlag, 1},
                              {"ll-1", kLL, 1},
                              {"ll-64", kLL, 64},
                              {"ll-1+fence", kLLFence, 1},
                              {"ll-1 x2bar", kLLTwoBarriers, 1}};
  std::printf("%-12s %7s %6s", "variant", "threads", "launch");
  for (int n : {2, 4, 8}) std::printf("  %5d-rank", n);
  std::printf("\n");
  for (const Variant& v : variants)
    for (int threads : {32, 512})
      for (bool streams : {false, true}) {
        std::printf("%-12s %7d %6s", v.name, threads, streams ? "kernels" : "blocks");
        for (int n : {2, 4, 8}) {
          r.n = n;
          r.lines = v.lines;
          float t[3];
          for (float& x : t) x = runKind(v.kind, r, threads, streams, ss);
          std::sort(t, t + 3);
          std::printf("  %10.3f", double(t[1]) * 1000.0 / (double(laps) * n));
        }
        std::printf("\n");
      }
  for (auto& s : ss) PROBE_CHECK(cudaStreamDestroy(s));
  PROBE_CHECK(cudaFree(r.slots));
  PROBE_CHECK(cudaFree(r.heads));
  PROBE_CHECK(cudaFree(r.failed));
  return 0;
}
