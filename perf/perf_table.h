// The text that braid-perf prints, laid out as nccl-tests prints it, so that scripts which
// parse nccl-tests output read braid-perf's too. Pure formatting: unit-tested on its own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "perf/perf_args.h"

namespace braid::perf {

// The result of one timed placement (out-of-place or in-place) at one size.
struct Measurement {
  double timeUs = 0;
  double algBw = 0;  // GB/s: size column / time
  double busBw = 0;  // GB/s: algBw * busBandwidthFactor
  int64_t wrong = 0;
};

// `value` right-aligned in `width` characters with as many decimals (2, 1 or 0) as fit;
// scientific notation when even the integer part does not fit.
std::string formatNumber(double value, int width);

// The run's parameters, as nccl-tests' first line ("# nThread 1 nGpus 1 minBytes ..."). Ranks as
// threads of one process, a GPU each, are what nccl-tests calls -t N -g 1: "nThread N nGpus 1".
std::string parametersLine(const PerfOptions& options, int threads = 1);
// Who a rank is and where it runs; device -1 for host memory.
struct RankInfo {
  int rank = 0;
  int pid = 0;
  std::string host;
  int device = -1;
  std::string busId;  // "0000:1b:00", or "host"
  std::string deviceName;
};
// One "#  Rank  0 Group  0 Pid ... device ..." line.
std::string rankLine(const RankInfo& info);
// The three header lines of the table.
std::vector<std::string> tableHeader(bool cpuTime);
// The first five columns of a row: size, count, type, redop, root.
std::string rowPrefix(size_t bytes, size_t count, const std::string& type, const std::string& op, int root);
// time, algbw, busbw, #wrong ("N/A" when not checked) of one placement.
std::string rowResult(const Measurement& m, bool checked);
// "# Out of bounds values : ..." and "# Avg bus bandwidth    : ...", and when some type/op
// series could not run (the library refused the arguments) "# Series not run       : N".
std::vector<std::string> footer(int failedResults, double avgBusBw, int seriesNotRun = 0);

}  // namespace braid::perf
