// The tuner: one pure function from what a call is and what its links are to {algorithm,
// protocol, channels, slices per step, estimated microseconds} and the runner-up. Every such
// choice braid makes comes from here: the GPU executor's launches (api/device_tasks.cc), the
// estimate of ncclGroupSimulateEnd (api/execute.cc), and braid-tune's table.
//
// The model: per call a fixed launch cost, per hop on the critical path the latency of the
// protocol on that kind of link, and the bytes the busiest hop carries over its bandwidth (times
// the protocol's efficiency, at most what the channels can move), plus Simple's handshake per
// slice. Its constants are one table (tuner_table.h), each with where it came from.
//
// Rules, in order: an algorithm must support the collective; a protocol must be one the executor
// runs, and LL128 runs only over same-GPU and NVLink hops (128-byte stores arrive whole and in
// order only there: never over PCIe, host-staged FIFOs or the network); NCCL_ALGO/NCCL_PROTO
// (tuner_env.h) then narrow the choice, and when they leave nothing the default is used with a
// warning; of what remains, the tuner weighs the algorithms braid has measured for the
// collective (tuner_table.h kConsidered), or all that remain when the user allowed none of those.
// The cheapest estimate wins; on a tie the default algorithm and Simple (the measured ones) win.
// Host memory (the CPU engine: one lane, no protocols) runs the collective's default algorithm,
// unless NCCL_ALGO narrows the collective: then the default if it is allowed, else the cheapest
// allowed one by the CPU engine's model (nothing allowed can run it: a warning and the default).
#pragma once
#include <cstdint>
#include <string>

#include "algo/algorithm.h"
#include "algo/protocol.h"
#include "algo/schedule.h"
#include "algo/tuner_env.h"

namespace braid::algo {

// What a hop between two ranks goes through, best first: a later kind is never faster.
enum class LinkKind : uint8_t { SameGpu, NvLink, Pcie, HostStaged, Network };
constexpr int kNumLinkKinds = 5;
const char* linkKindName(LinkKind k);

// The hops of one communication pattern: the worst kind among them and the narrowest bandwidth
// (GB/s in each direction; 0 = unknown, the table's value for the kind is used). A same-GPU
// bandwidth is the GPU's, shared by the ranks on it.
struct Hops {
  LinkKind kind = LinkKind::SameGpu;
  double gbps = 0;
};
// Both sets of hops together: the worse kind, the narrower known bandwidth.
Hops combine(Hops a, Hops b);
// Whether LL128 may run over these hops.
bool ll128Allowed(LinkKind k);

struct TunerInput {
  Coll coll = Coll::AllReduce;
  uint64_t bytes = 0;          // the whole collective as every rank sees it; SendRecv: one op's bytes
  uint32_t elemSize = 1;       // bytes per element (the model does not use it yet)
  int nRanks = 1;
  int ranksPerGpu = 1;         // the most ranks on any one GPU of the communicator
  int nNodes = 1;              // hosts (CollArgs::nodeOf): the tree's depth
  int ranksPerNode = 0;        // the most ranks on one host (0: nRanks / nNodes): its chains' length
  Hops ring;                   // the ring's hops (ring order's neighbours): the ring algorithm
  Hops mesh;                   // every pair of ranks: direct, twoshot; SendRecv: the hop to the peer
  int sms = 0;                 // SMs per GPU (0 = unknown: no SM limit below 64 channels)
  ProtocolSet executorProtocols = protocolBit(Protocol::Simple);
  int minChannels = 1;         // config.minCTAs: the fewest channels of a collective (and raises the cap)
  int maxChannels = 64;        // config.maxCTAs
  bool hostMemory = false;     // the CPU engine runs it (host buffers): one lane, no protocol choice
  const TuningConstraints* constraints = nullptr;  // NCCL_ALGO / NCCL_PROTO; nullptr = none
};

struct TunerChoice {
  const Algorithm* algorithm = nullptr;  // nullptr for SendRecv (buildP2p: one lane per peer)
  Protocol protocol = Protocol::Simple;
  int channels = 1;                      // collective lanes, or send/recv parts
  int slicesPerStep = 2;
  double microseconds = 0;
};

struct TunerResult {
  TunerChoice best;
  bool hasRunnerUp = false;
  TunerChoice runnerUp;       // the cheapest other (algorithm, protocol)
  std::string warning;        // NCCL_ALGO/NCCL_PROTO left nothing possible: why the default was used
};

// The choice for one call.
TunerResult tune(const TunerInput& in);

// The (algorithm, protocol) pairs tune() weighs for `in`, each with its channels, slices and
// estimate, in preference order (ties go to the earlier one). `warning` as in TunerResult.
struct Candidates {
  static constexpr int kCapacity = 8 * kNumProtocols;  // up to 8 algorithms for a collective
  TunerChoice items[kCapacity];
  int size = 0;
  std::string warning;
};
Candidates candidates(const TunerInput& in);

// The slices per step a protocol runs with (the table's; what tune() puts in its choices).
int slicesPerStepOf(Protocol protocol);

// The model's estimate for one (algorithm, protocol, channels) on `in`, whatever the rules say
// (tests, braid-tune). `algorithm` is ignored for SendRecv.
double estimateMicroseconds(const TunerInput& in, const Algorithm* algorithm, Protocol protocol, int channels);

// The channel rules (the same on every rank: they read only the collective's size and the
// communicator's facts). A channel per `bytesPerChannel` up to 16, then one per 512 KiB.
uint64_t channelsWanted(uint64_t bytes, uint64_t bytesPerChannel);
int collectiveChannels(const TunerInput& in, Protocol protocol);
int p2pParts(const TunerInput& in, Protocol protocol);

}  // namespace braid::algo
