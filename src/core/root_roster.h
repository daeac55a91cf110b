// The rendezvous's membership at the root: which ranks have reported, and whether a new
// report fits the others. Pure (no sockets), so that tests can drive it with any sequence.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/peer_info.h"

namespace braid {

class Roster {
 public:
  enum class Verdict {
    kAdmitted,
    kReplay,      // byte-identical to a rank already admitted: a replayed hello, dropped
    kWrongRanks,  // another nranks than the first rank's: the rendezvous fails
    kDuplicate,   // a second, different rank with the same number: the rendezvous fails
  };
  // `info` must already have passed wire::peerInfoProblem. On kWrongRanks and kDuplicate,
  // `problem` says what happened and how to fix it.
  Verdict admit(const PeerInfo& info, std::string* problem);

  int nRanks() const { return nRanks_; }  // -1 until the first rank reports
  int arrived() const { return static_cast<int>(byRank_.size()); }
  bool complete() const { return nRanks_ > 0 && arrived() == nRanks_; }
  // The ranks that have not reported: "1, 3, 7" (at most 16 named, then the count).
  std::string missing() const;
  // The rank's report, or null when it has not arrived.
  const PeerInfo* find(int rank) const;
  // One entry per rank, in rank order; only when complete().
  std::vector<PeerInfo> table() const;

 private:
  int nRanks_ = -1;
  // Grows as ranks arrive, never sized by a count from the wire.
  std::map<int, PeerInfo> byRank_;
};

}  // namespace braid
