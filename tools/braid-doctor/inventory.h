// The inventory: what the machine has (versions, GPUs and their links, IOMMU, MPS, network,
// storage), each part adding facts, blocks and skips to the report. Most parts need no GPU;
// those that do add a Skip naming why ("no CUDA device: ...").
#pragma once
#include <string>
#include <vector>

#include "figure.h"

namespace braid::doctor {

struct InventoryOptions {
  bool quick = false;
  double budgetSeconds = 5;  // for this part; helper programs get what is left of it
  std::string selfPath;      // the doctor's binary (for its probe modes)
};

// What later parts need from earlier ones.
struct InventoryFindings {
  std::string realNccl;               // the real libnccl found, empty when none
  int cudaDevices = 0;                // devices the CUDA runtime gives
  std::string noGpuReason;            // "no CUDA device: ..." when cudaDevices == 0
  std::vector<std::string> gpuBusIds;  // by CUDA index, lower case "0000:18:00.0"
  bool pciePeerPairs = false;          // some GPU pair moves its P2P traffic over PCIe
};

void inventoryVersions(const InventoryOptions&, Report*, InventoryFindings*);
void inventoryGpus(const InventoryOptions&, Report*, InventoryFindings*);  // + topology, P2P matrix
void inventoryIommu(const InventoryOptions&, Report*, InventoryFindings*);
void inventoryMps(const InventoryOptions&, Report*, InventoryFindings*);
void inventoryNetwork(const InventoryOptions&, Report*, InventoryFindings*);
void inventoryStorage(const InventoryOptions&, Report*, InventoryFindings*);

// The hidden mode `braid-doctor --gds-probe`: opens and closes the cuFile driver in a process
// of its own (bounded by the parent's timeout, its cufile.log kept out of the user's folder)
// and prints key=value lines. Returns the exit code.
int gdsProbeMain();

}  // namespace braid::doctor
