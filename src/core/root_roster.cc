#include "core/root_roster.h"

#include <cstring>

namespace braid {

Roster::Verdict Roster::admit(const PeerInfo& info, std::string* problem) {
  if (nRanks_ < 0) nRanks_ = info.nRanks;
  if (info.nRanks != nRanks_) {
    *problem = "bootstrap root: rank " + std::to_string(info.rank) + " called ncclCommInitRank with nranks=" +
               std::to_string(info.nRanks) + " but another rank used nranks=" + std::to_string(nRanks_) +
               ". Fix: pass the same nranks on every rank.";
    return Verdict::kWrongRanks;
  }
  auto it = byRank_.find(info.rank);
  if (it != byRank_.end()) {
    if (std::memcmp(&it->second, &info, sizeof(info)) == 0) return Verdict::kReplay;
    *problem = "bootstrap root: two ranks both claim rank " + std::to_string(info.rank) + " of " +
               std::to_string(nRanks_) + " (pids " + std::to_string(it->second.pid) + " and " +
               std::to_string(info.pid) + "). Fix: give each process a distinct rank in 0..nranks-1.";
    return Verdict::kDuplicate;
  }
  byRank_.emplace(info.rank, info);
  return Verdict::kAdmitted;
}

std::string Roster::missing() const {
  std::string list;
  int shown = 0;
  for (int r = 0; r < nRanks_ && shown < 16; ++r) {
    if (byRank_.count(r)) continue;
    list += (shown++ ? ", " : "") + std::to_string(r);
  }
  int absent = nRanks_ - arrived();
  if (absent > shown) list += ", ... (" + std::to_string(absent) + " in all)";
  return list;
}

const PeerInfo* Roster::find(int rank) const {
  auto it = byRank_.find(rank);
  return it == byRank_.end() ? nullptr : &it->second;
}

std::vector<PeerInfo> Roster::table() const {
  std::vector<PeerInfo> out;
  if (!complete()) return out;
  out.reserve(byRank_.size());
  for (const auto& entry : byRank_) out.push_back(entry.second);
  return out;
}

}  // namespace braid
