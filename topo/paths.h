// Paths between devices: for every pair of GPUs, GPU and NIC, and NICs, the path type (LOC, NV#,
// NVB, PIX, PXB, PHB, NODE, SYS, NET) and the bottleneck bandwidth, plus the links it uses so
// that the search can account for links that several hops share.
#pragma once
#include <vector>

#include "topo/system.h"

namespace braid::topo {

// A directed use of a link: 2*link when going from Link::a to Link::b, 2*link+1 the other way.
using DirectedLink = int;

struct Path {
  PathType type = PathType::Dis;
  double bw = 0;                    // GB/s, the narrowest link on the way
  int nvlinks = 0;                  // NV# of nvidia-smi for NVLink paths
  std::vector<DirectedLink> hops;
};

// Which GPU pairs may use peer-to-peer (NCCL_P2P_LEVEL / NCCL_P2P_DISABLE) and NVB paths.
struct P2pPolicy {
  PathType level = PathType::Sys;  // P2P allowed when ncclPathLevel(path) <= ncclPathLevel(level)
  bool nvbAllowed = true;          // NCCL_NVB_DISABLE=1 turns NVLink paths through a GPU off
};

// The physical PCI/CPU route from a to b (both devices of one host): up the PCI tree to the
// lowest common ancestor, across the socket interconnect if the CPUs differ, then down. With
// viaCpu the route goes up to the CPU even when a switch joins them (host-memory staging).
Path pciPath(const System& sys, int a, int b, bool viaCpu = false);
// The best path between two GPUs: NVLink (direct or through the NVSwitch), else NVB (through one
// other GPU's NVLinks, when allowed), else PCI. Devices of different hosts give type NET, bw 0.
Path gpuPath(const System& sys, int a, int b, bool nvbAllowed = true);
// The path a GPU-to-GPU transfer takes under `policy`: gpuPath when peer-to-peer is allowed for
// it, otherwise the route through host memory (type at least PHB).
Path effectiveGpuPath(const System& sys, int a, int b, const P2pPolicy& policy);
// Best path from a GPU or NIC to a NIC (over all listings of that NIC).
Path deviceToNicPath(const System& sys, int device, int nic);

// Paths among all GPUs and NIC identities of a System, computed once.
class PathMatrix {
 public:
  explicit PathMatrix(const System& sys, bool nvbAllowed = true);
  const Path& gpuToGpu(size_t i, size_t j) const { return gg_[i * nGpu_ + j]; }      // indices into sys.gpus
  const Path& gpuToNic(size_t i, size_t k) const { return gn_[i * nNic_ + k]; }      // k indexes nicIds()
  const Path& nicToNic(size_t k, size_t l) const { return nn_[k * nNic_ + l]; }
  // NIC identities (first listings), in sys.nics order.
  const std::vector<int>& nicIds() const { return nicIds_; }

 private:
  size_t nGpu_, nNic_;
  std::vector<int> nicIds_;
  std::vector<Path> gg_, gn_, nn_;
};

}  // namespace braid::topo
