// Sends to oneself through braid's NCCL API on device memory (issue 13 item 5): a send/recv
// pair to oneself is a copy (kernels::copyAsync), in any group.
//
// one-rank: a 1-rank communicator, ncclSend + ncclRecv to itself in a group, 8 B..16 MiB
//        (odd sizes too, unaligned offsets): the output is the input, byte for byte; and the
//        time per call (back to back) next to cudaMemcpyAsync of the same size. nccl-tests'
//        sendrecv_perf on 1 rank measured braid 10.3 us at 8 B and 349 us at 16 MB (one lane
//        copied it), NCCL 6.5 and 14.5 us: a copy must now stay within 3x cudaMemcpyAsync + 10 us.
// mixed: 2 ranks as threads on GPU 0; each rank's group holds two self pairs (the k-th send to
//        itself meets its k-th recv from itself, of different sizes), an in-place self pair,
//        and a send to and a recv from the other rank, on two streams: every output is right.
// Prints SUMMARY lines for tests/gpu/run.sh. Exit status 0: passed, 1: failed, 77: no GPU.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api_check.h"
#include "gpu_present.h"
#include "nccl.h"

namespace {

using Clock = std::chrono::steady_clock;

unsigned char pattern(int rank, int which, size_t i) { return static_cast<unsigned char>(i * 37 + rank * 11 + which * 101 + 1); }

// Fills `bytes` of device memory at `dev` with pattern(rank, which, .).
void fill(void* dev, size_t bytes, int rank, int which) {
  std::vector<unsigned char> h(bytes);
  for (size_t i = 0; i < bytes; ++i) h[i] = pattern(rank, which, i);
  CUDA_OK(cudaMemcpy(dev, h.data(), bytes, cudaMemcpyHostToDevice));
}

// The number of bytes of `dev` that are not pattern(rank, which, .); prints the first.
size_t wrongBytes(const void* dev, size_t bytes, int rank, int which, const char* what) {
  std::vector<unsigned char> h(bytes);
  CUDA_OK(cudaMemcpy(h.data(), dev, bytes, cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (size_t i = 0; i < bytes; ++i) {
    if (h[i] == pattern(rank, which, i)) continue;
    if (wrong++ == 0)
      std::printf("%s: %zu bytes: byte %zu is 0x%02x, expected 0x%02x\n", what, bytes, i, h[i], pattern(rank, which, i));
  }
  return wrong;
}

int oneRankTest() {
  ncclComm_t comm;
  int dev = 0;
  NCCL_OK(ncclCommInitAll(&comm, 1, &dev));
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  constexpr size_t kMax = size_t(16) << 20;
  char *in = nullptr, *out = nullptr;
  CUDA_OK(cudaMalloc(&in, kMax + 64));
  CUDA_OK(cudaMalloc(&out, kMax + 64));
  int failures = 0;
  // Outputs: sizes around the copy kernel's pack size, and at unaligned offsets.
  for (size_t bytes : {size_t(1), size_t(8), size_t(15), size_t(4097), size_t(1) << 20, kMax})
    for (size_t offset : {size_t(0), size_t(3)}) {
      fill(in + offset, bytes, 0, 0);
      CUDA_OK(cudaMemset(out, 0, kMax + 64));
      NCCL_OK(ncclGroupStart());
      NCCL_OK(ncclSend(in + offset, bytes, ncclInt8, 0, comm, stream));
      NCCL_OK(ncclRecv(out + offset, bytes, ncclInt8, 0, comm, stream));
      NCCL_OK(ncclGroupEnd());
      CUDA_OK(cudaStreamSynchronize(stream));
      const std::string what = "one rank, offset " + std::to_string(offset);
      failures += wrongBytes(out + offset, bytes, 0, 0, what.c_str()) != 0;
    }
  // Time per call, back to back, against cudaMemcpyAsync of the same bytes.
  auto timeIt = [&](size_t bytes, bool api) {
    const int iters = bytes >= (size_t(1) << 20) ? 50 : 500;
    for (int warm = 0; warm < 2; ++warm) {
      auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) {
        if (api) {
          NCCL_OK(ncclGroupStart());
          NCCL_OK(ncclSend(in, bytes / 4, ncclFloat32, 0, comm, stream));
          NCCL_OK(ncclRecv(out, bytes / 4, ncclFloat32, 0, comm, stream));
          NCCL_OK(ncclGroupEnd());
        } else {
          CUDA_OK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, stream));
        }
      }
      CUDA_OK(cudaStreamSynchronize(stream));
      if (warm == 1) return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
    }
    return 0.0;
  };
  for (size_t bytes : {size_t(8), kMax}) {
    const double braidUs = timeIt(bytes, true), copyUs = timeIt(bytes, false);
    const bool fast = braidUs <= 3 * copyUs + 10;
    failures += !fast;
    std::printf("SUMMARY one-rank sendrecv %zu B: %.1f us per call, cudaMemcpyAsync %.1f us: %s\n", bytes, braidUs,
                copyUs, fast ? "copy speed" : "TOO SLOW (limit 3x + 10 us)");
  }
  CUDA_OK(cudaFree(in));
  CUDA_OK(cudaFree(out));
  CUDA_OK(cudaStreamDestroy(stream));
  NCCL_OK(ncclCommDestroy(comm));
  std::printf("SUMMARY one-rank outputs %s\n", failures ? "WRONG or slow" : "ok");
  return failures ? 1 : 0;
}

int mixedTest() {
  ncclComm_t comms[2];
  int devs[2] = {0, 0};
  NCCL_OK(ncclCommInitAll(comms, 2, devs));
  constexpr size_t kA = 1000003, kB = 4097, kPeer = 262147;  // bytes
  int failures[2] = {0, 0};
  auto rank = [&](int r) {
    CUDA_OK(cudaSetDevice(0));
    cudaStream_t s0, s1;
    CUDA_OK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    char *a = nullptr, *aOut = nullptr, *b = nullptr, *bOut = nullptr, *same = nullptr, *p = nullptr, *pOut = nullptr;
    for (auto [ptr, bytes] : {std::pair{&a, kA}, {&aOut, kA}, {&b, kB}, {&bOut, kB}, {&same, kB}, {&p, kPeer}, {&pOut, kPeer}})
      CUDA_OK(cudaMalloc(ptr, bytes));
    fill(a, kA, r, 1);
    fill(b, kB, r, 2);
    fill(same, kB, r, 3);
    fill(p, kPeer, r, 4);
    const int other = 1 - r;
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(a, kA, ncclInt8, r, comms[r], s0));          // self pair 1 (with the first recv from self)
    NCCL_OK(ncclSend(p, kPeer / 2, ncclFloat16, other, comms[r], s1));
    NCCL_OK(ncclRecv(aOut, kA, ncclInt8, r, comms[r], s1));       // its recv, on the other stream
    NCCL_OK(ncclSend(b, kB, ncclInt8, r, comms[r], s0));          // self pair 2
    NCCL_OK(ncclRecv(pOut, kPeer / 2, ncclFloat16, other, comms[r], s0));
    NCCL_OK(ncclRecv(bOut, kB, ncclInt8, r, comms[r], s0));
    NCCL_OK(ncclSend(same, kB, ncclInt8, r, comms[r], s1));       // self pair 3, in place
    NCCL_OK(ncclRecv(same, kB, ncclInt8, r, comms[r], s1));
    NCCL_OK(ncclGroupEnd());
    CUDA_OK(cudaStreamSynchronize(s0));
    CUDA_OK(cudaStreamSynchronize(s1));
    const std::string tag = "rank " + std::to_string(r) + ": ";
    failures[r] += wrongBytes(aOut, kA, r, 1, (tag + "self pair 1").c_str()) != 0;
    failures[r] += wrongBytes(bOut, kB, r, 2, (tag + "self pair 2").c_str()) != 0;
    failures[r] += wrongBytes(same, kB, r, 3, (tag + "self pair 3 (in place)").c_str()) != 0;
    // pOut holds the other rank's p (the first kPeer - 1 bytes: 2-byte elements).
    failures[r] += wrongBytes(pOut, kPeer / 2 * 2, other, 4, (tag + "from the other rank").c_str()) != 0;
    ncclResult_t async = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(comms[r], &async));
    if (async != ncclSuccess) std::printf("%sasync error %d\n", tag.c_str(), async), ++failures[r];
    for (char* ptr : {a, aOut, b, bOut, same, p, pOut}) CUDA_OK(cudaFree(ptr));
    CUDA_OK(cudaStreamDestroy(s0));
    CUDA_OK(cudaStreamDestroy(s1));
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  for (ncclComm_t c : comms) NCCL_OK(ncclCommDestroy(c));
  const bool ok = failures[0] == 0 && failures[1] == 0;
  std::printf("SUMMARY mixed group (self pairs + a peer, 2 streams, 2 ranks) %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (braid::gputest::skipWithoutGpu()) return braid::gputest::kSkipExit;
  int rc = oneRankTest();
  rc |= mixedTest();
  std::printf("%s\n", rc ? "FAILED" : "OK");
  return rc;
}
