// Text views of a System: nvidia-smi's `topo -m` matrix (with its legend), the same matrix in
// NCCL's vocabulary with bandwidths, and a per-device affinity list.
#pragma once
#include <string>
#include <vector>

#include "topo/paths.h"
#include "topo/system.h"

namespace braid::topo {

// A network column of the matrix: one NCCL port (<net>), or a NIC known only as a PCI device.
struct NicColumn {
  int nicIndex;     // index into PathMatrix::nicIds()
  int node;         // the Net node, or the Nic node when it has no ports
  std::string name;
};
std::vector<NicColumn> nicColumns(const System& sys, const PathMatrix& pm);

// "0-47,96-143" from NCCL's comma-separated 32-bit hex words; empty when the mask is.
std::string cpuListFromMask(const std::string& mask);

// nvidia-smi topo -m: tab-separated, " X " on the diagonal, NV# / PIX / PXB / PHB / NODE / SYS,
// then CPU Affinity, NUMA Affinity and GPU NUMA ID, then the legends.
std::string smiMatrix(const System& sys, const PathMatrix& pm);
// The same pairs in NCCL's terms (LOC, NVL, NVB, PIX, PXB, PHB, SYS) with GB/s.
std::string ncclMatrix(const System& sys, const PathMatrix& pm);
// One line per GPU: bus id, NUMA node, CPUs, and the nearest NIC with its path.
std::string affinityReport(const System& sys, const PathMatrix& pm);

}  // namespace braid::topo
