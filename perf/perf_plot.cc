#include "perf/perf_plot.h"

#include <utility>

namespace braid::perf {
namespace {

// "float sum", or "int8" when the collective has no op.
std::string seriesKey(const ResultRow& row) {
  return row.op.empty() || row.op == "none" ? row.type : row.type + " " + row.op;
}

struct Curves {
  std::string key;
  plot::Series time, busBw;
};

// The report's series in the order they were measured.
std::vector<Curves> curves(const ReportSeries& report, const std::string& suffix) {
  std::vector<Curves> out;
  for (const ResultRow& row : report.rows) {
    const std::string key = seriesKey(row);
    Curves* c = nullptr;
    for (Curves& existing : out)
      if (existing.key == key) c = &existing;
    if (c == nullptr) {
      out.push_back({key, {key + suffix, {}, {}}, {key + suffix, {}, {}}});
      c = &out.back();
    }
    const double bytes = static_cast<double>(row.bytes);
    c->time.x.push_back(bytes);
    c->time.y.push_back(row.outOfPlace.timeUs);
    c->busBw.x.push_back(bytes);
    c->busBw.y.push_back(row.outOfPlace.busBw);
  }
  return out;
}

}  // namespace

std::vector<plot::Panel> perfPlotPanels(const ReportSeries& mine, const ReportSeries* other) {
  std::string what = mine.collective.empty() ? "braid-perf" : mine.collective;
  if (mine.nRanks > 0) what += ", " + std::to_string(mine.nRanks) + (mine.nRanks == 1 ? " rank" : " ranks");
  plot::Panel time{what + ": time", "bytes", "time (us)", true, true, {}};
  plot::Panel bw{what + ": bus bandwidth", "bytes", "bus bandwidth (GB/s)", true, false, {}};
  // Labels name the library; two runs of one library are told apart by the other's file.
  std::string ourSuffix, theirSuffix;
  if (other) {
    ourSuffix = " " + mine.library;
    theirSuffix = " " + other->library;
    if (other->library == mine.library) {
      ourSuffix += " (this run)";
      theirSuffix += " (" + (other->source.empty() ? std::string("other run") : other->source) + ")";
    }
  }
  std::vector<Curves> ours = curves(mine, ourSuffix);
  std::vector<Curves> theirs = other ? curves(*other, theirSuffix) : std::vector<Curves>{};
  auto add = [&](Curves& c) {
    time.series.push_back(std::move(c.time));
    bw.series.push_back(std::move(c.busBw));
  };
  for (Curves& c : ours) {
    add(c);
    for (Curves& t : theirs)
      if (t.key == c.key && !t.time.label.empty()) {
        add(t);
        t.time.label.clear();  // taken
      }
  }
  for (Curves& t : theirs)
    if (!t.time.label.empty()) add(t);
  return {time, bw};
}

}  // namespace braid::perf
