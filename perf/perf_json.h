// braid-perf --json FILE: the same results as the table, in the layout of nccl-tests' JSON
// report (keys "config", "devices", "results", "out_of_bounds", "average_bus_bandwidth").
#pragma once
#include <string>
#include <vector>

#include "perf/perf_args.h"
#include "perf/perf_table.h"

namespace braid::perf {

struct ResultRow {
  size_t bytes = 0;
  size_t count = 0;
  std::string type;
  std::string op;
  int root = -1;
  bool checked = false;
  Measurement outOfPlace;
  Measurement inPlace;
};

struct PerfReport {
  std::vector<std::string> args;  // the command line, program name first
  std::string startTime;
  std::string endTime;
  int ncclVersion = 0;  // what ncclGetVersion reported
  int nRanks = 0;
  std::string ranksAs = "processes";  // "threads" (of one process) or "processes"
  std::string library;  // the NCCL library measured: "braid", "NCCL 2.28.9" (libraryLabel)
  std::string memory;   // "host" or "device"
  PerfOptions options;
  std::vector<RankInfo> ranks;
  std::vector<ResultRow> rows;
  int failedResults = 0;
  double avgBusBw = 0;
};

std::string reportJson(const PerfReport& report);
// Writes reportJson to `path`; false with a reason on failure.
bool writeReportJson(const std::string& path, const PerfReport& report, std::string* error);
// "2026-01-31 12:34:56", local time.
std::string nowString();

}  // namespace braid::perf
