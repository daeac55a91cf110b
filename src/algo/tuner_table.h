// Every constant of the tuner (tuner.h), in one table, each with where it came from. "Measured"
// numbers are braid's, from perf/NOTES.md (Simple only: the executor had no other protocol);
// LL and LL128 take NCCL's published model constants (reference: nccl-facts.md section 3,
// NCCL's src/graph/tuning.cc) as differences from Simple, until they are measured on the H200.
// Internal to src/algo.
#pragma once
#include <cstdint>

#include "algo/schedule.h"
#include "algo/tuner.h"

namespace braid::algo::tuning {

struct CostTable {
  // ---- per protocol, indexed by Protocol (LL, LL128, Simple) ----
  // Fixed cost of a call: the kernel launch and the work it carries.
  double launchUs[kNumProtocols];
  // Payload bytes per byte written (LL: 8 of 16, LL128: 120 of 128, Simple: all).
  double efficiency[kNumProtocols];
  // The most a whole call can move, GB/s (0: no cap).
  double maxGbps[kNumProtocols];
  // FIFO slices a large step is cut into (kernels::Launch::slicesPerStep).
  int slicesPerStep[kNumProtocols];
  // Payload of one slice, and the handshake each slice of a lane pays.
  uint64_t sliceBytes[kNumProtocols];
  double sliceUs[kNumProtocols];

  // ---- per link kind (SameGpu, NvLink, Pcie, HostStaged, Network) x protocol ----
  // Latency of one hop on the critical path.
  double hopUs[kNumLinkKinds][kNumProtocols];
  // What one channel (one CUDA block) moves, GB/s of payload (0: no cap).
  double perChannelGbps[kNumLinkKinds][kNumProtocols];
  // ---- per link kind ----
  // Bandwidth of a hop when the caller does not know it (GB/s; SameGpu: the GPU's, shared).
  double defaultGbps[kNumLinkKinds];

  // ---- channels ----
  uint64_t fineBytesPerChannel;    // up to fineChannels
  uint64_t coarseBytesPerChannel;  // past fineChannels
  int fineChannels;
  int maxChannels;                 // per rank
  int maxP2pParts;                 // per send or recv

  // ---- one rank: a copy (api/device_tasks.cc copyOnOneRank) ----
  double copyLaunchUs;
  double copyGbps;

  // ---- host memory: the CPU engine ----
  double cpuHopUs;
  double cpuGbps;

  // ---- which algorithms are weighed by default (kConsidered below) ----
  uint64_t oneShotMaxBytes;  // direct (one-shot) all-reduce of 2 ranks, up to this size
};

inline constexpr CostTable kTable{
    // launchUs: Simple = 1-rank calls back to back, 8 B-2 MB: 5.4-6.2 us (one H200, a kernel and
    // its work; perf/NOTES.md "fourth session"). LL, LL128: fitted with hopUs's same-GPU row to
    // nccl-tests under MPS on one H200 (2026-12-01, perf/NOTES.md "nccl-tests under MPS"): LL ring
    // 22.7 us (4 ranks, 6 hops) and 55 (8 ranks, 14 hops) from 128 B to 8 KB, LL direct of 2 ranks
    // no faster than Simple's (12-16 against 10-13 us); LL128 ring 25 us on 4 ranks.
    .launchUs = {8.0, 7.0, 6.0},
    .efficiency = {0.5, 120.0 / 128.0, 1.0},
    // LL: NCCL's llMaxBw for Hopper in one node (141 GB/s).
    .maxGbps = {141.0, 0.0, 0.0},
    // Simple: 2 beat 1, 4 and 8 slices per step on the H200 (2 ranks, 64 MiB; perf/NOTES.md
    // "second session"). LL, LL128: one, as NCCL (non-Simple protocols: sliceSteps 1).
    .slicesPerStep = {1, 1, 2},
    // Simple: a step is at most half the api's FIFO of 8 x 256 KiB (api/device_resources.h),
    // cut into 2 slices. LL, LL128 carry their flags in every line: no handshake per slice.
    .sliceBytes = {64 << 10, 64 << 10, 512 << 10},
    // Simple: a system-scope fence and a flag store each side; assumed, not measured.
    .sliceUs = {0.0, 0.0, 1.0},

    // hopUs, Simple: SameGpu = 2 ranks on one H200, 8 B all-reduce of one hop: 9.2-11.4 us (threads),
    // 10.7 us (MPS), minus the launch; 4 ranks' 6-hop ring 21-29 us (issue 13, perf/NOTES.md).
    // NvLink = 2 H200s, one hop at 8 B: all-reduce 11.95, all-gather 12.35, reduce-scatter 10.13,
    // broadcast 9.99, sendrecv 11.97 us, minus the launch (perf/NOTES.md). Not measured: Pcie =
    // NvLink + NCCL's PCI-NVLink difference (Ring Simple 5.7 - 3.4); HostStaged = Pcie + the same
    // again (each hop crosses PCIe twice). LL, LL128: Simple's value plus NCCL's difference of that
    // hardware's ring latency (NVLink: LL 0.6, LL128 1.9, Simple 3.4; PCI: 1.0, 2.5, 5.7).
    // SameGpu: the fit above for LL and LL128; Simple ring 27.8 us (4 ranks) and 57.9 (8 ranks) at
    // 128 B-8 KB, direct 10.5 (2 ranks), in the same run: ~3.6 us a hop. A hop costs about the
    // same in every protocol: the interpreter's work per step, not the protocol's handshake, is
    // what these calls wait for (CUDA-graph runs, GPU time alone: LL 6.3 us, Simple 7.4, 2 ranks).
    // Network: measured, UCX 1.13 over TCP between network namespaces over veth on a shared
    // 2-core VM (perf/NOTES.md 2026-12-01 "UCX made fast"): a 2-node x 1-rank all-reduce of 8 B,
    // the ring's 2 hops, took 27 and 25.6 us (medians of 5 and 3, the call check beside it):
    // 13 us a hop, a sendmsg through the kernel's TCP (~5 us on each side) the bulk of it. Every
    // protocol the same: no GPU protocol's handshake saving was measured there (NCCL's NET
    // differences, LL 2.7, LL128 4.0, Simple 14.0, are its GPU proxies'); LL128 never runs there.
    .hopUs = {{3.0, 3.2, 3.6},      // SameGpu (measured, above)
              {2.5, 3.8, 5.3},      // NvLink
              {2.9, 4.4, 7.6},      // Pcie (LL128 never runs there)
              {3.3, 5.0, 9.9},      // HostStaged (Pcie + NCCL's PCI-NVLink difference)
              {13.0, 13.0, 13.0}},  // Network (measured: UCX/TCP over veth)
    // SameGpu: 4 ranks' ring on one channel from 8 KB to 256 KB under MPS (same run as launchUs):
    // LL 5.5, LL128 9, Simple 12.7 GB/s of payload (formerly 8, 36.7, 16: assumed).
    // Simple: formerly SameGpu = 2 ranks on one H200, 256 KB all-reduce on 1 channel: 30 us (issue 13);
    // NvLink = 2 H200s, 8 MB all-reduce on 16 channels: 56.2 us (perf/NOTES.md; "a block moves
    // ~10-20 GB/s over NVLink"); the others as NvLink (not measured; the link is narrower anyway).
    // LL: Simple's times LL's efficiency (assumed). LL128: NCCL's perChMaxRingLL128Bw (Hopper 36.7).
    .perChannelGbps = {{5.5, 9.0, 12.7},
                       {6.5, 36.7, 13.0},
                       {6.5, 36.7, 13.0},
                       {6.5, 36.7, 13.0},
                       {6.5, 36.7, 13.0}},
    // SameGpu: 2, 4, 8 ranks on one H200 moved 404-468, 264, 150 GB/s each (executor bench, 64 MiB-
    // 1 GiB all-reduce; perf/NOTES.md): ~1000 GB/s for the GPU. NvLink: one SM90 NVLink (NCCL 20.6).
    // Pcie, HostStaged: NCCL's PCI_BW (Gen3 x16, 12). Network: measured over the same UCX/TCP path
    // (veth, 2-core VM, load 5): a 2-node x 1-rank ring all-reduce of 16 MB, each rank sending the
    // whole buffer once, took 16.6 ms: 1.0 GB/s a direction (perf/NOTES.md 2026-12-01, median of
    // 3; Open MPI over the same path in the same run 21.0-21.4 ms: 0.8). A real NIC is faster:
    // the link's measured bandwidth, when the caller knows it, replaces this.
    .defaultGbps = {1000.0, 20.6, 12.0, 12.0, 1.0},

    // A channel per 64 KiB up to 16 with one rank per GPU (a block moves only ~10-20 GB/s over
    // NVLink: 128 KiB-8 MiB calls waited on a handful of blocks; 2 H200s: 0.2-0.7 of NCCL's speed
    // with a block per 512 KiB), then one per 512 KiB: each lane costs host time on every call,
    // which only calls of several MiB hide (2 MiB all-reduce: 36 us on 16 channels, 65-86 on 32;
    // 8 MiB: 56 on 16, 95-137 on 64; from 32 MiB 64 were fastest). Ranks sharing a GPU took a
    // channel per 512 KiB until NCCL_MIN_CTAS 1/4/16 under nccl-tests (MPS, one H200, 2026-12-01)
    // showed the same rule pays there: 2 ranks 1 MB 44.6 us on 2 channels, 22.1 on 16; 4 ranks
    // 256 KB 58.3 on 1, 34.5 on 4; 2 MB 77.8 on 4, 44.1 on 16 (perf/NOTES.md). The cap (SMs over
    // the ranks per GPU) still keeps their blocks on the GPU together.
    .fineBytesPerChannel = 64 << 10,
    .coarseBytesPerChannel = 512 << 10,
    .fineChannels = 16,
    // At most 64 per rank: 2 ranks on one H200 need 64 blocks each to reach 0.7 of the copy rate
    // (32 reached 0.59-0.63 in the executor bench); and at most the SMs over the most ranks on one
    // GPU (formerly api/device_resources.cc).
    .maxChannels = 64,
    // Send/recv: at most 32 (2 ranks on one H200 need that many blocks to reach 0.7 of the copy
    // rate), which bounds a peer pair's FIFO memory at 32 channels x 2 directions x 2 MiB.
    .maxP2pParts = 32,

    // 1-rank all-reduce back to back: 5.4-6.2 us to 8 MB; 1 GiB in 503 us (perf/NOTES.md).
    .copyLaunchUs = 5.6,
    .copyGbps = 2130.0,

    // The CPU engine: a handoff per step, and its copy rate on a small machine (formerly
    // api/execute.cc's estimate).
    .cpuHopUs = 1.0,
    .cpuGbps = 5.0,

    // One hop (each rank sends its input to the other, then adds) instead of the ring's two in a
    // row, each a FIFO handshake across the link. Measured at 8 B-32 KB on 2 H200s (11.8-12.8 us,
    // NCCL 11.5-13.4); 64 KiB is where it was cut off, not a measured crossover (perf/NOTES.md;
    // formerly algo/registry.cc tunedAlgorithm).
    .oneShotMaxBytes = 64 << 10,
};

// The CPU engine across hosts (host memory, ranks on 2 or more hosts): an algorithm weighed
// against the collective's default on the model (hopUs/defaultGbps of Network for the hops that
// cross hosts, cpuHopUs inside a host). The tree: 2 nodes x 2 ranks over UCX/TCP, all-reduce,
// tree against ring (medians of 3, perf/NOTES.md 2026-12-01): 8 B 58 vs 83 us, 512 B 92 vs 174,
// 32 KB 149 vs 192, 256 KB 571 vs 741, 2 MB 3.7 vs 6.3 ms; 3 nodes x 1 rank (where the model
// ties their hops): 512 B 123 vs 182 us, 256 KB 1122 vs 855 us (there the ring was faster).
// Direct on 2 ranks (one network hop instead of the ring's two in a row; the same bits on both
// ranks, a + b == b + a): 2 nodes x 1 rank, 2026-12-06 (perf/NOTES.md): 8 B 17.0 vs 19.8 us,
// 128 B 17.1 vs 28.9, 2 KB 18.7 vs 28.1, 8 KB 19.7 vs 36.1, 32 KB 34.3 vs 39.7; from 64 KB the
// two are even (64 KB-16 MB within the runs' noise), so it stops at oneShotMaxBytes as on GPUs.
struct HostConsidered {
  Coll coll;
  const char* algorithm;
  int minNodes;
  int onlyRanks;      // 0: any rank count
  uint64_t maxBytes;  // 0: any size
};
inline constexpr HostConsidered kHostConsidered[] = {
    {Coll::AllReduce, "tree", 2, 0, 0},
    {Coll::AllReduce, "direct", 2, 2, kTable.oneShotMaxBytes},
};

// The algorithms the tuner weighs for a collective unless NCCL_ALGO allows none of them.
struct Considered {
  Coll coll;
  const char* algorithm;
  int onlyRanks;      // 0: any rank count
  uint64_t maxBytes;  // 0: any size
};
inline constexpr Considered kConsidered[] = {
    {Coll::AllReduce, "ring", 0, 0},
    // 2 ranks only: a + b == b + a, so both ranks get the same bits; with more ranks each adds in
    // its own order and the ranks' sums may differ in the last bits.
    {Coll::AllReduce, "direct", 2, kTable.oneShotMaxBytes},
    {Coll::AllReduce, "twoshot", 0, 0},
    {Coll::AllGather, "ring", 0, 0},
    {Coll::AllGather, "direct", 0, 0},
    {Coll::ReduceScatter, "ring", 0, 0},
    {Coll::ReduceScatter, "direct", 0, 0},
    // Broadcast and Reduce: only the ring has run them on the GPU (direct: NCCL_ALGO=direct).
    {Coll::Broadcast, "ring", 0, 0},
    {Coll::Reduce, "ring", 0, 0},
    {Coll::AlltoAll, "direct", 0, 0},
    {Coll::Gather, "direct", 0, 0},
    {Coll::Scatter, "direct", 0, 0},
};

}  // namespace braid::algo::tuning
