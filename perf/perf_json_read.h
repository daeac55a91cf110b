// Reading a braid-perf --json report back (for --plot-compare): the fields the plot needs
// (through tools/json, the tools' one JSON reader). Pure, unit-tested in tests/unit/launcher.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "perf/perf_json.h"
#include "tools/json/json.h"

namespace braid::perf {

// What --plot-compare takes from a report: its library's name, collective and rows.
struct ReportSeries {
  std::string library;     // "library" ("braid", "NCCL 2.28.9"), else from "nccl_version"
  std::string source;      // the file's name without its folder (loadReportSeries), for labels
  std::string collective;  // config.collective
  int nRanks = 0;
  std::vector<ResultRow> rows;  // size, type, redop and both placements' time and bus_bw
};

// False with the path and the reason when the file cannot be read or is not such a report.
bool loadReportSeries(const std::string& path, ReportSeries* out, std::string* error);
bool reportSeriesFromJson(const std::string& text, ReportSeries* out, std::string* error);

// "braid" for a library file whose name holds "braid"; "NCCL 2.28.9" for libnccl*; else the
// file name; with no file, "NCCL API <version>". version: ncclGetVersion's code (22809).
std::string libraryLabel(const std::string& fileName, int version);

}  // namespace braid::perf
