// What the communicator calls: load the machine's topology once per process, and order ranks
// into rings per channel with bandwidth estimates.
//
//   System sys = topo::loadSystem(rank);          // NCCL_TOPO_FILE or live detection (cached)
//   topo::RingInfo info;
//   auto rings = topo::ringOrders(sys, ranks, nChannels, &info);
//
// Consistency: ringOrders is a pure function of (sys, ranks, nChannels, the P2P environment).
// Every rank of a host sees the same System from live detection (it covers all GPUs of the host,
// whatever CUDA_VISIBLE_DEVICES says), but hosts see their own machine. For a communicator that
// spans hosts, either give every rank the same System (NCCL_TOPO_FILE), or let each host compute
// hostChains() for its own ranks and all-gather them before joinHostChains(), or adopt rank 0's
// result. Nothing here depends on CUDA device numbering, only on PCI bus ids.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "topo/paths.h"
#include "topo/search.h"
#include "topo/system.h"

namespace braid::topo {

struct RankLocation {
  int rank = -1;
  uint64_t hostHash = 0;
  int cudaDev = -1;      // -1: host-only rank
  std::string busId;     // "0000:18:00.0" (any case); empty for host-only ranks
};

struct RingInfo {
  std::vector<double> bw;             // per channel, GB/s each ring link can carry (NCCL's bwIntra/bwInter)
  std::vector<std::string> nicIn;     // per channel, the NIC through which data enters each host (multi-host)
  std::vector<std::string> nicOut;
  PathType worstIntra = PathType::Loc;
  int searchedRings = 0;              // channels the search packed before they were repeated
  int distinctRings = 0;              // different rank orders among the channels
  bool fallback = false;              // some host's ranks are in rank order (unknown GPUs, host-only ranks)
  std::string note;                   // why, when fallback
};

// P2P policy from NCCL_P2P_DISABLE, NCCL_P2P_LEVEL and NCCL_NVB_DISABLE (NCCL's defaults otherwise:
// PXB, or SYS on AMD CPUs with at most two GPUs). Bad values are logged and ignored.
P2pPolicy p2pPolicyFromEnv(const System& sys);

// One ring (a permutation of the ranks' numbers) per channel. Ranks of one host are contiguous,
// hosts in the order of their lowest rank, ranks sharing a GPU next to each other. nChannels is
// clamped to [1, 64]. Never fails: a host whose ranks can't all be placed in `sys` is in rank order.
std::vector<std::vector<int>> ringOrders(const System& sys, const std::vector<RankLocation>& ranks, int nChannels,
                                         RingInfo* info);

// The node (host) of every rank, by RankLocation::rank: ids in order of first appearance by rank,
// which is the order in which ringOrders joins the hosts' chains (node 0 holds rank 0). Empty
// when every rank is on one host (algo::CollArgs::nodeOf's "one node") or a rank is missing.
std::vector<int> nodeOfRanks(const std::vector<RankLocation>& ranks);

// The per-host part of ringOrders: for the ranks of host `hostHash`, per channel the order they
// take inside the ring (a closed ring when nHosts == 1, else a chain entering and leaving through
// the NICs nearest the end GPUs).
struct HostChains {
  uint64_t hostHash = 0;
  std::vector<std::vector<int>> chains;  // per channel, rank numbers
  std::vector<double> bw;                // per channel GB/s inside the host (network share included)
  std::vector<std::string> nicIn, nicOut;
  PathType worst = PathType::Loc;
  int distinct = 0;
  bool fallback = false;
  std::string note;
};
HostChains hostChains(const System& sys, const std::vector<RankLocation>& ranks, uint64_t hostHash, int nChannels,
                      int nHosts, const P2pPolicy& policy);
// Joins hosts' chains (in ring order) into rings.
std::vector<std::vector<int>> joinHostChains(const std::vector<HostChains>& hosts, int nChannels, RingInfo* info);

// The topology of this machine: NCCL_TOPO_FILE when set (merged with the GPUs found live, so a
// static cloud file gets its GPUs), otherwise live detection. Detection runs once per process
// and is cached; a bad NCCL_TOPO_FILE is reported and live detection used instead. When `rank`
// equals NCCL_TOPO_DUMP_FILE_RANK (default 0) and NCCL_TOPO_DUMP_FILE is set, the result is
// written there. Diagnostics go to the log (WARN for problems, INFO/GRAPH for the rest).
System loadSystem(int rank = 0);
// Forgets the cached System (tests, or after the environment changed).
void resetSystemCache();

// Merges the GPUs of a live detection into a topology file's tree: GPUs the file lists only as
// <pci> get their <gpu> (and NVLinks) from `live`, GPUs the file lacks are added under their NUMA
// node. Returns the notes (GPU in the file but not on the machine, or the reverse).
std::vector<Diagnostic> mergeLiveGpus(XmlElement* fileXml, const std::string& fileName, const XmlElement& liveXml);

}  // namespace braid::topo
