// One row per ABI fact of nccl.h: a struct size or field offset, an enum value, a macro's
// value, the type of a function. The same code fills one table from NVIDIA's header and one
// from braid's (abi_table_body.inc, compiled twice); the test compares them row by row.
// This header must not include nccl.h: the test that compares the tables sees neither.
#pragma once
#include <string>
#include <vector>

namespace nccl_abi {

struct Row {
  std::string name;   // e.g. "offsetof(ncclConfig_t, netName)", "type(&ncclAllReduce)"
  std::string value;  // a number, or a type as the compiler spells it
};
using Table = std::vector<Row>;

Table toolkitTable();  // built against the CUDA toolkit's nccl.h
Table braidTable();    // built against braid's include/nccl.h

}  // namespace nccl_abi
