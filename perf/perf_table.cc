#include "perf/perf_table.h"

#include <cstdio>

namespace braid::perf {
namespace {

std::string printfString(const char* format, auto... args) {
  int size = std::snprintf(nullptr, 0, format, args...);
  std::string text(static_cast<size_t>(size > 0 ? size : 0), '\0');
  std::snprintf(text.data(), text.size() + 1, format, args...);
  return text;
}

}  // namespace

std::string formatNumber(double value, int width) {
  int integerDigits = 0;  // digits left of the point; 0 for values below 1
  for (double tens = 1; value >= tens && integerDigits < 400; tens *= 10) ++integerDigits;
  if (integerDigits <= width - 3) return printfString("%*.2f", width, value);
  if (integerDigits == width - 2) return printfString("%*.1f", width, value);
  if (integerDigits <= width) return printfString("%*.0f", width, value);
  return printfString("%*.1e", width, value);
}

std::string parametersLine(const PerfOptions& o, int threads) {
  bool factor = o.stepFactor > 1;
  return printfString(
      "# nThread %d nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
      "validation: %d graph: %d",
      threads, o.minBytes, o.maxBytes, factor ? o.stepFactor : o.stepBytes, factor ? "factor" : "bytes", o.warmupIters, o.iters,
      o.aggIters, o.checkIters, o.graphLaunches);
}

std::string rankLine(const RankInfo& r) {
  return printfString("#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s", r.rank, r.pid, r.host.c_str(), r.device,
                      r.busId.c_str(), r.deviceName.c_str());
}

std::vector<std::string> tableHeader(bool cpuTime) {
  const char* time = cpuTime ? "cputime" : "time";
  return {
      printfString("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          ", "",
                   "", "", "", ""),
      printfString("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "size", "count", "type",
                   "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw", "#wrong"),
      printfString("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "(B)", "(elements)", "", "",
                   "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")};
}

std::string rowPrefix(size_t bytes, size_t count, const std::string& type, const std::string& op, int root) {
  return printfString("%12zu  %12zu  %8s  %6s  %6d", bytes, count, type.c_str(), op.c_str(), root);
}

std::string rowResult(const Measurement& m, bool checked) {
  std::string head = "  " + formatNumber(m.timeUs, 7) + "  " + formatNumber(m.algBw, 6) + "  " + formatNumber(m.busBw, 6);
  // nccl-tests prints "    N/A", one column short; right-aligned here so the columns stay straight.
  return head + (checked ? printfString("  %6g", static_cast<double>(m.wrong)) : std::string("     N/A"));
}

std::vector<std::string> footer(int failedResults, double avgBusBw, int seriesNotRun) {
  std::vector<std::string> lines = {
      printfString("# %-20s : %d %s", "Out of bounds values", failedResults, failedResults ? "FAILED" : "OK"),
      printfString("# %-20s : %g ", "Avg bus bandwidth", avgBusBw)};
  if (seriesNotRun > 0) lines.push_back(printfString("# %-20s : %d FAILED", "Series not run", seriesNotRun));
  lines.push_back("#");
  return lines;
}

}  // namespace braid::perf
