// The GPU executor's host API: enqueue one rank's share of one launch (one collective, or a
// group of several) as CUDA kernels on a stream.
//
// Plain C++ (no CUDA syntax), so any component can include it. A launch only enqueues: it
// never synchronises the host, and it is graph-capturable: everything the kernel needs is
// passed by value in kernel parameters, or, for large plans, uploaded into device memory by a
// kernel whose parameters carry it: outside capture into a WorkCache (reused by the next
// launch with the same work), under capture into a GraphWork buffer that the graph holds.
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "algo/protocol.h"
#include "algo/schedule.h"
#include "kernels/proto_layout.h"  // FifoShape, maxStepBytes, defaultFifo
#include "kernels/work_layout.h"   // RedKind, DeviceError
#include "nccl.h"
#include "transport/p2p_fifo.h"

namespace braid::kernels {

struct RedOp {
  RedKind kind = RedKind::Sum;
  uint64_t scalarBits = 0;              // PreMulSum: one element of the op's type, little-endian bits
  const void* deviceScalar = nullptr;   // PreMulSum: scalar in device memory, read by the kernel; wins
  int nRanks = 1;                       // SumPostDiv: the divisor applied by kFinal steps
};

// One collective (or all P2P ops of a group) of the launch.
struct OpWork {
  ncclDataType_t type = ncclFloat32;
  RedOp red;
  bool reduces = true;           // false: the op only moves bytes (gathers, broadcast, P2P, ...)
  std::vector<void*> buffers;    // device pointers by schedule buffer index (kInput, kOutput, ...)
};

// One lane of a RankPlan, tagged with the op it belongs to. `lane` must stay valid until
// launch() returns (it is copied).
struct LaneWork {
  int op = 0;
  const algo::Lane* lane = nullptr;
};

// The connections the lanes use, keyed like the schedule: (channel, peer).
struct SendConn {
  int channel = 0;
  int peer = 0;
  transport::FifoSendEnd end;
};
struct RecvConn {
  int channel = 0;
  int peer = 0;
  transport::FifoRecvEnd end;
};

class WorkCache;
class GraphWork;

struct Launch {
  int cudaDev = 0;
  cudaStream_t stream = nullptr;
  // How the connections carry the data: the same on every rank of the call, and `sends` and
  // `recvs` are that protocol's connection ends (their FIFOs have its shape: proto_layout.h).
  // LL128 needs ends marked ordered128 (launch() refuses it elsewhere: see usableProtocol).
  algo::Protocol protocol = algo::Protocol::Simple;
  std::vector<OpWork> ops;
  std::vector<LaneWork> lanes;
  std::vector<SendConn> sends;
  std::vector<RecvConn> recvs;
  const volatile uint32_t* abortFlag = nullptr;  // device-visible (host-mapped); nonzero = abort
  uint32_t* errorOut = nullptr;                  // device-visible (host-mapped); gets a DeviceError; may be null
  int threadsPerBlock = 512;                     // a multiple of 32, at most 512
  bool peersOnThisGpu = false;                   // every peer's kernels run on this GPU (cheaper fences)
  int slicesPerStep = 2;                         // FIFO slices a large step is cut into; equal on all
                                                 // ranks; capped at the connections' nSlots / 2.
                                                 // 2 beat 1, 4 and 8 on the H200 (perf/NOTES.md)
  WorkCache* workCache = nullptr;                // uploads work too large for the parameters
                                                 // (work_cache.h); needed for such launches
  GraphWork* graphWork = nullptr;                // the same under graph capture (graph_work.h)
};

// What enqueuePacked reads of a launch: its settings, without ops, lanes and connections (the
// packed work holds what the kernels need of those).
Launch settingsOf(const Launch& launch);

// How many channels a launch's connections span: 1 + the highest channel, 0 without any.
inline int channelsOf(const Launch& launch) {
  int most = -1;
  for (const SendConn& c : launch.sends) most = most > c.channel ? most : c.channel;
  for (const RecvConn& c : launch.recvs) most = most > c.channel ? most : c.channel;
  return most + 1;
}

// Enqueues the work: one kernel per element type present (ops that only move bytes share
// the byte kernel), one CUDA block per lane. All ranks of a communicator must present
// their ops in the same order. Returns ncclInvalidArgument for a malformed launch (a step
// naming a connection or buffer that is absent), ncclUnhandledCudaError when CUDA refuses.
// `widestKernel`, when given, gets the most blocks of any kernel it enqueued (all of a kernel's
// blocks run together with the peers' kernels: they must fit on the GPU at once). `packed`,
// when given, gets the kernels as packed, for enqueuePacked to enqueue them again.
struct PackedLaunch;  // pack.h
ncclResult_t launch(const Launch& work, unsigned* widestKernel = nullptr, PackedLaunch* packed = nullptr);

// The second half of launch(): enqueues work packed by packLaunch (perhaps in another process,
// its pointers rewritten: src/api/served.h) with `context`'s device, stream, abort and error
// words, threads, fences, slicing and work caches; its ops, lanes and ends are not read.
ncclResult_t enqueuePacked(const Launch& context, const PackedLaunch& packed, unsigned* widestKernel = nullptr);

// The protocol a call runs when `asked` was chosen: `asked`, or Simple when LL128 was asked
// and `ordered128` (every connection of the call, on every rank of it, carries 128-byte stores
// whole and in order) is false. The fallback is logged once per `said` at INFO, naming `rank`.
// Every rank must pass the same values, so that all ends of a connection run one protocol.
algo::Protocol usableProtocol(algo::Protocol asked, bool ordered128, int rank, std::atomic<bool>* said);

// Loads all executor kernels on `cudaDev` (once per device; later calls return at once).
// CUDA loads modules lazily by default, and a module load waits for running kernels: a
// rank's first launch of a new kernel, while other ranks of the process spin in theirs,
// would never return. launch() calls this itself; call it at communicator init too.
ncclResult_t preloadKernels(int cudaDev);

// The number of inline work bytes a launch may take before it spills to device memory.
size_t inlineWorkCapacity();

}  // namespace braid::kernels
