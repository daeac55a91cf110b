// Paths to the topology files the tests read (copies of ../shared/topologies, see SOURCES.md).
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "topo/system.h"

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

// A collection file as a System; a load failure fails the calling test.
inline System loadXml(const std::string& name) {
  System sys;
  std::string error;
  EXPECT_TRUE(loadSystemFile(xmlPath(name), &sys, &error)) << error;
  return sys;
}

}  // namespace braid::topo::testing
