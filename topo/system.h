// The topology graph: CPUs (NUMA nodes), PCI switches, GPUs, NVSwitches, NICs and network
// ports, and the links between them with their type and bandwidth.
//
// A System is always built from an NCCL topology XML tree (read from a file, or made by live
// detection, as NCCL does), and keeps that tree so that NCCL_TOPO_DUMP_FILE writes back what
// was read. The XML nesting gives the PCI tree: every node except CPUs and NVSwitches has one
// parent (a PCI node or a CPU).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "topo/types.h"
#include "topo/xml.h"

namespace braid::topo {

struct Node {
  NodeType type = NodeType::Pci;
  int parent = -1;            // PCI-tree parent (a Pci or Cpu node); -1 for CPUs and NVSwitches
  int cpu = -1;               // the CPU (NUMA node) this node hangs under; itself for a CPU
  int line = 0;               // XML line it came from (for messages); 0 when made in memory
  std::string busId;          // normalized PCI address; empty when the XML gave none
  uint32_t pciClass = 0;      // 0 when unknown
  bool hasClass = false;
  double upBw = 0;            // GB/s of the PCIe link to the parent (0 for CPUs)
  int upLink = -1;            // index of the link to the parent
  int upWidth = 0;            // link_width as given (0 = unknown)

  // Cpu
  int numaId = -1;
  std::string affinity;       // NCCL's hex mask ("ffff,ffffffff"), empty when unknown
  std::string arch, vendor;
  int familyId = -1, modelId = -1;
  uint64_t hostHash = 0;
  int host = 0;               // index into System::hosts

  // Gpu
  int dev = -1;               // CUDA device index as written in the XML (or assigned, see skeleton)
  int sm = 0;
  int rank = -1;
  bool gdr = false;
  bool skeleton = false;      // a GPU or NIC known only as a <pci> entry of a static topology file

  // Nic / Net
  std::string name;           // Net: "mlx5_0"; Nic: its first port's name
  int netDev = -1;            // Net: NCCL's dev attribute
  double speedMbps = 0;       // Net
  int port = 0;
  uint64_t guid = 0;
  int maxConn = 0;
  int alias = -1;             // Nic listed again under another CPU (NCCL writes socket NICs under
                              // every CPU): index of the first listing, -1 if this is the first
};

struct Link {
  int a = -1, b = -1;         // node indices; for PCI links `a` is the child and `b` the parent
  LinkType type = LinkType::Pci;
  double bw = 0;              // GB/s in each direction
  int count = 0;              // NVLink lane count (NVL links)
};

struct Diagnostic {
  enum Level { Info, Warn } level = Warn;
  std::string text;           // "<source>:<line>: ..." where a line is known
};

struct Host {
  uint64_t hostHash = 0;
  std::vector<int> cpus;
  int nvs = -1;               // the NVSwitch node of this host (all NVSwitches fold into one), -1 if none
};

struct System {
  std::vector<Node> nodes;
  std::vector<Link> links;
  std::vector<Host> hosts;
  std::vector<int> cpus, gpus, nics, nets;  // node indices; gpus sorted by dev, nets by netDev
  std::vector<std::vector<int>> adjacency;  // node -> link indices
  std::unordered_map<std::string, int> busIndex;  // normalized bus id -> node
  XmlElement xml;                           // the tree this System was built from
  std::string source;                       // file name, or "live detection"
  std::vector<Diagnostic> diagnostics;

  const Node& node(int i) const { return nodes[static_cast<size_t>(i)]; }
  // -1 when absent.
  int findBusId(const std::string& normalizedBusId) const;
  int findGpuByDev(int dev) const;
  // The link between two nodes, -1 if none.
  int linkBetween(int a, int b) const;
  // The first listing of a NIC (resolves `alias`).
  int nicIdentity(int nic) const { const Node& n = node(nic); return n.alias >= 0 ? n.alias : nic; }
  bool hasWarnings() const;
};

// Builds the graph from an NCCL topology tree (<system version="1">). Returns false with `error`
// ("<source>:<line>: ...") when the tree cannot describe a machine: the root is not <system>, or a
// <pci> has no usable busid, or two devices share a busid. Problems that have a safe reading
// (unknown elements or attributes, out-of-range numbers, NVLinks to devices that are not in the
// file, a virtualization artifact in a link speed) become Diagnostics and the documented fallback
// (topo/README.md) is used.
bool buildSystem(XmlElement xml, const std::string& source, System* out, std::string* error);

// Reads an NCCL topology XML file and builds the graph.
bool loadSystemFile(const std::string& path, System* out, std::string* error);

// A canonical text description of the graph (nodes, attributes that matter, links and bandwidths).
// Two Systems describe the same machine exactly when their descriptions are equal.
std::string describeSystem(const System& sys);

}  // namespace braid::topo
