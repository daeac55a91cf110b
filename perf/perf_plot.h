// braid-perf --plot: two panels, time (us) and bus bandwidth (GB/s) against bytes, one series
// per (type, op) measured (out-of-place, nccl-tests' main columns), and with --plot-compare
// another report's series beside ours, each pair adjacent. Pure, unit-tested.
#pragma once
#include <string>
#include <vector>

#include "perf/perf_json_read.h"
#include "tools/plot/plot.h"

namespace braid::perf {

// `other` may be null. With it, labels name the library: "float sum braid", "float sum NCCL 2.28.9";
// when both are one library, "float sum braid (this run)" and "float sum braid (OTHER.json)".
std::vector<plot::Panel> perfPlotPanels(const ReportSeries& mine, const ReportSeries* other);

}  // namespace braid::perf
