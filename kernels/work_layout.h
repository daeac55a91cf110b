// The packed form of a launch, as the kernel reads it: a blob of fixed-size records
// (lanes, ops, buffer pointers, connection ends, steps) addressed by byte offsets.
// Shared by the host packer (executor.cc) and the device code; plain C++.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/instances.h"

namespace braid::kernels {

// Element-type codes of the kernels (ncclDataType_t order: instances.h).
#define BRAID_ELEM_ENUM(T, NCCL) T,
enum class ElemType : uint8_t { BRAID_ELEM_TYPES(BRAID_ELEM_ENUM) };
#undef BRAID_ELEM_ENUM
#define BRAID_ELEM_COUNT(T, NCCL) +1
constexpr int kNumElemTypes = 0 BRAID_ELEM_TYPES(BRAID_ELEM_COUNT);
#undef BRAID_ELEM_COUNT

enum class RedKind : uint8_t { Sum = 0, Prod = 1, Max = 2, Min = 3, PreMulSum = 4, SumPostDiv = 5 };

// Codes the kernel writes to the launch's error word (first error wins; 0 = fine).
enum DeviceError : uint32_t { kDeviceOk = 0, kDeviceAborted = 1, kDeviceBadWork = 2 };

constexpr int16_t kNoConn = -1;
constexpr uint16_t kNoBufIndex = 0xffff;

struct DevStep {          // 40 bytes
  uint64_t srcOff;        // elements of the op's kernel type
  uint64_t dstOff;
  uint64_t count;
  uint16_t src;           // index into the op's buffers, or kNoBufIndex
  uint16_t dst;
  int16_t recvConn;       // index into the launch's recv ends, or kNoConn
  int16_t sendConn;
  uint8_t flags;          // algo::kReduce | algo::kFinal
  uint8_t pad[7];
};
// The kernel reads a step as five words (executor_kernel.cuh StepWords): the fields' places.
static_assert(offsetof(DevStep, src) == 24 && offsetof(DevStep, dst) == 26 && offsetof(DevStep, recvConn) == 28 &&
              offsetof(DevStep, sendConn) == 30 && offsetof(DevStep, flags) == 32 && sizeof(DevStep) == 40);

struct DevLane {
  uint32_t firstStep;
  uint32_t nSteps;
  uint32_t op;
  uint32_t words;  // 0: the launch's abort and error words (KernelParams); k: the words table's entry k - 1
};

// The abort and error words of a rank whose lanes a launch runs beside its own (a launch that
// runs several ranks' lanes: mergeKernels, pack.h).
struct DevRankWords {
  const volatile uint32_t* abortFlag;
  uint32_t* errorOut;
};

struct DevOp {
  uint64_t scalarBits;
  const void* deviceScalar;
  uint32_t firstBuffer;   // index into the launch's buffer table
  uint32_t nBuffers;
  int32_t nRanks;
  uint8_t kind;           // RedKind
  uint8_t reduces;
  uint8_t pad[2];
};

struct DevSendEnd {
  char* fifo;
  uint64_t* tail;
  uint64_t* head;
  uint32_t* sizes;  // per slot, the bytes a Simple slice wrote (a network end's proxy sends that many); or null
};
struct DevRecvEnd {
  const char* fifo;
  uint64_t* tail;
  uint64_t* head;
};

// Byte offsets of the tables inside the blob; every table is 16-byte aligned.
struct WorkIndex {
  uint32_t lanes, ops, buffers, sends, recvs, steps, words;
  uint32_t nLanes, nOps, nSends, nRecvs, nWords;
};

constexpr size_t kInlineWorkBytes = 3584;  // keeps the kernel's parameters under 4 KiB
constexpr size_t kUploadChunkBytes = 16384;

#if defined(__CUDACC__)
#define BRAID_HOST_DEVICE __host__ __device__
#else
#define BRAID_HOST_DEVICE
#endif

// A step moves through the FIFO in slices of at most a slot. Cutting it into about
// slicesPerStep slices lets the receiver start on the first while the sender writes the
// next; below kMinSliceBytes the per-slice handshake would cost more than it overlaps.
constexpr uint64_t kMinSliceBytes = 32 * 1024;

// Elements per slice of a step of `count` elements of `elemSize` bytes (a divisor of 16;
// slotBytes a multiple of 16, so slices keep 16-byte alignment). Both ends of a connection
// see the same count for a step, so they cut it alike. With slicesPerStep <= nSlots / 2 and
// a step of at most half the FIFO (the schedules' maxStepElems), a step never takes more
// than half the slots (tests/gpu/cpu_side_test.cc checks it).
BRAID_HOST_DEVICE inline uint64_t sliceElemsFor(uint64_t count, uint32_t elemSize, uint32_t slotBytes,
                                                uint32_t slicesPerStep) {
  // A step holds at most half a FIFO, so its bytes fit 32 bits: a 32-bit division, inline (the
  // 64-bit one is a call of ~70 instructions on the GPU, once a step); larger counts keep it.
  const uint64_t stepBytes = count * elemSize;
  uint64_t bytes = stepBytes <= UINT32_MAX ? uint32_t(stepBytes) / slicesPerStep : stepBytes / slicesPerStep;
  bytes = (bytes + 15) & ~uint64_t(15);
  if (bytes < kMinSliceBytes) bytes = kMinSliceBytes;
  if (bytes > slotBytes) bytes = slotBytes;
  return bytes / elemSize;
}

// The slices per step a launch runs with: what was asked, at most half the slots. Schedules
// keep a step within half a FIFO so that two ranks sending to each other both finish the
// step before either receives; slices must keep that (8 slices in 8 slots deadlocked a
// 2-rank ring all-reduce on the H200).
inline uint32_t effectiveSlicesPerStep(uint32_t asked, uint32_t nSlots) {
  const uint32_t most = nSlots / 2 > 1 ? nSlots / 2 : 1;
  return asked < 1 ? 1 : asked > most ? most : asked;
}

// KernelParams::flags
constexpr uint32_t kPeersOnThisGpu = 1;  // every peer runs on this GPU: GPU-scope fences suffice

struct KernelParams {
  const volatile uint32_t* abortFlag;
  uint32_t* errorOut;
  const unsigned char* spilledWork;  // device copy of the blob, or null: the blob is inline
  uint32_t slotBytes;
  uint32_t nSlots;
  uint32_t flags;
  uint32_t slicesPerStep;  // at least 1; equal on all ranks
  WorkIndex index;
  alignas(16) unsigned char inlineWork[kInlineWorkBytes];
};
static_assert(sizeof(KernelParams) <= 4096, "kernel parameters must stay within 4 KiB");

// Parameters of the kernel that copies a large blob into device memory, one chunk a launch.
struct UploadParams {
  unsigned char* dst;
  uint32_t bytes;
  alignas(16) unsigned char data[kUploadChunkBytes];
};

}  // namespace braid::kernels
