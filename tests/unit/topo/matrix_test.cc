// braid-topo's matrix against `nvidia-smi topo -m` from the same machines. Both are parsed into
// cells by row and column label and compared cell by cell. Differences are listed per machine
// below with their reason; everything else must match exactly.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "test_data.h"
#include "topo/matrix.h"
#include "topo/paths.h"
#include "topo/system.h"

namespace braid::topo {
namespace {

struct Matrix {
  std::vector<std::string> columns;
  std::map<std::pair<std::string, std::string>, std::string> cells;
  std::vector<std::string> rows;
  std::string legend;  // the "Legend:" block up to the NIC legend
  std::vector<std::string> nicNames;
};

std::vector<std::string> splitTabs(const std::string& line) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t tab = line.find('\t', pos);
    out.push_back(line.substr(pos, tab == std::string::npos ? std::string::npos : tab - pos));
    if (tab == std::string::npos) break;
    pos = tab + 1;
  }
  return out;
}

Matrix parseMatrix(const std::string& text) {
  Matrix m;
  std::istringstream in(text);
  std::string line;
  bool inTable = false, inLegend = false, inNics = false;
  while (std::getline(in, line)) {
    if (!inTable && line.rfind("\tGPU0", 0) == 0) {
      inTable = true;
      m.columns = splitTabs(line);
      continue;
    }
    if (inTable && !line.empty() && line[0] != ' ' && line.find('\t') != std::string::npos && !inLegend) {
      auto f = splitTabs(line);
      m.rows.push_back(f[0]);
      for (size_t c = 1; c < f.size() && c < m.columns.size(); ++c) m.cells[{f[0], m.columns[c]}] = f[c];
      // The last header field is followed by an empty field before it in nvidia-smi's rows.
      if (f.size() == m.columns.size() + 1) m.cells[{f[0], m.columns.back()}] = f.back();
      continue;
    }
    if (line == "Legend:") inLegend = true;
    if (line == "NIC Legend:") {
      inLegend = false;
      inNics = true;
    }
    if (inLegend && !line.empty()) m.legend += line + "\n";
    if (inNics && line.rfind("  NIC", 0) == 0) m.nicNames.push_back(line.substr(line.find(": ") + 2));
  }
  return m;
}

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Matrix braidMatrix(const std::string& xml) {
  System sys;
  std::string error;
  EXPECT_TRUE(loadSystemFile(testing::xmlPath(xml), &sys, &error)) << error;
  PathMatrix pm(sys);
  return parseMatrix(smiMatrix(sys, pm));
}

Matrix smiFile(const std::string& name) { return parseMatrix(readFile(testing::dataDir() + "/nvidia-smi-topo/" + name)); }

// GPU rows: every GPU column and the three affinity columns must be equal.
void expectGpuBlockEqual(const Matrix& braid, const Matrix& smi, size_t nGpus) {
  ASSERT_FALSE(smi.rows.empty());
  for (size_t i = 0; i < nGpus; ++i) {
    std::string row = "GPU" + std::to_string(i);
    for (size_t j = 0; j < nGpus; ++j) {
      std::string col = "GPU" + std::to_string(j);
      EXPECT_EQ(braid.cells.at({row, col}), smi.cells.at({row, col})) << row << " " << col;
    }
    for (const char* col : {"CPU Affinity", "NUMA Affinity", "GPU NUMA ID"})
      EXPECT_EQ(braid.cells.at({row, col}), smi.cells.at({row, col})) << row << " " << col;
  }
  EXPECT_EQ(braid.legend, smi.legend);
}

TEST(TopoMatrix, HgxH200MatchesNvidiaSmi) {
  Matrix b = braidMatrix("vastai-hgx-h200-8gpu.xml");
  Matrix s = smiFile("hgx-h200-vastai.topo-m.txt");
  expectGpuBlockEqual(b, s, 8);
  // Difference: the NICs. nvidia-smi lists the 8 ConnectX functions (mlx5_0..7, each PIX to one
  // GPU); NCCL ran in a container without RDMA and dumped only the socket interface eth0, listed
  // under both CPUs. braid shows what the XML has: one NIC, eth0, NODE to every GPU.
  EXPECT_EQ(s.nicNames.size(), 8u);
  ASSERT_EQ(b.nicNames, std::vector<std::string>{"eth0"});
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b.cells.at({"GPU" + std::to_string(i), "NIC0"}), "NODE");
}

TEST(TopoMatrix, HgxB200MatchesNvidiaSmi) {
  Matrix b = braidMatrix("vastai-hgx-b200-8gpu.xml");
  Matrix s = smiFile("hgx-b200-vastai.topo-m.txt");
  expectGpuBlockEqual(b, s, 8);
  // Difference: nvidia-smi shows no NIC in that container; NCCL's dump has the socket eth0.
  EXPECT_TRUE(s.nicNames.empty());
  EXPECT_EQ(b.nicNames, std::vector<std::string>{"eth0"});
}

TEST(TopoMatrix, PerlmutterMatchesNvidiaSmi) {
  Matrix b = braidMatrix("perlmutter-a100-4gpu.xml");
  Matrix s = smiFile("perlmutter-a100-4gpu.topo-m.txt");
  expectGpuBlockEqual(b, s, 4);
  // Difference: nvidia-smi lists only RDMA (mlx5-style) NICs, so the Slingshot cxi NICs are not
  // in its matrix; braid shows the four from the XML, one per NUMA node, each beside a GPU.
  EXPECT_TRUE(s.nicNames.empty());
  EXPECT_EQ(b.nicNames.size(), 4u);
  EXPECT_EQ(b.cells.at({"GPU0", "NIC0"}), "NODE");  // cxi3 sits on GPU0's NUMA node 3
  EXPECT_EQ(b.nicNames[0], "cxi3");
  EXPECT_EQ(b.cells.at({"GPU0", "NIC1"}), "SYS");
}

TEST(TopoMatrix, RowsAndNicLegendLayout) {
  System sys;
  std::string error;
  ASSERT_TRUE(loadSystemFile(testing::xmlPath("aws-p4d-24xl.xml"), &sys, &error)) << error;
  PathMatrix pm(sys);
  std::string text = smiMatrix(sys, pm);
  // Header, 8 GPU rows and 4 NIC rows in nvidia-smi's tab layout.
  EXPECT_EQ(text.rfind("\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tNIC2\tNIC3\tCPU Affinity\t", 0), 0u);
  EXPECT_NE(text.find("\nGPU0\t X \tPIX\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tPIX\tNODE\tSYS\tSYS\t0-23,48-71\t0\t\tN/A\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nNIC0\tPIX\tPIX\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t X \tNODE\tSYS\tSYS\t\t\t\t\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("NIC Legend:\n\n  NIC0: pci:0000:10:1b.0\n"), std::string::npos) << text;
}

TEST(TopoMatrix, CpuListFromNcclMask) {
  EXPECT_EQ(cpuListFromMask("00000000,00000000,00000000,ffffffff,ffffffff,ffffffff"), "0-95");
  EXPECT_EQ(cpuListFromMask("00000000,0000ffff,ffffffff,00000000,0000ffff,ffffffff"), "0-47,96-143");
  EXPECT_EQ(cpuListFromMask("ffff0000,00000000,ffff0000,00000000"), "48-63,112-127");
  EXPECT_EQ(cpuListFromMask("5"), "0,2");
  EXPECT_EQ(cpuListFromMask(""), "");
}

}  // namespace
}  // namespace braid::topo
