// Vocabulary of the topology graph: node, link and path types, and the bandwidth constants
// that NCCL's model uses (reference: nccl-facts.md section 4.3), so that braid's estimates can
// be compared with NCCL's numbers.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace braid::topo {

enum class NodeType : uint8_t { Cpu, Pci, Gpu, Nvs, Nic, Net };
enum class LinkType : uint8_t { Loc, Nvl, C2c, Pci, Sys, Net };

// How two devices reach each other, best first. This is NCCL's order with nvidia-smi's NODE
// (two PCIe host bridges of one NUMA node) between PHB and SYS; NCCL counts NODE as PHB.
enum class PathType : uint8_t { Loc, Nvl, Nvb, C2c, Pix, Pxb, P2c, Pxn, Phb, Node, Sys, Net, Dis };

const char* nodeTypeName(NodeType t);
const char* linkTypeName(LinkType t);
// NCCL's spelling ("LOC", "NVL", ..., "PHB" for Node too, "SYS", "NET", "DIS").
const char* ncclPathName(PathType t);
// nvidia-smi's spelling where it has one ("PIX", "PXB", "PHB", "NODE", "SYS"); NCCL's otherwise.
const char* smiPathName(PathType t);
// NCCL's numeric level (PATH_LOC 0 ... PATH_DIS 11); Node maps to PATH_PHB (8).
int ncclPathLevel(PathType t);
// Parses NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL syntax: a path name (LOC, NVL, NVB, PIX, PXB, PHB,
// NODE, SYS, ...) or a legacy integer 0..5 (LOC, PIX, PXB, PHB, SYS, SYS).
std::optional<PathType> parsePathLevel(std::string_view text);

// Bandwidths in GB/s.
inline constexpr double kLocBw = 5000.0;
inline constexpr double kPciGen3x16Bw = 12.0;  // NCCL's PCI_BW, used when a link is unknown
inline constexpr double kNetDefaultMbps = 10000.0;

// NVLink bandwidth of one link for a GPU of this SM version (NCCL's per-generation constants).
double nvlinkBwPerLink(int sm);
// Per-lane rate in units of 100 Mbit/s from a sysfs/XML link_speed string ("16.0 GT/s PCIe",
// "8 GT/s", "32 GT/s PCIe/s"); nullopt for an empty or unknown speed.
std::optional<int> pciLaneRate(std::string_view linkSpeed);
// Bandwidth of a PCIe link; width 0 or an unknown rate count as x16 / Gen3.
double pciLinkBw(int width, std::optional<int> laneRate);
// Bandwidth between two CPU sockets of this kind (QPI/UPI/Infinity Fabric).
double cpuInterconnectBw(std::string_view arch, std::string_view vendor, int familyId, int modelId);
// Bandwidth of a network port given NCCL's speed attribute in Mbit/s (<= 0 means unknown).
double netBw(double speedMbps);
// The most one channel (one CTA) is expected to move, by GPU generation: NCCL's top search speed.
double maxChannelBw(int sm);

// "0000:18:00.0" form: lowercase, a domain of at least four hex digits. Accepts "18:00.0" (domain
// 0) and NCCL's "fffffff:ff:ff.0" placeholder. nullopt when the text is not a PCI address.
std::optional<std::string> normalizeBusId(std::string_view text);

}  // namespace braid::topo
