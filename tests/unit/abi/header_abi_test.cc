// braid's include/nccl.h against the CUDA toolkit's NCCL 2.28.9 nccl.h: every layout, enum
// value, macro, initializer and function type, compared row by row (see abi_table.h).
#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <string>

#include "abi_table.h"

extern "C" {
struct AbiCRow {
  const char* name;
  long long value;
};
const AbiCRow* abiCRows(void);  // abi_c_view.c: braid's header compiled as C
}

namespace {

// Rows each table must have: if a row is added or dropped here, the body and this count
// change together, so a table that silently lost rows fails.
constexpr std::size_t kExpectedRows = 323;
// 41 functions of nccl.h, each also as pncclX.
constexpr std::size_t kExpectedFunctionRows = 82;

std::size_t countFunctionRows(const nccl_abi::Table& table) {
  std::size_t n = 0;
  for (const nccl_abi::Row& row : table) n += row.name.rfind("type(&", 0) == 0;
  return n;
}

std::map<std::string, std::string> byName(const nccl_abi::Table& table) {
  std::map<std::string, std::string> map;
  for (const nccl_abi::Row& row : table) map.emplace(row.name, row.value);
  return map;
}

TEST(HeaderAbi, TablesHaveTheExpectedRows) {
  const nccl_abi::Table toolkit = nccl_abi::toolkitTable();
  const nccl_abi::Table braid = nccl_abi::braidTable();
  EXPECT_EQ(toolkit.size(), kExpectedRows);
  EXPECT_EQ(braid.size(), kExpectedRows);
  EXPECT_EQ(countFunctionRows(toolkit), kExpectedFunctionRows);
  EXPECT_EQ(countFunctionRows(braid), kExpectedFunctionRows);
  // Row names are unique, so a comparison by name misses nothing.
  EXPECT_EQ(byName(toolkit).size(), toolkit.size());
}

TEST(HeaderAbi, EveryRowMatchesTheToolkitHeader) {
  const nccl_abi::Table toolkit = nccl_abi::toolkitTable();
  const nccl_abi::Table braid = nccl_abi::braidTable();
  ASSERT_EQ(braid.size(), toolkit.size());
  for (std::size_t i = 0; i < toolkit.size(); ++i) {
    ASSERT_EQ(braid[i].name, toolkit[i].name) << "row " << i;
    EXPECT_EQ(braid[i].value, toolkit[i].value) << toolkit[i].name;
  }
}

// The toolkit's table is the reference; these facts show it really is NCCL 2.28.9's header
// and that the type spellings carry the information the comparison relies on.
TEST(HeaderAbi, ReferenceTableIsNccl2289) {
  const auto toolkit = byName(nccl_abi::toolkitTable());
  EXPECT_EQ(toolkit.at("NCCL_VERSION_CODE"), "22809");
  EXPECT_EQ(toolkit.at("sizeof(ncclConfig_t)"), "80");
  EXPECT_EQ(toolkit.at("type(ncclConfig_t)"), "ncclConfig_v22800");
  EXPECT_EQ(toolkit.at("sizeof(ncclUniqueId)"), "128");
  EXPECT_EQ(toolkit.at("sizeof(ncclSimInfo_t)"), "24");
  EXPECT_EQ(toolkit.at("type(ncclSimInfo_t)"), "ncclSimInfo_v22200");
  EXPECT_EQ(toolkit.at("ncclMaxRedOp"), "2147483647");
  EXPECT_EQ(toolkit.at("NCCL_CONFIG_INITIALIZER.magic"), std::to_string(0xcafebeefu));
  const std::string allReduce = toolkit.at("type(&ncclAllReduce)");
  for (const char* part : {"ncclResult_t", "const void*", "long unsigned int", "ncclDataType_t", "ncclRedOp_t",
                           "ncclComm*", "CUstream_st*"}) {
    EXPECT_NE(allReduce.find(part), std::string::npos) << allReduce << " lacks " << part;
  }
  EXPECT_NE(toolkit.at("type(&ncclCommInitRankConfig)").find("ncclConfig_v22800*"), std::string::npos);
}

TEST(HeaderAbi, HeaderCompiledAsCMatchesTheToolkit) {
  const auto toolkit = byName(nccl_abi::toolkitTable());
  int rows = 0;
  for (const AbiCRow* row = abiCRows(); row->name != nullptr; ++row, ++rows) {
    auto it = toolkit.find(row->name);
    ASSERT_NE(it, toolkit.end()) << row->name;
    EXPECT_EQ(std::to_string(row->value), it->second) << row->name << " (C)";
  }
  EXPECT_EQ(rows, 50);
}

}  // namespace
