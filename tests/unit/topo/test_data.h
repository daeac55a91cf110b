// Paths to the topology files the tests read (copies of ../shared/topologies, see SOURCES.md).
#pragma once
#include <string>
#include <vector>

namespace braid::topo::testing {

inline std::string dataDir() { return BRAID_TOPO_DATA; }
inline std::string xmlPath(const std::string& name) { return dataDir() + "/nccl-xml/" + name; }

// Every NCCL topology XML of the collection.
inline std::vector<std::string> allXmlFiles() {
  return {"aws-g5-48xl.xml",          "aws-p4d-24xl.xml",          "aws-p4de-24xl.xml",
          "aws-p5-48xl.xml",          "azure-ncv4.xml",            "azure-ndv2.xml",
          "azure-ndv4.xml",           "azure-ndv5.xml",            "h200-1gpu-vm-dump.xml",
          "ibm-gx3d-h100-8gpu-vsi.xml", "modal-gvisor-b200-8gpu-vm.xml", "perlmutter-a100-4gpu.xml",
          "rtx4090-4gpu-pcie-epyc-nps4.xml", "v100-sxm2-8gpu-vm-cubemesh.xml", "vastai-hgx-b200-8gpu.xml",
          "vastai-hgx-h200-8gpu.xml"};
}

}  // namespace braid::topo::testing
