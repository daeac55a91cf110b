// Bad input on device memory through the API (issue 4, item 5): a host pointer where the
// other buffer is device memory, a buffer on another GPU, a stream of another GPU, and
// overlapping in/out buffers. Each must return ncclInvalidArgument with a message, never
// crash or launch. One rank (ncclCommInitAll), so it needs one GPU; the cases that need a
// second GPU are skipped with a reason on one. Exits 77 (skipped) without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_present.h"
#include "nccl.h"

namespace {

void expectRejected(ncclResult_t rc, const char* mention) {
  EXPECT_EQ(rc, ncclInvalidArgument);
  std::string err = ncclGetLastError(nullptr);
  EXPECT_NE(err.find(mention), std::string::npos) << err;
}

class DeviceBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    if (braid::gputest::gpuCount() == 0) GTEST_SKIP() << "no CUDA device";
    int dev0 = 0;
    ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev0), ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dev, 4096), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  }
  void TearDown() override {
    if (comm) ncclCommDestroy(comm);
    if (dev) cudaFree(dev);
    if (stream) cudaStreamDestroy(stream);
  }
  ncclComm_t comm = nullptr;
  float* dev = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<float> host = std::vector<float>(1024, 1.0f);
};

TEST_F(DeviceBadInput, HostAndDeviceBuffersMixed) {
  expectRejected(ncclAllReduce(host.data(), dev, 256, ncclFloat, ncclSum, comm, stream), "host memory");
  expectRejected(ncclAllReduce(dev, host.data(), 256, ncclFloat, ncclSum, comm, stream), "device memory");
}

TEST_F(DeviceBadInput, OverlappingBuffers) {
  expectRejected(ncclAllReduce(dev, dev + 8, 256, ncclFloat, ncclSum, comm, stream), "overlap");
}

TEST_F(DeviceBadInput, BufferOnAnotherDevice) {
  if (braid::gputest::gpuCount() < 2) GTEST_SKIP() << "needs a second GPU";
  float* other = nullptr;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&other, 4096), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  expectRejected(ncclAllReduce(other, other, 256, ncclFloat, ncclSum, comm, stream), "device 1");
  cudaFree(other);
}

TEST_F(DeviceBadInput, StreamOfAnotherDevice) {
  if (braid::gputest::gpuCount() < 2) GTEST_SKIP() << "needs a second GPU";
  cudaStream_t otherStream = nullptr;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&otherStream), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  expectRejected(ncclAllReduce(dev, dev, 256, ncclFloat, ncclSum, comm, otherStream), "stream belongs to CUDA device 1");
  cudaStreamDestroy(otherStream);
}

// A count past the end of the device allocation (4 KiB): refused before any kernel runs,
// for a count one element too large and for huge ones, in place and out of place.
TEST_F(DeviceBadInput, CountsBeyondTheAllocation) {
  for (size_t count : {size_t(1025), size_t(1) << 45, size_t(1) << 60}) {
    expectRejected(ncclAllReduce(dev, dev, count, ncclFloat, ncclSum, comm, stream), "sendbuff");
    expectRejected(ncclBroadcast(dev, dev, count, ncclFloat, 0, comm, stream), "buff");
    expectRejected(ncclAllGather(dev, dev, count, ncclFloat, comm, stream), "buff");
    expectRejected(ncclAlltoAll(dev, dev, count, ncclFloat, comm, stream), "buff");
    ncclGroupStart();
    ncclSend(dev, count, ncclFloat, 0, comm, stream);
    ncclRecv(dev, 8, ncclFloat, 0, comm, stream);
    expectRejected(ncclGroupEnd(), "sendbuff");
  }
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

TEST_F(DeviceBadInput, ValidCallStillWorks) {
  ASSERT_EQ(ncclAllReduce(dev, dev, 256, ncclFloat, ncclSum, comm, stream), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (braid::gputest::skipWithoutGpu()) return braid::gputest::kSkipExit;
  return RUN_ALL_TESTS();
}
