// What the tuner (algo/tuner.h) is told about a communicator's links, from what braid knows:
// each rank's host and GPU (PCI bus id), whether FIFOs stage through host memory
// (NCCL_P2P_DISABLE), and the topology's paths (topo/). Shared by the communicator
// (api/tuning.cc) and braid-tune, so that both see the same links.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algo/tuner.h"
#include "topo/system.h"

namespace braid::api {

// The protocols the GPU executor (kernels/) runs: the one place the tuner learns it. LL128 is
// chosen only on same-GPU and NVLink hops; where the transport cannot order 128-byte lines the
// launch still falls back to Simple (GpuResources::usableProtocol).
constexpr algo::ProtocolSet kExecutorProtocols =
    algo::protocolBit(algo::Protocol::LL) | algo::protocolBit(algo::Protocol::LL128) | algo::protocolBit(algo::Protocol::Simple);

struct RankPlace {
  uint64_t host = 0;
  std::string busId;  // the GPU's PCI bus id, any case ("0000:18:00.0"); empty for a host-only rank
};

// The hop between two ranks, the same seen from either end (the worse of both directions), so
// that both ends of a send/recv choose alike. Other host: network. NCCL_P2P_DISABLE: host-staged
// (the transport stages every GPU connection then, even on one GPU). Same bus id: same GPU.
// Otherwise the topology's GPU path: NVLink (direct or through the NVSwitch), else PCIe (peer
// access never goes through a third GPU); bandwidth 0 (the tuner's default for the kind) when
// the topology lacks a GPU.
algo::Hops hopBetween(const topo::System& sys, const RankPlace& a, const RankPlace& b, bool p2pDisabled);

struct LinkFacts {
  algo::Hops ring;                 // the ring's neighbours (ring order)
  algo::Hops mesh;                 // every pair
  int ranksPerGpu = 1;             // the most ranks on one GPU
  std::vector<algo::Hops> toRank;  // from `self` to each rank (to itself: same GPU)
};

// `ring` is the rank order (empty: 0..n-1). Pure: the same inputs give every rank the same ring,
// mesh and ranksPerGpu.
LinkFacts linkFacts(const topo::System& sys, const std::vector<RankPlace>& ranks, const std::vector<int>& ring, int self,
                    bool p2pDisabled);

// What the tuner may pick when NCCL_PROTO is unset: where it was measured to pay. Simple
// everywhere; LL too when every hop is on one GPU (nccl-tests under MPS on one H200, 2026-12-01:
// LL ring 14-23 us against Simple's 20-28 us from 8 B to 32 KB on 4 ranks, 19-56 against 32-58
// on 8; perf/NOTES.md). LL128 was slower than Simple from 64 KB and than LL below there, and
// neither has been measured over NVLink or PCIe yet: NCCL_PROTO runs them.
algo::ProtocolSet defaultProtocols(const LinkFacts& links);

// What the tuner weighs for device memory: with NCCL_PROTO set, every protocol the executor runs
// (NCCL_PROTO narrows them in the tuner); unset, defaultProtocols. Fixed per communicator.
algo::ProtocolSet deviceProtocols(const LinkFacts& links, bool ncclProtoSet);

// The protocol of a device launch of sends and receives alone (one with a collective takes the
// collective's: CommTuning::launchProtocol): Simple, unless NCCL_PROTO leaves send/recv exactly
// one of `protocols` (deviceProtocols). The ranks of such a group differ in their tasks (sizes,
// peers, order), yet both ends of every connection must run one protocol with one slicing: so
// it reads only the communicator's settings, never the tasks.
algo::Protocol p2pLaunchProtocol(const algo::TuningConstraints& constraints, algo::ProtocolSet protocols);

// What the tuner may weigh for one device task, so that its choice (the TUNING log, the
// estimate, braid-tune, the plan) is made for the protocol its launch runs: only `launch` where
// the launch's protocol is known (device_tasks.cc: every task of a launch runs the launch's one
// protocol); else a send/recv only p2pLaunchProtocol, what a launch of sends and receives alone
// runs; any other task `protocols`.
algo::ProtocolSet deviceTaskProtocols(algo::Coll coll, const algo::TuningConstraints& constraints,
                                      algo::ProtocolSet protocols, std::optional<algo::Protocol> launch);

// "NVLink 370.8 GB/s" (the tuner's default shown as "? GB/s").
std::string describeHops(const algo::Hops& h);

}  // namespace braid::api
