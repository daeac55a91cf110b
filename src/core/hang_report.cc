#include "core/hang_report.h"

#include <cstdio>
#include <map>
#include <tuple>

namespace braid {
namespace {

// What a rank is doing, as far as the report groups ranks: in a call (which one) or idle
// after one, or unknown.
std::string position(const CallStatus& s) {
  if (s.rank == kRankLeft) return "has left (destroyed its communicator)";
  if (s.rank < 0) return "did not answer (dead, or its process is stuck)";
  std::string where;
  if (s.inCall) where = "in " + describeCall(s.current);
  else if (s.current.seq == 0 && s.current.count == 0 && s.current.root == -1 && s.current.op == -1)
    where = "idle, no call yet";
  else where = "idle after " + describeCall(s.current);
  if (s.failed) where += ", communicator failed";
  return where;
}

}  // namespace

std::string rankRanges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string hangReport(int me, const std::vector<CallStatus>& all, double stalledSeconds) {
  const CallStatus& self = all[me];
  std::string line = "hang report (rank " + std::to_string(me);
  if (stalledSeconds > 0) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.0f", stalledSeconds);
    line += std::string(", no progress for ") + secs + " s";
  }
  line += "): ";
  if (self.inCall) {
    line += "this rank waits in " + describeCall(self.current);
    std::vector<int> waits;
    for (int r : self.waitingFor)
      if (r >= 0) waits.push_back(r);
    if (!waits.empty()) line += " for rank(s) " + rankRanges(waits);
    else if (self.current.onDevice) line += " (on the GPU: call #" + std::to_string(self.completed) + " was the last to finish)";
  } else {
    line += "this rank is " + position(self);
  }
  // Group the ranks by position, in the order their lowest rank appears.
  std::map<std::string, std::vector<int>> groups;
  std::vector<std::string> order;
  for (const CallStatus& s : all) {
    int r = static_cast<int>(&s - all.data());
    std::string where = position(s);
    if (!groups.count(where)) order.push_back(where);
    groups[where].push_back(r);
  }
  line += ". Ranks: ";
  for (size_t i = 0; i < order.size(); ++i) {
    const std::vector<int>& g = groups[order[i]];
    line += (i ? "; " : "") + std::string(g.size() > 1 ? "ranks " : "rank ") + rankRanges(g) + " " + order[i];
  }
  if (order.size() > 1)
    line += ". Fix: every rank must issue the same collectives in the same order; the ranks behind are the ones "
            "to look at.";
  return line;
}

}  // namespace braid
